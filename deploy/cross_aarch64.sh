#!/usr/bin/env bash
# Cross-builds sparkserve for aarch64 (the DGX Spark's CPU; CPU-only: no CUDA) on an x86_64 Debian 12
# machine and runs unit tests of that build under qemu-user.
#   deploy/cross_aarch64.sh [--build-dir DIR] [--tests "NAME ..."] [--all] [--release]
# Default: builds the unit tests of the lower layers (--tests: gtest binaries of tests/unit) and runs
# each under qemu-aarch64; --all builds everything (sparkserve, sparkserve-node, every test) and runs
# ctest (every test, through the toolchain's emulator). --release also builds the two binaries, makes
# the aarch64 release tarball (deploy/bundle.sh --release, into DIR/release) and starts an unpacked
# copy under qemu with only the target's glibc/libstdc++ beside it: --version, and the tiny demo
# model served on the CPU answering one chat completion, then SIGTERM.
# SPARKSERVE_JOBS limits parallel jobs (as build.sh).
#
# The arm64 libraries are NOT installed as multiarch packages: libgloo-dev is not Multi-Arch: same,
# so `apt-get install libgloo-dev:arm64` removes the machine's libgloo-dev (amd64), and the arm64
# packages pull upgrades of amd64 ones (linux-libc-dev, libssl-dev, zlib1g-dev: headers every build
# here hashes). Instead `apt-get download` fetches the arm64 -dev packages and their dependencies
# into DIR/debs and they are unpacked into DIR/sysroot, leaving the machine's packages alone; only the
# cross compiler (g++-aarch64-linux-gnu) and qemu-user-static are installed, and the arm64 package
# lists (dpkg --add-architecture arm64). cmake/toolchain-aarch64.cmake uses that sysroot.
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build-aarch64"
ALL=0
RELEASE=0
TESTS="core_test gloo_collective_test quant_codec_test quant_safetensors_test quant_gguf_test tokenizer_test kernels_cpu_test"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --tests) TESTS="$2"; shift 2 ;;
    --all) ALL=1; shift ;;
    --release) RELEASE=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$(uname -m)" = x86_64 ] || die "this cross-builds from x86_64 (on an aarch64 machine run deploy/build.sh)"
SYSROOT="$BUILD_DIR/sysroot"
t_start=$(date +%s)

# 1. Host tools.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  as_root dpkg --add-architecture arm64
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
fi
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    g++-aarch64-linux-gnu qemu-user-static >&2
fi
apt-cache show libgloo-dev:arm64 >/dev/null 2>&1 || as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq

# 2. The sysroot: deploy/setup.sh's library -dev packages for arm64, with their dependency closure,
# less what the cross toolchain brings (glibc, libstdc++, gcc's runtimes) and tools/system packages.
DEV_PACKAGES=(
  libgrpc++-dev:arm64 libprotobuf-dev:arm64 libabsl-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
  libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64
  libgloo-dev:arm64 libboost-dev:arm64 libboost-system-dev:arm64 libssl-dev:arm64
  nlohmann-json3-dev libcli11-dev
)
SKIP_PKG='^(libc6|libc6-dev|libc-dev-bin|linux-libc-dev|libstdc\+\+6|libstdc\+\+-12-dev|libgcc-s1|libgcc-12-dev|gcc-12-base|libasan8|libatomic1|libgomp1|libhwasan0|libitm1|liblsan0|libtsan2|libubsan1|libcrypt1|libcrypt-dev|libnsl2|libnsl-dev|libtirpc3|libtirpc-dev|libtirpc-common|rpcsvc-proto|dpkg|tar|passwd|adduser|cdebconf|debconf|install-info|libpam.*|libsemanage.*|libselinux1|libsepol2|libaudit.*|libcap-ng0|libnewt0.52|libslang2|libtextwrap1|libdebian-installer4|libreadline8|readline-common|libtinfo6|libbz2-1.0|pkgconf|pkgconf-bin|libpkgconf3|catch2|libgssapi-krb5-2|libkrb5-3|libkrb5support0|libk5crypto3|libcom-err2|libkeyutils1)$'
STAMP="$SYSROOT/.packages"
want="$(printf '%s\n' "${DEV_PACKAGES[@]}" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  log "sysroot: arm64 packages into $SYSROOT"
  rm -rf "$SYSROOT"; mkdir -p "$BUILD_DIR/debs" "$SYSROOT"
  pkgs=()
  while read -r p; do
    base="${p%:arm64}"
    [[ "$base" =~ $SKIP_PKG ]] && continue
    # Only arm64 packages, and the architecture-independent header packages named above.
    if [[ "$p" == *:arm64 ]] || printf '%s\n' "${DEV_PACKAGES[@]}" | grep -qx "$p"; then pkgs+=("$p"); fi
  done < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
             --no-enhances --no-pre-depends "${DEV_PACKAGES[@]}" 2>/dev/null | grep -v '^[ <]' | sort -u)
  # Architecture-independent dependencies of the -dev packages (headers shared by all architectures).
  pkgs+=(googletest libboost1.74-dev:arm64)
  (cd "$BUILD_DIR/debs" && apt-get download "${pkgs[@]}" >&2)
  for deb in "$BUILD_DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$SYSROOT"; done
  # Absolute symlinks (libfoo.so -> /lib/aarch64-linux-gnu/libfoo.so.1) point into the sysroot.
  find "$SYSROOT" -type l -lname '/*' | while read -r l; do ln -sfn "$SYSROOT$(readlink "$l")" "$l"; done
  echo "$want" >"$STAMP"
  log "sysroot: ${#pkgs[@]} packages ($(du -sh "$SYSROOT" | cut -f1))"
fi
# gRPC's CMake config insists that its code generators exist for the target: the host's stand in
# (only the host's are run: proto/CMakeLists.txt finds grpc_cpp_plugin on the PATH).
# Gloo installs into /usr/lib, not the multiarch folder (why its two architectures cannot be installed
# side by side), and its CMake config names that path absolutely: point it into the sysroot.
sed -i "s|\"/usr/lib/libgloo|\"$SYSROOT/usr/lib/libgloo|g" "$SYSROOT"/usr/share/cmake/Gloo/GlooTargets-*.cmake
mkdir -p "$SYSROOT/usr/bin"
for plugin in /usr/bin/grpc_*_plugin; do ln -sfn "$plugin" "$SYSROOT/usr/bin/$(basename "$plugin")"; done
t_sysroot=$(date +%s)

# 3. Configure and build (CPU-only).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$REPO_ROOT" CCACHE_NOHASHDIR=1
cmake -S "$REPO_ROOT" -B "$BUILD_DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$REPO_ROOT/cmake/toolchain-aarch64.cmake" -DSPARKSERVE_AARCH64_SYSROOT="$SYSROOT" \
  -DSPARKSERVE_CUDA=OFF -DSPARKSERVE_WERROR=ON -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >&2
JOBS="${SPARKSERVE_JOBS:-$(nproc)}"
if [ "$ALL" = 1 ]; then
  cmake --build "$BUILD_DIR/build" -j "$JOBS" >&2
  file "$BUILD_DIR/build/bin/sparkserve" "$BUILD_DIR/build/bin/sparkserve-node" >&2
else
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR/build" -j "$JOBS" --target $TESTS >&2
fi
t_build=$(date +%s)

# 4. The unit tests under qemu-user, with the cross toolchain's glibc (QEMU_LD_PREFIX) and the
# sysroot's libraries.
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export QEMU_SET_ENV="LD_LIBRARY_PATH=$SYSROOT/usr/lib/aarch64-linux-gnu:$SYSROOT/lib/aarch64-linux-gnu:$SYSROOT/usr/lib"
rc=0
if [ "$ALL" = 1 ]; then
  ctest --test-dir "$BUILD_DIR/build" -j "$JOBS" --timeout 600 --output-on-failure 2>&1 | tee "$BUILD_DIR/ctest.log" || rc=1
else
  : >"$BUILD_DIR/tests.log"
  for t in $TESTS; do
    bin="$BUILD_DIR/build/tests/$t"
    file "$bin" | grep -q 'ARM aarch64' || die "$bin is not an aarch64 executable"
    # From the source root, as ctest runs them (fixtures are found relative to it).
    if (cd "$REPO_ROOT" && qemu-aarch64-static "$bin" --gtest_brief=1) >>"$BUILD_DIR/tests.log" 2>&1; then
      log "aarch64 $t: $(grep -Eo 'PASSED  \] [0-9]+ tests?' "$BUILD_DIR/tests.log" | tail -1 | grep -Eo '[0-9]+') tests passed"
    else
      log "aarch64 $t: FAILED (see $BUILD_DIR/tests.log)"; rc=1
    fi
  done
fi
t_tests=$(date +%s)

# 5. The release tarball, started from an unpacked copy under qemu with only the target's glibc and
# libstdc++ (the cross toolchain's) beside it: the rest must come from its lib/.
if [ "$RELEASE" = 1 ]; then
  [ "$ALL" = 1 ] || cmake --build "$BUILD_DIR/build" -j "$JOBS" --target sparkserve sparkserve-node >&2
  tarball="$("$REPO_ROOT/deploy/bundle.sh" --release --build-dir "$BUILD_DIR/build" --out-dir "$BUILD_DIR/release")"
  QEMU_LD_PREFIX=/usr/aarch64-linux-gnu SPARKSERVE_RUN_PREFIX=qemu-aarch64-static \
    "$REPO_ROOT/deploy/release_smoke.sh" "$tarball" --backend cpu
fi
t_end=$(date +%s)
log "times: sysroot $((t_sysroot - t_start)) s, configure+build $((t_build - t_sysroot)) s, tests $((t_tests - t_build)) s, release (binaries, tarball, its check) $((t_end - t_tests)) s (jobs $JOBS)"
exit "$rc"
