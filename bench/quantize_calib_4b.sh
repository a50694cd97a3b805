#!/usr/bin/env bash
# Calibrated `sparkserve quantize` of the random full-size Qwen3.5-4B bf16 checkpoint: wall time and
# peak resident memory (GNU time), for bench/RESULTS.md. CPU only (the calibration runs the f32 CPU
# reference model): run it on a machine with >= 32 GiB RAM, e.g. the GPU machine.
#   bench/quantize_calib_4b.sh [BUILD_DIR [WORK_DIR [extra quantize flags...]]]
# Makes WORK_DIR/src (sparkserve demo-model --shape 4b + the Qwen3 tokenizer and the Qwen3.5 chat
# template from ../shared/fixtures, so calibration tokenises the built-in corpus) unless it exists,
# then quantises it to WORK_DIR/nvfp4-mixed with the default calibration (8 samples <= 512 tokens,
# 2 held out) and prints the tool's table plus "peak RSS".
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-/tmp/sparkserve-q4b}
shift $(( $# < 2 ? $# : 2 ))
BIN=$BUILD/bin/sparkserve
FIX=${FIXTURES:-$(cd "$(dirname "$0")/.." && pwd)/../shared/fixtures}
mkdir -p "$WORK"
if [ ! -f "$WORK/src/config.json" ]; then
  "$BIN" demo-model "$WORK/src" --shape 4b --seed 0 --quiet
  cp "$FIX/qwen3-tokenizer/tokenizer.json" "$FIX/qwen3-tokenizer/tokenizer_config.json" "$WORK/src/"
  cp "$FIX/qwen3_5-chat_template.jinja" "$WORK/src/chat_template.jinja"
fi
rm -rf "$WORK/nvfp4-mixed"
/usr/bin/time -v "$BIN" quantize "$WORK/src" "$WORK/nvfp4-mixed" --quiet "$@" 2> "$WORK/quantize.stderr" \
  | tee "$WORK/quantize.stdout"
grep -E "quantize: (calibrated|held-out|with simulated)|Maximum resident|Elapsed" "$WORK/quantize.stderr"
