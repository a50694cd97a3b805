# Writes version.h: project version, git commit and the CUDA architectures compiled in.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE SPARKSERVE_GIT_COMMIT
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT SPARKSERVE_GIT_COMMIT)
  set(SPARKSERVE_GIT_COMMIT "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _dirty ERROR_QUIET)
if(_dirty)
  string(APPEND SPARKSERVE_GIT_COMMIT "-dirty")
endif()
if(SPARKSERVE_WITH_CUDA)
  set(_archs "")
  foreach(a IN LISTS CMAKE_CUDA_ARCHITECTURES)
    list(APPEND _archs "sm_${a}")
  endforeach()
  list(JOIN _archs " " SPARKSERVE_CUDA_ARCHS_STRING)
else()
  set(SPARKSERVE_CUDA_ARCHS_STRING "none")
endif()
configure_file(${CMAKE_SOURCE_DIR}/core/version.h.in ${CMAKE_BINARY_DIR}/generated/sparkserve/version.h @ONLY)
