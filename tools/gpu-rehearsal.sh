#!/usr/bin/env bash
# Rehearses the GPU run on a machine with nvcc but no GPU, so that whatever can fail before
# a GPU is touched fails here first:
#   1. tools/gpu-build.sh builds build-carry/ (the binaries, the fallback's sources);
#   2. the binaries need no library beyond glibc, libstdc++/libgcc, and a libnccl.so.2 that
#      resolves from a wheel's layout alone (site-packages/nvidia/nccl/lib, no __init__.py:
#      a namespace package, as nvidia-nccl wheels are), without the loader cache or RUNPATH;
#      they use only NCCL functions of NCCL 2.19 and later;
#   3. tools/gpu-check.sh, with a python3 whose nvidia.nccl is that fake wheel, gets through
#      every step that needs no GPU and stops at its first GPU call saying no CUDA device was
#      found (exit 2), every step logged, $OUT within the device tool's limits;
#   4. the fallback: the carried binaries made unusable, gpu-check.sh builds them from
#      build-carry/deps alone (tools/gpu-build.sh --offline) and gets as far again;
#   5. run_gpu_tests.py skips only where no CUDA device was found, and the Megatron-LM step
#      fails with one clear line, no traceback, where it cannot run.
# With --no-fallback, step 4 is left out (a second cold build: the CI run does the others,
# the `slow` suite all of them). Exits 77 (a skip) only where nvcc or NCCL's header and
# library are absent.
# Usage: tools/gpu-rehearsal.sh [--no-fallback]
set -uo pipefail
fallback=1
[ "${1:-}" = --no-fallback ] && fallback=0
cd "$(dirname "$0")/.."
root=$PWD
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v nvcc >/dev/null; then
  echo "SKIP: no nvcc here (the GPU build needs the CUDA toolkit)"
  exit 77
fi
# NCCL's header and library, as the GPU build finds them (meson.build): a machine without
# them cannot build the nccl backend, so there is nothing to rehearse.
nccl_h=$(ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null | head -n 1)
nccl_lib=$(ls /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 2>/dev/null |
           head -n 1)
[ -n "$nccl_lib" ] || nccl_lib=$(ldconfig -p | grep -m1 -o '/.*libnccl.so.2$')
if [ -z "$nccl_h" ] || [ -z "$nccl_lib" ]; then
  echo "SKIP: no NCCL to build against here (nccl.h: ${nccl_h:-not found}," \
       "libnccl.so.2: ${nccl_lib:-not found})"
  exit 77
fi
if ! err=$(echo '#include <nccl.h>' |
           c++ -std=c++20 -I/usr/local/cuda/include -E -x c++ - -o /dev/null 2>&1); then
  echo "SKIP: $nccl_h does not compile here: $(echo "$err" | grep -m1 -i error)"
  exit 77
fi
tmp=$(mktemp -d /tmp/paramlayout-rehearsal.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
expect() {  # DESCRIPTION COMMAND...: passes when COMMAND succeeds
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}

# 1. The carried build.
echo "== tools/gpu-build.sh"
if ! tools/gpu-build.sh >"$tmp/build.log" 2>&1; then
  tail -n 30 "$tmp/build.log"
  bad "tools/gpu-build.sh"
  echo "$passed passed, $failed failed"
  exit 1
fi
ok "tools/gpu-build.sh: $(tail -n 1 "$tmp/build.log")"
sed 's/^/   | /' build-carry/BUILD-INFO

# 2. A fake nvidia-nccl wheel, and what the binaries resolve against it.
site=$tmp/site-packages
mkdir -p "$site/nvidia/nccl/lib" "$site/nvidia/nccl/include"
ln -s "$nccl_lib" "$site/nvidia/nccl/lib/libnccl.so.2"
ln -s "$nccl_h" "$site/nvidia/nccl/include/nccl.h"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
# The GPU machine's python3 holds torch: Debian's does, where python3-torch is installed.
mkdir -p "$tmp/python"
py=$(command -v python3)
/usr/bin/python3 -c 'import torch' 2>/dev/null && py=/usr/bin/python3
ln -s "$py" "$tmp/python/python3"
export PATH=$tmp/python:$PATH
expect "python3 ($py) finds nvidia.nccl as a namespace package, at the fake wheel" \
  test "$(python3 -c 'import nvidia.nccl as n; print(n.__file__, list(n.__path__)[0])')" = \
       "None $site/nvidia/nccl"

allowed='^(libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libcuda\.so\.1|libnccl\.so\.2)$'
# The NCCL functions of NCCL 2.19 (the oldest the nccl backend is meant to run on).
nccl_2_19='ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclCommInitAll ncclCommInitRankConfig
  ncclCommSplit ncclCommFinalize ncclCommDestroy ncclCommAbort ncclGetErrorString
  ncclGetLastError ncclCommGetAsyncError ncclCommCount ncclCommCuDevice ncclCommUserRank
  ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclReduce ncclBcast ncclBroadcast ncclAllReduce
  ncclReduceScatter ncclAllGather ncclSend ncclRecv ncclGroupStart ncclGroupEnd
  ncclCommRegister ncclCommDeregister ncclMemAlloc ncclMemFree'
loader=/lib64/ld-linux-x86-64.so.2
for f in build-carry/bin/paramlayout build-carry/bin/gpu-copy-bandwidth; do
  needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  extra=$(grep -Ev "$allowed" <<<"$needed" | paste -sd' ')
  expect "$f needs only glibc, the C++ runtime and libnccl.so.2 (needs: $(paste -sd' ' <<<"$needed"))" \
    test -z "$extra"
  list=$("$loader" --inhibit-cache --inhibit-rpath "$f" --library-path "$site/nvidia/nccl/lib" \
           --list "$f" 2>&1)
  expect "$f resolves every library without the loader cache or RUNPATH" \
    bash -c '! grep -q "not found" <<<"$1"' _ "$list"
  if grep -q libnccl <<<"$needed"; then
    expect "$f takes libnccl.so.2 from the fake wheel" \
      grep -q "libnccl.so.2 => $site/nvidia/nccl/lib/libnccl.so.2" <<<"$list"
  fi
  unknown=$(nm -D --undefined-only "$f" | awk '/ nccl/ {print $2}' |
            grep -vxF -f <(tr -s ' \n' '\n' <<<"$nccl_2_19" | sed '/^$/d') | paste -sd' ')
  expect "$f calls only NCCL functions that NCCL 2.19 has${unknown:+ (not: $unknown)}" \
    test -z "$unknown"
done

# 3. The run itself, as far as it goes without a GPU.
check_run() {  # NAME EXIT_STATUS OUT: what every rehearsed run must show
  local name=$1 rc=$2 out=$3 f
  expect "$name: gpu-check.sh exits 2 (no CUDA device), got $rc" test "$rc" -eq 2
  expect "$name: its transcript says no CUDA device was found" \
    grep -q "no CUDA device was found" "$out/gpu-check.log"
  for step in inputs broken-layout environment; do
    expect "$name: step $step passed" grep -q "^| $step | ok |" "$out/summary.md"
  done
  expect "$name: gpu-probe stopped the run (no GPU)" grep -q "^| gpu-probe | no GPU |" "$out/summary.md"
  for step in gpu-tests reference copy-bandwidth llama3-70b deepseek-v3 deepseek-v3-job \
      megatron; do
    expect "$name: step $step is listed as not run" grep -q "^| $step | not run |" "$out/summary.md"
  done
  expect "$name: every step's log is packed" \
    test "$(tar -tzf "$out/logs.tar.gz" | grep -c '^logs/.*\.log$')" -ge 5
  local files
  files=$(find "$out" -type f | wc -l)
  expect "$name: \$OUT holds $files files (at most 8 come back)" test "$files" -le 8
  expect "$name: \$OUT's names and depth are ones that come back" \
    bash -c '! find "$1" -mindepth 3 | grep -q . && ! find "$1" -mindepth 1 -printf "%f\n" | grep -qv "^[A-Za-z0-9._-]*$"' _ "$out"
  expect "$name: no file in \$OUT over 16 MiB" bash -c '! find "$1" -type f -size +16M | grep -q .' _ "$out"
  expect "$name: results.json is JSON" python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$out/results.json"
}

echo "== tools/gpu-check.sh (the carried binaries, a fake wheel, no GPU)"
OUT=$tmp/out GPU_CHECK_WORK=$tmp/work GPU_CHECK_BUDGET=300 tools/gpu-check.sh >"$tmp/check.log" 2>&1
rc=$?
sed 's/^/   | /' "$tmp/out/summary.md"
check_run "carried" "$rc" "$tmp/out"
expect "carried: it ran build-carry/bin" grep -q "^binaries: $root/build-carry/bin" "$tmp/out/gpu-check.log"
expect "carried: they were built from these sources" grep -q "^| binaries | ok |" "$tmp/out/summary.md"
expect "carried: the environment report names the NCCL wheel" grep -q "^NCCL wheel: $site/nvidia/nccl" "$tmp/out/env.txt"
if [ -f build-carry/megatron/core/optimizer/param_layout.py ]; then
  expect "carried: Megatron-LM's package is there" grep -q "^| megatron-files | ok |" "$tmp/out/summary.md"
else
  echo "note: no Megatron-LM in build-carry (tools/gpu-megatron.sh needs a checkout): its absence must be named"
  expect "carried: the missing Megatron-LM package is named" \
    grep -q "^| megatron-files | FAIL (2) | [0-9.]* | megatron: cannot run: missing: " "$tmp/out/summary.md"
fi

# 4. The fallback: build there from build-carry/deps when the carried binaries do not load.
# Built once here first (a cold build takes minutes on two cores; the GPU machine has 16),
# in a folder that the fallback run below then finds up to date.
if [ "$fallback" = 1 ]; then
echo "== tools/gpu-build.sh --offline (build-carry/deps and the fake wheel alone)"
export PARAMLAYOUT_GPU_BUILD_DIR=$root/build-gpu-offline
if tools/gpu-build.sh --offline "$tmp/offline-bin" >"$tmp/offline.log" 2>&1; then
  ok "tools/gpu-build.sh --offline"
else
  tail -n 30 "$tmp/offline.log"
  bad "tools/gpu-build.sh --offline"
fi
echo "== tools/gpu-check.sh (carried binaries unusable: the fallback build)"
mkdir -p "$tmp/unusable"
OUT=$tmp/out2 GPU_CHECK_WORK=$tmp/work2 GPU_CHECK_BIN=$tmp/unusable GPU_CHECK_BUDGET=600 \
  tools/gpu-check.sh >"$tmp/check2.log" 2>&1
rc=$?
sed 's/^/   | /' "$tmp/out2/summary.md"
check_run "fallback" "$rc" "$tmp/out2"
expect "fallback: it built from build-carry/deps" grep -q "^| build | ok |" "$tmp/out2/summary.md"
expect "fallback: build.log came back" test -s "$tmp/out2/build.log"
expect "fallback: it ran the binaries it built" grep -q "^paramlayout: .*($tmp/work2/bin)" "$tmp/out2/env.txt"
else
  echo "== the fallback build left out (--no-fallback)"
fi

# 5. The skip rule of the GPU tests, and the Megatron-LM step where it cannot run.
fake() {  # NAME MESSAGE: a paramlayout whose verify fails with MESSAGE (exit 2)
  cat >"$tmp/$1" <<EOF
#!/bin/sh
[ "\$1" = verify ] && { echo "paramlayout: error: $2" >&2; exit 2; }
exec "$root/build-carry/bin/paramlayout" "\$@"
EOF
  chmod +x "$tmp/$1"
}
fake no-device "no CUDA device was found (CUDA driver version is insufficient for CUDA runtime version)"
fake nccl-error "NCCL error in ncclCommInitRankConfig: unhandled system error"
python3 tests/gpu/run_gpu_tests.py "$tmp/no-device" "$root" >"$tmp/t1.log" 2>&1
rc=$?
expect "run_gpu_tests.py skips (77) where no CUDA device was found, got $rc" test "$rc" -eq 77
python3 tests/gpu/run_gpu_tests.py "$tmp/nccl-error" "$root" >"$tmp/t2.log" 2>&1
rc=$?
expect "run_gpu_tests.py fails (1) on an NCCL error instead of skipping, got $rc" test "$rc" -eq 1
python3 tests/gpu/megatron_ddp.py --paramlayout build-carry/bin/paramlayout --megatron build-carry \
  --loader python/paramlayout/megatron.py --work "$tmp/megatron" >"$tmp/m.log" 2>&1
rc=$?
sed 's/^/   | /' "$tmp/m.log"
expect "the Megatron-LM step, unable to run here, exits 2 (got $rc)" test "$rc" -eq 2
expect "the Megatron-LM step says why in one line, no traceback" \
  bash -c 'grep -q "^megatron: cannot run: " "$1" && ! grep -q Traceback "$1"' _ "$tmp/m.log"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
