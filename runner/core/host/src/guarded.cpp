// One forwarding call and an exception handler per method: no allocation,
// nothing on the path when no exception is thrown.
#include "guarded.hpp"

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "runner/common/error.hpp"

namespace runner {

void rethrow_plugin_error(const PluginDescriptor& plugin, const char* what) {
  std::string message;
  try {
    throw;
  } catch (const OptionError& e) {
    throw PluginOptionError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name +
                                "' (" + plugin.library + ") refused option '" + e.option() +
                                "': " + e.what(),
                            plugin.kind, e.option(), e.what());
  } catch (const SampleError& e) {
    throw PluginSampleError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name +
                            "': " + e.what());
  } catch (const DataError& e) {
    // The data's fault, not the plugin's: exit 2 when found before the runs.
    throw PluginDataError(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "': " +
                              e.what(),
                          "check the data files the [data] section names", ErrorKind::input);
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();  // TORCH_CHECK's text, not LibTorch's C++ backtrace
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "an exception that is not a std::exception";
  }
  throw Error(std::string(to_string(plugin.kind)) + " plugin '" + plugin.name + "' (" +
                  plugin.library + ") failed" + (what != nullptr ? std::string(" in ") + what : "") +
                  ": " + message,
              {}, ErrorKind::run);
}

namespace host::detail {
namespace {

class GuardedModel final : public Model {
 public:
  GuardedModel(std::unique_ptr<Model> inner, const PluginDescriptor& plugin)
      : inner_(std::move(inner)), plugin_(plugin) {}
  torch::nn::Module& module() override {
    return call_plugin(plugin_, "module",
                       [&]() -> torch::nn::Module& { return inner_->module(); });
  }
  torch::Tensor forward(const Batch& batch) override {
    return call_plugin(plugin_, "forward", [&] { return inner_->forward(batch); });
  }
  torch::Tensor loss(const torch::Tensor& output, const Batch& batch) override {
    return call_plugin(plugin_, "loss", [&] { return inner_->loss(output, batch); });
  }
  Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    return call_plugin(plugin_, "example_batch",
                       [&] { return inner_->example_batch(batch_size, device); });
  }
  std::int64_t parameter_count() override {
    return call_plugin(plugin_, "parameter_count", [&] { return inner_->parameter_count(); });
  }
  std::optional<double> flops_per_sample() override {
    return call_plugin(plugin_, "flops_per_sample", [&] { return inner_->flops_per_sample(); });
  }
  std::optional<double> tokens_per_sample() override {
    return call_plugin(plugin_, "tokens_per_sample", [&] { return inner_->tokens_per_sample(); });
  }
  EvalTally evaluate(const torch::Tensor& output, const Batch& batch) override {
    return call_plugin(plugin_, "evaluate", [&] { return inner_->evaluate(output, batch); });
  }
  std::map<std::string, double> finish_evaluation(
      const std::map<std::string, double>& means) override {
    return call_plugin(plugin_, "finish_evaluation",
                       [&] { return inner_->finish_evaluation(means); });
  }
  std::map<std::string, std::string> tied_parameters() override {
    return call_plugin(plugin_, "tied_parameters", [&] { return inner_->tied_parameters(); });
  }
  std::map<std::string, std::string> provenance() override {
    return call_plugin(plugin_, "provenance", [&] { return inner_->provenance(); });
  }

 private:
  std::unique_ptr<Model> inner_;
  const PluginDescriptor plugin_;  // a copy: an instance may outlive its host
};

class GuardedOptimizer final : public Optimizer {
 public:
  GuardedOptimizer(std::unique_ptr<Optimizer> inner, const PluginDescriptor& plugin)
      : inner_(std::move(inner)), plugin_(plugin) {}
  torch::optim::Optimizer& get() override {
    return call_plugin(plugin_, "get", [&]() -> torch::optim::Optimizer& { return inner_->get(); });
  }
  void on_step_end(std::int64_t step) override {
    call_plugin(plugin_, "on_step_end", [&] { inner_->on_step_end(step); });
  }
  bool set_momentum(double momentum) override {
    return call_plugin(plugin_, "set_momentum", [&] { return inner_->set_momentum(momentum); });
  }

 private:
  std::unique_ptr<Optimizer> inner_;
  const PluginDescriptor plugin_;  // a copy: an instance may outlive its host
};

class GuardedLoader final : public Loader {
 public:
  GuardedLoader(std::unique_ptr<Loader> inner, const PluginDescriptor& plugin)
      : inner_(std::move(inner)), plugin_(plugin) {}
  [[nodiscard]] DataSpec spec() const override {
    return call_plugin(plugin_, "spec", [&] { return inner_->spec(); });
  }
  [[nodiscard]] std::int64_t size() const override {
    return call_plugin(plugin_, "size", [&] { return inner_->size(); });
  }
  Example get(std::int64_t index) override {
    return call_plugin(plugin_, "get", [&] { return inner_->get(index); });
  }
  Batch get_batch(const std::vector<std::int64_t>& indices) override {
    return call_plugin(plugin_, "get_batch", [&] { return inner_->get_batch(indices); });
  }
  [[nodiscard]] std::int64_t skipped() const override {
    return call_plugin(plugin_, "skipped", [&] { return inner_->skipped(); });
  }
  [[nodiscard]] bool streaming() const override {
    return call_plugin(plugin_, "streaming", [&] { return inner_->streaming(); });
  }
  std::unique_ptr<SampleStream> open(std::int64_t epoch) override {
    auto stream = call_plugin(plugin_, "open", [&] { return inner_->open(epoch); });
    if (!stream)
      throw Error("loader plugin '" + plugin_.name + "' (" + plugin_.library +
                      ") failed in open: it returned no stream",
                  {}, ErrorKind::run);
    return std::make_unique<GuardedStream>(std::move(stream), plugin_);
  }

 private:
  class GuardedStream final : public SampleStream {
   public:
    GuardedStream(std::unique_ptr<SampleStream> inner, const PluginDescriptor& plugin)
        : inner_(std::move(inner)), plugin_(plugin) {}
    std::optional<Example> next() override {
      return call_plugin(plugin_, "next", [&] { return inner_->next(); });
    }

   private:
    std::unique_ptr<SampleStream> inner_;
    const PluginDescriptor& plugin_;  // the loader's copy, which outlives its streams
  };

  std::unique_ptr<Loader> inner_;
  const PluginDescriptor plugin_;  // a copy: an instance may outlive its host
};

class GuardedCommHook final : public CommHook {
 public:
  GuardedCommHook(std::unique_ptr<CommHook> inner, const PluginDescriptor& plugin)
      : inner_(std::move(inner)), plugin_(plugin) {}
  CommLaunch run(c10d::GradBucket& bucket,
                 const c10::intrusive_ptr<c10d::ProcessGroup>& group) override {
    return call_plugin(plugin_, "run", [&] { return inner_->run(bucket, group); });
  }

 private:
  std::unique_ptr<CommHook> inner_;
  const PluginDescriptor plugin_;  // a copy: an instance may outlive its host
};

}  // namespace

std::unique_ptr<Model> guard(std::unique_ptr<Model> model, const PluginDescriptor& plugin) {
  return std::make_unique<GuardedModel>(std::move(model), plugin);
}
std::unique_ptr<Optimizer> guard(std::unique_ptr<Optimizer> optimizer,
                                 const PluginDescriptor& plugin) {
  return std::make_unique<GuardedOptimizer>(std::move(optimizer), plugin);
}
std::unique_ptr<Loader> guard(std::unique_ptr<Loader> loader, const PluginDescriptor& plugin) {
  return std::make_unique<GuardedLoader>(std::move(loader), plugin);
}
std::unique_ptr<CommHook> guard(std::unique_ptr<CommHook> hook, const PluginDescriptor& plugin) {
  return std::make_unique<GuardedCommHook>(std::move(hook), plugin);
}

namespace {

// A function of a kernel case that reports what it throws as its plugin's
// failure in `what` (a copy of the descriptor: the case may outlive its host).
template <typename R, typename... Args>
std::function<R(Args...)> guarded(std::function<R(Args...)> inner, const PluginDescriptor& plugin,
                                  const char* what) {
  if (!inner) return inner;
  return [inner = std::move(inner), plugin, what](Args... args) -> R {
    return call_plugin(plugin, what, [&]() -> R { return inner(std::forward<Args>(args)...); });
  };
}

}  // namespace

KernelCase guard(KernelCase kernel, const PluginDescriptor& plugin) {
  kernel.check_shape = guarded(std::move(kernel.check_shape), plugin, "check_shape");
  kernel.make_inputs = guarded(std::move(kernel.make_inputs), plugin, "make_inputs");
  kernel.make_output = guarded(std::move(kernel.make_output), plugin, "make_output");
  kernel.custom = guarded(std::move(kernel.custom), plugin, "custom");
  kernel.native = guarded(std::move(kernel.native), plugin, "native");
  kernel.reference = guarded(std::move(kernel.reference), plugin, "reference");
  kernel.differentiable = guarded(std::move(kernel.differentiable), plugin, "differentiable");
  kernel.bytes_moved = guarded(std::move(kernel.bytes_moved), plugin, "bytes_moved");
  kernel.flops = guarded(std::move(kernel.flops), plugin, "flops");
  return kernel;
}

}  // namespace host::detail
}  // namespace runner
