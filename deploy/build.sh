#!/usr/bin/env bash
# Builds sparkserve (binaries in DIR/bin/: sparkserve, sparkserve-node). Runs setup.sh when the
# build dependencies are missing.
#   deploy/build.sh [--cpu|--cuda] [--build-dir DIR] [--release|--debug] [--no-werror]
#   --cuda builds for sm_90a;sm_100a;sm_120a;sm_121a (override with SPARKSERVE_CUDA_ARCHS);
#   the default is CUDA when nvcc is found. Set SPARKSERVE_JOBS to limit parallel jobs.
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build"
CUDA=AUTO
TYPE=RelWithDebInfo
WERROR=ON
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) CUDA=OFF; shift ;;
    --cuda) CUDA=ON; shift ;;
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --release) TYPE=Release; shift ;;
    --debug) TYPE=Debug; shift ;;
    --no-werror) WERROR=OFF; shift ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
if [ "$CUDA" = AUTO ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [ "$CUDA" = ON ] && ! command -v nvcc >/dev/null 2>&1; then
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH" || die "--cuda: nvcc not found (install the CUDA toolkit)"
fi
if ! command -v cmake >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1 || [ ! -f /usr/include/grpcpp/grpcpp.h ] || [ ! -d /usr/include/gloo ]; then
  "$REPO_ROOT/deploy/setup.sh" --build-dir "$BUILD_DIR" --no-venv
fi
ARCHS="${SPARKSERVE_CUDA_ARCHS:-90a;100a;120a;121a}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, so that another clone of the same sources reuses the cache.
export CCACHE_BASEDIR="$REPO_ROOT" CCACHE_NOHASHDIR=1
cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$TYPE" -DSPARKSERVE_CUDA="$CUDA" \
  -DSPARKSERVE_CUDA_ARCHS="$ARCHS" -DSPARKSERVE_WERROR="$WERROR" >&2
JOBS="${SPARKSERVE_JOBS:-$(nproc)}"
cmake --build "$BUILD_DIR" -j "$JOBS" >&2
log "built: $BUILD_DIR/bin/sparkserve, $BUILD_DIR/bin/sparkserve-node"
