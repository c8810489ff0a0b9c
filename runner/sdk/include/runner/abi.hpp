// The ABI record of a plugin library: plain, fixed-layout metadata the host
// reads from the library's file, before it loads the library and before any
// of the library's code (static initialisers included) can run.
//
// RUNNER_PLUGIN (plugin.hpp) emits one record into the ELF section
// `.runner_plugin_abi`. The record holds no pointers, so it needs no
// relocation: the bytes in the file are the record. The host finds the
// section through the file's section headers, checks the record against its
// own (SDK ABI, runner version, LibTorch version, compiler, C++ ABI, CUDA) and
// only then calls dlopen. A file without the section is not a runner plugin
// and is never loaded.
//
// This header includes no LibTorch header beyond <torch/version.h>.
#pragma once

#include <torch/version.h>

#include <cstdint>

#include "runner/version.hpp"

namespace runner {

/// Name of the ELF section that holds a plugin library's ABI record.
inline constexpr const char* kAbiRecordSection = ".runner_plugin_abi";
/// First bytes of every ABI record (NUL-padded to 16).
inline constexpr const char* kAbiRecordMagic = "runner-plugin";

/// The ABI record. Its first three fields never move, so any host can read
/// the version and size of any record; every string is NUL-terminated inside
/// its array and printable.
struct PluginAbiRecord {
  char magic[16];              ///< kAbiRecordMagic
  std::uint32_t abi_version;   ///< RUNNER_SDK_ABI_VERSION the library was built with
  std::uint32_t struct_size;   ///< sizeof(PluginAbiRecord) in the library
  char runner_version[32];     ///< RUNNER_VERSION_STRING
  char torch_version[32];      ///< TORCH_VERSION ("2.14.1")
  char compiler[64];           ///< "gcc 12.2.0" or "clang 16.0.6"
  char plugin_version[64];     ///< the library's own version (RUNNER_PLUGIN_VERSION)
  std::int32_t cxx11_abi;      ///< _GLIBCXX_USE_CXX11_ABI (1 or 0)
  std::int32_t cuda;           ///< 1 if built with CUDA code paths
};

}  // namespace runner

#define RUNNER_DETAIL_STR2(x) #x
#define RUNNER_DETAIL_STR(x) RUNNER_DETAIL_STR2(x)
#if defined(__clang__)
#define RUNNER_DETAIL_COMPILER \
  "clang " RUNNER_DETAIL_STR(__clang_major__) "." RUNNER_DETAIL_STR(__clang_minor__) "." RUNNER_DETAIL_STR(__clang_patchlevel__)
#elif defined(__GNUC__)
#define RUNNER_DETAIL_COMPILER \
  "gcc " RUNNER_DETAIL_STR(__GNUC__) "." RUNNER_DETAIL_STR(__GNUC_MINOR__) "." RUNNER_DETAIL_STR(__GNUC_PATCHLEVEL__)
#else
#define RUNNER_DETAIL_COMPILER "unknown"
#endif
#ifdef RUNNER_WITH_CUDA
#define RUNNER_DETAIL_CUDA 1
#else
#define RUNNER_DETAIL_CUDA 0
#endif
#ifndef RUNNER_PLUGIN_VERSION
/// The library's own version; runner_add_plugin() defines it from VERSION.
#define RUNNER_PLUGIN_VERSION "0.0.0"
#endif
// Only the test suite overrides these two, to build deliberately mismatched plugins.
#ifndef RUNNER_PLUGIN_ABI_VERSION
#define RUNNER_PLUGIN_ABI_VERSION RUNNER_SDK_ABI_VERSION
#endif
#ifndef RUNNER_PLUGIN_TORCH_VERSION
#define RUNNER_PLUGIN_TORCH_VERSION TORCH_VERSION
#endif

/// The record of the translation unit that expands it, as an initializer. A
/// string too long for its array is a compile error.
#define RUNNER_ABI_RECORD_VALUE                                                          \
  ::runner::PluginAbiRecord {                                                            \
    "runner-plugin", RUNNER_PLUGIN_ABI_VERSION,                                          \
        static_cast<std::uint32_t>(sizeof(::runner::PluginAbiRecord)),                  \
        RUNNER_VERSION_STRING, RUNNER_PLUGIN_TORCH_VERSION, RUNNER_DETAIL_COMPILER,      \
        RUNNER_PLUGIN_VERSION, _GLIBCXX_USE_CXX11_ABI, RUNNER_DETAIL_CUDA                \
  }

// `used` keeps the compiler from dropping the unreferenced record, `retain`
// keeps the linker from dropping its section under --gc-sections.
#if defined(__has_attribute)
#if __has_attribute(retain)
#define RUNNER_DETAIL_RETAIN , retain
#endif
#endif
#ifndef RUNNER_DETAIL_RETAIN
#define RUNNER_DETAIL_RETAIN
#endif

/// Places the variable it precedes in the ABI record section.
#define RUNNER_ABI_RECORD_SECTION \
  __attribute__((used RUNNER_DETAIL_RETAIN, section(".runner_plugin_abi"), aligned(8)))

namespace runner {

/// The ABI record this translation unit writes (for the host: its own facts).
constexpr PluginAbiRecord this_abi_record() { return RUNNER_ABI_RECORD_VALUE; }

}  // namespace runner
