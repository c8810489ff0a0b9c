// The training setup of a run: precision, memory format, schedule, clipping (training_setup.hpp).
#include "training_setup.hpp"

#include <c10/core/MemoryFormat.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <set>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/training/clip.hpp"

namespace runner {
namespace {

training::Precision precision_of(const Experiment& experiment) {
  const auto precision = training::parse_precision(experiment.precision());
  if (!precision)  // the experiment layer admits only the known names
    throw Error("unknown precision '" + experiment.precision() + "'", {}, ErrorKind::run);
  return *precision;
}

training::ScheduleSpec schedule_spec(const Experiment& experiment) {
  const ScheduleSettings& s = experiment.schedule;
  training::ScheduleSpec spec;
  const auto kind = training::parse_schedule_kind(s.type);
  const auto anneal = training::parse_anneal(s.anneal);
  if (!kind || !anneal)  // the experiment layer admits only the known names
    throw Error("unknown schedule '" + s.type + "' / anneal '" + s.anneal + "'", {},
                ErrorKind::run);
  spec.kind = *kind;
  spec.total_steps = experiment.total_train_steps();
  spec.warmup_steps = s.warmup_steps;
  spec.warmup_start_factor = s.warmup_start_factor;
  if (spec.kind == training::ScheduleKind::step) spec.step_size = s.step_size;
  spec.gamma = s.gamma;
  spec.min_lr = s.min_lr;
  spec.pct_start = s.pct_start;
  spec.anneal = *anneal;
  spec.div_factor = s.div_factor;
  spec.final_div_factor = s.final_div_factor;
  spec.three_phase = s.three_phase;
  spec.cycle_momentum = s.cycle_momentum;
  spec.base_momentum = s.base_momentum;
  spec.max_momentum = s.max_momentum;
  return spec;
}

}  // namespace

TrainingSetup::TrainingSetup(const Experiment& experiment, torch::Device device)
    : experiment_(experiment), device_(device), precision_(precision_of(experiment)) {
  if (experiment.kind != RunKind::train || !experiment.schedule.enabled) return;
  const training::ScheduleSpec spec = schedule_spec(experiment);
  if (const auto problem = training::schedule_error(spec))
    throw Error(experiment.where_of("schedule.type"), *problem);
  schedule_.emplace(spec);
}

void TrainingSetup::check_input_shape(const std::vector<std::int64_t>& sample_shape) const {
  if (!experiment_.model_settings.channels_last || sample_shape.size() == 3) return;
  throw Error(experiment_.where_of("model.channels_last"),
              "model.channels_last needs image samples [channels, height, width]; the loader's "
              "samples have shape " + shape_text(sample_shape),
              "channels-last is a memory format of 4-D (batch, channel, height, width) "
              "tensors; remove channels_last for this model");
}

void TrainingSetup::prepare_model(torch::nn::Module& module) const {
  const c10::ScalarType dtype = training::storage_dtype(precision_);
  if (dtype != c10::ScalarType::Float) module.to(dtype);
  if (!experiment_.model_settings.channels_last) return;
  // What module.to(memory_format=torch.channels_last) does: every 4-D
  // parameter and buffer is laid out NHWC; the others stay as they are.
  torch::NoGradGuard no_grad;
  auto convert = [](torch::Tensor& t) {
    if (t.defined() && t.dim() == 4) t.set_data(t.contiguous(c10::MemoryFormat::ChannelsLast));
  };
  for (auto& parameter : module.parameters()) convert(parameter);
  for (auto& buffer : module.buffers()) convert(buffer);
}

void TrainingSetup::prepare_batch(Batch& batch) const {
  if (!batch.inputs.defined()) return;
  const c10::ScalarType dtype = training::storage_dtype(precision_);
  if (dtype != c10::ScalarType::Float && batch.inputs.is_floating_point())
    batch.inputs = batch.inputs.to(dtype);
  if (experiment_.model_settings.channels_last && batch.inputs.dim() == 4)
    batch.inputs = batch.inputs.contiguous(c10::MemoryFormat::ChannelsLast);
}

std::optional<training::AutocastGuard> TrainingSetup::autocast() const {
  const auto dtype = training::autocast_dtype(precision_);
  if (!dtype) return std::nullopt;
  return std::optional<training::AutocastGuard>(std::in_place, device_.type(), *dtype);
}

void TrainingSetup::attach(Optimizer& optimizer, const std::vector<torch::Tensor>& parameters) {
  optimizer_ = &optimizer;
  parameters_ = parameters;
  torch::optim::Optimizer& inner = optimizer.get();
  base_lrs_.clear();
  for (auto& group : inner.param_groups()) {
    base_lrs_.push_back(group.options().get_lr());
    if (schedule_)
      if (const auto problem = training::schedule_error(schedule_->spec(), base_lrs_.back()))
        throw Error(experiment_.where_of("schedule.min_lr"), *problem);
  }
  if (schedule_ && experiment_.schedule.type == "one_cycle" && experiment_.schedule.cycle_momentum &&
      !optimizer.set_momentum(*schedule_->momentum_at(0)))
    throw Error(experiment_.where_of("schedule.type"),
                "schedule type \"one_cycle\" cycles the momentum, but optimizer '" +
                    experiment_.optimizer->plugin + "' has none",
                "set cycle_momentum = false in [schedule], or use an optimizer with momentum "
                "(sgd, adam, adamw, rmsprop, lion)");
  if (!training::needs_loss_scaling(precision_)) return;
  // The scaler unscales what the optimizer steps: every parameter it was
  // given must be in its groups, or a scaled gradient would reach step().
  std::set<const void*> held;
  for (auto& group : inner.param_groups())
    for (const auto& p : group.params()) held.insert(p.unsafeGetTensorImpl());
  for (const auto& p : parameters)
    if (held.count(p.unsafeGetTensorImpl()) == 0)
      throw Error(experiment_.where_of("train.precision"),
                  "precision \"amp_fp16\" unscales the gradients of the optimizer's parameter "
                  "groups, but optimizer '" + experiment_.optimizer->plugin +
                      "' does not hold the model's parameters in its groups",
                  "use precision = \"amp_bf16\" (no loss scaling), or an optimizer that keeps "
                  "the parameters it is given in its param_groups()");
  scaler_ = std::make_unique<training::GradScaler>();
}

torch::Tensor TrainingSetup::loss_for_backward(const torch::Tensor& loss) const {
  return scaler_ ? scaler_->scale(loss) : loss;
}

bool TrainingSetup::before_step(std::int64_t step) {
  bool apply = true;
  skipped_ = -1;
  if (scaler_) {
    scale_ = scaler_->current_scale();
    scaler_->unscale(parameters_);
    apply = !scaler_->found_inf();  // a read of the device: the step depends on it
    skipped_ = apply ? 0 : 1;
  }
  if (experiment_.train.clip_grad_norm > 0)
    grad_norm_ = training::clip_grad_norm(parameters_, experiment_.train.clip_grad_norm);
  torch::optim::Optimizer& inner = optimizer_->get();
  if (schedule_) {
    auto& groups = inner.param_groups();
    for (std::size_t g = 0; g < groups.size() && g < base_lrs_.size(); ++g)
      groups[g].options().set_lr(schedule_->lr_at(step, base_lrs_[g]));
    if (const auto momentum = schedule_->momentum_at(step); momentum && experiment_.schedule.cycle_momentum)
      optimizer_->set_momentum(*momentum);
  }
  lr_ = inner.param_groups().empty() ? std::nan("") : inner.param_groups().front().options().get_lr();
  return apply;
}

void TrainingSetup::after_step() {
  if (scaler_) scaler_->update();
}

void TrainingSetup::record(store::Sample& sample) const {
  sample.lr = lr_;
  if (grad_norm_.defined()) sample.grad_norm = grad_norm_.item<double>();
  sample.loss_scale = scale_;
  sample.skipped = skipped_;
}

}  // namespace runner
