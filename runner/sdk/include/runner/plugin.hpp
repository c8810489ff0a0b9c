// Plugin entry point, ABI record and the registrar.
//
// A plugin library is a C++ shared library built against this SDK (with
// `runner_add_plugin()` from the installed CMake package). It has exactly one
// entry, declared with RUNNER_PLUGIN:
//
//   #include <runner/sdk.hpp>
//
//   struct TinyOptions {
//     std::int64_t width = 64;
//   };
//
//   static void register_plugins(runner::Registrar& r) {
//     runner::OptionBinder<TinyOptions> options;
//     options.field("width", &TinyOptions::width, "hidden width").range(1, 65536);
//     r.add_model("tiny", "a one-layer model", options,
//                 [](const TinyOptions& o, const runner::ModelContext& ctx) {
//                   return std::make_unique<TinyModel>(o, ctx);
//                 });
//   }
//   RUNNER_PLUGIN(register_plugins)
//
// RUNNER_PLUGIN writes the library's ABI record (abi.hpp) into its file. The
// host reads and checks the record (SDK ABI, runner version, LibTorch
// version, compiler, C++ ABI, CUDA) before it loads the library, and only
// then calls the registration function.
#pragma once

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "runner/abi.hpp"
#include "runner/kernel.hpp"
#include "runner/loader.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/options.hpp"
#include "runner/version.hpp"

namespace runner {

// Comm hooks are declared in comm_hook.hpp, which a comm hook plugin
// includes (it brings in c10d's headers, which no other kind needs).
class CommHook;

/// Factory signatures. Each gets validated options (see options.hpp).
using ModelFactory =
    std::function<std::unique_ptr<Model>(const Options&, const ModelContext&)>;
using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(const Options&, const OptimizerContext&)>;
using LoaderFactory =
    std::function<std::unique_ptr<Loader>(const Options&, const LoaderContext&)>;
using KernelFactory = std::function<KernelCase(const Options&)>;
using CommHookFactory = std::function<std::unique_ptr<CommHook>(const Options&)>;
/// A model's rules that need the data (classes, sample shape, vocabulary,
/// batch size): throws runner::OptionError(option, ...) for an option that
/// does not fit it, any other exception for data the model cannot take. The
/// host calls it for every trial before any run, without building the model.
using ModelDataCheck = std::function<void(const Options&, const ModelContext&)>;

/// The narrow interface a library registers its plugins through. Names are
/// unique per kind across all loaded libraries; a duplicate is an error.
class Registrar {
 public:
  virtual ~Registrar() = default;
  /// Registers a model plugin; `data_check` (may be empty) runs before any run.
  virtual void add_model(std::string name, std::string help, OptionSchema options,
                         ModelFactory factory, ModelDataCheck data_check) = 0;
  /// Registers a model plugin without a data check.
  void add_model(std::string name, std::string help, OptionSchema options,
                 ModelFactory factory) {
    add_model(std::move(name), std::move(help), std::move(options), std::move(factory), {});
  }
  /// Registers an optimizer plugin.
  virtual void add_optimizer(std::string name, std::string help, OptionSchema options,
                             OptimizerFactory factory) = 0;
  /// Registers a data loader plugin.
  virtual void add_loader(std::string name, std::string help, OptionSchema options,
                          LoaderFactory factory) = 0;
  /// Registers a kernel plugin: one custom op's benchmark (kernel.hpp).
  virtual void add_kernel(std::string name, std::string help, OptionSchema options,
                          KernelFactory factory) = 0;
  /// Registers a gradient communication hook.
  virtual void add_comm_hook(std::string name, std::string help, OptionSchema options,
                             CommHookFactory factory) = 0;

  /// Registers a model whose factory takes `const Opts&`, filled through `options`.
  template <typename Opts, typename Factory>
  void add_model(std::string name, std::string help, OptionBinder<Opts> options,
                 Factory factory) {
    OptionSchema schema = options.schema();
    add_model(std::move(name), std::move(help), std::move(schema),
              ModelFactory(typed<Model, Opts>(std::move(options), std::move(factory))), {});
  }
  /// Registers a model with a data check `void(const Opts&, const ModelContext&)`
  /// (see ModelDataCheck); the factory should call it too, so a rule lives once.
  template <typename Opts, typename Factory, typename DataCheck>
  void add_model(std::string name, std::string help, OptionBinder<Opts> options,
                 Factory factory, DataCheck data_check) {
    OptionSchema schema = options.schema();
    ModelDataCheck check = [binder = options, data_check = std::move(data_check)](
                               const Options& o, const ModelContext& context) {
      data_check(binder.read(o), context);
    };
    add_model(std::move(name), std::move(help), std::move(schema),
              ModelFactory(typed<Model, Opts>(std::move(options), std::move(factory))),
              std::move(check));
  }
  /// Registers an optimizer whose factory takes `const Opts&`.
  template <typename Opts, typename Factory>
  void add_optimizer(std::string name, std::string help, OptionBinder<Opts> options,
                     Factory factory) {
    OptionSchema schema = options.schema();
    add_optimizer(std::move(name), std::move(help), std::move(schema),
                  OptimizerFactory(typed<Optimizer, Opts>(std::move(options), std::move(factory))));
  }
  /// Registers a data loader whose factory takes `const Opts&`.
  template <typename Opts, typename Factory>
  void add_loader(std::string name, std::string help, OptionBinder<Opts> options,
                  Factory factory) {
    OptionSchema schema = options.schema();
    add_loader(std::move(name), std::move(help), std::move(schema),
               LoaderFactory(typed<Loader, Opts>(std::move(options), std::move(factory))));
  }
  /// Registers a kernel whose factory takes `const Opts&` and returns its KernelCase.
  template <typename Opts, typename Factory>
  void add_kernel(std::string name, std::string help, OptionBinder<Opts> options,
                  Factory factory) {
    OptionSchema schema = options.schema();
    add_kernel(std::move(name), std::move(help), std::move(schema),
               KernelFactory([binder = std::move(options), factory = std::move(factory)](
                                 const Options& o) { return factory(binder.read(o)); }));
  }
  /// Registers a comm hook whose factory takes `const Opts&`.
  template <typename Opts, typename Factory>
  void add_comm_hook(std::string name, std::string help, OptionBinder<Opts> options,
                     Factory factory) {
    OptionSchema schema = options.schema();
    add_comm_hook(std::move(name), std::move(help), std::move(schema),
                  CommHookFactory(typed<CommHook, Opts>(std::move(options), std::move(factory))));
  }

 private:
  // A factory of the untyped Options that reads them into an Opts first.
  template <typename Kind, typename Opts, typename Factory>
  static auto typed(OptionBinder<Opts> binder, Factory factory) {
    return [binder = std::move(binder), factory = std::move(factory)](
               const Options& options, const auto&... context) -> std::unique_ptr<Kind> {
      return factory(binder.read(options), context...);
    };
  }
};

/// Signature of the registration function passed to RUNNER_PLUGIN.
using RegisterFunction = void (*)(Registrar&);

}  // namespace runner

/// Declares the library's one entry point. `register_fn` is a
/// `void(runner::Registrar&)` function. Writes the ABI record into the
/// `.runner_plugin_abi` section and exports `runner_plugin_register` through
/// Boost.DLL; the host calls it only after the record has matched.
#define RUNNER_PLUGIN(register_fn)                                                   \
  namespace runner_plugin_entry {                                                   \
  RUNNER_ABI_RECORD_SECTION const ::runner::PluginAbiRecord abi_record =            \
      RUNNER_ABI_RECORD_VALUE;                                                      \
  inline void runner_plugin_register_fn(::runner::Registrar& r) {                    \
    register_fn(r);                                                                 \
  }                                                                                 \
  }                                                                                 \
  BOOST_DLL_ALIAS(runner_plugin_entry::runner_plugin_register_fn, runner_plugin_register)
