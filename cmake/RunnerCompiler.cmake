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
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
if(RUNNER_WARNINGS_AS_ERRORS)
  target_compile_options(runner_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

if(RUNNER_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
