#!/usr/bin/env bash
# Idempotent set-up on Debian 12 / Ubuntu 24.04 (x86_64, aarch64): build dependencies from the
# distribution's packages and the pinned Python test oracles in a virtualenv under the build tree.
#   deploy/setup.sh [--build-dir DIR] [--no-venv]
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build"
WANT_VENV=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --no-venv) WANT_VENV=0; shift ;;
    -h|--help) sed -n '2,4p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libutf8proc-dev libgloo-dev
  libboost-dev libboost-system-dev libssl-dev openssl python3 python3-venv python3-dev curl patchelf
  clang libclang-rt-dev
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
  log "system packages present"
fi

if [ "$WANT_VENV" = 1 ]; then
  VENV="$BUILD_DIR/venv"
  REQ="$REPO_ROOT/tests/requirements.txt"
  STAMP="$VENV/.requirements.sha256"
  want="$(sha256sum "$REQ" | cut -d' ' -f1)"
  if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    PY=/usr/bin/python3
    [ -x "$PY" ] || PY="$(command -v python3)"
    log "creating the test virtualenv in $VENV"
    mkdir -p "$BUILD_DIR"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -r "$REQ" >&2
    echo "$want" > "$STAMP"
  else
    log "test virtualenv up to date"
  fi
fi
