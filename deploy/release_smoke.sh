#!/usr/bin/env bash
# Starts a release tarball (deploy/bundle.sh --release) the way a user would, on the target machine:
# unpacked into a temp dir, with no LD_LIBRARY_PATH: `--version` of both binaries names the version in
# the tarball's name, and the tiny demo model served on BACKEND answers one chat completion (HTTP
# 200), then stops cleanly on SIGTERM. Needs curl.
#   deploy/release_smoke.sh TARBALL [--backend cpu|cuda]
# SPARKSERVE_RUN_PREFIX runs the binaries through a command, e.g. qemu-aarch64-static for an aarch64
# tarball on x86_64 (deploy/cross_aarch64.sh --release), with QEMU_LD_PREFIX naming the target's glibc.
source "$(dirname "$0")/common.sh"
[ $# -ge 1 ] || die "usage: deploy/release_smoke.sh TARBALL [--backend cpu|cuda]"
TARBALL="$(realpath "$1")"; shift
BACKEND=cpu
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) BACKEND="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
name="$(basename "$TARBALL" .tar.xz)"
version="${name#sparkserve-}"; version="${version%-*}"
read -r -a prefix <<<"${SPARKSERVE_RUN_PREFIX:-}"
tmp="$(mktemp -d)"
pid=""
cleanup() { [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
tar -xJf "$TARBALL" -C "$tmp"
root="$tmp/$name"
[ -x "$root/bin/sparkserve" ] || die "$TARBALL has no $name/bin/sparkserve"
run() { env -u LD_LIBRARY_PATH -u QEMU_SET_ENV "${prefix[@]}" "$@"; }

for b in sparkserve sparkserve-node; do
  out="$(run "$root/bin/$b" --version)" || die "$b --version failed"
  [[ "$out" == "$b $version "* ]] || die "$b --version says '$out', not version $version"
  log "$out"
done
run "$root/bin/sparkserve" demo-model "$tmp/demo" --shape tiny --quiet >/dev/null
# (not through run(): a backgrounded function is a subshell, and SIGTERM would reach it, not serve)
env -u LD_LIBRARY_PATH -u QEMU_SET_ENV "${prefix[@]}" "$root/bin/sparkserve" serve "$tmp/demo" --backend "$BACKEND" \
  --host 127.0.0.1 --port 0 --max-seq-len 256 --max-batch 2 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
port=""
for _ in $(seq 600); do
  port="$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/serve.out")"
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.err" >&2; die "serve exited before it was healthy"; }
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$tmp/serve.err" >&2; die "serve not healthy in 120 s"; }
code="$(curl -s -o "$tmp/reply.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model": "demo", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}')"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
if [ "$code" != 200 ] || ! grep -q '"chat.completion"' "$tmp/reply.json"; then
  cat "$tmp/reply.json" "$tmp/serve.err" >&2; die "chat completion: HTTP $code"
fi
[ "$rc" = 0 ] || { cat "$tmp/serve.err" >&2; die "serve exited $rc after SIGTERM"; }
log "$name: --version, demo model served on $BACKEND (HTTP 200), clean SIGTERM: ok"
