# sparkserve_warnings: the warning set every project target compiles with.
add_library(sparkserve_warnings INTERFACE)
target_compile_options(sparkserve_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPARKSERVE_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SPARKSERVE_WERROR}>>:-Werror=all-warnings>)
