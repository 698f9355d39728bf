#!/usr/bin/env bash
# Sourced by the benchmarks: the release build (build-release/) and how they measure.
# The machine may be shared with other work, so a time is the least of several runs, CPU
# time is given beside wall time, and where a figure must not move with the machine's load
# it is counted in instructions (callgrind).

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/setup.sh
paramlayout_install valgrind
paramlayout_release_build
bin=build-release/paramlayout

# One line naming the machine and the build, for the top of a report.
machine() {
  echo "$(nproc) cores of $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
    "$(free -g | awk '/^Mem:/ { print $2 }') GiB, load average $(cut -d' ' -f2 /proc/loadavg)" \
    "at the start; commit $(git rev-parse --short HEAD), $(date -u +%F)"
}

# best_of RUNS COMMAND...: "WALL_MS CPU_MS PEAK_RSS_MB": the least wall time and the least
# CPU time (user + system, all threads) of RUNS runs of COMMAND (its output discarded), and
# the most memory it took; exits if COMMAND fails. On a loaded machine the CPU time moves
# much less than the wall time.
best_of() {
  python3 - "$@" <<'PY'
import os, subprocess, sys, time
runs, command = int(sys.argv[1]), sys.argv[2:]
wall, cpu, rss = float("inf"), float("inf"), 0
for _ in range(runs):
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = min(wall, time.perf_counter() - start)
    cpu = min(cpu, usage.ru_utime + usage.ru_stime)
    rss = max(rss, usage.ru_maxrss)
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a check or diff verdict
        sys.exit(f"failed: {' '.join(command)}")
print(f"{wall * 1e3:.1f} {cpu * 1e3:.1f} {rss / 1024:.0f}")
PY
}

# instructions COMMAND...: the instructions COMMAND executes, whole process (callgrind).
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\)/\1/p'
}

# plan_instructions MANIFEST STRATEGY[/PACKER] DP: instructions per plan inside
# paramlayout::plan, over 20 plans of bench_plan (callgrind): the plan alone, no I/O.
plan_instructions() {
  local run total
  run=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    --toggle-collect='paramlayout::plan(*' build-release/bench_plan --runs 20 "$@" 2>&1)
  total=$(sed -n 's/.*Collected : \([0-9]*\)/\1/p' <<<"$run")
  echo $((total / 20))
}

# plan_ms MANIFEST STRATEGY[/PACKER][,...] DP: the least CPU time of each plan (bench_plan),
# in milliseconds, one per choice; the choices are timed in alternation.
plan_ms() {
  build-release/bench_plan "$@" | sed -n 's/.*plan \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '
}

# millions N: N as "12.3 M".
# command_cells RUNS COMMAND...: "INSTRUCTIONS | CPU_MS | WALL_MS | PEAK_RSS_MB", the cells
# of a markdown row: COMMAND's instructions (callgrind) and best_of RUNS runs.
command_cells() {
  local runs=$1 wall cpu rss
  shift
  read -r wall cpu rss <<<"$(best_of "$runs" "$@")"
  echo "$(millions "$(instructions "$@")") | $cpu | $wall | $rss"
}

millions() {
  python3 -c "print(f'{$1 / 1e6:,.1f} M')"
}
