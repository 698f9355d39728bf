#!/usr/bin/env bash
# What `paramlayout verify --backend cpu` costs, in a release build (build-release/), as a
# markdown table: a Llama-3.2-1B manifest (1.24 G bf16 elements) planned with both
# strategies at dp 8 and 512, then verified on 2 simulated devices: the least CPU time
# (both cores' work) and wall time of RUNS runs.
# The data pass is O(buffer) for any dp, so the time per element should not grow with dp.
# Usage: [RUNS=N] bench/verify.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-3}
data=build-release/bench
mkdir -p "$data"
manifest=$data/llama3.2-1b.json
[ -f "$manifest" ] || python3 bench/gen_manifests.py "$data" llama3.2-1b

echo "Measured by bench/verify.sh on $(machine); the least of $runs runs."
echo
echo "| strategy | dp | elements | CPU s | CPU ns / element | wall s | peak RSS MB |"
echo "|---|---|---|---|---|---|---|"
for strategy in sequential-dp layerwise; do
  for dp in 8 512; do
    layout=$data/verify-$strategy-dp$dp.json
    report=$data/verify-$strategy-dp$dp.report.json
    "$bin" plan "$manifest" --dp "$dp" --strategy "$strategy" -q -o "$layout"
    read -r wall cpu rss <<<"$(best_of "$runs" "$bin" verify "$layout" --manifest "$manifest" \
      --backend cpu -q --report "$report")"
    python3 - "$report" "$strategy" "$dp" "$wall" "$cpu" "$rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
strategy, dp, wall, cpu, rss = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
assert r["ok"], "verify failed"
n = sum(x["elements"] for x in r["buckets"])
print(f"| {strategy} | {dp} | {n:,} | {cpu / 1e3:.2f} | {cpu / 1e3 / n * 1e9:.2f} "
      f"| {wall / 1e3:.2f} | {rss} |")
PY
  done
done
