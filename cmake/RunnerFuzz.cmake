# The fuzz build (RUNNER_FUZZ=ON): clang's libFuzzer with AddressSanitizer and
# UBSan over runner's LibTorch-free layers. toml++ is compiled into them
# header-only, so the fuzzer instruments (and sees into) the TOML parser too.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "RUNNER_FUZZ needs clang (libFuzzer); configure with the `fuzz` preset, "
                      "or -DCMAKE_CXX_COMPILER=clang++-14 (Debian: clang-14 libclang-rt-14-dev)")
endif()
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(nlohmann_json 3 REQUIRED)
find_path(RUNNER_TOMLPP_INCLUDE toml++/toml.h REQUIRED)
add_library(runner_toml INTERFACE)
target_include_directories(runner_toml SYSTEM INTERFACE ${RUNNER_TOMLPP_INCLUDE})
target_compile_definitions(runner_toml INTERFACE TOML_HEADER_ONLY=1)

add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                    -fno-sanitize-recover=undefined)
add_link_options(-fsanitize=address,undefined)
