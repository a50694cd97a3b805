#!/usr/bin/env bash
# The GPU suite, one command for a machine with a GPU: kernel checks against the CPU reference on
# fresh random inputs and kernel timings (gpu_kernel_check), ending with a short table.
#   tests/gpu/run.sh [BIN_DIR]   (default: build/bin, or a bundle's bin/ made by deploy/bundle.sh)
set -uo pipefail
BIN="${1:-build/bin}"
LOG_DIR="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$LOG_DIR/gpu.txt"
status=0
"$BIN/gpu_kernel_check" 2>&1 | tee "$LOG_DIR/kernel_check.log" || status=1
echo "gpu suite: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
