#include "runner/host/host.hpp"

#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <variant>

#include "abi_record.hpp"
#include "guarded.hpp"
#include "trust.hpp"
#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/comm_hook.hpp"
#include "runner/sdk.hpp"

namespace fs = std::filesystem;

namespace runner {
namespace {

// Libraries are never unloaded: custom ops, vtables and static objects of a
// plugin may outlive any host object, so handles live until the process exits.
std::vector<boost::dll::shared_library>& process_libraries() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}
std::mutex& process_libraries_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

// The text of an exception without LibTorch's C++ backtrace.
std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

using AnyFactory =
    std::variant<ModelFactory, OptimizerFactory, LoaderFactory, KernelFactory, CommHookFactory>;

struct Entry {
  PluginDescriptor descriptor;
  AnyFactory factory;
  ModelDataCheck data_check;  // models only; may be empty
  std::size_t library = 0;
};

}  // namespace

bool is_plugin_file_name(const std::string& file_name) {
  return file_name.rfind("runner_plugin_", 0) == 0 && file_name.size() > 3 &&
         file_name.compare(file_name.size() - 3, 3, ".so") == 0;
}

std::vector<fs::path> default_plugin_paths() {
  std::vector<fs::path> paths;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path builtin = exe.parent_path().parent_path() / "lib" / "runner" / "plugins";
    if (fs::is_directory(builtin, ec)) paths.push_back(builtin);
  }
  if (const char* env = std::getenv("RUNNER_PLUGIN_PATH"); env != nullptr) {
    for (const auto& part : split(env, ':'))
      if (!part.empty()) paths.emplace_back(part);
  }
  return paths;
}

struct PluginHost::Impl {
  bool allow_unsafe = false;
  std::vector<LoadedLibrary> libraries;
  std::map<std::pair<PluginKind, std::string>, Entry> entries;

  void load_file(const fs::path& path);
  const Entry& entry(PluginKind kind, const std::string& name) const;
};

namespace {

// The registrar a library sees during registration: it only adds entries.
class HostRegistrar final : public Registrar {
 public:
  HostRegistrar(std::map<std::pair<PluginKind, std::string>, Entry>& entries,
                const std::vector<LoadedLibrary>& libraries, std::size_t library)
      : entries_(entries), libraries_(libraries), library_(library) {}

  void add_model(std::string name, std::string help, OptionSchema options, ModelFactory factory,
                 ModelDataCheck data_check) override {
    add(PluginKind::model, std::move(name), std::move(help), std::move(options),
        std::move(factory));
    added.back().data_check = std::move(data_check);
  }
  void add_optimizer(std::string name, std::string help, OptionSchema options,
                     OptimizerFactory factory) override {
    add(PluginKind::optimizer, std::move(name), std::move(help), std::move(options),
        std::move(factory));
  }
  void add_loader(std::string name, std::string help, OptionSchema options,
                  LoaderFactory factory) override {
    add(PluginKind::loader, std::move(name), std::move(help), std::move(options),
        std::move(factory));
  }
  void add_kernel(std::string name, std::string help, OptionSchema options,
                  KernelFactory factory) override {
    add(PluginKind::kernel, std::move(name), std::move(help), std::move(options),
        std::move(factory));
  }
  void add_comm_hook(std::string name, std::string help, OptionSchema options,
                     CommHookFactory factory) override {
    add(PluginKind::comm_hook, std::move(name), std::move(help), std::move(options),
        std::move(factory));
  }

  /// Entries added by this library, committed only if registration succeeds.
  std::vector<Entry> added;

 private:
  void add(PluginKind kind, std::string name, std::string help, OptionSchema options,
           AnyFactory factory) {
    const std::string& file = libraries_[library_].path.string();
    if (name.empty())
      throw Error("plugin library '" + file + "' registers a " + to_string(kind) +
                  " plugin with an empty name");
    auto clash = entries_.find({kind, name});
    if (clash != entries_.end())
      throw Error(std::string(to_string(kind)) + " plugin '" + name +
                      "' is registered twice: by '" +
                      libraries_[clash->second.library].path.string() + "' and by '" + file + "'",
                  "remove one of the two libraries from the plugin path");
    for (const auto& e : added)
      if (e.descriptor.kind == kind && e.descriptor.name == name)
        throw Error(std::string(to_string(kind)) + " plugin '" + name +
                    "' is registered twice by '" + file + "'");
    Entry e;
    e.descriptor.kind = kind;
    e.descriptor.name = std::move(name);
    e.descriptor.help = std::move(help);
    e.descriptor.schema = std::move(options);
    e.descriptor.library = file;
    e.factory = std::move(factory);
    e.library = library_;
    added.push_back(std::move(e));
  }

  std::map<std::pair<PluginKind, std::string>, Entry>& entries_;
  const std::vector<LoadedLibrary>& libraries_;
  std::size_t library_;
};

}  // namespace

void PluginHost::Impl::load_file(const fs::path& given) {
  std::error_code ec;
  const fs::path path = fs::canonical(given, ec);
  if (ec) throw Error("plugin library '" + given.string() + "' does not exist");
  for (const auto& lib : libraries)
    if (lib.path == path) return;

  if (!allow_unsafe) host::detail::check_trusted_file(path);
  // Read from the file: nothing of the library runs before this passes.
  const PluginAbiRecord record = host::detail::read_checked_abi_record(path);

  boost::dll::shared_library library;
  try {
    library.load(path, boost::dll::load_mode::rtld_now);
  } catch (const std::exception& e) {
    throw Error("cannot load plugin library '" + path.string() + "': " + e.what(),
                "check that it was built for this machine and that its dependencies resolve (ldd)");
  }
  // Kept even when rejected below: its static initialisers (op registrations)
  // have already run, and unloading would leave them dangling.
  {
    std::lock_guard<std::mutex> lock(process_libraries_mutex());
    process_libraries().push_back(library);
  }
  if (!library.has("runner_plugin_register"))
    throw Error("plugin library '" + path.string() +
                    "' has an ABI record but does not export runner_plugin_register",
                "declare the entry point with RUNNER_PLUGIN(register_fn)");

  LoadedLibrary loaded;
  loaded.path = path;
  loaded.sha256 = sha256_file_hex(path);
  loaded.plugin_version = record.plugin_version;  // NUL-terminated: checked with the record
  libraries.push_back(std::move(loaded));

  HostRegistrar registrar(entries, libraries, libraries.size() - 1);
  try {
    library.get_alias<void(Registrar&)>("runner_plugin_register")(registrar);
  } catch (const Error&) {
    libraries.pop_back();
    throw;
  } catch (const std::exception& e) {
    libraries.pop_back();
    throw Error("plugin library '" + path.string() + "' failed to register: " + message_of(e));
  } catch (...) {
    libraries.pop_back();
    throw Error("plugin library '" + path.string() +
                "' failed to register: an exception that is not a std::exception");
  }
  for (auto& e : registrar.added) {
    auto key = std::make_pair(e.descriptor.kind, e.descriptor.name);
    entries.emplace(std::move(key), std::move(e));
  }
}

const Entry& PluginHost::Impl::entry(PluginKind kind, const std::string& name) const {
  auto it = entries.find({kind, name});
  if (it == entries.end())
    throw Error(std::string("unknown ") + to_string(kind) + " plugin '" + name + "'",
                "run 'runner plugins' to see what is loaded");
  return it->second;
}

PluginHost::PluginHost() : impl_(std::make_unique<Impl>()) {
  if (const char* env = std::getenv("RUNNER_ALLOW_UNSAFE_PLUGINS"); env != nullptr)
    impl_->allow_unsafe = std::string_view(env) == "1";
}

void PluginHost::allow_unsafe_paths(bool allow) { impl_->allow_unsafe = allow; }
PluginHost::~PluginHost() = default;

void PluginHost::load(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!impl_->allow_unsafe) host::detail::check_trusted_folder(fs::canonical(path, ec));
    std::vector<fs::path> files;
    for (const auto& item : fs::directory_iterator(path, ec))
      if (item.is_regular_file() && is_plugin_file_name(item.path().filename().string()))
        files.push_back(item.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) impl_->load_file(file);
    return;
  }
  if (!fs::exists(path, ec))
    throw Error("plugin path '" + path.string() + "' does not exist",
                "pass a plugin library or a folder holding runner_plugin_*.so files");
  impl_->load_file(path);
}

const PluginDescriptor* PluginHost::find(PluginKind kind, const std::string& name) const {
  auto it = impl_->entries.find({kind, name});
  return it == impl_->entries.end() ? nullptr : &it->second.descriptor;
}

std::vector<std::string> PluginHost::names(PluginKind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, e] : impl_->entries)
    if (key.first == kind) out.push_back(key.second);
  return out;  // map order: sorted by name within a kind
}

std::vector<const PluginDescriptor*> PluginHost::all() const {
  std::vector<const PluginDescriptor*> out;
  for (const auto& [key, e] : impl_->entries) out.push_back(&e.descriptor);
  return out;
}

const std::vector<LoadedLibrary>& PluginHost::libraries() const { return impl_->libraries; }

const LoadedLibrary& PluginHost::library_of(PluginKind kind, const std::string& name) const {
  return impl_->libraries[impl_->entry(kind, name).library];
}

namespace {

// Calls a factory, adding the plugin's name and library to anything it
// throws, and guards the instance it makes the same way.
template <typename Factory, typename... Args>
auto make(const Entry& e, Args&&... args) {
  const auto& factory = std::get<Factory>(e.factory);
  auto made = call_plugin(e.descriptor, nullptr,
                          [&] { return factory(std::forward<Args>(args)...); });
  if (!made)
    throw Error(std::string(to_string(e.descriptor.kind)) + " plugin '" + e.descriptor.name +
                    "' (" + e.descriptor.library + ") returned nothing",
                "its factory must return an instance (std::make_unique<...>)", ErrorKind::run);
  return host::detail::guard(std::move(made), e.descriptor);
}

}  // namespace

std::unique_ptr<Model> PluginHost::make_model(const std::string& name, const Options& options,
                                              const ModelContext& context) const {
  return make<ModelFactory>(impl_->entry(PluginKind::model, name), options, context);
}

void PluginHost::check_model_data(const std::string& name, const Options& options,
                                  const ModelContext& context) const {
  const Entry& e = impl_->entry(PluginKind::model, name);
  if (!e.data_check) return;
  try {
    e.data_check(options, context);
  } catch (const OptionError&) {
    rethrow_plugin_error(e.descriptor, nullptr);
  } catch (const std::exception& error) {
    // Not the plugin's failure: this experiment's data does not fit the model.
    throw PluginDataError("model plugin '" + name + "' cannot take this data: " +
                              message_of(error),
                          "change the [data] section or the model's options; " +
                              std::string("run 'runner plugins describe ") + name +
                              "' to see its options",
                          ErrorKind::input);
  } catch (...) {
    rethrow_plugin_error(e.descriptor, "its data check");
  }
}

std::unique_ptr<Optimizer> PluginHost::make_optimizer(const std::string& name,
                                                      const Options& options,
                                                      const OptimizerContext& context) const {
  return make<OptimizerFactory>(impl_->entry(PluginKind::optimizer, name), options,
                                        context);
}

std::unique_ptr<Loader> PluginHost::make_loader(const std::string& name, const Options& options,
                                                const LoaderContext& context) const {
  return make<LoaderFactory>(impl_->entry(PluginKind::loader, name), options, context);
}

KernelCase PluginHost::make_kernel(const std::string& name, const Options& options) const {
  const Entry& e = impl_->entry(PluginKind::kernel, name);
  const auto& factory = std::get<KernelFactory>(e.factory);
  KernelCase made = call_plugin(e.descriptor, nullptr, [&] { return factory(options); });
  return host::detail::guard(std::move(made), e.descriptor);
}

std::unique_ptr<CommHook> PluginHost::make_comm_hook(const std::string& name,
                                                     const Options& options) const {
  return make<CommHookFactory>(impl_->entry(PluginKind::comm_hook, name), options);
}

}  // namespace runner
