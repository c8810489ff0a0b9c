// Plugin entry point, ABI metadata and the registrar.
//
// A plugin library is a C++ shared library built against this SDK (with
// `runner_add_plugin()` from the installed CMake package). It has exactly one
// entry, declared with RUNNER_PLUGIN:
//
//   #include <runner/sdk.hpp>
//
//   static void register_plugins(runner::Registrar& r) {
//     runner::OptionSchema options;
//     options.integer("width", 64, "hidden width").range(1, 65536);
//     r.add_model("tiny", "a one-layer model", options,
//                 [](const runner::Options& o, const runner::ModelContext& ctx) {
//                   return std::make_unique<TinyModel>(o, ctx);
//                 });
//   }
//   RUNNER_PLUGIN(register_plugins)
//
// The host first reads the plain PluginAbiInfo the library exports, checks it
// against its own (SDK ABI, runner version, LibTorch version, compiler,
// C++ ABI, CUDA), and only then calls the registration function.
#pragma once

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/version.h>

#include "runner/comm_hook.hpp"
#include "runner/kernel.hpp"
#include "runner/loader.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/options.hpp"
#include "runner/version.hpp"

namespace runner {

/// Plain metadata a plugin library exports before anything else. Its first
/// two fields never move, so any host can read them from any library.
struct PluginAbiInfo {
  std::uint32_t abi_version;     ///< RUNNER_SDK_ABI_VERSION the library was built with
  std::uint32_t struct_size;     ///< sizeof(PluginAbiInfo) in the library
  const char* runner_version;    ///< RUNNER_VERSION_STRING
  const char* torch_version;     ///< TORCH_VERSION ("2.14.1")
  const char* compiler;          ///< "gcc 12.2.0" or "clang 16.0.6"
  int cxx11_abi;                 ///< _GLIBCXX_USE_CXX11_ABI (1 or 0)
  int cuda;                      ///< 1 if built with CUDA code paths
  const char* plugin_version;    ///< the library's own version (RUNNER_PLUGIN_VERSION)
};

/// Factory signatures. Each gets validated options (see options.hpp).
using ModelFactory =
    std::function<std::unique_ptr<Model>(const Options&, const ModelContext&)>;
using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(const Options&, const OptimizerContext&)>;
using LoaderFactory =
    std::function<std::unique_ptr<Loader>(const Options&, const LoaderContext&)>;
using KernelFactory = std::function<std::unique_ptr<Kernel>(const Options&)>;
using CommHookFactory = std::function<std::unique_ptr<CommHook>(const Options&)>;

/// The narrow interface a library registers its plugins through. Names are
/// unique per kind across all loaded libraries; a duplicate is an error.
class Registrar {
 public:
  virtual ~Registrar() = default;
  /// Registers a model plugin.
  virtual void add_model(std::string name, std::string help, OptionSchema options,
                         ModelFactory factory) = 0;
  /// Registers an optimizer plugin.
  virtual void add_optimizer(std::string name, std::string help, OptionSchema options,
                             OptimizerFactory factory) = 0;
  /// Registers a data loader plugin.
  virtual void add_loader(std::string name, std::string help, OptionSchema options,
                          LoaderFactory factory) = 0;
  /// Registers a kernel plugin (its ops are registered by TORCH_LIBRARY_FRAGMENT at load).
  virtual void add_kernel(std::string name, std::string help, OptionSchema options,
                          KernelFactory factory) = 0;
  /// Registers a gradient communication hook.
  virtual void add_comm_hook(std::string name, std::string help, OptionSchema options,
                             CommHookFactory factory) = 0;
};

/// Signature of the registration function passed to RUNNER_PLUGIN.
using RegisterFunction = void (*)(Registrar&);

namespace detail {
#if defined(__clang__)
#define RUNNER_DETAIL_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define RUNNER_DETAIL_STR2(x) #x
#define RUNNER_DETAIL_STR(x) RUNNER_DETAIL_STR2(x)
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
#define RUNNER_PLUGIN_VERSION "0.0.0"
#endif
#ifndef RUNNER_PLUGIN_ABI_VERSION
/// Only the test suite overrides this, to build a deliberately mismatched plugin.
#define RUNNER_PLUGIN_ABI_VERSION RUNNER_SDK_ABI_VERSION
#endif
}  // namespace detail

/// The ABI info of the translation unit that includes this header.
inline const PluginAbiInfo& this_abi_info() {
  static const PluginAbiInfo info{RUNNER_PLUGIN_ABI_VERSION,
                                  static_cast<std::uint32_t>(sizeof(PluginAbiInfo)),
                                  RUNNER_VERSION_STRING,
                                  TORCH_VERSION,
                                  RUNNER_DETAIL_COMPILER,
                                  _GLIBCXX_USE_CXX11_ABI,
                                  RUNNER_DETAIL_CUDA,
                                  RUNNER_PLUGIN_VERSION};
  return info;
}

}  // namespace runner

/// Declares the library's one entry point. `register_fn` is a
/// `void(runner::Registrar&)` function. Exports two symbols through Boost.DLL:
/// `runner_plugin_abi` (plain metadata, read first) and `runner_plugin_register`.
#define RUNNER_PLUGIN(register_fn)                                                   \
  namespace runner_plugin_entry {                                                   \
  inline const ::runner::PluginAbiInfo* runner_plugin_abi_fn() {                     \
    return &::runner::this_abi_info();                                              \
  }                                                                                 \
  inline void runner_plugin_register_fn(::runner::Registrar& r) {                    \
    register_fn(r);                                                                 \
  }                                                                                 \
  }                                                                                 \
  BOOST_DLL_ALIAS(runner_plugin_entry::runner_plugin_abi_fn, runner_plugin_abi)     \
  BOOST_DLL_ALIAS(runner_plugin_entry::runner_plugin_register_fn, runner_plugin_register)
