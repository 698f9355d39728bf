#!/usr/bin/env python3
"""The GPU run's tables, from what tools/gpu-check.sh has gathered so far in WORK:
steps.tsv (step, status, seconds, note) and reports/ (verify reports of layouts and of a
job's chunks, copy.json).

Writes OUT/summary.md (the tables, also printed) and OUT/results.json (the same figures).
Usage: gpu_summary.py WORK OUT [--print]
"""
import json
import sys
from pathlib import Path

LAYOUTS = ["llama3-70b-sequential-dp", "llama3-70b-layerwise", "deepseek-v3-sequential-dp",
           "deepseek-v3-layerwise"]
JOBS = ["deepseek-v3-job"]


def read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def steps(work):
    rows = []
    path = work / "steps.tsv"
    if path.exists():
        for line in path.read_text().splitlines():
            name, status, seconds, note = (line.split("\t") + ["", "", ""])[:4]
            rows.append({"step": name, "status": status, "seconds": float(seconds or 0),
                         "note": note})
    return rows


def figures(report, copy_gbps):
    """One layout's figures from its verify report."""
    buckets = report["buckets"]
    moved = sum(b["reduce_scatter_bytes"] + b["all_gather_bytes"] for b in buckets)
    fill_s = sum(b["fill_seconds"] for b in buckets)
    check_s = sum(b["check_seconds"] for b in buckets)
    collective_s = sum(b["reduce_scatter_seconds"] + b["all_gather_seconds"] for b in buckets)
    fill = sum(b["filled_bytes"] for b in buckets) / fill_s / 1e9 if fill_s else 0
    check = sum(b["checked_bytes"] for b in buckets) / check_s / 1e9 if check_s else 0
    return {
        "ok": report["ok"], "backend": report["backend"], "devices": report["devices"],
        "elements": sum(b["elements"] for b in buckets), "buckets": len(buckets),
        "chunks": sum(b["chunks"] for b in buckets), "gb_moved": moved / 1e9,
        "verify_seconds": report["seconds"],
        "gb_verified_per_second": moved / 1e9 / report["seconds"] if report["seconds"] else 0,
        "fill_gbps": fill, "check_gbps": check,
        "fill_percent_of_copy": 100 * fill / copy_gbps if copy_gbps else None,
        "check_percent_of_copy": 100 * check / copy_gbps if copy_gbps else None,
        "collective_algbw_gbps": moved / 1e9 / collective_s if collective_s else 0,
    }


def percent(value):
    return "" if value is None else f" ({value:.0f}%)"


def tables(results):
    lines = ["| step | status | seconds | note |", "|---|---|---:|---|"]
    for s in results["steps"]:
        lines.append(f"| {s['step']} | {s['status']} | {s['seconds']:.1f} | {s['note']} |")
    copy = results.get("copy")
    if copy:
        lines += ["", f"{copy['gpu']}: device-to-device copy {copy['gbps']:.0f} GB/s "
                      f"(bytes read + written, median of {copy['copies']} copies of "
                      f"{copy['bytes'] / 2**30:.0f} GiB; best {copy['best_gbps']:.0f})"]
    if results["layouts"]:
        lines += ["", "| layout (dp 64 on one GPU) | elements | GB moved | verify s | "
                      "GB verified/s | fill GB/s (% of copy) | check GB/s (% of copy) | "
                      "collectives algbw GB/s | verdict |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, f in results["layouts"].items():
            lines.append(
                f"| {name} | {f['elements']:,} | {f['gb_moved']:.1f} | {f['verify_seconds']:.2f} "
                f"| {f['gb_verified_per_second']:.1f} | {f['fill_gbps']:.0f}"
                f"{percent(f['fill_percent_of_copy'])} | {f['check_gbps']:.0f}"
                f"{percent(f['check_percent_of_copy'])} | {f['collective_algbw_gbps']:.0f} | "
                f"{'verified' if f['ok'] else 'WRONG'} |")
    return "\n".join(lines) + "\n"


def main():
    work, out = Path(sys.argv[1]), Path(sys.argv[2])
    copy = read_json(work / "reports/copy.json")
    results = {"steps": steps(work), "copy": copy, "layouts": {}}
    for name in LAYOUTS:
        report = read_json(work / f"reports/{name}.json")
        if report and "buckets" in report:
            results["layouts"][name] = figures(report, copy["gbps"] if copy else 0)
    # A job's report: a row per chunk verified, at the chunk's own dp and expert dp.
    for job in JOBS:
        report = read_json(work / f"reports/{job}.json")
        for chunk in (report or {}).get("chunks", []):
            if "buckets" in chunk:
                name = f"{job} {chunk['name']} (expert dp {chunk['expert_dp']})"
                results["layouts"][name] = figures(chunk, copy["gbps"] if copy else 0)
    env = work / "environment.json"
    if env.exists():
        results["environment"] = read_json(env)
    text = tables(results)
    for path, content in ((out / "summary.md", text),
                          (out / "results.json", json.dumps(results, indent=1) + "\n")):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(content)
        tmp.replace(path)
    if "--print" in sys.argv:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
