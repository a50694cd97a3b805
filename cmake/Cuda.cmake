# Decides whether the CUDA backend is built; when it is, every target architecture is compiled in
# and the runtime is linked statically (it finds the driver at run time: libcuda is never linked).
set(SPARKSERVE_WITH_CUDA OFF)
if(SPARKSERVE_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SPARKSERVE_WITH_CUDA ON)
  endif()
elseif(SPARKSERVE_CUDA)
  set(SPARKSERVE_WITH_CUDA ON)
endif()

if(SPARKSERVE_WITH_CUDA)
  set(CMAKE_CUDA_ARCHITECTURES ${SPARKSERVE_CUDA_ARCHS})
  enable_language(CUDA)
  # CMake 3.25 does not know that nvcc 13 takes C++20: tell it the switch.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  # .cu files hold kernels and launchers only (no fmt/absl: nvcc cannot compile fmt's consteval
  # checks); host code around them lives in .cc files.
  string(APPEND CMAKE_CUDA_FLAGS " --expt-relaxed-constexpr")
  find_package(CUDAToolkit REQUIRED)
  # NCCL: only its header at build time; core/nccl_collective.cc loads libnccl.so.2 at run time
  # (a 200+ MB library that bundles need not carry, and that binaries run without).
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
  # Where this machine's libnccl.so.2 lies: the run-time fallback when the loader does not find it.
  find_library(NCCL_LIBRARY NAMES libnccl.so.2 nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
               /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu)
  if(NCCL_INCLUDE_DIR)
    set(SPARKSERVE_WITH_NCCL ON)
  else()
    set(SPARKSERVE_WITH_NCCL OFF)
  endif()
  message(STATUS "sparkserve: CUDA backend ON (${CMAKE_CUDA_ARCHITECTURES}), NCCL ${SPARKSERVE_WITH_NCCL}")
else()
  message(STATUS "sparkserve: CUDA backend OFF")
endif()
