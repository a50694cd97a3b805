#!/usr/bin/env bash
# Builds the container image of deploy/Containerfile from this build's release tarball and checks it:
# `--version`, and the tiny demo model (mounted at /model) served on the CPU answering one chat
# completion, then a clean stop (SIGTERM). Uses podman, else docker.
#   deploy/container.sh [--build-dir DIR] [--base IMAGE] [--tag TAG]
# --base replaces the CUDA base image (ARG CUDA_BASE), e.g. where the registry cannot be reached:
#   debootstrap --variant=minbase --include=passwd bookworm /tmp/deb12 http://deb.debian.org/debian
#   tar -C /tmp/deb12 -c . | podman import - localhost/debian12:latest
#   deploy/container.sh --base localhost/debian12:latest
# Machines whose cgroups/rlimits the default OCI runtime rejects (a VM with hybrid cgroups, as the CI
# machine) take extra flags, e.g. CONTAINER_GLOBAL_FLAGS="--runtime runc"
# CONTAINER_BUILD_FLAGS="--isolation chroot" CONTAINER_RUN_FLAGS="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096".
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build"
BASE=""
TAG=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --base) BASE="$2"; shift 2 ;;
    --tag) TAG="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
TOOL="$(command -v podman || command -v docker || true)"
[ -n "$TOOL" ] || die "no container tool (podman or docker)"
read -r -a GLOBAL <<<"${CONTAINER_GLOBAL_FLAGS:-}"
read -r -a BUILD_FLAGS <<<"${CONTAINER_BUILD_FLAGS:-}"
read -r -a RUN_FLAGS <<<"${CONTAINER_RUN_FLAGS:-}"

tarball="$("$REPO_ROOT/deploy/bundle.sh" --release --build-dir "$BUILD_DIR" --out-dir "$BUILD_DIR/release")"
name="$(basename "$tarball" .tar.xz)"          # sparkserve-VERSION-ARCH
version="${name#sparkserve-}"; arch="${version##*-}"; version="${version%-*}"
TAG="${TAG:-sparkserve:$version}"
args=(--build-arg "VERSION=$version" --build-arg "ARCH=$arch")
[ -z "$BASE" ] || args+=(--build-arg "CUDA_BASE=$BASE")
# The context is a folder holding only the tarball (the Containerfile ADDs it by name).
ctx="$(mktemp -d)"; model="$(mktemp -d)"
cleanup() { "$TOOL" "${GLOBAL[@]}" rm -f sparkserve-check >/dev/null 2>&1 || true; rm -rf "$ctx" "$model"; }
trap cleanup EXIT
ln "$tarball" "$ctx/" 2>/dev/null || cp "$tarball" "$ctx/"
"$TOOL" "${GLOBAL[@]}" build "${BUILD_FLAGS[@]}" -f "$REPO_ROOT/deploy/Containerfile" "${args[@]}" -t "$TAG" "$ctx" >&2
log "built $TAG"

"$TOOL" "${GLOBAL[@]}" run --rm "${RUN_FLAGS[@]}" "$TAG" --version | tee "$ctx/version" >&2
grep -q "^sparkserve $version " "$ctx/version" || die "the image's --version does not say $version"
"$BUILD_DIR/bin/sparkserve" demo-model "$model/demo" --shape tiny --quiet
chmod -R a+rX "$model"
port=$((20000 + RANDOM % 20000))
"$TOOL" "${GLOBAL[@]}" run -d --name sparkserve-check --network host "${RUN_FLAGS[@]}" -v "$model/demo:/model:ro" \
  "$TAG" serve /model --backend cpu --host 127.0.0.1 --port "$port" >/dev/null
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
code="$(curl -s -o "$ctx/reply.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model": "model", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}')"
"$TOOL" "${GLOBAL[@]}" stop -t 15 sparkserve-check >/dev/null
rc="$("$TOOL" "${GLOBAL[@]}" inspect sparkserve-check --format '{{.State.ExitCode}}')"
if [ "$code" != 200 ] || ! grep -q '"chat.completion"' "$ctx/reply.json" || [ "$rc" != 0 ]; then
  "$TOOL" "${GLOBAL[@]}" logs sparkserve-check >&2 || true
  die "container check: HTTP $code, exit $rc after the stop"
fi
log "container $TAG: --version, demo serve on the CPU (HTTP 200), clean stop: ok"
