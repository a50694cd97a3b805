# Writes generated/sparkserve/version.h (version, git commit, compiled CUDA architectures) at every
# build, so that --version names the commit the binary was built from. The file is rewritten only
# when its content changes, so an unchanged commit rebuilds nothing.
if(SPARKSERVE_WITH_CUDA)
  set(_archs "")
  foreach(a IN LISTS CMAKE_CUDA_ARCHITECTURES)
    list(APPEND _archs "sm_${a}")
  endforeach()
  list(JOIN _archs " " SPARKSERVE_CUDA_ARCHS_STRING)
else()
  set(SPARKSERVE_CUDA_ARCHS_STRING "none")
endif()
set(SPARKSERVE_VERSION_HEADER ${CMAKE_BINARY_DIR}/generated/sparkserve/version.h)
add_custom_target(sparkserve_version
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${SPARKSERVE_VERSION_HEADER}
          -DPROJECT_VERSION=${PROJECT_VERSION} -DCUDA_ARCHS=${SPARKSERVE_CUDA_ARCHS_STRING}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteVersion.cmake
  BYPRODUCTS ${SPARKSERVE_VERSION_HEADER}
  COMMENT "version.h")
# Also at configure time, so the header exists before the first build.
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${SPARKSERVE_VERSION_HEADER}
                -DPROJECT_VERSION=${PROJECT_VERSION} -DCUDA_ARCHS=${SPARKSERVE_CUDA_ARCHS_STRING}
                -P ${CMAKE_SOURCE_DIR}/cmake/WriteVersion.cmake)
