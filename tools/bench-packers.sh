#!/usr/bin/env bash
# Compares the layerwise packers (issue 6): real model shapes synthesized from the configs in
# testdata/configs/, planned at dp 8, 16, 64 and 256 with `--packer megatron` and
# `--packer balanced`; writes docs/PACKING.md (padding, floor, Newton-Schulz imbalance and
# its bound, plan time). Usage: tools/bench-packers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_release_build

bin=build-release/paramlayout
data=build-release/packers
mkdir -p "$data"
shapes=(
  "llama3-70b|--tp 8 --pp 4 --stage 0|Llama-3-70B, TP8, PP stage 1 of 4"
  "gpt3-175b|--tp 8 --pp 8 --stage 0|GPT-3 175B, TP8, PP stage 1 of 8"
  "mixtral-8x7b|--tp 2 --ep 8 --etp 1|Mixtral 8x7B, TP2, EP8"
  "qwen3-30b-a3b|--ep 8|Qwen3-30B-A3B, EP8"
  "deepseek-v3|--ep 64|DeepSeek-V3, EP64 (all 61 layers)"
)
# field STATS_JSON NAME FORMAT: one figure of `paramlayout stats --json`.
field() {
  python3 -c 'import json, sys; print(format(json.loads(sys.argv[1])[sys.argv[2]], sys.argv[3]))' "$@"
}
# command_ms MANIFEST DP: the best of 20 runs of the whole `paramlayout plan` command (read,
# plan, write) with each packer, in alternation: "MEGATRON_MS BALANCED_MS".
command_ms() {
  python3 - "$bin" "$@" <<'PY'
import subprocess, sys, time
binary, manifest, dp = sys.argv[1:]
best = {}
for _ in range(20):
    for packer in ("megatron", "balanced"):
        start = time.perf_counter()
        subprocess.run([binary, "plan", manifest, "--dp", dp, "--strategy", "layerwise",
                        "--packer", packer, "-q", "-o", "/dev/null"], check=True)
        best[packer] = min(best.get(packer, 1e9), time.perf_counter() - start)
print(f"{best['megatron'] * 1e3:.1f} {best['balanced'] * 1e3:.1f}")
PY
}
out=docs/PACKING.md
command_rows=""  # the second table, at dp 8 and 16
{
  echo "# Layerwise packing: \`megatron\` vs \`balanced\`"
  echo
  echo "Measured by \`tools/bench-packers.sh\` on $(date -u +%F), $(nproc) cores of"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). Each shape is one rank's"
  echo "chunk, synthesized by \`paramlayout synth\` from \`testdata/configs/\`; default bucket size;"
  echo "expert dp = dp. Padding and floor are elements over param elements, of the whole layout"
  echo "(the floor: no layout under the rules can pad less, since a bucket of dp equal shards"
  echo "holds its largest param whole). Imbalance: the heaviest rank's Newton-Schulz cost over"
  echo "the mean (bound: what the largest single matrix forces). Plan: the whole plan (every"
  echo "buffer, manifest already parsed), the best of as many runs of \`build-release/bench_plan\`"
  echo "as fit in about 0.2 s (at most 200), the two packers timed in alternation; the last"
  echo "column is balanced over megatron. Instructions per plan, which unlike the clock do not"
  echo "vary from run to run: \`tools/bench-packers-instructions.sh\`."
  echo
  echo "| shape | dp | megatron padding | balanced padding | floor | megatron imbalance | balanced imbalance | bound | megatron plan ms | balanced plan ms | time ratio |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for entry in "${shapes[@]}"; do
    IFS='|' read -r config split title <<<"$entry"
    manifest=$data/$config.json
    # shellcheck disable=SC2086
    "$bin" synth "testdata/configs/$config.json" $split -q -o "$manifest"
    for dp in 8 16 64 256; do
      row="| $title | $dp"
      declare -A pad imb ms
      times=$(build-release/bench_plan "$manifest" layerwise/megatron,layerwise/balanced "$dp")
      for packer in megatron balanced; do
        layout=$data/$config-$dp-$packer.json
        "$bin" plan "$manifest" --dp "$dp" --strategy layerwise --packer "$packer" -q -o "$layout"
        ms[$packer]=$(sed -n "s|.* layerwise/$packer dp .*plan \([0-9.]*\) ms.*|\1|p" <<<"$times")
        stats=$("$bin" stats "$layout" --manifest "$manifest" --json)
        pad[$packer]=$(field "$stats" padding_percent .2f)%
        imb[$packer]=$(field "$stats" cost_imbalance .3f)
        floor=$(field "$stats" floor_percent .2f)%
        bound=$(field "$stats" cost_imbalance_bound .3f)
      done
      echo "$row | ${pad[megatron]} | ${pad[balanced]} | $floor | ${imb[megatron]} | ${imb[balanced]} | $bound | ${ms[megatron]} | ${ms[balanced]} | $(python3 -c "print(f'{${ms[balanced]} / ${ms[megatron]}:.2f}x')") |"
      if [ "$dp" -le 16 ]; then
        read -r m b <<<"$(command_ms "$manifest" "$dp")"
        command_rows+="| $title | $dp | $m | $b | $(python3 -c "print(f'{$b / $m:.2f}x')") |"$'\n'
      fi
    done
  done
  echo
  echo "The whole \`paramlayout plan\` command (reading the manifest, planning, writing the layout),"
  echo "best of 20 runs of each, in alternation:"
  echo
  echo "| shape | dp | megatron command ms | balanced command ms | ratio |"
  echo "|---|---|---|---|---|"
  printf '%s' "$command_rows"
  cat <<'TEXT'

## What `balanced` does

Layerwise buckets must be dp shards of one size, each param whole in one shard, buckets
contiguous in backprop order. Megatron-LM's packer closes a bucket once it reaches
max(bucket_size, 0.9 x dp x its largest param) and spreads it with a 1.3 x average cap, so
a bucket whose largest matrix sets the shard size often holds too few others to fill dp
shards of that size, and the last bucket of a run is nearly empty.

`balanced` (src/core/strategies/layerwise_balanced.cpp):
1. counts the buckets a run needs greedily (each takes params while they fit dp shards of
   max(bucket_size / dp, its largest param));
2. cuts the run into that many buckets of about equal totals, and also tries a few counts
   fewer (larger buckets: bucket_size is a soft target), keeping the count that pads least
   (on a tie, the most buckets); the fewest go first, since they usually win, and a count
   whose buckets cannot beat the best so far (or Megatron-LM's size for the buffer) even at
   their lower bounds is dropped before any more packing;
3. gives each bucket the smallest shard size at which best-fit-decreasing packs its params
   (from a lower bound up: the largest param, total / dp, and the k + 1 smallest of the
   k x dp + 1 largest params, which some shard must share; galloping, then bisecting to
   1/1024; a packing at one size also holds at its fullest shard's, where the search goes
   on, and a size that fails fails up to the next multiple of the params' sizes' gcd);
   buckets of the same params (experts) are packed once;
4. where a bucket has few distinct param sizes (at most 12, dp at most 64), tries just below
   best-fit's size filling shards one at a time, and where that packs, goes on from its
   fullest shard and bisects below once more the same way: each shard takes the largest param
   left and the params that fill it best (a bounded depth-first search over the sizes; a
   shard's best choice is repeated while its params last). Best-fit spreads the large
   matrices first and strands room no small one fits; filling shard by shard does not;
5. moves each cut between two buckets by up to 4 params either way where the pair gets
   smaller (a move whose lower bounds leave less to gain than the search resolves is not
   tried; one packing of each side at the largest size that could win rules most others
   out). Runs of more than 2000 params (thousands of experts) skip steps 4 and 5;
6. at that size packs the params by cost where they fit (costliest matrix to the cheapest
   shard with room, balancing Newton-Schulz work), else keeps the packing found;
7. gives each bucket's shards to ranks, buckets with the costliest shard first, costliest
   shard onto the least-loaded rank, counting what the ranks already hold from the buffers
   planned before with the same shard count (a rank's Muon work is the sum over its
   buffers, as `stats` reports it); then, while the heaviest rank is heavier than under
   Megatron-LM's packing of all those buffers, swaps two shards of one bucket where that
   lightens it most;
8. packs the buffer Megatron-LM's way too (first), and keeps that layout where `balanced`
   would pad more or load its heaviest rank more: it never loses on either figure. Where
   steps 4-5 load a rank more (they ignore cost), it plans again without them first. Should
   a buffer kept Megatron-LM's way still leave some rank heavier than all of Megatron-LM's
   layouts would, every buffer of those ranks is packed Megatron-LM's way.

Planning time (last column; `balanced` runs Megatron-LM's packer too, and its time is
counted): these plans take 5 to 600 microseconds, and a point moves by a few percent from
run to run (more in a slow spell of the machine), so the issue's 2x goal is also weighed
in instructions, which do not move (`tools/bench-packers-instructions.sh`, 20 plans each;
docs/PERFORMANCE.md has them): 1.3-1.98x on every shape at dp 8 and 16, DeepSeek-V3 at
dp 8 the closest. On the clock two rows read 2.0-2.1x from run to run, DeepSeek-V3 and the
Llama-3 stage at dp 8, and DeepSeek-V3 up to 2.35x in a slow spell of the machine: the
bin-filling search (step 4) spends more of its time per instruction than the rest, waiting
on divisions and branches. The other rows read under 2x. The whole `paramlayout plan`
command takes 12-23 ms with either packer on these shapes (0.9-1.1x, the second table):
the search spends under a millisecond once for memory every rank holds for the whole run.

Both are checked by `paramlayout check` (every promise) in the `packer` unit suite, over the
70 layerwise reference cases and the shapes above.

## How close to the best possible

The floor is a bound, not always reachable. `tools/exact_packing.py MANIFEST DP K` finds
the least padding of a layerwise buffer by exhaustive search over every cut into at most K
contiguous buckets and every packing of each (exact; slow beyond a few distinct sizes).
Of the layerwise buffer alone (the table counts the whole layout, so its figures are a
little lower):

| shape | dp | least, 1 bucket | least, 2 buckets | `balanced` |
|---|---|---|---|---|
| Llama-3-70B, TP8, PP stage 1 of 4 | 8 | 0.39% | 1.18% | 1.18% (2 buckets) |
| Llama-3-70B, TP8, PP stage 1 of 4 | 16 | 1.96% | 3.53% | 1.96% (1 bucket) |
| GPT-3 175B, TP8, PP stage 1 of 8 | 8 | 4.59% | 4.59% | 4.59% |
| GPT-3 175B, TP8, PP stage 1 of 8 | 16 | 10.09% | 13.76% | 10.09% (1 bucket) |

So on these two stages `balanced` is at the optimum (for Llama at dp 8, the optimum with
more than one bucket; a single bucket for the stage would give up overlapping the
reduction with the backward pass, and the bucket count never drops below half the
greedy count). Mixtral and Qwen3 are at the floor. The issue's goal of 2 points above the
floor on average at dp 8 and 16 cannot be met on its four shapes by any layout under the
rules: GPT-3's optimum alone is 4.59% and 10.09% above its floor. Why: GPT-3's stage is
24 matrices of 4 units (of 18.9 M elements), 12 of 3 and 12 of 1, and a position
embedding of 1.33; at dp 16 the average shard needs 9.08 units, but every sum of these
sizes that fits is at most 9 (9.33 once, with the embedding) unless it is 10, so 10-unit
shards it is. Llama-3-70B's stage is 20 layers of 56, 28, 10 and 8 units of 2^20: at dp 16
every shard holds an even number of units, 128 cannot hold them all (the search above),
so 130.
TEXT
} >"$out"
cat "$out"
