#!/usr/bin/env bash
# Makes a relocatable bundle: DIR/bin (the binaries) + DIR/lib (every shared library they need
# beyond glibc and the C++ runtime), each binary's RPATH set to $ORIGIN/../lib. The bundle runs on
# machines that lack our build dependencies (e.g. a GPU box with only the driver).
#   deploy/bundle.sh [--build-dir DIR] [--out BUNDLE_DIR] [--archive FILE.tar.xz] [BINARY_NAME...]
# (default: all of DIR/bin). --archive also packs the bundle into one xz tarball (the kernels' SASS
# compresses ~6x: what a copy to a GPU machine with a size limit should carry).
#   deploy/bundle.sh --release [--build-dir DIR] [--version V] [--out-dir OUT_DIR]
# The release for users: OUT_DIR/sparkserve-V-ARCH.tar.xz (+ .sha256; OUT_DIR defaults to
# DIR/release), one folder sparkserve-V-ARCH/ with the bundle of sparkserve and sparkserve-node,
# systemd/ (deploy/systemd's units), INSTALL (deploy/INSTALL.in: unpack, serve, the node unit, what
# the target needs, measured from the binaries) and VERSION (`sparkserve --version`). V defaults to
# the build's CMake project version; ARCH is the binaries' architecture as `uname -m` names it.
# SPARKSERVE_XZ_LEVEL (default 6) sets the compression (0: fast, ~15% larger; the CI test uses it).
source "$(dirname "$0")/common.sh"
BUILD_DIR="$REPO_ROOT/build"
OUT=""
ARCHIVE=""
RELEASE=0
VERSION=""
OUT_DIR=""
NAMES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --out) OUT="$(realpath -m "$2")"; shift 2 ;;
    --archive) ARCHIVE="$(realpath -m "$2")"; shift 2 ;;
    --release) RELEASE=1; shift ;;
    --version) VERSION="$2"; shift 2 ;;
    --out-dir) OUT_DIR="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) die "unknown argument '$1' (see --help)" ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
command -v patchelf >/dev/null 2>&1 || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf >&2

# The architecture of an ELF file, spelled as `uname -m` spells it on that machine.
elf_arch() {
  case "$(LC_ALL=C readelf -h "$1" | sed -n 's/^ *Machine: *//p')" in
    *X86-64*) echo x86_64 ;;
    AArch64) echo aarch64 ;;
    *) die "$1: unknown ELF machine" ;;
  esac
}

# qemu-user for ARCH (qemu-user-static's or qemu-user's name). Where the target's glibc and libraries
# lie comes from the caller: QEMU_LD_PREFIX, QEMU_SET_ENV=LD_LIBRARY_PATH=... (deploy/cross_aarch64.sh).
qemu_for() {
  local q
  for q in "qemu-$1-static" "qemu-$1"; do command -v "$q" >/dev/null 2>&1 && { echo "$q"; return; }; done
  die "running $1 binaries needs qemu-user (qemu-$1-static or qemu-$1)"
}

# "SONAME PATH" of every shared library BINARY loads (recursively), as the dynamic loader resolves
# them on this machine. A foreign-architecture binary (a cross build) is asked through its own
# loader under qemu-user (see qemu_for).
needed_libs() {
  local bin="$1" arch listing; arch="$(elf_arch "$bin")"
  if [ "$arch" = "$(uname -m)" ]; then
    listing="$(ldd "$bin")"
  else
    local loader
    loader="$(LC_ALL=C readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
    # qemu's QEMU_LD_PREFIX applies to the guest's file opens, not to the program qemu starts.
    [ -z "${QEMU_LD_PREFIX:-}" ] || [ ! -e "$QEMU_LD_PREFIX$loader" ] || loader="$QEMU_LD_PREFIX$loader"
    listing="$("$(qemu_for "$arch")" "$loader" --list "$bin")"
  fi
  [ -n "$listing" ] || die "$bin: the loader listed nothing"
  ! grep 'not found' <<<"$listing" >&2 || die "$bin: libraries not found on this machine (above)"
  awk '/=> \// {print $1, $3}' <<<"$listing"
}

# Runs a binary of the bundle (under qemu-user when it is of another architecture), with no
# LD_LIBRARY_PATH: what it loads comes from its RPATH and the system.
run_bundled() {
  local bin="$1"; shift
  if [ "$ARCH" = "$(uname -m)" ]; then env -u LD_LIBRARY_PATH "$bin" "$@"; else env -u LD_LIBRARY_PATH "$(qemu_for "$ARCH")" "$bin" "$@"; fi
}

# The release's files beside bin/ and lib/: systemd/, VERSION and INSTALL (deploy/INSTALL.in with
# what the target needs, read from the bundle: the newest glibc and libstdc++ symbol versions any
# file of it asks for, and the CUDA version and architectures the binaries were built with).
write_release_files() {
  mkdir -p "$OUT/systemd"
  cp "$REPO_ROOT"/deploy/systemd/*.service "$OUT/systemd/"
  run_bundled "$OUT/bin/sparkserve" --version >"$OUT/VERSION" || die "the bundled sparkserve does not start"
  local glibc glibcxx cuda_archs cuda_version cuda_text
  glibc="$(for f in "$OUT"/bin/* "$OUT"/lib/*; do readelf -W --dyn-syms "$f"; done | grep -o 'GLIBC_[0-9.]*[0-9]' | sort -uV | tail -1)"
  glibcxx="$(for f in "$OUT"/bin/* "$OUT"/lib/*; do readelf -W --dyn-syms "$f"; done | grep -o 'GLIBCXX_[0-9.]*[0-9]' | sort -uV | tail -1)"
  # The distributions whose glibc (Debian 12: 2.36, Ubuntu 24.04: 2.39) is new enough.
  local distros="a distribution with glibc ${glibc#GLIBC_} or newer"
  if [ "$(printf '%s\n' "$glibc" GLIBC_2.36 | sort -V | tail -1)" = GLIBC_2.36 ]; then
    distros="Debian 12, Ubuntu 24.04 (DGX OS 7) or newer"
  elif [ "$(printf '%s\n' "$glibc" GLIBC_2.39 | sort -V | tail -1)" = GLIBC_2.39 ]; then
    distros="Ubuntu 24.04 (DGX OS 7) or newer"
  fi
  cuda_archs="$(sed -n 's/^cuda: //p' "$OUT/VERSION")"
  if [ -z "$cuda_archs" ] || [ "$cuda_archs" = none ]; then
    cuda_text='- No GPU: this is a CPU-only build (`--backend cpu`); it needs no NVIDIA driver.'
  else
    cuda_version="$(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' "$BUILD_DIR"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)"
    local driver="a driver that supports CUDA ${cuda_version%.*}"
    case "$cuda_version" in 13.*) driver="driver 580 or newer (CUDA ${cuda_version%.*})" ;; esac
    cuda_text="- For the GPU (\`--backend cuda\`): an NVIDIA GPU of an architecture built in
  ($cuda_archs) and the NVIDIA $driver. The CUDA runtime is linked in: no
  CUDA toolkit is needed. \`--collective nccl\` (tensor parallelism on GPUs) loads libnccl.so.2
  (the libnccl2 package, or SPARKSERVE_NCCL_LIBRARY=/path/libnccl.so.2); \`--collective gloo\` needs none."
  fi
  local text; text="$(cat "$REPO_ROOT/deploy/INSTALL.in")"
  text="${text//@NAME@/$RELEASE_NAME}"; text="${text//@VERSION@/$VERSION}"; text="${text//@ARCH@/$ARCH}"
  text="${text//@GLIBC@/${glibc#GLIBC_}}"; text="${text//@GLIBCXX@/${glibcxx#GLIBCXX_}}"
  text="${text//@DISTROS@/$distros}"; text="${text//@CUDA@/$cuda_text}"
  printf '%s\n' "$text" >"$OUT/INSTALL"
  ! grep -n '@[A-Z_]*@' "$OUT/INSTALL" || die "INSTALL: a placeholder is left"
}

if [ "$RELEASE" = 1 ]; then
  [ -z "$OUT" ] && [ -z "$ARCHIVE" ] || die "--release names its own folder and archive: use --out-dir"
  [ ${#NAMES[@]} -gt 0 ] || NAMES=(sparkserve sparkserve-node)
  if [ -z "$VERSION" ]; then
    VERSION="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null || true)"
    [ -n "$VERSION" ] || die "no project version in $BUILD_DIR/CMakeCache.txt (build first, or give --version)"
  fi
  [[ "$VERSION" =~ ^[A-Za-z0-9._+-]+$ ]] || die "--version '$VERSION': letters, digits and ._+- only"
  [ -x "$BUILD_DIR/bin/sparkserve" ] || die "no binary $BUILD_DIR/bin/sparkserve (build first)"
  ARCH="$(elf_arch "$BUILD_DIR/bin/sparkserve")"
  RELEASE_NAME="sparkserve-$VERSION-$ARCH"
  OUT_DIR="${OUT_DIR:-$BUILD_DIR/release}"
  mkdir -p "$OUT_DIR"
  STAGE="$(mktemp -d "$OUT_DIR/.stage.XXXXXX")"
  trap 'rm -rf "$STAGE"' EXIT
  OUT="$STAGE/$RELEASE_NAME"
  ARCHIVE="$OUT_DIR/$RELEASE_NAME.tar.xz"
fi
OUT="${OUT:-$REPO_ROOT/build/bundle}"
[ ${#NAMES[@]} -gt 0 ] || NAMES=($(cd "$BUILD_DIR/bin" && ls))
rm -rf "$OUT"; mkdir -p "$OUT/bin" "$OUT/lib"
# Libraries every target system has (glibc, the C++ runtime) or must bring itself (the GPU driver).
SKIP='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s|libstdc\+\+|libcuda\.so|libnvidia)'
for name in "${NAMES[@]}"; do
  src="$BUILD_DIR/bin/$name"
  [ -x "$src" ] || die "no binary $src"
  cp "$src" "$OUT/bin/"
  needed_libs "$src" | while read -r soname path; do
    soname="${soname##*/}"  # the loader lists itself by path
    [[ "$soname" =~ $SKIP ]] && continue
    [ -f "$OUT/lib/$soname" ] || cp -L "$path" "$OUT/lib/$soname"
  done
  patchelf --set-rpath '$ORIGIN/../lib' "$OUT/bin/$name"
done
for lib in "$OUT"/lib/*; do patchelf --set-rpath '$ORIGIN' "$lib"; done
STRIP=strip
arch="$(elf_arch "$OUT/bin/${NAMES[0]}")"
[ "$arch" = "$(uname -m)" ] || ! command -v "$arch-linux-gnu-strip" >/dev/null || STRIP="$arch-linux-gnu-strip"
"$STRIP" --strip-debug "$OUT"/bin/* "$OUT"/lib/* 2>/dev/null || true
[ "$RELEASE" = 1 ] && write_release_files
log "bundle: $OUT ($(du -sh "$OUT" | cut -f1))"
if [ -n "$ARCHIVE" ]; then
  tar -C "$(dirname "$OUT")" --owner=0 --group=0 --numeric-owner --sort=name -cf - "$(basename "$OUT")" \
    | xz -"${SPARKSERVE_XZ_LEVEL:-6}" -T0 >"$ARCHIVE.part"
  mv "$ARCHIVE.part" "$ARCHIVE"
  log "bundle archive: $ARCHIVE ($(du -sh "$ARCHIVE" | cut -f1))"
fi
if [ "$RELEASE" = 1 ]; then
  (cd "$OUT_DIR" && sha256sum "$RELEASE_NAME.tar.xz" >"$RELEASE_NAME.tar.xz.sha256")
  echo "$ARCHIVE"
fi
