// Probe: the AOTInductor package loader (torch::inductor::AOTIModelPackageLoader).
//
// The header must compile, the program must link (the loader is defined in
// libtorch_cpu), and at run time loading a package that does not exist must
// fail with a c10::Error rather than crash. The probe also reports which
// shared library the loader's code was resolved from.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <dlfcn.h>

#include <exception>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "probe_common.hpp"

namespace {

constexpr std::string_view kProbe = "aoti_loader";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

int main() {
  using torch::inductor::AOTIModelPackageLoader;
  try {
    // Which library provides the loader (a static member: a plain function pointer).
    auto* fn = &AOTIModelPackageLoader::load_metadata_from_package;
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(fn), &info) != 0 && info.dli_fname != nullptr) {
      probe::say(kProbe, std::string("AOTIModelPackageLoader resolved from ") + info.dli_fname);
    }

    const std::string missing = (std::filesystem::temp_directory_path() /
                                 ("runner-probe-aoti-" + std::to_string(::getpid()) + "-missing.pt2"))
                                    .string();
    bool threw = false;
    try {
      AOTIModelPackageLoader loader(missing);
    } catch (const c10::Error& e) {
      threw = true;
      probe::say(kProbe, "loading a missing package throws c10::Error: " + first_line(e.what_without_backtrace()));
    }
    probe::expect(threw, "AOTIModelPackageLoader accepted a package that does not exist");
  } catch (const std::exception& e) {
    probe::fail(kProbe, e.what());
  }
  probe::say(kProbe, "OK: model_package_loader.h compiles, AOTIModelPackageLoader links and runs");
  return 0;
}
