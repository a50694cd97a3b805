# CMake toolchain: cross-compiles for aarch64 Linux (the DGX Spark's CPU) with Debian's
# aarch64-linux-gnu gcc; the target's libraries come from SPARKSERVE_AARCH64_SYSROOT (a folder of
# unpacked arm64 -dev packages that deploy/cross_aarch64.sh makes), host tools (protoc,
# grpc_cpp_plugin) from this machine, and executables run under qemu-user (ctest, gtest discovery).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT SPARKSERVE_AARCH64_SYSROOT)
  set(SPARKSERVE_AARCH64_SYSROOT "$ENV{SPARKSERVE_AARCH64_SYSROOT}")
endif()
if(NOT IS_DIRECTORY "${SPARKSERVE_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "SPARKSERVE_AARCH64_SYSROOT ('${SPARKSERVE_AARCH64_SYSROOT}') holds no arm64 libraries: run deploy/cross_aarch64.sh")
endif()
# try_compile projects get the same settings.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SPARKSERVE_AARCH64_SYSROOT)
set(_sr "${SPARKSERVE_AARCH64_SYSROOT}")
set(_cross /usr/aarch64-linux-gnu)  # the cross toolchain's own glibc and libstdc++

set(CMAKE_FIND_ROOT_PATH "${_sr}" "${_cross}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Headers the packages' CMake configs do not name (header-only libraries, multiarch config headers).
set(CMAKE_C_FLAGS_INIT "-isystem ${_sr}/usr/include/aarch64-linux-gnu -isystem ${_sr}/usr/include")
set(CMAKE_CXX_FLAGS_INIT "-isystem ${_sr}/usr/include/aarch64-linux-gnu -isystem ${_sr}/usr/include")
# The libraries' own dependencies (libgrpc.so needs libcares.so ...) are found at link time here.
set(_link "-L${_sr}/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,${_sr}/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,${_sr}/lib/aarch64-linux-gnu -Wl,-rpath-link,${_sr}/usr/lib")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_link}")

set(ENV{PKG_CONFIG_LIBDIR} "${_sr}/usr/lib/aarch64-linux-gnu/pkgconfig:${_sr}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_sr}")

find_program(_qemu NAMES qemu-aarch64-static qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${_qemu};-L;${_cross};-E;LD_LIBRARY_PATH=${_sr}/usr/lib/aarch64-linux-gnu:${_sr}/lib/aarch64-linux-gnu:${_sr}/usr/lib")
