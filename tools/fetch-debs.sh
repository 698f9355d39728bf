#!/usr/bin/env bash
# Downloads the Debian packages paramlayout builds with (and their libraries) into .debs/,
# for a machine that cannot install them itself (a GPU machine without network access);
# tools/gpu-check.sh unpacks them there. Usage: tools/fetch-debs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
mkdir -p .debs
grep -qx '/.debs/' .git/info/exclude 2>/dev/null || echo /.debs/ >>.git/info/exclude
packages=(libcli11-dev libsimdjson-dev libsimdjson14 libfmt-dev libfmt9 nlohmann-json3-dev
          doctest-dev libvalijson-dev libssl-dev)
(cd .debs && apt-get download "${packages[@]}" >/dev/null)
ls .debs
