"""Launch lines for the real-model judge: a fixed sample that covers every feature paramlayout's
`job` reads (CI runs it), and a generator of random lines (the slow suite).

A case is (world size, line, expected exit code of real_model.py): 0 where both read the line
and every chunk must be identical, 2 where Megatron-LM and paramlayout both refuse it, 3 where
it is out of the judge's reach. The sizes are small (hidden 64, a few layers): what is judged
is which params each chunk holds and how DDP lays them out, which the sizes do not change.
"""
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CONFIGS = ROOT / "testdata" / "configs"

# A small GPT: 4 layers, hidden 64, 4 heads, vocab 1000 (padded by Megatron-LM's own rule).
BASE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--max-position-embeddings", "128", "--vocab-size", "1000"]
LLAMA = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
         "--group-query-attention", "--num-query-groups", "2", "--ffn-hidden-size", "160",
         "--swiglu", "--normalization", "RMSNorm", "--disable-bias-linear",
         "--position-embedding-type", "rope", "--untie-embeddings-and-output-weights",
         "--max-position-embeddings", "128", "--vocab-size", "1000"]
MOE = ["--num-experts", "4", "--moe-ffn-hidden-size", "48", "--moe-router-topk", "2",
       "--moe-grouped-gemm"]
MLA = ["--multi-latent-attention", "--q-lora-rank", "32", "--kv-lora-rank", "16",
       "--qk-head-dim", "16", "--qk-pos-emb-head-dim", "8", "--v-head-dim", "16"]
DISTOPT = ["--bf16", "--use-distributed-optimizer"]

HYBRID = ["--hybrid-layer-pattern", "M*M-", "--mamba-num-heads", "4", "--mamba-head-dim", "16",
          "--mamba-state-dim", "16", "--mamba-num-groups", "2"]
SAMPLE = [
    # tensor and pipeline parallel, tied embedding across the pipeline edges
    (8, BASE + ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]
     + DISTOPT, 0),
    # uneven stages, embedding and loss accounted for in the split
    (4, LLAMA + ["--num-layers", "6", "--pipeline-model-parallel-size", "4",
                 "--decoder-first-pipeline-num-layers", "1", "--decoder-last-pipeline-num-layers",
                 "1"] + DISTOPT, 0),
    (3, LLAMA + ["--num-layers", "7", "--pipeline-model-parallel-size", "3",
                 "--account-for-embedding-in-pipeline-split",
                 "--account-for-loss-in-pipeline-split", "--fp16"], 0),
    # virtual pipeline, bucketing of the first chunk only, padded buckets
    (8, BASE + ["--num-layers", "8", "--pipeline-model-parallel-size", "2",
                "--num-layers-per-virtual-pipeline-stage", "2", "--overlap-grad-reduce",
                "--ddp-bucket-size", "20000", "--ddp-pad-buckets-for-high-nccl-busbw"]
     + DISTOPT, 0),
    # a pipeline layout string with MTP on the last stage
    (4, LLAMA + ["--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout",
                 "Et*2|t*2mL", "--mtp-num-layers", "1"] + DISTOPT, 0),
    # context parallel
    (8, LLAMA + ["--context-parallel-size", "2", "--tensor-model-parallel-size", "2",
                 "--overlap-grad-reduce"] + DISTOPT, 0),
    # MoE with expert parallel, expert tensor parallel 1 under tp 2, shared experts, layer freq
    (8, LLAMA + MOE + ["--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2",
                       "--expert-tensor-parallel-size", "1",
                       "--moe-shared-expert-intermediate-size", "96",
                       "--moe-layer-freq", "([0]*1+[1]*3)"] + DISTOPT, 0),
    # MoE on every layer, experts not grouped, shared expert gate, no expert parallel
    (2, LLAMA + MOE[:6] + ["--moe-shared-expert-intermediate-size", "48",
                           "--moe-shared-expert-gate", "--bf16"], 0),
    # multi-latent attention with MoE and MTP (DeepSeek-V3's shape, small)
    (4, [a for a in LLAMA if a not in ("--group-query-attention", "--num-query-groups", "2")]
     + MLA + MOE + ["--expert-model-parallel-size", "2", "--mtp-num-layers", "1",
                    "--moe-layer-freq", "([0]+[1]*3)"] + DISTOPT, 0),
    # precisions: fp16 with fp32 grads, bf16 grads reduced in bf16, float32
    (2, BASE + ["--fp16", "--accumulate-allreduce-grads-in-fp32"], 0),
    (4, LLAMA + ["--bf16", "--grad-reduce-in-bf16", "--use-distributed-optimizer"], 0),
    (2, BASE + ["--untie-embeddings-and-output-weights"], 0),
    # Muon: the layer-wise distributed optimizer's layout
    (8, LLAMA + ["--optimizer", "muon", "--tensor-model-parallel-size", "2"] + DISTOPT, 0),
    (8, LLAMA + MOE + ["--optimizer", "muon", "--expert-model-parallel-size", "2"] + DISTOPT, 0),
    # ... at expert data parallel 1, where Megatron-LM keeps no per-shard list of the experts
    (4, LLAMA + MOE + ["--optimizer", "muon", "--expert-model-parallel-size", "4"] + DISTOPT, 0),
    # learnable softmax offsets (TE's DotProductAttention param), qk layer norms
    (4, LLAMA + ["--softmax-type", "learnable", "--qk-layernorm",
                 "--tensor-model-parallel-size", "2"] + DISTOPT, 0),
    # linear attention (gated delta net, flash-linear-attention's layers) every other layer
    (4, LLAMA + ["--experimental-attention-variant", "gated_delta_net",
                 "--linear-attention-freq", "2"] + DISTOPT, 0),
    # refused by both: 4 layers over 3 stages
    (3, BASE + ["--pipeline-model-parallel-size", "3"], 2),
    # out of reach: FSDP
    (4, BASE + ["--use-megatron-fsdp", "--bf16", "--use-distributed-optimizer",
                "--data-parallel-sharding-strategy", "optim_grads_params"], 3),
    # pretrain_hybrid.py's line: --spec takes a module and a name (nargs='*')
    (2, LLAMA + HYBRID + ["--spec", "megatron.core.models.hybrid.hybrid_layer_specs",
                          "hybrid_stack_spec"] + DISTOPT, 0),
    # refused by both: a hybrid model without --spec (hybrid_builders.py)
    (2, LLAMA + HYBRID + DISTOPT, 2),
    # Megatron-LM's local layers (no Transformer Engine, no stand-in)
    (8, BASE + ["--transformer-impl", "local", "--tensor-model-parallel-size", "2",
                "--pipeline-model-parallel-size", "2"] + DISTOPT, 0),
    (4, LLAMA + MOE + ["--transformer-impl", "local", "--expert-model-parallel-size", "2"]
     + DISTOPT, 0),
    # refused by both: MoE experts with biases under expert tensor parallel > 1, and in TE's
    # grouped GEMM while bias-dropout fusion is on
    (4, BASE + MOE + ["--tensor-model-parallel-size", "2"] + DISTOPT, 2),
    (2, BASE + MOE + ["--expert-model-parallel-size", "2"] + DISTOPT, 2),
    # a --moe-layer-freq list literal, which Megatron-LM's parser evaluates (moe_freq_type)
    (4, LLAMA + MOE + ["--moe-layer-freq", "[0,1,1,1]"] + DISTOPT, 0),
    # TransformerConfig's refusal: a grouped tensor without grouped GEMM
    (4, LLAMA + MOE[:-1] + ["--moe-use-grouped-tensor"] + DISTOPT, 2),
    # expert capacity: padded to a factor it runs; padding without one, or a factor under
    # sinkhorn balancing, TransformerConfig refuses
    (4, LLAMA + MOE + ["--moe-expert-capacity-factor", "1.25",
                       "--moe-pad-expert-input-to-capacity"] + DISTOPT, 0),
    (4, LLAMA + MOE + ["--moe-pad-expert-input-to-capacity"] + DISTOPT, 2),
    (4, LLAMA + MOE + ["--moe-expert-capacity-factor", "1", "--moe-router-load-balancing-type",
                       "sinkhorn"] + DISTOPT, 2),
]

# Lines on which paramlayout and Megatron-LM are known to differ (each a difference the
# judge reports, exit 1); run by `real_model_suite.py --known`. None at present.
KNOWN_DIFFERENCES = []


def _choice(rng, options):
    return options[rng.randrange(len(options))]


def random_case(rng):
    """(world size, line, 0): a random line Megatron-LM accepts and paramlayout must build
    identically. Sizes are drawn so that Megatron-LM's divisibility rules hold."""
    tp = _choice(rng, [1, 1, 2, 4])
    pp = _choice(rng, [1, 1, 2, 3, 4])
    cp = _choice(rng, [1, 1, 2])
    dp = _choice(rng, [1, 2, 3, 4, 8])
    heads = tp * _choice(rng, [1, 2, 4])
    groups = _choice(rng, [g for g in (1, 2, 4) if heads % g == 0 and g % tp == 0] or [heads])
    kv = _choice(rng, [8, 16])
    hidden = heads * kv
    line = ["--hidden-size", str(hidden), "--num-attention-heads", str(heads),
            "--max-position-embeddings", "128",
            "--vocab-size", str(rng.randrange(500, 3000))]
    if groups != heads:
        line += ["--group-query-attention", "--num-query-groups", str(groups)]
    if rng.random() < 0.5:
        line += ["--swiglu", "--ffn-hidden-size", str(tp * rng.randrange(8, 40))]
    if rng.random() < 0.5:
        line += ["--normalization", "RMSNorm"]
    if rng.random() < 0.4:
        line += ["--disable-bias-linear"]
    if rng.random() < 0.3:
        line += ["--qk-layernorm"]
    if rng.random() < 0.5:
        line += ["--position-embedding-type", "rope"]
    if rng.random() < 0.5:
        line += ["--untie-embeddings-and-output-weights"]
    vpp = 1
    layers_per_stage = rng.randrange(1, 4)
    if pp > 1 and rng.random() < 0.3:
        vpp = 2
    layers = pp * vpp * layers_per_stage
    split = rng.random()
    if pp > 1 and vpp == 1 and split < 0.25:
        first, last = rng.randrange(0, 3), rng.randrange(0, 3)
        middle = (pp - 2) * rng.randrange(1, 3) if pp > 2 else 0
        layers = first + last + middle
        if layers == 0 or (pp > 2 and middle == 0):
            first, layers = 1, 1 + last + middle
        line += ["--decoder-first-pipeline-num-layers", str(first),
                 "--decoder-last-pipeline-num-layers", str(last)]
    elif pp > 1 and vpp == 1 and split < 0.4:
        line += ["--account-for-embedding-in-pipeline-split",
                 "--account-for-loss-in-pipeline-split"]
        layers = pp * layers_per_stage - 2
        if layers < 1:
            layers = pp * layers_per_stage + pp - 2
            if layers < 1 or (layers + 2) % pp:
                line = line[:-2]
                layers = pp * layers_per_stage
    line += ["--num-layers", str(layers)]
    if vpp > 1:
        line += ["--num-layers-per-virtual-pipeline-stage", str(layers_per_stage)]
    ep = 1
    if rng.random() < 0.35:
        experts = _choice(rng, [2, 4, 8])
        ep = _choice(rng, [e for e in (1, 2, 4) if experts % e == 0])
        line += ["--num-experts", str(experts), "--moe-ffn-hidden-size",
                 str(tp * rng.randrange(4, 20)), "--moe-router-topk",
                 str(rng.randrange(1, min(experts, 4) + 1))]
        if line[-1] == "1":  # validate_args: top-1 routing needs the pre-softmax router
            line += ["--moe-router-pre-softmax"]
        if rng.random() < 0.6:
            line += ["--moe-grouped-gemm"]
        if rng.random() < 0.4:
            line += ["--moe-shared-expert-intermediate-size", str(tp * rng.randrange(4, 20))]
            if rng.random() < 0.5:
                line += ["--moe-shared-expert-gate"]
        if rng.random() < 0.4 and layers > 1:
            dense = rng.randrange(1, layers)
            line += ["--moe-layer-freq", f"([0]*{dense}+[1]*{layers - dense})"]
        if ep > 1:
            line += ["--expert-model-parallel-size", str(ep)]
        if tp > 1 and rng.random() < 0.5:
            line += ["--expert-tensor-parallel-size", "1"]
    if rng.random() < 0.2 and "--num-layers-per-virtual-pipeline-stage" not in line:
        line += ["--mtp-num-layers", "1"]
    precision = _choice(rng, ["bf16", "bf16", "fp16", "fp32"])
    if precision != "fp32":
        line += [f"--{precision}"]
    if precision == "bf16" and rng.random() < 0.3:
        line += ["--grad-reduce-in-bf16"]
    if precision == "fp16" and rng.random() < 0.5:
        line += ["--accumulate-allreduce-grads-in-fp32"]
    if rng.random() < 0.6:
        line += ["--use-distributed-optimizer"]
        if rng.random() < 0.2 and "--num-experts" not in line and precision != "fp16":
            line += ["--optimizer", "muon"]
    if rng.random() < 0.5:
        line += ["--overlap-grad-reduce"]
        if rng.random() < 0.5:
            line += ["--ddp-bucket-size", str(rng.randrange(1000, 200000))]
        if rng.random() < 0.3:
            line += ["--ddp-pad-buckets-for-high-nccl-busbw"]
    if tp > 1:
        line += ["--tensor-model-parallel-size", str(tp)]
        if rng.random() < 0.5:
            line += ["--sequence-parallel"]
    if pp > 1:
        line += ["--pipeline-model-parallel-size", str(pp)]
    if cp > 1:
        line += ["--context-parallel-size", str(cp)]
    world = tp * pp * cp * dp
    if ep > 1 and world % (ep * pp * (1 if "--expert-tensor-parallel-size" in line else tp)):
        world *= ep
    return world, line, 0


def random_cases(count, seed):
    rng = random.Random(seed)
    return [random_case(rng) for _ in range(count)]


def _has_experts(config):
    import json
    data = json.loads(config.read_text())
    scopes = (data, data.get("text_config") or {})  # a multimodal config's language model
    return any(scope.get(k) for scope in scopes
               for k in ("num_experts", "num_local_experts", "n_routed_experts"))


def config_cases(splits=("1",)):
    """Every Hugging Face config in testdata/configs, built by Megatron-Bridge's provider,
    bf16 with the distributed optimizer over 8 data-parallel ranks, for each split: an integer
    is a tensor-parallel size, "ppN" N pipeline stages, "epN" N expert-parallel ranks (MoE
    configs only). (world size, line, expected, config); expected None: 0, or 3 where Bridge
    maps no bridge for the architecture (those are judged through their launch-line form)."""
    out = []
    for config in sorted(CONFIGS.glob("*.json")):
        if config.name == "published.json":
            continue
        for split in splits:
            line = ["--bf16", "--use-distributed-optimizer"]
            if split.startswith("pp"):
                size = int(split[2:])
                line += ["--pipeline-model-parallel-size", str(size)]
            elif split.startswith("ep"):
                if not _has_experts(config):
                    continue
                size = int(split[2:])
                line += ["--expert-model-parallel-size", str(size)]
            else:
                size = int(split)
                line += ["--tensor-model-parallel-size", str(size)]
            out.append((8 * size, line, None, str(config)))
    return out


def demo_jobs():
    """The jobs tools/demo.sh runs (the README's DeepSeek-V3 job is its first), read from the
    script as it ships: (world size, line, config) for each `build/paramlayout job` it runs
    (its --packer left out: the judge compares Megatron-LM's own packing)."""
    import re
    import subprocess
    text = (ROOT / "tools" / "demo.sh").read_text()

    def array(name):
        block = re.search(rf"^\s*{name}=\((.*?)\)\s*$", text, re.M | re.S).group(1)
        words = subprocess.run(["bash", "-c", f'a=({block}); printf "%s\\0" "${{a[@]}}"'],
                               capture_output=True, text=True, check=True).stdout
        return words.split("\0")[:-1]

    config = re.search(r"^config=(\S+)", text, re.M).group(1)
    jobs = []
    for call in re.finditer(r"^\s*build/paramlayout job ((?:.*\\\n)*.*)$", text, re.M):
        words = call.group(1)
        world = int(re.search(r"--world-size (\d+)", words).group(1))
        hf = re.search(r"--hf-config (\S+)", words).group(1).strip('"')
        name = re.search(r'"\$\{(\w+)\[@\]\}"', words).group(1)
        jobs.append((world, array(name), str(ROOT / hf.replace("$config", config))))
    return jobs


# Hugging Face configs with what Megatron-LM validates only with the model's own arguments:
# MTP (rope positions), a sequence longer than the config's max_position_embeddings, MLA;
# and a line both refuse.
# (world size, line, expected, config)
HF_SAMPLE = [(w, line, 0, config) for w, line, config in demo_jobs()] + [
    (16, ["--tensor-model-parallel-size", "2", "--context-parallel-size", "2",
          "--seq-length", "16384"] + DISTOPT, 0, str(CONFIGS / "llama3-8b.json")),
    (8, ["--expert-model-parallel-size", "8", "--mtp-num-layers", "1", "--moe-grouped-gemm"]
     + DISTOPT, 0, str(CONFIGS / "qwen3-30b-a3b.json")),
    # refused by both: the sequence does not split over 2 x 8 context-parallel chunks
    (8, ["--context-parallel-size", "8", "--seq-length", "1000"] + DISTOPT, 2,
     str(CONFIGS / "llama3-8b.json")),
]

# The line whose start-up log the judge changes (real_model.LOG_MUTATIONS): virtual chunks,
# a first chunk of several buckets, padded.
LOG_MUTATION_CASE = SAMPLE[3]
REFUSED_CASE = next(case for case in SAMPLE if case[2] == 2)


# A search's space for the judge: a small MoE with MTP on 8 GPUs; `paramlayout search` varies
# tp, pp, vpp, cp, ep, etp, the split, sequence parallelism and recompute around it.
SEARCH_WORLD = 8
SEARCH_LINE = ["--num-layers", "8"] + LLAMA[2:] + MOE + [
    "--mtp-num-layers", "1", "--seq-length", "128", "--micro-batch-size", "1",
    "--global-batch-size", "32"] + DISTOPT


def search_cases(binary, count):
    """COUNT of the launches `paramlayout search` lists for SEARCH_LINE, spread evenly over its
    ranked list (the first and the last among them), and the best that sets a pipeline layout
    string if none of those does, each a case that must be identical."""
    import json
    import subprocess
    result = subprocess.run([binary, "search", "--world-size", str(SEARCH_WORLD), "--json",
                             "--threads", "1", "--"] + SEARCH_LINE,
                            capture_output=True, text=True, check=True)
    candidates = json.loads(result.stdout)["candidates"]
    if len(candidates) <= count:
        chosen = range(len(candidates))
    else:
        chosen = sorted({round(i * (len(candidates) - 1) / (count - 1)) for i in range(count)})
    chosen = list(chosen)
    laid = [i for i, c in enumerate(candidates) if "--pipeline-model-parallel-layout" in c["args"]]
    if laid and not set(laid) & set(chosen):
        chosen.append(laid[0])
    return [(SEARCH_WORLD, candidates[i]["args"], 0) for i in chosen]

