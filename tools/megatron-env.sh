#!/usr/bin/env bash
# Prepares, once, the Python environment in which Megatron-LM's and Megatron-Bridge's own code
# runs as the judge of paramlayout (tests/megatron/real_model.py), and prints that
# environment's python as its last line. Later runs reuse it and only print the path.
#
#   tools/megatron-env.sh            # prepare (first time: downloads ~4 GB, pip's cache keeps them)
#   PY=$(tools/megatron-env.sh | tail -n 1)
#
# The environment is a virtual environment under ~/.cache/paramlayout/ (PARAMLAYOUT_CACHE
# overrides), named by a hash of everything below that decides its content: the Python
# version, the pinned packages and the upstream sources. It holds
#   - from PyPI, only what the upstream code imports: torch (a release of the same season as
#     the Megatron-LM commit targeted, since the fake process group is torch-internal),
#     transformers in the range Megatron-Bridge accepts, the pure-Python packages
#     Megatron-LM and Megatron-Bridge import, and the kernel packages some layers import
#     (mamba_ssm without its CUDA build, flash-linear-attention at Megatron-LM's pin);
#   - Megatron-LM and Megatron-Bridge themselves, unpacked from the tarballs in
#     ../shared/upstream (PARAMLAYOUT_UPSTREAM overrides) into the environment's directory and
#     put on its path by a .pth file. A checkout named by MEGATRON_LM is put first on the path
#     by the judge itself, not here.
# Nothing outside that directory and pip's cache changes. Exit status 0 when the environment
# is ready; 1 with the reason on stderr when it cannot be made here (no Python 3.12, no
# upstream tarballs, no network for a first install).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
upstream=${PARAMLAYOUT_UPSTREAM:-$repo/../shared/upstream}
cache=${PARAMLAYOUT_CACHE:-$HOME/.cache/paramlayout}

say() { echo "megatron-env: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

# Megatron-LM d98e8a64 (2026-08-22) and Megatron-Bridge 067f987 (2026-08-22).
megatron_lm_tarball=megatron-lm-d98e8a64.tar.gz
megatron_bridge_tarball=megatron-bridge-067f987.tar.gz

# What the judge imports from PyPI. torch 2.13.0 (2026-07-08) is the last release before the
# Megatron-LM commit (2.14.0 came 2026-09-02). transformers 5.12.1 is the newest that
# Megatron-Bridge's pyproject.toml accepts (transformers>=5.8,<=5.12.1).
# flash-linear-attention 0.5.1 and causal-conv1d ~=1.5 are the pins of Megatron-LM's
# pyproject.toml ([ssm]); mamba-ssm 2.3.2.post1 (2026-05-09) is the PyPI release nearest
# its git pin, built without its CUDA kernels (MAMBA_SKIP_CUDA_BUILD; MAMBA_FORCE_BUILD
# keeps its setup.py from fetching a prebuilt wheel from GitHub).
pins=(
  torch==2.13.0
  transformers==5.12.1
  numpy packaging einops pyyaml regex tqdm rich omegaconf pillow safetensors sentencepiece
  flash-linear-attention==0.5.1
)
# Installed on top of a prepared environment (their own marker, so adding one does not rebuild
# the rest): emerging_optimizers 0.3.0, the version Megatron-LM's pyproject.toml pins (git tag
# v0.3.0, the same release as on PyPI), whose Muon, Lion, SOAP and adaptive Muon Megatron-LM
# builds; absl-py, which it imports; tiktoken 0.14.0 (2026-08-17), the release before the
# Megatron-LM commit of a package its pyproject.toml lists, which its TikTokenizer imports.
addon_pins=(
  emerging-optimizers==0.3.0
  absl-py
  tiktoken==0.14.0
)
# Built from their source distributions against the torch above, without CUDA.
source_pins=(
  mamba-ssm==2.3.2.post1
)

find_python() {
  local candidate
  for candidate in "${PARAMLAYOUT_PYTHON:-}" python3.12 \
    "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
    [ -n "$candidate" ] || continue
    if "$candidate" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 12))' \
      2>/dev/null; then
      command -v "$candidate" || echo "$candidate"
      return 0
    fi
  done
  return 1
}

python=$(find_python) ||
  fail "no Python 3.12 found (Megatron-Bridge requires >=3.12,<3.13);" \
    "name one with PARAMLAYOUT_PYTHON"
python_version=$("$python" -c 'import sys; print(sys.version.split()[0])')

key=$(printf '%s\n' "$python_version" "${pins[@]}" "${source_pins[@]}" \
  "$megatron_lm_tarball" "$megatron_bridge_tarball" | sha256sum | cut -c1-16)
env_dir=$cache/megatron-env-$key
ready=$env_dir/.ready

mkdir -p "$cache"
exec 9>"$cache/megatron-env.lock"
flock 9 # one preparation at a time; the others wait for it and then reuse it

if [ ! -f "$ready" ]; then
  for t in "$megatron_lm_tarball" "$megatron_bridge_tarball"; do
    [ -f "$upstream/$t" ] ||
      fail "$upstream/$t not found (name the folder with PARAMLAYOUT_UPSTREAM)"
  done
  say "preparing $env_dir (Python $python_version)"
  rm -rf "$env_dir"
  "$python" -m venv "$env_dir"
  pip=("$env_dir/bin/python" -m pip --disable-pip-version-check)
  "${pip[@]}" install -q --upgrade pip setuptools wheel >&2 || fail "pip could not upgrade itself"
  "${pip[@]}" install -q "${pins[@]}" >&2 || fail "pip install ${pins[*]} failed"
  MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE \
    "${pip[@]}" install -q --no-build-isolation --no-deps "${source_pins[@]}" >&2 ||
    fail "pip install ${source_pins[*]} failed"

  mkdir -p "$env_dir/upstream"
  tar xzf "$upstream/$megatron_lm_tarball" -C "$env_dir/upstream"
  tar xzf "$upstream/$megatron_bridge_tarball" -C "$env_dir/upstream"
  site=$("$env_dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' "$env_dir/upstream/megatron-lm" "$env_dir/upstream/megatron-bridge/src" \
    >"$site/paramlayout-upstream.pth"

  "$env_dir/bin/python" -c \
    'import torch, transformers, megatron.core, megatron.training.arguments' >&2 ||
    fail "the environment in $env_dir does not import Megatron-LM"
  touch "$ready"
  say "ready"
fi

addon_key=$(printf '%s\n' "${addon_pins[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$env_dir/.addons-$addon_key" ]; then
  "$env_dir/bin/python" -m pip --disable-pip-version-check install -q --no-deps \
    "${addon_pins[@]}" >&2 || fail "pip install ${addon_pins[*]} failed"
  touch "$env_dir/.addons-$addon_key"
fi

echo "$env_dir/bin/python"
