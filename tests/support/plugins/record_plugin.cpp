// Test libraries for the host's ABI record check, one per value of
// RUNNER_TEST_RECORD (set by CMake). None includes LibTorch or registers
// anything: the host must refuse each from its file, before loading it.
// The constructor proves that: it writes the file named by
// RUNNER_TEST_MARKER and aborts, so a library the host loaded by mistake
// fails the test whichever way it looks.
#include <runner/abi.hpp>

#include <cstdio>
#include <cstdlib>

#define RUNNER_TEST_none 1
#define RUNNER_TEST_old_sdk 2
#define RUNNER_TEST_other_torch 3
#define RUNNER_TEST_unterminated 4
#define RUNNER_TEST_nonprintable 5
#define RUNNER_TEST_wrong_size 6
#define RUNNER_TEST_truncated 7
#define RUNNER_TEST_bad_magic 8
#define RUNNER_TEST_no_register 9
#define RUNNER_TEST_CASE2(name) RUNNER_TEST_##name
#define RUNNER_TEST_CASE(name) RUNNER_TEST_CASE2(name)
#define CASE RUNNER_TEST_CASE(RUNNER_TEST_RECORD)

namespace {

[[maybe_unused]] constexpr runner::PluginAbiRecord valid() { return RUNNER_ABI_RECORD_VALUE; }

#if CASE == RUNNER_TEST_unterminated
constexpr runner::PluginAbiRecord unterminated() {
  runner::PluginAbiRecord r = valid();
  for (char& c : r.torch_version) c = 'x';
  return r;
}
RUNNER_ABI_RECORD_SECTION const runner::PluginAbiRecord record = unterminated();
#elif CASE == RUNNER_TEST_nonprintable
constexpr runner::PluginAbiRecord nonprintable() {
  runner::PluginAbiRecord r = valid();
  r.compiler[1] = '\x01';
  return r;
}
RUNNER_ABI_RECORD_SECTION const runner::PluginAbiRecord record = nonprintable();
#elif CASE == RUNNER_TEST_wrong_size
struct Larger {
  runner::PluginAbiRecord record;
  char extra[8];
};
constexpr Larger larger() {
  Larger l{valid(), {}};
  l.record.struct_size = sizeof(Larger);
  return l;
}
RUNNER_ABI_RECORD_SECTION const Larger record = larger();
#elif CASE == RUNNER_TEST_truncated
struct Truncated {
  char magic[12];
};
RUNNER_ABI_RECORD_SECTION const Truncated record = {"runner-plug"};
#elif CASE == RUNNER_TEST_bad_magic
constexpr runner::PluginAbiRecord bad_magic() {
  runner::PluginAbiRecord r = valid();
  r.magic[0] = 'R';
  return r;
}
RUNNER_ABI_RECORD_SECTION const runner::PluginAbiRecord record = bad_magic();
#elif CASE == RUNNER_TEST_other_torch || CASE == RUNNER_TEST_no_register
// other_torch: CMake sets RUNNER_PLUGIN_TORCH_VERSION="1.0.0".
RUNNER_ABI_RECORD_SECTION const runner::PluginAbiRecord record = valid();
#endif

#if CASE == RUNNER_TEST_other_torch
// Defined nowhere: dlopen of this library fails with "undefined symbol", the
// failure an older host reported instead of the ABI difference.
extern "C" void runner_test_symbol_from_another_libtorch();
#endif

__attribute__((constructor)) void on_load() {
#if CASE == RUNNER_TEST_other_torch
  runner_test_symbol_from_another_libtorch();
#endif
#if CASE != RUNNER_TEST_no_register
  if (const char* marker = std::getenv("RUNNER_TEST_MARKER"); marker != nullptr) {
    if (std::FILE* f = std::fopen(marker, "w")) {
      std::fputs("loaded\n", f);
      std::fclose(f);
    }
  }
  std::abort();
#endif
}

}  // namespace

#if CASE == RUNNER_TEST_old_sdk
// The entry point of a plugin built with an SDK before version 4.
extern "C" __attribute__((visibility("default"))) const void* runner_plugin_abi() {
  return nullptr;
}
#endif
