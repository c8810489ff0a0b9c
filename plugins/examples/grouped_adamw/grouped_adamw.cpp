// Example plugin: `grouped_adamw`, LibTorch's AdamW over two parameter groups,
// biases and norms without weight decay, as most training recipes do. It is
// docs/plugins.md's worked example of typed options (a required option, a
// pair of numbers, a bounded list) and of named parameters. Built and tested
// by the suite, not installed: runner's own Adam-family optimizers are the
// built-ins'.
#include <torch/optim/adamw.h>

#include <runner/sdk.hpp>

namespace {

struct GroupedAdamWOptions {
  double lr = 0.0;  // required: the experiment must choose it
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  std::vector<std::string> no_decay{"bias", "norm"};
};

class GroupedAdamW final : public runner::Optimizer {
 public:
  GroupedAdamW(const GroupedAdamWOptions& o, const runner::OptimizerContext& context) {
    const runner::ParameterSplit split =
        runner::split_parameters(context.named_parameters, o.no_decay);
    auto with_decay = [&](double decay) {
      auto options = std::make_unique<torch::optim::AdamWOptions>(o.lr);
      options->betas({o.betas[0], o.betas[1]}).eps(o.eps).weight_decay(decay);
      return options;
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    if (!split.decay.empty()) groups.emplace_back(split.decay, with_decay(o.weight_decay));
    if (!split.no_decay.empty()) groups.emplace_back(split.no_decay, with_decay(0.0));
    optimizer_ = std::make_unique<torch::optim::AdamW>(groups, *with_decay(o.weight_decay));
  }

  torch::optim::Optimizer& get() override { return *optimizer_; }

 private:
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

void register_plugins(runner::Registrar& registrar) {
  using O = GroupedAdamWOptions;
  runner::OptionBinder<O> options;
  options.field("lr", &O::lr, "learning rate").range(0.0, std::nullopt).required();
  options.field("betas", &O::betas, "decay rates of the moment estimates").range(0.0, 0.9999);
  options.field("eps", &O::eps, "added to the denominator").range(0.0, std::nullopt);
  options.field("weight_decay", &O::weight_decay, "decoupled weight decay of the first group")
      .range(0.0, std::nullopt);
  options.field("no_decay", &O::no_decay, "name or module-type patterns kept out of weight decay")
      .items(0, 8);
  registrar.add_optimizer("grouped_adamw", "AdamW; biases and norms without weight decay",
                          options, [](const O& o, const runner::OptimizerContext& context) {
                            return std::make_unique<GroupedAdamW>(o, context);
                          });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
