#!/usr/bin/env bash
# The main job: set up, build, then serve MODEL_DIR over the OpenAI and Anthropic APIs (on the GPU
# when there is one, else the CPU backend; `-- --backend cpu|cuda` chooses). With no MODEL_DIR,
# create a tiny demo model (random weights, its own small tokenizer and chat template) and serve it,
# then print a curl example.
#   deploy/run.sh [MODEL_DIR] [-- extra `sparkserve serve` flags, e.g. --port 8080 --api-key K]
# Environment: SPARKSERVE_BUILD_DIR (default build/), HOST (default 127.0.0.1), PORT (default 8000).
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
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
NAME="$(basename "$(realpath "$MODEL_DIR")")"
cat >&2 <<MSG
[run.sh] serving $MODEL_DIR on http://$HOST:$PORT (Ctrl-C stops). Try:
  curl -s http://$HOST:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "$NAME", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'
MSG
exec "$BIN" serve "$MODEL_DIR" --host "$HOST" --port "$PORT" "$@"
