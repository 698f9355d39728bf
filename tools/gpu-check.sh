#!/usr/bin/env bash
# GPU evidence for `paramlayout verify` (issue 3), in one call on a machine with an NVIDIA GPU:
#  1. builds for Hopper (-Dgpu_arch=90, release) and runs the GPU tests (tests/gpu);
#  2. verifies real-model layouts at dp 64 (expert dp 8) on the visible GPU(s): a
#     Llama-3-70B pipeline stage (TP 8, stage 1 of 4: 2.27 G elements) and a DeepSeek-V3
#     stage (PP 16 stage 2, EP 64's 4 local experts: 1.64 G elements);
#  3. prints a table: time per GB verified, and the fill/check kernels' bandwidth against a
#     device-to-device copy measured in the same run (gpu-copy-bandwidth).
# Everything it prints goes to $OUT/gpu-check.log (OUT defaults to build-gpu/out) with the
# reports. Where the Debian packages cannot be installed (no network), run
# tools/fetch-debs.sh first and carry .debs/: they are unpacked into /tmp/paramlayout-deps.
# Usage: [OUT=dir] tools/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-gpu/out}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1

if compgen -G ".debs/*.deb" >/dev/null; then
  deps=/tmp/paramlayout-deps
  for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
  for pc in "$deps"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$deps"/usr/share/pkgconfig/*.pc; do
    sed -i "s|^prefix=/usr|prefix=$deps/usr|" "$pc"
  done
  export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig
  export CPATH=$deps/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  source tools/setup.sh
  paramlayout_install
fi
# NCCL from the CUDA toolkit, or from the nvidia-nccl Python wheel.
if ! ls /usr/local/cuda/lib64/libnccl.so* /usr/lib/x86_64-linux-gnu/libnccl.so* >/dev/null 2>&1; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  if [ -n "$nccl" ]; then
    mkdir -p /tmp/paramlayout-nccl
    ln -sf "$nccl"/lib/libnccl.so.* /tmp/paramlayout-nccl/libnccl.so
    export CPATH=$nccl/include${CPATH:+:$CPATH}
    export LIBRARY_PATH=/tmp/paramlayout-nccl${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$nccl/lib:/tmp/paramlayout-nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
[ -f build-gpu/build.ninja ] ||
  meson setup build-gpu -Dbuildtype=release -Dgpu_arch=90 -Dcuda=enabled -Dnccl=enabled >/dev/null
meson compile -C build-gpu >/dev/null
meson test -C build-gpu --suite gpu --print-errorlogs -v | grep -E "^(ok|FAIL|ERROR|SKIP|nccl)|test_|Ran " || true

bin=build-gpu/paramlayout
data=build-gpu/gpu-data
mkdir -p "$data"
python3 tools/gen_bench_manifests.py "$data" llama3-70b-tp8-pp4-stage0 deepseek-v3-ep64-pp16-stage1
build-gpu/gpu-copy-bandwidth 4 | tee "$out/copy.json"
for model in llama3-70b-tp8-pp4-stage0 deepseek-v3-ep64-pp16-stage1; do
  for strategy in sequential-dp layerwise; do
    layout=$data/$model-$strategy.json
    "$bin" plan "$data/$model.json" --dp 64 --expert-dp 8 --strategy "$strategy" -q -o "$layout"
    TIMEFORMAT="  wall %R s"
    time "$bin" verify "$layout" --manifest "$data/$model.json" --backend nccl \
      --report "$out/$model-$strategy.json" | tail -3
  done
done
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
copy = json.loads((out / "copy.json").read_text())
print(f"\n{copy['gpu']}: device-to-device copy {copy['gbps']:.0f} GB/s (read + write)")
print("| layout (dp 64) | GB moved (grads + params) | verify s | s per GB | "
      "fill GB/s (% of copy) | check GB/s (% of copy) | collectives algbw GB/s |")
print("|---|---|---|---|---|---|---|")
for f in sorted(out.glob("*-*-*.json")):
    if f.name == "copy.json":
        continue
    r = json.loads(f.read_text())
    b = r["buckets"]
    gb = sum(x["reduce_scatter_bytes"] + x["all_gather_bytes"] for x in b) / 1e9
    fill = sum(x["filled_bytes"] for x in b) / sum(x["fill_seconds"] for x in b) / 1e9
    check = sum(x["checked_bytes"] for x in b) / sum(x["check_seconds"] for x in b) / 1e9
    coll = sum(x["reduce_scatter_seconds"] + x["all_gather_seconds"] for x in b)
    alg = gb / coll if coll else 0
    print(f"| {f.stem} | {gb:.1f} | {r['seconds']:.2f} | {r['seconds'] / gb:.3f} "
          f"| {fill:.0f} ({fill / copy['gbps']:.0%}) | {check:.0f} ({check / copy['gbps']:.0%}) "
          f"| {alg:.0f} |")
PY
