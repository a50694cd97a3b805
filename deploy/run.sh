#!/usr/bin/env bash
# The main job: build, then serve MODEL_DIR (on the GPU when there is one). With no MODEL_DIR,
# create a tiny demo model and serve it on the CPU backend. Until serving lands this inspects it.
#   deploy/run.sh [MODEL_DIR] [-- extra sparkserve serve flags]
source "$(dirname "$0")/common.sh"
BUILD_DIR="${SPARKSERVE_BUILD_DIR:-$REPO_ROOT/build}"
MODEL_DIR=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then MODEL_DIR="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
"$REPO_ROOT/deploy/build.sh" --build-dir "$BUILD_DIR"
BIN="$BUILD_DIR/bin/sparkserve"
if [ -z "$MODEL_DIR" ]; then
  MODEL_DIR="$BUILD_DIR/demo-model"
  if [ ! -f "$MODEL_DIR/config.json" ]; then
    log "no MODEL_DIR given: creating a tiny demo model in $MODEL_DIR"
    "$BIN" demo-model "$MODEL_DIR" --shape tiny
  fi
fi
[ -f "$MODEL_DIR/config.json" ] || die "$MODEL_DIR has no config.json: give a Hugging Face model directory"
if "$BIN" --help 2>/dev/null | grep -qE '^ +serve'; then
  exec "$BIN" serve "$MODEL_DIR" "$@"
fi
log "serving is not built yet: inspecting $MODEL_DIR"
exec "$BIN" inspect "$MODEL_DIR"
