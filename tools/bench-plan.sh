#!/usr/bin/env bash
# Benchmarks `paramlayout plan` (issue 2's speed goals) in a release build:
#  - a DeepSeek-V3-shaped manifest (all 256 experts on one rank: ~30k params, ~0.67 T
#    elements) at dp 8, 64 and 512 with both strategies: the whole process (--timings,
#    peak RSS) and the plan phase alone (bench_plan, best of 20), layerwise with both packers;
#  - a synthetic 1M-param manifest at dp 4096: throughput of manifest + layout JSON.
# With MEGATRON_LM set to a Megatron-LM checkout (work tree or bare git dir), Megatron-LM's
# own layout functions are timed on the same manifest in the same run (the anchor), and
# their layouts are compared with paramlayout's.
# Usage: [MEGATRON_LM=path] tools/bench-plan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_release_build

data=build-release/bench
mkdir -p "$data"
[ -f "$data/synthetic-1m.json" ] || python3 tools/gen_bench_manifests.py "$data" deepseek-v3-ep1 synthetic-1m
bin=build-release/paramlayout
deepseek=$data/deepseek-v3-ep1.json

echo "## $(date -u +%F) on $(nproc) cores of $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo
echo "### DeepSeek-V3 (ep 1): $(du -h "$deepseek" | cut -f1) manifest"
for strategy in sequential-dp layerwise; do
  if [ "$strategy" = layerwise ]; then  # both packers, timed in alternation
    build-release/bench_plan "$deepseek" layerwise,layerwise/balanced 8 64 512
  else
    build-release/bench_plan "$deepseek" "$strategy" 8 64 512
  fi
  for dp in 8 64 512; do
    /usr/bin/time -f "    peak RSS %M KB" "$bin" plan "$deepseek" --dp "$dp" --strategy "$strategy" \
      -q --timings -o "$data/$strategy-dp$dp.json" 2>&1 | sed "s/^timings/  $strategy dp $dp: timings/"
  done
  if [ -n "${MEGATRON_LM:-}" ]; then
    python3 tools/megatron_anchor.py "$MEGATRON_LM" "$deepseek" "$strategy" 8 64 512 \
      --compare "$data"
  fi
done

echo
echo "### check and diff on the DeepSeek-V3 layouts (30k params)"
for dp in 8 64 512; do
  /usr/bin/time -f "  check --replan, layerwise dp $dp: %e s, peak RSS %M KB" \
    "$bin" check "$data/layerwise-dp$dp.json" --manifest "$deepseek" --replan >/dev/null
done
/usr/bin/time -f "  diff layerwise dp 64 vs dp 512: %e s, peak RSS %M KB" \
  "$bin" diff "$data/layerwise-dp64.json" "$data/layerwise-dp512.json" >/dev/null || true
/usr/bin/time -f "  diff --json sequential-dp vs layerwise dp 8: %e s, peak RSS %M KB" \
  "$bin" diff --json "$data/sequential-dp-dp8.json" "$data/layerwise-dp8.json" >/dev/null || true

echo
echo "### synthetic 1M params at dp 4096: $(du -h "$data/synthetic-1m.json" | cut -f1) manifest"
for strategy in sequential-dp layerwise; do
  for target in file stdout; do
    if [ "$target" = file ]; then
      args=(-o "$data/synthetic-1m-$strategy.json")
    else
      args=()
    fi
    /usr/bin/time -f "    peak RSS %M KB, wall %e s" "$bin" plan "$data/synthetic-1m.json" \
      --dp 4096 --strategy "$strategy" -q --timings "${args[@]}" 2>&1 >/dev/null |
      sed "s/^timings/  $strategy -> $target: timings/"
  done
  in=$(stat -c %s "$data/synthetic-1m.json")
  out=$(stat -c %s "$data/synthetic-1m-$strategy.json")
  echo "    manifest + layout: $(( (in + out) / 1000000 )) MB"
done
build-release/bench_plan "$data/synthetic-1m.json" sequential-dp 4096
build-release/bench_plan "$data/synthetic-1m.json" layerwise 4096
