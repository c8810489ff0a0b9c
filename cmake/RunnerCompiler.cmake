# Compiler settings for runner's own targets: warnings, ccache, sanitizers.

if(RUNNER_USE_CCACHE)
  find_program(RUNNER_CCACHE_PROGRAM ccache)
  if(RUNNER_CCACHE_PROGRAM)
    set(CMAKE_C_COMPILER_LAUNCHER "${RUNNER_CCACHE_PROGRAM}")
    set(CMAKE_CXX_COMPILER_LAUNCHER "${RUNNER_CCACHE_PROGRAM}")
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${RUNNER_CCACHE_PROGRAM}")
  endif()
endif()

# Warnings apply to our code only: third-party headers come in as SYSTEM.
add_library(runner_warnings INTERFACE)
target_compile_options(runner_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  # .cu files: nvcc's own warnings, and the host compiler's on the host code
  # (no -Wpedantic: nvcc's generated host stubs are not pedantic C++).
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
if(RUNNER_WARNINGS_AS_ERRORS)
  target_compile_options(runner_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()

if(RUNNER_SANITIZE)
  # C and C++ only: nvcc does not take these flags (the host stubs of the .cu
  # files stay uninstrumented; the kernels run on the device anyway).
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
