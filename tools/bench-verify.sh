#!/usr/bin/env bash
# Benchmarks the cpu backend of `paramlayout verify` (issue 3's CPU speed goal): a
# Llama-3.2-1B-shaped manifest (1.24 G bf16 elements) planned with both strategies at dp 8
# and 512, then verified. The data pass should cost the same at both dp: O(buffer), not
# O(dp x buffer).
# Usage: tools/bench-verify.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_release_build

data=build-release/bench
mkdir -p "$data"
manifest=$data/llama3.2-1b.json
python3 tools/gen_bench_manifests.py "$data" llama3.2-1b

bin=build-release/paramlayout
echo "## $(date -u +%F) on $(nproc) cores of $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo
echo "| strategy | dp | elements | verify wall s | ns / element | fill GB/s | check GB/s |"
echo "|---|---|---|---|---|---|---|"
for strategy in sequential-dp layerwise; do
  for dp in 8 512; do
    layout=$data/verify-$strategy-dp$dp.json
    report=$data/verify-$strategy-dp$dp.report.json
    "$bin" plan "$manifest" --dp "$dp" --strategy "$strategy" -q -o "$layout"
    start=$(date +%s.%N)
    "$bin" verify "$layout" --manifest "$manifest" --backend cpu -q --report "$report" >/dev/null
    end=$(date +%s.%N)
    python3 - "$report" "$strategy" "$dp" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
wall = float(sys.argv[5]) - float(sys.argv[4])
n = sum(b["elements"] for b in r["buckets"])
fill = sum(b["filled_bytes"] for b in r["buckets"]) / sum(b["fill_seconds"] for b in r["buckets"])
check = sum(b["checked_bytes"] for b in r["buckets"]) / sum(b["check_seconds"] for b in r["buckets"])
assert r["ok"], "verify failed"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {n:,} | {wall:.2f} | {wall / n * 1e9:.2f} "
      f"| {fill / 1e9:.1f} | {check / 1e9:.1f} |")
PY
  done
done
