#!/usr/bin/env bash
# What `paramlayout plan` costs, in a release build (build-release/), as markdown tables:
#  - a DeepSeek-V3 manifest with all 256 experts on one rank (30,428 params, 0.67 T
#    elements) at dp 8, 64 and 512, per strategy and packer: the plan alone (bench_plan,
#    manifest already parsed: instructions per plan, and the least CPU time of as many runs
#    as fit in 0.2 s) and the whole command (read, validate, plan, write the layout: its
#    instructions, its least CPU and wall time of RUNS runs, and peak memory);
#  - a synthetic manifest of 1,000,000 params at dp 4096: the whole command's instructions,
#    the phases of its fastest of RUNS runs (--timings, wall time; "other" is the rest of
#    the total, the layout's quality figures among it), that run's CPU time, and the JSON
#    read and written per second of CPU.
# With MEGATRON_LM naming a Megatron-LM checkout (a work tree or a bare git directory),
# Megatron-LM's own layout functions are timed on the DeepSeek-V3 manifest in the same run
# (bench/megatron_anchor.py), and their layouts compared with paramlayout's.
# Usage: [MEGATRON_LM=DIR] [RUNS=N] bench/plan.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-10}
data=build-release/bench
mkdir -p "$data"
[ -f "$data/synthetic-1m.json" ] ||
  python3 bench/gen_manifests.py "$data" deepseek-v3-ep1 synthetic-1m
deepseek=$data/deepseek-v3-ep1.json

echo "Measured by bench/plan.sh on $(machine)."
echo
echo "### DeepSeek-V3, all 256 experts on one rank: $(du -h "$deepseek" | cut -f1) manifest"
echo
echo "| strategy | packer | dp | plan: instructions | plan: CPU ms | command: instructions | command: CPU ms | command: wall ms | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|"
for choice in sequential-dp/megatron layerwise/megatron layerwise/balanced; do
  strategy=${choice%/*}
  packer=${choice#*/}
  for dp in 8 64 512; do
    plan_count=$(plan_instructions "$deepseek" "$choice" "$dp")
    plan_best=$(plan_ms "$deepseek" "$choice" "$dp")
    command=("$bin" plan "$deepseek" --dp "$dp" --strategy "$strategy" --packer "$packer" -q
             -o "$data/$strategy-$packer-dp$dp.json")
    echo "| $strategy | $packer | $dp | $(millions "$plan_count") | ${plan_best% }" \
      "| $(command_cells "$runs" "${command[@]}") |"
  done
done

if [ -n "${MEGATRON_LM:-}" ]; then
  echo
  echo "Megatron-LM's own layout functions on the same manifest, in the same run (CPU time):"
  echo
  for strategy in sequential-dp layerwise; do
    for dp in 8 64 512; do  # the layouts to compare with, planned with default options
      cp "$data/$strategy-megatron-dp$dp.json" "$data/$strategy-dp$dp.json"
    done
    python3 bench/megatron_anchor.py "$MEGATRON_LM" "$deepseek" "$strategy" 8 64 512 \
      --compare "$data" | sed 's/^/    /'
  done
fi

echo
echo "### The far-off warning: DeepSeek-V3 synthesized unsplit at dp 512, layerwise"
echo
# synth's DeepSeek-V3 (30,956 params, experts not split) pads 26.65% at dp 512, so the
# warning weighs other plans; -q skips it. The phases are those of --timings.
synth_ds=$data/deepseek-v3-synth.json
"$bin" synth testdata/configs/deepseek-v3.json -q -o "$synth_ds"
echo "| command | instructions | CPU ms | wall ms | peak RSS MB |"
echo "|---|---|---|---|---|"
for quiet in -q ""; do
  command=("$bin" plan "$synth_ds" --dp 512 --strategy layerwise $quiet -o "$data/synth-ds.json")
  echo "| plan --dp 512 --strategy layerwise ${quiet:-(with the warning)} | $(command_cells "$runs" "${command[@]}") |"
done
"$bin" plan "$synth_ds" --dp 512 --strategy layerwise --timings -o "$data/synth-ds.json" 2>&1 |
  sed -n 's/^timings: /phases of one run: /p'
echo
echo "### Synthetic, 1,000,000 params at dp 4096: $(du -h "$data/synthetic-1m.json" | cut -f1) manifest"
echo
echo "| strategy | instructions | parse ms | validate ms | plan ms | other ms | write ms | total ms | CPU ms | JSON in + out | MB per CPU s | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for strategy in sequential-dp layerwise; do
  layout=$data/synthetic-1m-$strategy.json
  command=("$bin" plan "$data/synthetic-1m.json" --dp 4096 --strategy "$strategy" -q
           --timings -o "$layout")
  best=""
  for _ in $(seq "$runs"); do  # the run with the least total, phase by phase
    line=$(/usr/bin/time -f "rss %M cpu %U %S" "${command[@]}" 2>&1 | tr '\n' ' ')
    total=$(sed -n 's/.*total \([0-9.]*\) ms.*/\1/p' <<<"$line")
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(not $total < $best_total)"; then
      best=$line
      best_total=$total
    fi
  done
  bytes=$(( $(stat -c %s "$data/synthetic-1m.json") + $(stat -c %s "$layout") ))
  count=$(millions "$(instructions "${command[@]}")")
  python3 - "$strategy" "$bytes" "$best" "$count" <<'PY'
import re, sys
strategy, nbytes, line, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ms = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) ms", line)}
other = ms["total"] - ms["parse"] - ms["validate"] - ms["plan"] - ms["write"]
rss = int(re.search(r"rss (\d+)", line).group(1)) / 1024
user, system = map(float, re.search(r"cpu ([0-9.]+) ([0-9.]+)", line).groups())
print(f"| {strategy} | {count} | {ms['parse']:.0f} | {ms['validate']:.0f} | {ms['plan']:.0f} "
      f"| {other:.0f} | {ms['write']:.0f} | {ms['total']:.0f} | {(user + system) * 1e3:.0f} "
      f"| {nbytes / 1e6:.0f} MB "
      f"| {nbytes / 1e6 / (user + system):.0f} | {rss:.0f} |")
PY
done
