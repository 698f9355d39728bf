#!/usr/bin/env bash
# Builds the GPU binaries to carry to a GPU machine (tools/gpu-check.sh runs them there), and
# what that machine needs to build them itself should they not load there.
#
# Here (a machine with nvcc and NCCL, no GPU needed), into build-carry/ (ignored by git):
#   bin/paramlayout, bin/gpu-copy-bandwidth  for sm_$GPU_ARCH (90), release; the C++ and
#       CUDA runtimes, fmt (header-only), simdjson and libcrypto linked statically, no MPI:
#       at run time they need glibc, libcuda (the driver, loaded at run time) and
#       libnccl.so.2 (the nvidia-nccl wheel's, found through LD_LIBRARY_PATH);
#   BUILD-INFO  what was built, with what, and what the binaries need at run time;
#   deps/       the fallback's sources: Debian packages (headers, libcrypto, pkgconf) and
#               simdjson's amalgamated source from Debian's source package.
# Usage: tools/gpu-build.sh
#
# On the GPU machine, when the carried binaries do not load (gpu-check.sh does this):
#   tools/gpu-build.sh --offline DIR   builds the same binaries into DIR from build-carry/deps
#       alone (NCCL from the nvidia-nccl wheel of `python3`), in /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
arch=${GPU_ARCH:-90}
carry=$root/build-carry
deps=$carry/deps
offline=
if [ "${1:-}" = --offline ]; then
  offline=${2:?usage: tools/gpu-build.sh --offline DIR}
fi

say() { echo "gpu-build: $*"; }
die() { echo "gpu-build: error: $*" >&2; exit 1; }

# The Debian packages the fallback builds from (bookworm's, like this machine's).
fallback_packages=(libcli11-dev libfmt-dev nlohmann-json3-dev libssl-dev
                   pkgconf pkgconf-bin libpkgconf3)

# Fetches the fallback's packages and simdjson's source into build-carry/deps, once.
fetch_deps() {
  mkdir -p "$deps/debs" "$deps/simdjson"
  if ! compgen -G "$deps/debs/libssl-dev_*.deb" >/dev/null; then
    say "downloading ${fallback_packages[*]}"
    (cd "$deps/debs" && apt-get -o APT::Sandbox::User=root download "${fallback_packages[@]}" >/dev/null) ||
      die "apt-get download ${fallback_packages[*]} failed"
  fi
  if [ ! -s "$deps/simdjson/simdjson.cpp" ]; then
    # The source of the libsimdjson-dev installed here (Debian ships no static library):
    # apt-get source through a private list of deb-src entries, leaving the system's alone.
    local version work
    version=$(dpkg-query -W -f='${Version}' libsimdjson-dev)
    work=$(mktemp -d)
    mkdir -p "$work/lists/partial" "$work/src"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
      >"$work/sources.list"
    local o=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
    say "downloading simdjson $version's source"
    apt-get "${o[@]}" update >"$work/apt.log" 2>&1 ||
      { cat "$work/apt.log"; die "apt-get update (deb-src) failed"; }
    (cd "$work/src" && apt-get "${o[@]}" source --download-only "simdjson=$version") \
      >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; die "apt-get source simdjson=$version failed"; }
    tar -xzf "$work"/src/simdjson_*.orig.tar.gz -C "$work/src" --wildcards '*/singleheader/simdjson.*'
    cp "$work"/src/simdjson-*/singleheader/simdjson.{h,cpp} "$deps/simdjson/"
    rm -rf "$work"
  fi
}

# Writes static libraries and pkg-config files for fmt, simdjson, libcrypto, CLI11 and
# nlohmann_json into $1, from headers under $2 (/usr here, the unpacked packages offline).
static_deps() {
  local out=$1 usr=$2 multiarch=x86_64-linux-gnu
  mkdir -p "$out/lib" "$out/pkgconfig"
  if [ ! -f "$out/lib/libsimdjson.a" ] || [ "$deps/simdjson/simdjson.cpp" -nt "$out/lib/libsimdjson.a" ]; then
    say "compiling simdjson"
    c++ -std=c++17 -O2 -DNDEBUG -DSIMDJSON_THREADS_ENABLED=1 -pthread -c \
      "$deps/simdjson/simdjson.cpp" -o "$out/simdjson.o"
    rm -f "$out/lib/libsimdjson.a"
    ar rcs "$out/lib/libsimdjson.a" "$out/simdjson.o"
  fi
  ln -sf "$usr/lib/$multiarch/libcrypto.a" "$out/lib/libcrypto.a"
  [ -f "$out/lib/libcrypto.a" ] || die "no $usr/lib/$multiarch/libcrypto.a (libssl-dev)"
  local inc="-I$usr/include"
  cat >"$out/pkgconfig/fmt.pc" <<EOF
Name: fmt
Description: fmt, header-only
Version: $(sed -n 's/^#define FMT_VERSION \([0-9]*\)/\1/p' "$usr/include/fmt/core.h" |
           awk '{printf "%d.%d.%d", $1/10000, $1/100%100, $1%100}')
Cflags: $inc -DFMT_HEADER_ONLY
EOF
  cat >"$out/pkgconfig/simdjson.pc" <<EOF
Name: simdjson
Description: simdjson, static
Version: $(sed -n 's/^#define SIMDJSON_VERSION "\(.*\)"/\1/p' "$deps/simdjson/simdjson.h" | head -1)
Cflags: -I$deps/simdjson -DSIMDJSON_THREADS_ENABLED=1
Libs: -L$out/lib -lsimdjson -pthread
EOF
  cat >"$out/pkgconfig/libcrypto.pc" <<EOF
Name: OpenSSL-libcrypto
Description: libcrypto, static
Version: $(sed -n 's/^# *define OPENSSL_VERSION_STR "\(.*\)"/\1/p' "$usr/include/$multiarch/openssl/opensslv.h" "$usr/include/openssl/opensslv.h" 2>/dev/null | head -1)
Cflags: $inc -I$usr/include/$multiarch
Libs: -L$out/lib -lcrypto -ldl -pthread
EOF
  cat >"$out/pkgconfig/CLI11.pc" <<EOF
Name: CLI11
Description: CLI11, header-only
Version: $(sed -n 's/^#define CLI11_VERSION "\(.*\)"/\1/p' "$usr/include/CLI/Version.hpp")
Cflags: $inc
EOF
  cat >"$out/pkgconfig/nlohmann_json.pc" <<EOF
Name: nlohmann_json
Description: JSON for Modern C++, header-only
Version: $(sed -n 's/^#define NLOHMANN_JSON_VERSION_MAJOR \([0-9]*\).*/\1/p' "$usr/include/nlohmann/json.hpp" | head -1).0.0
Cflags: $inc
EOF
}

# Configures and builds $1 with the static libraries and pkg-config files static_deps made
# in $2; copies the binaries into $3.
build() {
  local dir=$1 static=$2 bin=$3
  local options=(-Dbuildtype=release -Dtests=disabled -Dmpi=disabled -Dcuda=enabled
                 -Dnccl=enabled "-Dgpu_arch=$arch" "-Dpkg_config_path=$static/pkgconfig")
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "${options[@]}" >/dev/null
  else
    meson setup "$dir" "${options[@]}" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; tail -n 25 "$dir/meson-logs/meson-log.txt" 2>/dev/null
        die "meson setup $dir failed"; }
  fi
  meson compile -C "$dir" paramlayout gpu-copy-bandwidth >"$dir.compile.log" 2>&1 ||
    { tail -40 "$dir.compile.log"; die "meson compile -C $dir failed (log: $dir.compile.log)"; }
  grep -q "nccl verify backend *: YES" "$dir/meson-logs/meson-log.txt" ||
    die "$dir was configured without the nccl backend"
  mkdir -p "$bin"
  cp "$dir/paramlayout" "$dir/gpu-copy-bandwidth" "$bin/"
}

# What the binaries in $1 need at run time, into $1/../BUILD-INFO (here) or stdout.
describe() {
  local bin=$1 f
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "sources: $(tools/gpu-sources-hash.sh)"
  if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    echo "source: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD -- src include meson.build bench || echo ' (with uncommitted changes)')"
  fi
  echo "nvcc: $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), for sm_$arch"
  echo "nccl.h: $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$(nccl_header)" | paste -sd.)"
  for f in "$bin"/*; do
    echo "$(basename "$f"): $(stat -c %s "$f") bytes, sha256 $(sha256sum "$f" | cut -c1-16)"
    echo "  needs: $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')"
    echo "  newest versions: $(objdump -T "$f" | grep -oE '(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -uV |
                           awk -F_ '{v[$1]=$0} END {for (k in v) print v[k]}' | sort | paste -sd' ')"
    echo "  nccl symbols: $(nm -D --undefined-only "$f" | awk '/ nccl/ {print $2}' | paste -sd' ')"
  done
}

nccl_header() {
  local h
  for h in "${NCCL_INCLUDE:-}/nccl.h" /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
    [ -f "$h" ] && { echo "$h"; return; }
  done
  echo /dev/null
}

if [ -z "$offline" ]; then
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc not found"
  export PATH=/usr/local/cuda/bin:$PATH
  source tools/setup.sh
  paramlayout_install
  fetch_deps
  static_deps "$root/build-gpu-deps" /usr
  build "$root/build-gpu" "$root/build-gpu-deps" "$carry/bin"
  describe "$carry/bin" | tee "$carry/BUILD-INFO"
  say "done: build-carry/ ($(du -sh "$carry" | cut -f1)); carry it with the device run"
  exit 0
fi

# Offline, on the GPU machine: everything from build-carry/deps, NCCL from the wheel.
[ -d "$deps/debs" ] && [ -s "$deps/simdjson/simdjson.cpp" ] ||
  die "no build-carry/deps to build from (tools/gpu-build.sh makes it, on a machine with apt)"
work=${PARAMLAYOUT_GPU_BUILD_DIR:-/tmp/paramlayout-gpu-build}
usr=$work/root/usr
mkdir -p "$work/root"
for f in "$deps"/debs/*.deb; do
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$f" "$work/root"
  else  # a .deb is an ar archive holding data.tar.*
    (cd "$work" && ar x "$f" && tar -xf data.tar.* -C "$work/root" && rm -f data.tar.* control.tar.* debian-binary)
  fi
done
export PKG_CONFIG=$usr/bin/pkgconf
export LD_LIBRARY_PATH=$usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$PKG_CONFIG" --version >/dev/null || die "the carried pkgconf does not run here"
nccl=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])') ||
  die "python3 cannot import nvidia.nccl (the nvidia-nccl wheel)"
[ -f "$nccl/include/nccl.h" ] && compgen -G "$nccl/lib/libnccl.so*" >/dev/null ||
  die "no include/nccl.h and lib/libnccl.so* in $nccl"
mkdir -p "$work/nccl"
ln -sf "$(ls "$nccl"/lib/libnccl.so* | head -1)" "$work/nccl/libnccl.so"
export NCCL_INCLUDE=$nccl/include
export CPATH=$nccl/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$work/nccl${LIBRARY_PATH:+:$LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin
static_deps "$work/deps" "$usr"
build "$work/build" "$work/deps" "$offline"
describe "$offline"
