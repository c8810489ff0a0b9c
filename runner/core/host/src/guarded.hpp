// Plugin instances wrapped so that whatever they throw names the plugin.
#pragma once

#include <memory>

#include "runner/host/host.hpp"
#include "runner/comm_hook.hpp"
#include "runner/sdk.hpp"

namespace runner::host::detail {

/// `model`, reporting exceptions from its methods with rethrow_plugin_error.
[[nodiscard]] std::unique_ptr<Model> guard(std::unique_ptr<Model> model,
                                           const PluginDescriptor& plugin);
/// `optimizer`, likewise (the engine guards the LibTorch optimizer's step itself).
[[nodiscard]] std::unique_ptr<Optimizer> guard(std::unique_ptr<Optimizer> optimizer,
                                               const PluginDescriptor& plugin);
/// `loader`, likewise.
[[nodiscard]] std::unique_ptr<Loader> guard(std::unique_ptr<Loader> loader,
                                            const PluginDescriptor& plugin);
/// `hook`, likewise.
[[nodiscard]] std::unique_ptr<CommHook> guard(std::unique_ptr<CommHook> hook,
                                              const PluginDescriptor& plugin);

/// `kernel` with each of its functions guarded likewise (named "custom",
/// "native", "reference", ...); empty functions stay empty.
[[nodiscard]] KernelCase guard(KernelCase kernel, const PluginDescriptor& plugin);

}  // namespace runner::host::detail
