// Chooses the CPU kernels' instruction set as ATen chooses its own.
#include <ATen/Version.h>

#include <string>

#include "kernels.hpp"

namespace runner_kernels::cpu {

namespace {

// at::get_cpu_capability() names the capability ATen's DispatchStub runs
// ("DEFAULT", "AVX2", "AVX512", or another architecture's): the best the CPU
// supports, or the one ATEN_CPU_CAPABILITY asks for. Custom and native ops
// then run the same instruction set, which is what a comparison needs.
const Kernels& choose() {
#if defined(RUNNER_KERNELS_X86_64)
  const std::string capability = at::get_cpu_capability();
  if (capability == "AVX512") return AVX512::kernels();
  if (capability == "AVX2") return AVX2::kernels();
#endif
  return DEFAULT::kernels();
}

}  // namespace

const Kernels& selected() {
  static const Kernels& kernels = choose();
  return kernels;
}

}  // namespace runner_kernels::cpu
