// The plugin host: finds plugin libraries, checks their ABI metadata, lets
// them register through a narrow Registrar, and builds plugin instances.
// This header does not include LibTorch (the CLI includes it).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/experiment/catalog.hpp"

namespace runner {

class Model;
class Optimizer;
class Loader;
class CommHook;
struct KernelCase;
struct ModelContext;
struct OptimizerContext;
struct LoaderContext;

/// What rethrow_plugin_error throws for a runner::OptionError: the plugin
/// refused the value of one of its options. option() names it, so that a
/// caller holding the experiment can point at its file:line:col; detail() is
/// the plugin's own message.
class PluginOptionError : public Error {
 public:
  PluginOptionError(const std::string& message, PluginKind kind, std::string option,
                    std::string detail)
      : Error(message, {}, ErrorKind::input),
        kind_(kind),
        option_(std::move(option)),
        detail_(std::move(detail)) {}
  [[nodiscard]] PluginKind plugin_kind() const { return kind_; }
  [[nodiscard]] const std::string& option() const { return option_; }
  [[nodiscard]] const std::string& detail() const { return detail_; }

 private:
  PluginKind kind_;
  std::string option_;
  std::string detail_;
};

/// What rethrow_plugin_error throws for a runner::SampleError: one sample of
/// a loader cannot be read. The data pipeline skips it under
/// data.on_error = "skip"; otherwise it fails the run like any Error.
class PluginSampleError : public Error {
 public:
  explicit PluginSampleError(const std::string& message) : Error(message, {}, ErrorKind::run) {}
};

/// What rethrow_plugin_error throws for a runner::DataError: the data a
/// loader was pointed at is unusable (input: exit 2 before the runs). The
/// engine adds the position of the experiment's [data] plugin.
class PluginDataError : public Error {
 public:
  using Error::Error;
};

/// Rethrows the exception in flight (call it inside a catch block) as
/// runner::Error (run) naming the plugin and its library:
/// "model plugin 'NAME' (LIBRARY) failed in forward: MESSAGE".
[[noreturn]] void rethrow_plugin_error(const PluginDescriptor& plugin, const char* what);

/// Runs `call` (plugin code), reporting anything it throws with
/// rethrow_plugin_error. Costs nothing when nothing is thrown.
template <typename Call>
decltype(auto) call_plugin(const PluginDescriptor& plugin, const char* what, Call&& call) {
  try {
    return std::forward<Call>(call)();
  } catch (...) {
    rethrow_plugin_error(plugin, what);
  }
}

/// A shared library the host has loaded.
struct LoadedLibrary {
  std::filesystem::path path;    ///< canonical path
  std::string sha256;            ///< of the file
  std::string plugin_version;    ///< the library's own version string
};

/// The ABI facts of this host, which every plugin library must match.
struct HostAbi {
  unsigned abi_version;
  std::string runner_version;
  std::string torch_version;
  std::string compiler;
  int cxx11_abi;
  int cuda;
};

/// This host's ABI facts.
[[nodiscard]] HostAbi host_abi();

/// File names the host treats as plugin libraries when scanning a folder.
[[nodiscard]] bool is_plugin_file_name(const std::string& file_name);

/// Folders searched by default: the built-in plugin folder next to the
/// executable (<exe>/../lib/runner/plugins), then RUNNER_PLUGIN_PATH entries.
[[nodiscard]] std::vector<std::filesystem::path> default_plugin_paths();

class PluginHost final : public PluginCatalog {
 public:
  PluginHost();
  ~PluginHost() override;
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  /// Loads `path`: a plugin library file, or a folder whose runner_plugin_*.so
  /// files are loaded in name order. Loading the same file twice is a no-op.
  /// A library's ABI record is read from its file and checked before the
  /// library is loaded: a file that is not a runner plugin of this ABI never
  /// runs. Throws runner::Error (input) for a missing path, a file that is not
  /// a runner plugin, a mismatched or malformed ABI record, a library that
  /// cannot be loaded, or a failed registration (a duplicate name, an
  /// exception); a failed library registers nothing.
  void load(const std::filesystem::path& path);

  /// Loads libraries (and scans folders) that other users could have written
  /// (world-writable, or owned by someone else), which load() refuses by
  /// default. Also set by RUNNER_ALLOW_UNSAFE_PLUGINS=1.
  void allow_unsafe_paths(bool allow);

  [[nodiscard]] const PluginDescriptor* find(PluginKind kind,
                                             const std::string& name) const override;
  [[nodiscard]] std::vector<std::string> names(PluginKind kind) const override;
  /// Every registered plugin, ordered by kind then name.
  [[nodiscard]] std::vector<const PluginDescriptor*> all() const;
  /// Libraries loaded so far, in load order.
  [[nodiscard]] const std::vector<LoadedLibrary>& libraries() const;
  /// The library that registered a plugin.
  [[nodiscard]] const LoadedLibrary& library_of(PluginKind kind, const std::string& name) const;

  // Instances. An exception from the factory, or later from any method of
  // the instance (forward, get_batch, reduce, ...), is re-thrown as
  // runner::Error (run kind) naming the plugin and its library.
  [[nodiscard]] std::unique_ptr<Model> make_model(const std::string& name, const Options& options,
                                                  const ModelContext& context) const;
  /// Runs model `name`'s data check (Registrar::add_model), if it has one,
  /// without building the model: a runner::OptionError from it is thrown as
  /// PluginOptionError, any other exception as PluginDataError (input).
  void check_model_data(const std::string& name, const Options& options,
                        const ModelContext& context) const;
  [[nodiscard]] std::unique_ptr<Optimizer> make_optimizer(const std::string& name,
                                                          const Options& options,
                                                          const OptimizerContext& context) const;
  [[nodiscard]] std::unique_ptr<Loader> make_loader(const std::string& name, const Options& options,
                                                    const LoaderContext& context) const;
  [[nodiscard]] std::unique_ptr<CommHook> make_comm_hook(const std::string& name,
                                                         const Options& options) const;
  /// A kernel plugin's case, every function of it guarded like an instance's
  /// methods (a failure names the plugin, its library and the function).
  [[nodiscard]] KernelCase make_kernel(const std::string& name, const Options& options) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runner
