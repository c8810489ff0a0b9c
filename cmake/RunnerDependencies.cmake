# Finds every dependency. Each comes from the system package manager, except
# LibTorch: the `torch` pip wheel (scripts/setup hands CMake its
# torch.utils.cmake_prefix_path) or any LibTorch distribution given as Torch_DIR.

find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(tomlplusplus REQUIRED)
# The experiment layer's TOML library (header-only in the fuzz build, cmake/RunnerFuzz.cmake).
add_library(runner_toml INTERFACE)
target_link_libraries(runner_toml INTERFACE tomlplusplus::tomlplusplus)
find_package(nlohmann_json 3 REQUIRED)   # canonical config JSON, stored documents
find_package(spdlog REQUIRED)
find_package(Boost 1.74 REQUIRED)   # Boost.DLL is header-only (with std::filesystem)

# --- LibTorch ---------------------------------------------------------------
# A CUDA build of LibTorch needs the CUDA toolkit at configure time. The pip
# wheel ships CUDA's runtime libraries (nvrtc among them) under
# site-packages/nvidia/, which the system toolkit may lack: point at them.
# Also with RUNNER_CUDA=OFF, which only leaves runner's own CUDA code out: a
# CUDA LibTorch's config insists on finding the toolkit either way.
find_program(RUNNER_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
if(RUNNER_NVCC)
  get_filename_component(_runner_cuda_root "${RUNNER_NVCC}/../.." ABSOLUTE)
  if(NOT CUDA_TOOLKIT_ROOT_DIR)
    set(CUDA_TOOLKIT_ROOT_DIR "${_runner_cuda_root}" CACHE PATH "CUDA toolkit used with LibTorch")
  endif()
  if(NOT CUDA_nvrtc_LIBRARY)
    foreach(_p IN LISTS CMAKE_PREFIX_PATH)
      file(GLOB _nvrtc "${_p}/../../../nvidia/cu*/lib/libnvrtc.so.*")
      list(FILTER _nvrtc EXCLUDE REGEX "builtins|alt")
      if(_nvrtc)
        list(GET _nvrtc 0 _nvrtc)
        set(CUDA_nvrtc_LIBRARY "${_nvrtc}" CACHE FILEPATH "nvrtc shipped with the torch wheel")
      endif()
    endforeach()
  endif()
  if(NOT TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    # Keeps LibTorch's configure from probing a GPU.
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0" CACHE STRING "CUDA architectures for runner's own kernels")
  endif()
  # What runner's own .cu files are compiled for (plugins/kernels/builtin/cuda):
  # the same list in CMake's spelling ("8.0;9.0" -> "80;90", SASS and PTX of
  # each), unless given. Set before LibTorch's config enables CUDA, which
  # would otherwise cache nvcc's default.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(_runner_archs "${TORCH_CUDA_ARCH_LIST}")
    if(NOT _runner_archs)
      set(_runner_archs "$ENV{TORCH_CUDA_ARCH_LIST}")
    endif()
    string(REGEX REPLACE "[ ;]+" ";" _runner_archs "${_runner_archs}")
    list(TRANSFORM _runner_archs REPLACE "\\+PTX$" "")
    list(TRANSFORM _runner_archs REPLACE "\\." "")
    list(FILTER _runner_archs INCLUDE REGEX "^[0-9]+a?$")
    if(NOT _runner_archs)
      set(_runner_archs 80 90)
    endif()
    set(CMAKE_CUDA_ARCHITECTURES "${_runner_archs}" CACHE STRING
        "CUDA architectures of runner's own kernels (default: TORCH_CUDA_ARCH_LIST's)")
  endif()
endif()

find_package(Torch REQUIRED)

# The Python whose torch (and torchvision) is the oracle of the parity tests:
# by default the interpreter of the virtual environment the wheel came from.
set(RUNNER_PYTHON "" CACHE FILEPATH "Python with torch, for the parity tests (empty: they skip), and with pyarrow, runner export's default for parquet")
if(NOT RUNNER_PYTHON)
  get_filename_component(_runner_venv_python "${Torch_DIR}/../../../../../../../bin/python" ABSOLUTE)
  if(EXISTS "${_runner_venv_python}")
    set(RUNNER_PYTHON "${_runner_venv_python}" CACHE FILEPATH
        "Python with torch, for the parity tests (empty: they skip), and with pyarrow, runner export's default for parquet" FORCE)
  endif()
endif()
message(STATUS "runner: parity oracle: ${RUNNER_PYTHON}")

if(CAFFE2_USE_CUDA AND NOT RUNNER_CUDA STREQUAL "OFF")
  set(RUNNER_HAS_CUDA ON)
elseif(RUNNER_CUDA STREQUAL "ON")
  message(FATAL_ERROR "RUNNER_CUDA=ON but LibTorch at ${Torch_DIR} was not built with CUDA, "
                      "or nvcc was not found. Install the CUDA toolkit or use RUNNER_CUDA=AUTO.")
else()
  set(RUNNER_HAS_CUDA OFF)
endif()
message(STATUS "runner: LibTorch ${Torch_VERSION} at ${Torch_DIR}; CUDA code paths: ${RUNNER_HAS_CUDA}")

# One target for LibTorch so that its headers are SYSTEM (no warnings from them).
add_library(runner_torch INTERFACE)
target_link_libraries(runner_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(runner_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
if(RUNNER_HAS_CUDA)
  target_compile_definitions(runner_torch INTERFACE RUNNER_WITH_CUDA=1)
  # ATen's CUDA headers include cuSPARSE, cuBLAS, ... headers that a minimal
  # system toolkit may lack; the wheel's nvidia/* packages carry them.
  set(RUNNER_CUDA_INCLUDE_DIRS ${CUDA_INCLUDE_DIRS})
  foreach(_p IN LISTS CMAKE_PREFIX_PATH Torch_DIR)
    file(GLOB _inc LIST_DIRECTORIES true "${_p}/../../../nvidia/*/include" "${_p}/../../../../nvidia/*/include")
    foreach(_d IN LISTS _inc)
      if(IS_DIRECTORY "${_d}")
        get_filename_component(_d "${_d}" ABSOLUTE)
        list(APPEND RUNNER_CUDA_INCLUDE_DIRS "${_d}")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES RUNNER_CUDA_INCLUDE_DIRS)
  target_include_directories(runner_torch SYSTEM INTERFACE ${RUNNER_CUDA_INCLUDE_DIRS})

  # runner's own CUDA code (docs/kernels-cuda.md). LibTorch's config has
  # already enabled the language (this is a no-op then), but it also set
  # CMAKE_CUDA_ARCHITECTURES to OFF and appended its own nvcc flags (its
  # -gencode list, --expt-relaxed-constexpr, ...) to CMAKE_CUDA_FLAGS, both
  # as plain variables in this scope. runner's .cu files include no LibTorch
  # header: drop those, so that the cached values (the user's, or the
  # default above) apply. One CUDA runtime per process: the shared libcudart
  # LibTorch links, never a static copy in a plugin.
  enable_language(CUDA)
  unset(CMAKE_CUDA_ARCHITECTURES)
  unset(CMAKE_CUDA_FLAGS)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  message(STATUS "runner: CUDA architectures of runner's kernels: ${CMAKE_CUDA_ARCHITECTURES}")
endif()

# Gloo's headers: <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp> includes
# them, and the torch wheel does not ship them (docs/libtorch-probes.md).
# Debian's libgloo-dev provides them (scripts/dev installs it); only their
# declarations are used, the Gloo that runs is the one inside libtorch_cpu.
# Without them, [distributed] backend = "gloo" runs fail with a message.
# Cached: after installing or removing them, reconfigure with
# `cmake -U RUNNER_HAVE_GLOO_HEADERS <build dir>`.
include(CheckCXXSourceCompiles)
include(CMakePushCheckState)
cmake_push_check_state(RESET)
set(CMAKE_REQUIRED_INCLUDES ${TORCH_INCLUDE_DIRS})
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles([[
#include <gloo/algorithm.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>
int main() { return 0; }
]] RUNNER_HAVE_GLOO_HEADERS)
cmake_pop_check_state()
message(STATUS "runner: Gloo headers for ProcessGroupGloo: ${RUNNER_HAVE_GLOO_HEADERS}")
