// What the experiment layer needs to know about plugins, without LibTorch:
// the plugin host implements this over its registry.
#pragma once

#include <string>
#include <vector>

#include "runner/options.hpp"

namespace runner {

/// A registered plugin as seen by validation and `runner plugins`.
struct PluginDescriptor {
  PluginKind kind = PluginKind::model;  ///< what it is
  std::string name;                     ///< unique name within its kind
  std::string help;                     ///< one-line description
  OptionSchema schema;                  ///< declared options
  std::string library;                  ///< path of the shared library that registered it
};

/// Look-up of registered plugins by kind and name.
class PluginCatalog {
 public:
  virtual ~PluginCatalog() = default;
  /// The plugin `name` of `kind`, or nullptr.
  [[nodiscard]] virtual const PluginDescriptor* find(PluginKind kind,
                                                     const std::string& name) const = 0;
  /// Names of all plugins of `kind`, sorted.
  [[nodiscard]] virtual std::vector<std::string> names(PluginKind kind) const = 0;
};

}  // namespace runner
