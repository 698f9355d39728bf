#!/usr/bin/env bash
# The GPU run: `paramlayout verify` and Megatron-LM's DDP on a real GPU, in one call on a
# machine with an NVIDIA GPU, Python with torch and the nvidia-nccl wheel, and no network.
# It runs the binaries tools/gpu-build.sh made for it (build-carry/bin; when they do not load,
# it builds them there from build-carry/deps), then these steps, each under its own timeout
# and all within GPU_CHECK_BUDGET seconds:
#   inputs             manifests (paramlayout synth) and layouts for the steps below; no GPU
#   megatron-files     Megatron-LM's package and the project's loader are there; no GPU
#   broken-layout      a layout with a param of the wrong size: verify must exit 1; no GPU
#   environment        GPU, driver, NCCL, torch, and a one-rank torch NCCL all-reduce
#   gpu-probe          the first verify on the GPU; without a CUDA device the run stops here
#   gpu-tests          tests/gpu/run_gpu_tests.py
#   reference          the 144 reference cases (testdata/reference) verified
#   copy-bandwidth     a device-to-device copy, the yardstick of the fill and check kernels
#   llama3-70b         Llama-3-70B TP 8 PP 4 stage 0, dp 64 on one GPU, both strategies
#   deepseek-v3        DeepSeek-V3 TP 8 EP 8 (dp 64, expert dp 8) on one GPU, both strategies
#   deepseek-v3-job    one chunk of the DeepSeek-V3 job on 1,024 GPUs (its first MoE chunk,
#                      dp 64, expert dp 1), as `verify JOB --stage --chunk` verifies it
#   megatron           tests/gpu/megatron_ddp.py: the layouts in Megatron-LM's own DDP (last)
# Into $OUT (at most 8 files): gpu-check.log (this transcript), summary.md and results.json
# (the tables, rewritten after every step), logs.tar.gz (every step's log and report),
# env.txt, gpu-tests.log, megatron.log, and build.log when it had to build.
# Exit status: 0 every step passed, 1 a step failed, 2 it could not run (no usable binaries,
# no CUDA device).
# Usage: [OUT=DIR] [GPU_CHECK_BUDGET=SECONDS] [GPU_CHECK_STEPS=step,step] tools/gpu-check.sh
# (GPU_CHECK_BIN: other binaries than build-carry/bin; GPU_CHECK_WORK: the scratch folder.)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# The project's Megatron-LM loader (layout file -> FullParamLayout), the one path to change
# when it moves.
megatron_loader=${PARAMLAYOUT_MEGATRON_LOADER:-$root/python/paramlayout/megatron.py}

out=${OUT:-$root/build-gpu-check/out}
work=${GPU_CHECK_WORK:-/tmp/paramlayout-gpu-check}
budget=${GPU_CHECK_BUDGET:-420}
only=${GPU_CHECK_STEPS:-}
reserve=15  # seconds kept for the summary
mkdir -p "$out"
(cd "$out" && rm -f gpu-check.log summary.md results.json logs.tar.gz env.txt gpu-tests.log \
  megatron.log build.log)
rm -rf "$work"
mkdir -p "$work/logs" "$work/reports" "$work/data"
: >"$work/steps.tsv"
exec > >(tee "$out/gpu-check.log") 2>&1
tee_pid=$!
started=$SECONDS
step_no=0
export PYTHONUNBUFFERED=1 root work out megatron_loader
data=$work/data
export data

echo "gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget} s, logs in $out"

# -- bookkeeping ------------------------------------------------------------------------
record() {  # STEP STATUS SECONDS NOTE
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//|//}" >>"$work/steps.tsv"
  python3 tests/gpu/gpu_summary.py "$work" "$out" 2>/dev/null
  tar -czf "$out/logs.tar.gz.tmp" -C "$work" logs reports steps.tsv 2>/dev/null &&
    mv "$out/logs.tar.gz.tmp" "$out/logs.tar.gz"
}

wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

# run_step NAME LIMIT FUNCTION: runs FUNCTION under `timeout` (at most LIMIT seconds, and no
# more than the budget leaves), its output in its own log; the log's last line is its note.
run_step() {
  local name=$1 limit=$2 fn=$3
  wanted "$name" || return 0
  local left=$((budget - (SECONDS - started) - reserve))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    echo "== $name: not run, the ${budget} s budget is spent"
    record "$name" "not run" 0 "the ${budget} s budget was spent"
    return 1
  fi
  local log
  log=$work/logs/$(printf %02d $((++step_no)))-$name.log
  echo "== $name (at most ${limit} s)"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" bash -c "set -o pipefail; $fn" >"$log" 2>&1
  rc=$?
  local status=ok
  case $rc in
    0) ;;
    3) status="no GPU" ;;
    124 | 137) status=TIMEOUT; echo "timed out after ${limit} s" >>"$log" ;;
    *) status="FAIL ($rc)" ;;
  esac
  sed 's/^/   | /' "$log" | tail -n 25
  local note
  note=$(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)
  echo "== $name: $status in $((SECONDS - t0)) s"
  record "$name" "$status" "$((SECONDS - t0))" "$note"
  return $rc
}

skip_rest() {  # REASON STEP...
  local reason=$1 s
  shift
  for s in "$@"; do
    wanted "$s" && record "$s" "not run" 0 "$reason"
  done
}

finish() {  # EXIT_STATUS
  python3 tests/gpu/gpu_summary.py "$work" "$out" --print 2>&1
  echo "gpu-check: exit $1 after $((SECONDS - started)) s; $out: $(cd "$out" && ls | paste -sd' ')"
  exec 1>&- 2>&-
  wait "$tee_pid" 2>/dev/null  # the transcript complete before the call returns
  exit "$1"
}

# -- the binaries and the NCCL they load -------------------------------------------------
echo "python3: $(command -v python3 || echo missing)"
if nccl=$(timeout 60 python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>"$work/nccl.err"); then
  export LD_LIBRARY_PATH=$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "NCCL wheel: $nccl ($(ls "$nccl/lib" 2>/dev/null | paste -sd' '))"
else
  echo "NCCL wheel: python3 cannot import nvidia.nccl: $(tail -n 1 "$work/nccl.err")"
  echo "NCCL from the system: $(ldconfig -p 2>/dev/null | grep -m1 -o '/.*libnccl.so.2' || echo none)"
fi

binaries_load() {  # DIR: both binaries resolve their libraries and paramlayout runs
  local f
  for f in "$1/paramlayout" "$1/gpu-copy-bandwidth"; do
    [ -x "$f" ] || { echo "$f: missing"; return 1; }
    if ldd "$f" | grep -q "not found"; then
      echo "$f: $(ldd "$f" | grep "not found" | paste -sd';')"
      return 1
    fi
  done
  timeout 30 "$1/paramlayout" --version | grep -q "nccl" ||
    { echo "$1/paramlayout --version: $(timeout 30 "$1/paramlayout" --version 2>&1 | tail -n 1)"; return 1; }
}

bin=${GPU_CHECK_BIN:-$root/build-carry/bin}
stale=0
if why=$(binaries_load "$bin"); then
  echo "binaries: $bin ($(grep -m1 '^source:' build-carry/BUILD-INFO 2>/dev/null))"
  built_from=$(sed -n 's/^sources: //p' build-carry/BUILD-INFO 2>/dev/null)
  here=$(tools/gpu-sources-hash.sh 2>/dev/null)
  if [ -n "$here" ] && [ "$built_from" = "$here" ]; then
    record binaries ok 0 "build-carry/bin, built from these sources ($here)"
  else
    echo "warning: build-carry/bin was built from other sources than these (${built_from:-unknown}, here $here)"
    record binaries STALE 0 "built from other sources (${built_from:-unknown}, here $here): run tools/gpu-build.sh"
    stale=1
  fi
else
  echo "binaries: $bin do not load here: $why; building them from build-carry/deps"
  export fallback_bin=$work/bin
  run_step build 300 'tools/gpu-build.sh --offline "$fallback_bin"'
  cp "$work"/logs/*-build.log "$out/build.log" 2>/dev/null
  bin=$fallback_bin
  if why=$(binaries_load "$bin"); then
    record binaries ok 0 "built here from build-carry/deps ($bin)"
  else
    echo "gpu-check: no usable binaries: $why"
    skip_rest "no usable binaries" inputs megatron-files broken-layout environment gpu-probe \
      gpu-tests reference copy-bandwidth llama3-70b deepseek-v3 deepseek-v3-job megatron
    finish 2
  fi
fi
export bin
"$bin/paramlayout" --version

# -- steps ------------------------------------------------------------------------------
step_inputs() {
  "$bin/paramlayout" synth testdata/configs/llama3-70b.json --tp 8 --pp 4 --stage 0 \
    -o "$data/llama3-70b.json" &&
  "$bin/paramlayout" synth testdata/configs/deepseek-v3.json --tp 8 --ep 8 \
    -o "$data/deepseek-v3.json" || return 1
  local m s
  for m in llama3-70b deepseek-v3; do
    for s in sequential-dp layerwise; do
      "$bin/paramlayout" plan "$data/$m.json" --dp 64 --expert-dp 8 --grad-reduce-in-fp32 \
        --strategy "$s" -o "$data/$m-$s.layout.json" | tail -n 2 || return 1
    done
  done
  "$bin/paramlayout" plan testdata/reference/manifests/random-1001.json --dp 2 -q \
    -o "$data/probe.layout.json" || return 1
  # The DeepSeek-V3 job on 1,024 GPUs (tests/cli/job_tests.py's launch): its chunk must load,
  # be selected and pass the static check; only the data pass is left for the GPU.
  "$bin/paramlayout" job --world-size 1024 --hf-config testdata/configs/deepseek-v3.json -q \
    -o "$data/deepseek-v3-job" -- --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 16 --expert-model-parallel-size 64 \
    --pipeline-model-parallel-layout 'Et*3|(tt|)*29m|L' --mtp-num-layers 1 --bf16 \
    --use-distributed-optimizer --overlap-grad-reduce --moe-grouped-gemm || return 1
  local why
  why=$(verify_deepseek_job_chunk --backend cpu --max-elements 1 2>&1)
  grep -q "stage1.chunk0: .*the data pass would move" <<<"$why" ||
    { echo "the DeepSeek-V3 job's chunk is not ready: $why"; return 1; }
  echo "DeepSeek-V3 job: $(grep -c '"chunk": ' "$data/deepseek-v3-job/job.json") chunks;" \
    "stage1.chunk0 holds $(sed -n 's/.*would move \([0-9,]*\) elements.*/\1/p' <<<"$why") elements"
  python3 tests/gpu/verify_reference.py plan "$bin/paramlayout" "$root" "$data/reference" || return 1
  # A param one element short: the static pass must catch it (exit 1).
  python3 - "$data" <<'PY' || return 1
import json, sys
from pathlib import Path
data = Path(sys.argv[1])
layout = json.loads((data / "reference/gpt2-124m--0.layout.json").read_text())
param = layout["buffers"][0]["params"][3]
param["end"] -= 1
(data / "broken.layout.json").write_text(json.dumps(layout))
print(f"broken layout: {param['name']} one element short")
PY
  python3 -m py_compile tests/gpu/*.py && echo "inputs ready: $(ls "$data" | wc -l) files"
}

step_megatron_files() {
  python3 tests/gpu/megatron_ddp.py --preflight --paramlayout "$bin/paramlayout" \
    --megatron build-carry --loader "$megatron_loader" --work "$work/megatron"
}

step_broken_layout() {
  "$bin/paramlayout" verify "$data/broken.layout.json" \
    --manifest testdata/reference/manifests/gpt2-124m.json --backend nccl
  local rc=$?
  echo "exit $rc (1 expected: the static pass stops a broken layout)"
  [ "$rc" -eq 1 ]
}

step_environment() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null), $(ldd --version 2>&1 | head -n 1)"
    echo "cpus: $(nproc), memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
    echo "nvidia-smi: $(timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>&1 | paste -sd';')"
    echo "nvcc: $(nvcc --version 2>/dev/null | grep -o "release [0-9.]*" || echo none)"
    echo "python3: $(python3 --version 2>&1) at $(command -v python3)"
    echo "NCCL wheel: ${nccl:-none}"
    echo "paramlayout: $("$bin/paramlayout" --version) ($bin)"
    echo "libraries: $(ldd "$bin/paramlayout" | awk '{print $1 "=>" $3}' | paste -sd' ')"
    sed 's/^/build: /' build-carry/BUILD-INFO 2>/dev/null | head -n 4
  } | tee "$work/env.txt"
  timeout 120 python3 - "$work/environment.json" <<'PY' 2>&1 | tee -a "$work/env.txt"
import json, os, sys
info = {}


def get(key, f):
    try:
        info[key] = f()
    except Exception as e:  # each failure is one line of the report
        info[key] = f"unknown ({type(e).__name__}: {e})"


try:
    import torch
except Exception as e:
    torch = None
    info["torch"] = f"not importable ({type(e).__name__}: {e})"
if torch is not None:
    get("torch", lambda: f"{torch.__version__} (CUDA {torch.version.cuda})")
    get("torch_nccl", lambda: ".".join(map(str, torch.cuda.nccl.version())))
    get("gpu", lambda: torch.cuda.get_device_name(0))
    get("multiprocessors", lambda: torch.cuda.get_device_properties(0).multi_processor_count)
    get("memory_gib", lambda: round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))

    def allreduce():
        # torch's own NCCL on one rank: tells an NCCL or driver problem from paramlayout's.
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29531")
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", rank=0, world_size=1)
        t = torch.full((1 << 20,), 3.0, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        ok = bool((t == 3.0).all())
        dist.destroy_process_group()
        return "ok" if ok else "WRONG values"

    get("torch_allreduce", allreduce)
    if str(info["torch_allreduce"]).startswith("unknown"):
        info["torch_allreduce"] = "failed: " + info["torch_allreduce"][9:-1]
for k, v in info.items():
    print(f"{k}: {v}")
open(sys.argv[1], "w").write(json.dumps(info))
PY
  cp "$work/env.txt" "$out/env.txt"
  grep "^torch_allreduce" "$work/env.txt" | tail -n 1 || echo "torch_allreduce: not run (torch missing)"
}

step_gpu_probe() {
  "$bin/paramlayout" verify "$data/probe.layout.json" \
    --manifest testdata/reference/manifests/random-1001.json --backend nccl --timeout 60 \
    --report "$work/reports/probe.json" 2>&1 | tee "$work/probe.txt"
  local rc=${PIPESTATUS[0]}
  if grep -q "no CUDA device was found" "$work/probe.txt"; then
    echo "no CUDA device: the GPU steps are not run"
    return 3
  fi
  return "$rc"
}

step_gpu_tests() {
  python3 tests/gpu/run_gpu_tests.py "$bin/paramlayout" "$root" 2>&1 | tee "$out/gpu-tests.log"
}

step_reference() {
  python3 tests/gpu/verify_reference.py verify "$bin/paramlayout" "$root" "$data/reference" \
    --jobs 6 --timeout 60
}

step_copy_bandwidth() {
  "$bin/gpu-copy-bandwidth" 4 | tee "$work/reports/copy.json"
}

verify_model() {  # MODEL
  local s r rc=0 t0
  for s in sequential-dp layerwise; do
    t0=$(date +%s.%N)
    "$bin/paramlayout" verify "$data/$1-$s.layout.json" --manifest "$data/$1.json" \
      --backend nccl --timeout 120 --report "$work/reports/$1-$s.json" \
      >"$work/logs/verify-$1-$s.txt" 2>&1
    r=$?
    head -n 1 "$work/logs/verify-$1-$s.txt"
    tail -n 3 "$work/logs/verify-$1-$s.txt"
    echo "  exit $r, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s wall"
    [ "$r" -eq 0 ] || rc=1
  done
  return $rc
}
step_llama() { verify_model llama3-70b; }
step_deepseek() { verify_model deepseek-v3; }

# The DeepSeek-V3 job's first MoE chunk (layers 3 and 4), at the job's own dp and expert dp.
verify_deepseek_job_chunk() {
  "$bin/paramlayout" verify "$data/deepseek-v3-job" --stage 1 --chunk 0 "$@"
}
step_deepseek_job() {
  local rc t0
  t0=$(date +%s.%N)
  verify_deepseek_job_chunk --backend nccl --timeout 120 \
    --report "$work/reports/deepseek-v3-job.json" \
    >"$work/logs/verify-deepseek-v3-job.txt" 2>&1
  rc=$?
  cat "$work/logs/verify-deepseek-v3-job.txt"
  echo "  exit $rc, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s wall"
  return $rc
}

step_megatron() {
  python3 tests/gpu/megatron_ddp.py --paramlayout "$bin/paramlayout" --megatron build-carry \
    --loader "$megatron_loader" --work "$work/megatron" \
    --traceback "$work/logs/megatron-traceback.txt" 2>&1 | tee "$out/megatron.log"
}

export -f step_inputs step_megatron_files step_broken_layout step_environment step_gpu_probe \
  step_gpu_tests step_reference step_copy_bandwidth verify_model step_llama step_deepseek \
  verify_deepseek_job_chunk step_deepseek_job step_megatron
export nccl

# -- the run ----------------------------------------------------------------------------
failed=$stale
run_step inputs 120 step_inputs || failed=1
run_step megatron-files 30 step_megatron_files || failed=1
run_step broken-layout 30 step_broken_layout || failed=1
run_step environment 150 step_environment || failed=1
run_step gpu-probe 90 step_gpu_probe
case $? in
  0) ;;
  3) skip_rest "no CUDA device was found" gpu-tests reference copy-bandwidth llama3-70b \
       deepseek-v3 deepseek-v3-job megatron
     finish 2 ;;
  *) failed=1 ;;
esac
run_step gpu-tests 200 step_gpu_tests || failed=1
run_step reference 150 step_reference || failed=1
run_step copy-bandwidth 60 step_copy_bandwidth || failed=1
run_step llama3-70b 90 step_llama || failed=1
run_step deepseek-v3 120 step_deepseek || failed=1
run_step deepseek-v3-job 60 step_deepseek_job || failed=1
# Last, so that it holds up nothing; it gets what the budget leaves, up to 240 s.
run_step megatron 240 step_megatron || failed=1
finish "$failed"
