# Tests of the kernels plugin's CUDA implementations
# (plugins/kernels/builtin/cuda, docs/kernels-cuda.md):
#   cuda_reduce_ops_test     the row kernels' reduction algebra and workspace
#                            sizing, on the host (unit; no GPU needed)
#   cuda_registration_test   the built plugin registers a CUDA kernel for every
#                            runner op (unit; skips in a build without CUDA)
#   cuda_kernels_test        every op on a GPU against float64 ATen on the CPU
#                            (gpu; skips without a CUDA device)
runner_add_test(cuda_reduce_ops_test SOURCES cuda_reduce_ops_test.cpp LIBS runner_torch)
target_include_directories(cuda_reduce_ops_test PRIVATE "${PROJECT_SOURCE_DIR}/plugins")

runner_add_test(cuda_registration_test SOURCES cuda_registration_test.cpp
  LIBS runner_host runner_sdk)
runner_add_test(cuda_kernels_test SOURCES cuda_kernels_test.cpp
  LIBS runner_host runner_sdk LABELS gpu)
if(TARGET kernels)
  add_dependencies(cuda_registration_test kernels)
  add_dependencies(cuda_kernels_test kernels)
endif()
