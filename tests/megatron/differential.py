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
        if p["storage"] == "nvfp4" and shape and rng.random() < 0.9:
            shape[-1] += shape[-1] % 2  # two values a byte: mostly even, else refused
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
               "bucket_size": bucket_size, "pad": rng.random() < 0.2,
               "fp32_grads": rng.random() < 0.3}
    return manifest, options


def megatron_buffers(functions, manifest, options):
    """Each buffer's key, params and layout by Megatron-LM's functions."""
    sequential_dp, layerwise = functions
    config = types.SimpleNamespace(pad_buckets_for_high_nccl_busbw=options["pad"])
    return [(key, params, (layerwise if key[3] else sequential_dp)(
                params, options["bucket_size"], options["expert_dp" if key[2] else "dp"], config))
            for key, params in megatron_functions.buffers(
                manifest, options["strategy"], options.get("fp32_grads", False), with_key=True)]


def megatron_results(functions, manifest, options):
    return [result for _, _, result in megatron_buffers(functions, manifest, options)]


def param_buffers_differ(param_buffer, options, buffers, layout):
    """Where DDP keeps each buffer's params, by Megatron-LM's own allocation and packed-layout
    code (megatron_functions.load_param_buffer), against the layout's param_buffer members and
    its stats: the bytes per rank of params and grads, each buffer's all-gather bytes, and
    nvfp4's packed buckets and offsets. A message where they differ, else None."""
    if not buffers:
        return None
    params_bytes = grads_bytes = 0
    for i, (key, params, result) in enumerate(buffers):
        dp = options["expert_dp" if key[2] else "dp"]
        theirs = param_buffer(params, dp, options["pad"], result, key[1], key[0])
        if theirs is None:
            return f"buffer {i}: Megatron-LM fails, paramlayout planned it"
        params_bytes += theirs["params"]
        grads_bytes += theirs["grads"]
        ours = layout["buffers"][i]
        gathered = layout["stats"]["traffic_per_step"]["buffers"][i]["all_gather_bytes"]
        if gathered != theirs["all_gather"]:
            return f"buffer {i}: all-gathers {gathered} bytes, Megatron-LM {theirs['all_gather']}"
        packed = ours.get("param_buffer", {})
        if "packed_buckets" in theirs:
            buckets = [(b["start"], b["end"]) for b in packed.get("buckets", [])]
            offsets = {p["name"]: tuple(r) for p, r in zip(ours["params"], packed.get("params", []))}
            if buckets != theirs["packed_buckets"] or offsets != theirs["packed_params"]:
                return f"buffer {i}: packed nvfp4 layout differs"
        elif "buckets" in packed:
            return f"buffer {i}: packed, Megatron-LM does not pack it"
    bytes_per_rank = layout["stats"]["bytes_per_rank"]
    if (bytes_per_rank["params"], bytes_per_rank["grads"]) != (params_bytes, grads_bytes):
        return (f"params / grads take {bytes_per_rank['params']} / {bytes_per_rank['grads']} "
                f"bytes per rank, Megatron-LM allocates {params_bytes} / {grads_bytes}")
    return None


def megatron_refuses(param_buffer, options, buffers):
    return any(param_buffer(params, options["expert_dp" if key[2] else "dp"], options["pad"],
                            result, key[1], key[0]) is None
               for key, params, result in buffers)


def plan_command(binary, manifest_path, layout_path, options, packer="megatron"):
    """`paramlayout plan` with a case's options."""
    command = [binary, "plan", str(manifest_path), "-q", "-o", str(layout_path),
               "--strategy", options["strategy"], "--dp", str(options["dp"]),
               "--expert-dp", str(options["expert_dp"]),
               "--bucket-size", str(options["bucket_size"] or "none"), "--packer", packer]
    return (command + (["--pad-for-high-nccl-busbw"] if options["pad"] else [])
            + (["--grad-reduce-in-fp32"] if options.get("fp32_grads") else []))


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
    param_buffer = megatron_functions.load_param_buffer(checkout)
    rng = random.Random(args.seed)
    wrong = refused = 0
    with tempfile.TemporaryDirectory() as tmp:
        manifest_path, layout_path = Path(tmp, "manifest.json"), Path(tmp, "layout.json")
        for case in range(args.cases):
            manifest, options = random_case(rng)
            manifest_path.write_text(json.dumps(manifest))
            planned = subprocess.run(plan_command(args.binary, manifest_path, layout_path,
                                                  options), stderr=subprocess.PIPE, text=True)
            buffers = megatron_buffers(functions, manifest, options)
            if planned.returncode != 0:
                refused += 1
                problem = (None if megatron_refuses(param_buffer, options, buffers)
                           else "paramlayout refuses, Megatron-LM does not: " + planned.stderr)
            elif not megatron_functions.same_layout([r for _, _, r in buffers], layout_path):
                problem = "LAYOUT DIFFERS from Megatron-LM's"
            else:
                problem = param_buffers_differ(param_buffer, options, buffers,
                                               json.loads(layout_path.read_text()))
            if problem:
                wrong += 1
                kept = Path(f"differential-case-{case}.json")
                kept.write_text(json.dumps({"options": options, "manifest": manifest}))
                print(f"case {case}: {problem.strip()} ({kept})", flush=True)
    print(f"{args.cases} cases, {wrong} differ, {refused} refused by both (seed {args.seed})")
    return 1 if wrong else 0

if __name__ == "__main__":
    sys.exit(main())
