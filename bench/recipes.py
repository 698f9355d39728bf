#!/usr/bin/env python3
"""Three Megatron-Bridge H100 bf16 pretraining recipes, searched at their own GPU counts, as
the markdown table in docs/search.md: each recipe's own launch (planned with every dimension
fixed) and where it ranks among the search's candidates, beside the search's first row.

Usage: bench/recipes.py [BINARY]   (default build-release/paramlayout)
"""
import json
import subprocess
import sys

# Each: the row's name, the GPUs, the HF config, whether it has experts, what the recipe fixes
# besides the parallel sizes, and the recipe's own parallel sizes (Megatron-Bridge 067f987, src/megatron/bridge/
# recipes/: llama/h100/llama3.py:717-808, qwen/h100/qwen3_moe.py:146-227,
# deepseek/h100/deepseek_v3.py:105-271).
RECIPES = [
    ("Llama-3-70B", 32, "llama3-70b.json", False,
     ["--bf16", "--use-distributed-optimizer", "--micro-batch-size", "1",
      "--global-batch-size", "512", "--seq-length", "8192"],
     ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "4",
      "--num-virtual-stages-per-pipeline-rank", "5", "--context-parallel-size", "2",
      "--sequence-parallel"]),
    ("Qwen3-30B-A3B", 16, "qwen3-30b-a3b.json", True,
     ["--bf16", "--use-distributed-optimizer", "--use-precision-aware-optimizer",
      "--moe-grouped-gemm", "--micro-batch-size", "1", "--global-batch-size", "1024",
      "--seq-length", "4096"],
     ["--expert-model-parallel-size", "16", "--expert-tensor-parallel-size", "1"]),
    ("DeepSeek-V3", 1024, "deepseek-v3.json", True,
     ["--bf16", "--use-distributed-optimizer", "--use-precision-aware-optimizer",
      "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16", "--main-grads-dtype", "bf16",
      "--moe-grouped-gemm", "--mtp-num-layers", "1", "--micro-batch-size", "1",
      "--global-batch-size", "4096", "--seq-length", "4096"],
     ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "16",
      "--pipeline-model-parallel-layout", "Et*4|(t*4|)*14,tmL",
      "--expert-model-parallel-size", "64", "--expert-tensor-parallel-size", "1",
      "--sequence-parallel"]),
]
ALL = "tp,pp,vpp,cp,ep,etp,split,sequence-parallel,recompute"


def search(binary, world, config, args, *options):
    command = [binary, "search", "--world-size", str(world), "--hf-config",
               f"testdata/configs/{config}", "--gpu-memory", "H100", "--json", *options,
               "--", *args]
    return json.loads(subprocess.run(command, capture_output=True, text=True,
                                      check=True).stdout)


def ahead(c):
    """The search's order: those that fit first, then by the step estimate."""
    return (not c["fits"], c["step"]["step_seconds"])


def row(label, c, moe, rank):
    gib = c["peak_bytes"] / 2**30
    experts = lambda k: str(c[k]) if moe else "-"
    sp = "yes" if c["sequence_parallel"] else "-"
    return (f"| {label} | {c['tp']} | {c['pp']} | {c['vpp']} | {c['cp']} | {experts('ep')} | "
            f"{experts('etp')} | {sp} | {gib:.2f} GiB | {c['step']['step_seconds']:.1f} s | "
            f"{rank} |")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build-release/paramlayout"
    print("| model, GPUs | | tp | pp | vpp | cp | ep | etp | sp | peak | step (est.) | rank |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, world, config, moe, fixed, sizes in RECIPES:
        found = search(binary, world, config, fixed)["candidates"]
        [own] = search(binary, world, config, fixed + sizes, "--fix", ALL)["candidates"]
        rank = 1 + sum(ahead(c) < ahead(own) for c in found)
        fit = sum(bool(c["fits"]) for c in found)
        print(row(f"{name}, {world:,} | recipe", own, moe,
                  f"{rank:,} of {len(found):,} ({fit:,} fit)"))
        print(row("| search", found[0], moe, "1"))


if __name__ == "__main__":
    main()
