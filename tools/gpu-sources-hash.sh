#!/usr/bin/env bash
# A hash of the sources the GPU binaries are built from: tools/gpu-build.sh records it in
# build-carry/BUILD-INFO, tools/gpu-check.sh compares it with the tree it runs in, so that
# binaries built from other sources are named as such. Usage: tools/gpu-sources-hash.sh
set -euo pipefail
cd "$(dirname "$0")/.."
find src include bench meson.build meson_options.txt -type f \( -name '*.cpp' -o -name '*.cu' \
  -o -name '*.hpp' -o -name '*.in' -o -name meson.build -o -name meson_options.txt \) -print0 |
  sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
