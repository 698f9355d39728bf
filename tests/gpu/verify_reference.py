#!/usr/bin/env python3
"""The shipped reference cases (testdata/reference/cases.json, Megatron-LM's own layouts),
planned by paramlayout and verified on the GPU, several processes at once.

  verify_reference.py plan BINARY ROOT DIR       plans every case into DIR (no GPU)
  verify_reference.py verify BINARY ROOT DIR [--jobs N] [--timeout S]
                                                 verifies them (--backend nccl), a report each

`verify` prints one line per case that is not verified and a last line with the counts;
exits 0 when every layout is verified, 1 otherwise (2 when the cases were not planned).
"""
import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def plan_arguments(options):
    args = ["--strategy", options["strategy"], "--dp", str(options["dp"])]
    if "expert_dp" in options:
        args += ["--expert-dp", str(options["expert_dp"])]
    size = options.get("bucket_size", "default")
    if size is None:
        args += ["--bucket-size", "none"]
    elif size != "default":
        args += ["--bucket-size", str(size)]
    if options.get("grad_reduce_in_fp32"):
        args.append("--grad-reduce-in-fp32")
    if options.get("pad_for_high_nccl_busbw"):
        args.append("--pad-for-high-nccl-busbw")
    return args


def cases(root):
    ref = Path(root, "testdata/reference")
    return [(c["id"], ref / c["manifest"], c["options"])
            for c in json.loads((ref / "cases.json").read_text())]


def plan_all(binary, root, out):
    out.mkdir(parents=True, exist_ok=True)
    listed = []
    for case_id, manifest, options in cases(root):
        layout = out / f"{case_id}.layout.json"
        result = subprocess.run([binary, "plan", str(manifest), "-q", "-o", str(layout),
                                 *plan_arguments(options)], capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{case_id}: plan failed ({result.returncode}): {result.stderr.strip()}")
            return 1
        listed.append({"id": case_id, "layout": str(layout), "manifest": str(manifest)})
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    print(f"{len(listed)} reference cases planned into {out}")
    return 0


def verify_one(binary, case, reports, timeout):
    report = reports / f"{case['id']}.json"
    start = time.monotonic()
    try:
        result = subprocess.run([binary, "verify", case["layout"], "--manifest", case["manifest"],
                                 "--backend", "nccl", "-q", "--report", str(report),
                                 "--timeout", str(timeout)],
                                capture_output=True, text=True, timeout=timeout + 60)
        code, text = result.returncode, (result.stdout + result.stderr).strip()
    except subprocess.TimeoutExpired:
        code, text = -1, f"no answer within {timeout + 60} s"
    return case["id"], code, text, time.monotonic() - start, report


def verify_all(binary, out, jobs, timeout):
    listed = out / "cases.json"
    if not listed.exists():
        print(f"{listed}: missing (run `plan` first)")
        return 2
    todo = json.loads(listed.read_text())
    reports = out / "reports"
    reports.mkdir(exist_ok=True)
    start = time.monotonic()
    verified = elements = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for case_id, code, text, seconds, report in pool.map(
                lambda c: verify_one(binary, c, reports, timeout), todo):
            if code == 0:
                verified += 1
                elements += sum(b["elements"] for b in json.loads(report.read_text())["buckets"])
            else:
                last = text.splitlines()[-1] if text else ""
                print(f"{case_id}: exit {code} after {seconds:.1f} s: {last}", flush=True)
    print(f"reference layouts: {verified} of {len(todo)} verified on the GPU "
          f"({elements:,} elements, {jobs} at a time, {time.monotonic() - start:.1f} s)")
    return 0 if verified == len(todo) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["plan", "verify"])
    parser.add_argument("binary")
    parser.add_argument("root")
    parser.add_argument("dir", type=Path)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--timeout", type=int, default=120, help="verify's --timeout")
    args = parser.parse_args()
    if args.command == "plan":
        return plan_all(args.binary, args.root, args.dir)
    return verify_all(args.binary, args.dir, args.jobs, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
