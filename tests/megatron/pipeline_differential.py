#!/usr/bin/env python3
"""Differential test of the pipeline split against Megatron-LM's own functions: random
pipeline arguments (even, uneven first and last stages, embedding and loss counted as
layers, virtual stages by either argument, layout strings valid and broken, multi-token
prediction layers), split by `paramlayout job` and by the functions of a Megatron-LM checkout
(read at run time, see megatron_pipeline.py). Per chunk it compares the decoder layers, the
MTP layers, the embedding and output flags (job.json) and which chunk holds the decoder's
final norm (decoder.final_layernorm in the chunk's manifest). Where Megatron-LM refuses the
arguments, or accepts them but builds some layer twice or never, paramlayout must refuse
them (exit 2).

Usage: pipeline_differential.py MEGATRON_CHECKOUT PARAMLAYOUT [--cases N] [--seed S]
                                [--sweep] [--check-cases FILE]
       pipeline_differential.py MEGATRON_CHECKOUT PARAMLAYOUT --write-cases FILE
Exits 1 when a case differs, keeping it as pipeline-differential-case-N.json in the current
directory. With MEGATRON_CHECKOUT "-", reads it from $MEGATRON_LM, and exits 77 (a skip, for
meson) where that is unset. --sweep runs every small configuration of pipeline_cases.py's
sweep_arguments instead of random ones. --check-cases also recomputes the checked-in cases
(testdata/pipeline/cases.json) with Megatron-LM's functions. --write-cases runs the named
cases of pipeline_cases.py instead and writes what Megatron-LM's functions compute for them
to FILE (testdata/pipeline/cases.json), after checking the harness against Megatron-LM's own
unit-test goldens.
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import megatron_checkout  # noqa: E402
import megatron_pipeline  # noqa: E402
import pipeline_cases  # noqa: E402

# A small model: the split does not depend on the layers' shapes.
MODEL_ARGS = ["--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size", "1000",
              "--position-embedding-type", "rope"]
FIELDS = ("layers", "mtp_layers", "embedding", "output", "final_norm")


def megatron_split(megatron, args):
    """("refused", why), ("broken", why) or ("split", chunks)."""
    try:
        chunks = megatron.split(args)
    except megatron_pipeline.REFUSALS as e:
        return "refused", f"{type(e).__name__}: {e}".strip()
    num_layers = megatron_pipeline.parse_arguments(args).num_layers
    mtp = megatron_pipeline.parse_arguments(args).mtp_num_layers or 0
    order = sorted(chunks, key=lambda c: (c["chunk"], c["stage"]))
    built = [i for c in order for i in c["layers"]]
    if built != list(range(num_layers)):
        return "broken", f"builds decoder layers {built}, not 0..{num_layers - 1} once each"
    if sorted(i for c in chunks for i in c["mtp_layers"]) != list(range(mtp)):
        return "broken", "does not build each multi-token prediction layer once"
    return "split", chunks


def paramlayout_split(binary, args, world_size, out_dir):
    """("refused", message) or ("split", chunks) from `paramlayout job`."""
    command = [binary, "job", "--world-size", str(world_size), "-q", "-o", str(out_dir), "--"]
    result = subprocess.run(command + MODEL_ARGS + args, capture_output=True, text=True)
    if result.returncode == 2:
        return "refused", result.stderr.strip()
    if result.returncode != 0:
        raise SystemExit(f"paramlayout job exited {result.returncode}: {result.stderr}")
    job = json.loads(Path(out_dir, "job.json").read_text())
    chunks = []
    for c in job["chunks"]:
        names = [p["name"] for p in json.loads(Path(out_dir, c["manifest"]).read_text())["params"]]
        final_norm = any(n.startswith("decoder.final_layernorm.") for n in names)
        chunks.append({"stage": c["stage"], "chunk": c["chunk"], "layers": c["layers"],
                       "mtp_layers": c["mtp_layers"], "embedding": c["embedding"],
                       "output": c["output"], "final_norm": final_norm})
    return "split", chunks


def scratch():
    """A directory for paramlayout's output: in memory where the system has one (a job
    writes two files per chunk, each synced)."""
    return tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None)


def world_size(args):
    return megatron_pipeline.parse_arguments(args).pipeline_model_parallel_size


def compare(megatron, binary, args, out_dir):
    """(agrees, what Megatron-LM did, what paramlayout did, the first difference)."""
    theirs = megatron_split(megatron, args)
    pp = world_size(args)
    if pp is None or pp < 1:
        return theirs[0] != "split", theirs, ("refused", "not run"), ""
    ours = paramlayout_split(binary, args, pp, out_dir)
    if theirs[0] != "split" or ours[0] != "split":
        agrees = (theirs[0] == "split") == (ours[0] == "split")
        return agrees, theirs, ours, "" if agrees else "one refuses, the other does not"
    if len(theirs[1]) != len(ours[1]):
        return False, theirs, ours, f"{len(theirs[1])} chunks, paramlayout {len(ours[1])}"
    for a, b in zip(theirs[1], ours[1]):
        for key in ("stage", "chunk") + FIELDS:
            if a[key] != b[key]:
                return False, theirs, ours, (f"stage {a['stage']} chunk {a['chunk']}: {key} "
                                             f"{a[key]}, paramlayout {b[key]}")
    return True, theirs, ours, ""


def check_goldens(megatron):
    """Megatron-LM's own unit-test goldens, reproduced through this harness."""
    wrong = 0
    for source, args, expected in pipeline_cases.GOLDENS:
        chunks = megatron.split(args)
        order = sorted(chunks, key=lambda c: (c["chunk"], c["stage"]))
        if "first_last" in expected:
            got = ([c["layers"][0] + 1 if c["layers"] else None for c in order],
                   [c["layers"][-1] + 1 if c["layers"] else None for c in order])
            want = expected["first_last"]
        else:
            got = {(c["stage"], c["chunk"]): c["layers"][0] for c in chunks}
            want = expected["offsets"]
        if got != want:
            wrong += 1
            print(f"{source}: the harness computes {got}, Megatron-LM's test expects {want}")
    return wrong


def check_cases(megatron, path):
    """The checked-in cases, recomputed by Megatron-LM's functions: the number that differ."""
    doc = json.loads(Path(path).read_text())
    wrong = 0
    for case in doc["cases"]:
        theirs = megatron_split(megatron, case["args"])
        if ("chunks" in case) != (theirs[0] == "split") or \
                ("chunks" in case and case["chunks"] != theirs[1]):
            wrong += 1
            print(f"{path}: '{case['name']}' is not what Megatron-LM {megatron.commit[:12]} "
                  f"computes (it was written from {doc['megatron_lm'][:12]}; rewrite it with "
                  "--write-cases)")
    return wrong


def write_cases(megatron, binary, path):
    if wrong := check_goldens(megatron):
        print(f"{wrong} of Megatron-LM's goldens not reproduced: not writing {path}")
        return 1
    cases = []
    differ = 0
    with scratch() as tmp:
        for name, args, message in pipeline_cases.NAMED:
            agrees, theirs, ours, diff = compare(megatron, binary, args, tmp)
            case = {"name": name, "world_size": world_size(args), "args": args}
            if theirs[0] == "split":
                case["chunks"] = theirs[1]
            else:
                case["megatron"] = theirs[1]
                case["refused"] = message
                if message is None or message not in ours[1]:
                    agrees, diff = False, f"paramlayout says {ours[1]!r}, expected {message!r}"
            if not agrees:
                differ += 1
                print(f"{name}: DIFFERS: {diff}", flush=True)
            cases.append(case)
    Path(path).write_text(dump_cases(megatron.commit, cases))
    print(f"wrote {len(cases)} cases to {path}; {differ} differ from paramlayout")
    return 1 if differ else 0


def dump_cases(commit, cases):
    """cases.json: one line per case, then one per chunk, so a diff reads well."""
    out = ["{", f'  "megatron_lm": {json.dumps(commit)},',
           f'  "model_args": {json.dumps(MODEL_ARGS)},', '  "cases": [']
    for i, case in enumerate(cases):
        text = json.dumps({k: v for k, v in case.items() if k != "chunks"})
        if "chunks" in case:
            text = text[:-1] + ', "chunks": [\n' + ",\n".join(
                "      " + json.dumps(c) for c in case["chunks"]) + "]}"
        out.append("    " + text + ("," if i + 1 < len(cases) else ""))
    return "\n".join(out + ["  ]", "}"]) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout")
    parser.add_argument("binary")
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write-cases", metavar="FILE")
    parser.add_argument("--check-cases", metavar="FILE")
    parser.add_argument("--sweep", action="store_true",
                        help="every small configuration (16,160 cases) instead of random ones")
    args = parser.parse_args()
    checkout = megatron_checkout.checkout_from(args.checkout)
    if checkout is None:
        print(megatron_checkout.SKIP_MESSAGE)
        return 77
    megatron = megatron_pipeline.Megatron(checkout)
    if args.write_cases:
        return write_cases(megatron, args.binary, args.write_cases)
    if check_goldens(megatron) or (args.check_cases and check_cases(megatron, args.check_cases)):
        return 1
    rng = random.Random(args.seed)
    cases = list(pipeline_cases.sweep_arguments()) if args.sweep else \
        [pipeline_cases.random_arguments(rng) for _ in range(args.cases)]
    tally = {}
    differ = 0
    with scratch() as tmp:
        for case, case_args in enumerate(cases):
            agrees, theirs, ours, diff = compare(megatron, args.binary, case_args, tmp)
            kind = f"megatron {theirs[0]}, paramlayout {ours[0]}"
            tally[kind] = tally.get(kind, 0) + 1
            if not agrees:
                differ += 1
                kept = Path(f"pipeline-differential-case-{case}.json")
                kept.write_text(json.dumps({"args": case_args, "megatron": theirs,
                                            "paramlayout": ours, "difference": diff}, indent=1))
                print(f"case {case}: DIFFERS: {diff}\n  {' '.join(case_args)}\n  ({kept})",
                      flush=True)
    for kind, n in sorted(tally.items()):
        print(f"  {n:6} {kind}")
    print(f"{len(cases)} cases, {differ} differ ("
          f"{'the sweep' if args.sweep else f'seed {args.seed}'}, Megatron-LM "
          f"{megatron.commit[:12]})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
