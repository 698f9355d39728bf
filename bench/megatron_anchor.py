#!/usr/bin/env python3
"""Times Megatron-LM's own per-buffer layout functions on a manifest: the anchor that
bench/plan.sh sets paramlayout's plan times against, in the same run.

The functions are read at run time from a Megatron-LM checkout
(tests/megatron/megatron_functions.py). Only the layout functions are timed; grouping the
params into buffers is done first, untimed. Params are plain-Python stand-ins, lighter than
torch Parameters, so these times are a lower bound on what the functions take in a job.

Usage: megatron_anchor.py MEGATRON_CHECKOUT MANIFEST STRATEGY DP [DP...] [--compare DIR]
Prints one line per dp: "<strategy> dp <dp>: megatron <seconds> s CPU", the process's CPU
time (the least of 3 runs), as bench_plan reports paramlayout's. With --compare, also
says whether DIR/<strategy>-dp<dp>.json (paramlayout's layout of the same manifest with
default options) places every param where Megatron-LM's functions do.
"""
import json
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "megatron"))
import megatron_functions  # noqa: E402


def main():
    args = sys.argv[1:]
    compare = None
    if "--compare" in args:
        i = args.index("--compare")
        compare = args[i + 1]
        del args[i:i + 2]
    if len(args) < 4:
        sys.exit(__doc__.split("\n\n")[-1])
    checkout, manifest_path, strategy, *dps = args
    sequential_dp, layerwise = megatron_functions.load_functions(checkout)
    groups = megatron_functions.buffers(json.loads(Path(manifest_path).read_text()), strategy)
    config = types.SimpleNamespace(pad_buckets_for_high_nccl_busbw=False)
    for dp in map(int, dps):
        bucket_size = max(40_000_000, 1_000_000 * dp)
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            results = [(layerwise if is_layerwise else sequential_dp)(params, bucket_size, dp,
                                                                      config)
                       for is_layerwise, _, params in groups]
            best = min(best, time.process_time() - start)
        line = f"{strategy} dp {dp}: megatron {best:.3f} s CPU"
        if compare:
            same = megatron_functions.same_layout(results, Path(compare, f"{strategy}-dp{dp}.json"))
            line += ", same layout as paramlayout" if same else ", LAYOUT DIFFERS from paramlayout"
        print(line, flush=True)


if __name__ == "__main__":
    main()
