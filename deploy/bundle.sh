#!/usr/bin/env bash
# Makes a relocatable bundle: DIR/bin (the binaries) + DIR/lib (every shared library they need
# beyond glibc and the C++ runtime), each binary's RPATH set to $ORIGIN/../lib. The bundle runs on
# machines that lack our build dependencies (e.g. a GPU box with only the driver).
#   deploy/bundle.sh [--build-dir DIR] [--out BUNDLE_DIR] [--archive FILE.tar.xz] [BINARY_NAME...]
# (default: all of DIR/bin). --archive also packs the bundle into one xz tarball (the kernels' SASS
# compresses ~6x: what a copy to a GPU machine with a size limit should carry).
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build"
OUT="$REPO_ROOT/build/bundle"
ARCHIVE=""
NAMES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --out) OUT="$(realpath -m "$2")"; shift 2 ;;
    --archive) ARCHIVE="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    -*) die "unknown argument '$1' (see --help)" ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
command -v patchelf >/dev/null 2>&1 || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf >&2
[ ${#NAMES[@]} -gt 0 ] || NAMES=($(cd "$BUILD_DIR/bin" && ls))
rm -rf "$OUT"; mkdir -p "$OUT/bin" "$OUT/lib"
# Libraries every target system has (glibc, the C++ runtime) or must bring itself (the GPU driver).
SKIP='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s|libstdc\+\+|libcuda\.so|libnvidia)'
for name in "${NAMES[@]}"; do
  src="$BUILD_DIR/bin/$name"
  [ -x "$src" ] || die "no binary $src"
  cp "$src" "$OUT/bin/"
  ldd "$src" | awk '/=> \// {print $1, $3}' | while read -r soname path; do
    [[ "$soname" =~ $SKIP ]] && continue
    [ -f "$OUT/lib/$soname" ] || cp -L "$path" "$OUT/lib/$soname"
  done
  patchelf --set-rpath '$ORIGIN/../lib' "$OUT/bin/$name"
done
for lib in "$OUT"/lib/*; do patchelf --set-rpath '$ORIGIN' "$lib"; done
strip --strip-debug "$OUT"/bin/* "$OUT"/lib/* 2>/dev/null || true
log "bundle: $OUT ($(du -sh "$OUT" | cut -f1))"
if [ -n "$ARCHIVE" ]; then
  tar -C "$(dirname "$OUT")" -cf - "$(basename "$OUT")" | xz -6 -T0 >"$ARCHIVE"
  log "bundle archive: $ARCHIVE ($(du -sh "$ARCHIVE" | cut -f1))"
fi
