#!/usr/bin/env python3
"""Differential test against Megatron-LM's own layout functions: random manifests and
options, planned by paramlayout and by the functions of a Megatron-LM checkout (read at run
time by megatron_functions.py), every param's range and every bucket compared.

The shipped reference cases fix 144 points; this walks the space around them: shapes from
vectors to large matrices, every dtype and storage, expert params under their own dp,
shared embeddings, Muon opt-outs, GTP rematerialisation, bucket sizes from tiny to none,
dp from 1 to 1000, padding for high NCCL bus bandwidth.

Usage: differential.py MEGATRON_CHECKOUT PARAMLAYOUT [--cases N] [--seed S]
Exits 1 when a layout differs, keeping each such case (manifest and options) as
differential-case-N.json in the current directory. With MEGATRON_CHECKOUT "-", reads it from
$MEGATRON_LM, and exits 77 (a skip, for meson) where that is unset.
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import megatron_checkout  # noqa: E402
import megatron_functions  # noqa: E402


def random_param(rng, i, layerwise_hint):
    kind = rng.random()
    if kind < 0.25:
        shape = [rng.choice([1, 7, 64, 1000, 4096, rng.randint(1, 20000)])]
    elif kind < 0.3:
        shape = [rng.randint(1, 64) for _ in range(rng.choice([0, 3, 4]))]
    elif kind < 0.32:  # embedding-sized: billions of elements
        shape = [rng.randint(50_000, 260_000), rng.randint(4096, 16384)]
    else:
        big = rng.random() < 0.3
        shape = [rng.randint(1, 30000 if big else 3000), rng.randint(1, 8192 if big else 3000)]
    p = {"name": f"p{i}", "shape": shape,
         "dtype": rng.choice(["bfloat16", "bfloat16", "float32", "float16"])}
    if rng.random() < 0.1:
        p["storage"] = rng.choice(["fp8", "mxfp8", "nvfp4"])
    if rng.random() < 0.25:
        p["expert_parallel"] = True
    if len(shape) == 2:
        if rng.random() < 0.05:
            p["embedding_or_output"] = True
        if rng.random() < 0.1:
            p["use_muon"] = False
        if layerwise_hint and rng.random() < 0.1:
            p["gtp_remat_size"] = rng.choice([2, 4, 8])
    return p


def random_case(rng):
    n = rng.choice([1, 2, 5, rng.randint(1, 40), rng.randint(1, 40), rng.randint(40, 200),
                    rng.randint(40, 200)])
    strategy = rng.choice(["sequential-dp", "layerwise"])
    params = [random_param(rng, i, strategy == "layerwise") for i in range(n)]
    matrices = [p for p in params if len(p["shape"]) == 2]
    if matrices and rng.random() < 0.2:  # a tied embedding copy, first or last
        rng.choice([matrices[0], matrices[-1]])["shared_embedding"] = True
    dp = rng.choice([1, 2, 3, 4, 8, 16, 24, 64, 128, 1000, rng.randint(1, 300)])
    expert_dp = rng.choice([dp, max(1, dp // 8), rng.randint(1, 64)])
    bucket_size = rng.choice([None, "default", rng.randint(1, 10_000),
                              rng.randint(10_000, 50_000_000)])
    if bucket_size == "default":
        bucket_size = max(40_000_000, 1_000_000 * dp)
    manifest = {"schema": "paramlayout.manifest/v1", "model": "differential", "params": params}
    options = {"strategy": strategy, "dp": dp, "expert_dp": expert_dp,
               "bucket_size": bucket_size, "pad": rng.random() < 0.2}
    return manifest, options


def megatron_results(functions, manifest, options):
    sequential_dp, layerwise = functions
    config = types.SimpleNamespace(pad_buckets_for_high_nccl_busbw=options["pad"])
    return [(layerwise if is_layerwise else sequential_dp)(
                params, options["bucket_size"], options["expert_dp" if expert else "dp"], config)
            for is_layerwise, expert, params in megatron_functions.buffers(manifest,
                                                                        options["strategy"])]


def plan_command(binary, manifest_path, layout_path, options, packer="megatron"):
    """`paramlayout plan` with a case's options."""
    command = [binary, "plan", str(manifest_path), "-q", "-o", str(layout_path),
               "--strategy", options["strategy"], "--dp", str(options["dp"]),
               "--expert-dp", str(options["expert_dp"]),
               "--bucket-size", str(options["bucket_size"] or "none"), "--packer", packer]
    return command + (["--pad-for-high-nccl-busbw"] if options["pad"] else [])


def case_arguments(description, *positionals):
    """The command line of a random-case tool: POSITIONALS, --cases N, --seed S."""
    parser = argparse.ArgumentParser(description=description)
    for name in positionals:
        parser.add_argument(name)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def main():
    args = case_arguments("Random manifests planned here and by Megatron-LM's functions.",
                          "checkout", "binary")
    checkout = megatron_checkout.checkout_from(args.checkout)
    if checkout is None:
        print(megatron_checkout.SKIP_MESSAGE)
        return 77
    functions = megatron_functions.load_functions(checkout)
    rng = random.Random(args.seed)
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        manifest_path, layout_path = Path(tmp, "manifest.json"), Path(tmp, "layout.json")
        for case in range(args.cases):
            manifest, options = random_case(rng)
            manifest_path.write_text(json.dumps(manifest))
            subprocess.run(plan_command(args.binary, manifest_path, layout_path, options),
                           check=True)
            if not megatron_functions.same_layout(megatron_results(functions, manifest, options),
                                               layout_path):
                wrong += 1
                kept = Path(f"differential-case-{case}.json")
                kept.write_text(json.dumps({"options": options, "manifest": manifest}))
                print(f"case {case}: LAYOUT DIFFERS from Megatron-LM's ({kept})", flush=True)
    print(f"{args.cases} cases, {wrong} differ (seed {args.seed})")
    return 1 if wrong else 0

if __name__ == "__main__":
    sys.exit(main())
