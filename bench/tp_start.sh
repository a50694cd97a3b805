#!/usr/bin/env bash
# Start-up of a tensor-parallel server (issue 17's figures): bytes shipped to the nodes and time to
# healthy, first start (empty node caches) and second start (same nodes, a new head), on loopback.
#   bench/tp_start.sh MODEL_DIR [NODES=1] [BIN_DIR=build/bin] [-- extra serve flags]
# Prints one line per start: "start N: healthy after S s, shipped B bytes, reused R bytes".
# Time to healthy = from launching `serve` until GET /health answers 200 (every node synced).
set -euo pipefail
MODEL="$(realpath "$1")"
NODES="${2:-1}"
BIN="$(realpath "${3:-build/bin}")"
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
printf 'tp-start-token\n' >"$WORK/token" && chmod 600 "$WORK/token"
targets=""
for i in $(seq 1 "$NODES"); do
  "$BIN/sparkserve-node" --host 127.0.0.1 --port 0 --cache-dir "$WORK/cache$i" --token-file "$WORK/token" \
    2>"$WORK/node$i.log" &
  PIDS+=($!)
  for _ in $(seq 1 200); do grep -q 'listening on' "$WORK/node$i.log" && break; sleep 0.05; done
  targets+="${targets:+,}$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$WORK/node$i.log" | head -1 | sed 's/listening on //')"
done
metric() { curl -s "$1/metrics" | sed -n "s/^sparkserve:$2{[^}]*} //p" | head -1 | xargs printf "%.0f"; }
for start in 1 2; do
  : >"$WORK/serve$start.out"
  t0=$(date +%s%N)
  "$BIN/sparkserve" serve "$MODEL" --host 127.0.0.1 --port 0 --nodes "$targets" --token-file "$WORK/token" "$@" \
    >"$WORK/serve$start.out" 2>"$WORK/serve$start.err" &
  serve_pid=$!
  url=""
  while [ -z "$url" ]; do
    url=$(sed -n 's/^listening on //p' "$WORK/serve$start.out")
    kill -0 "$serve_pid" 2>/dev/null || { cat "$WORK/serve$start.err" >&2; exit 1; }
    sleep 0.02
  done
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ]; do
    kill -0 "$serve_pid" 2>/dev/null || { cat "$WORK/serve$start.err" >&2; exit 1; }
    sleep 0.02
  done
  t1=$(date +%s%N)
  echo "start $start: healthy after $(( (t1 - t0) / 1000000000 )).$(printf '%02d' $(( (t1 - t0) / 10000000 % 100 ))) s," \
    "shipped $(metric "$url" shard_bytes_sent_total) bytes, reused $(metric "$url" shard_bytes_reused_total) bytes" \
    "(TP=$((NODES + 1)), $(basename "$MODEL"))"
  kill -TERM "$serve_pid"
  wait "$serve_pid" || true
done
