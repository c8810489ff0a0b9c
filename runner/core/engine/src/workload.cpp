// Building a run's workload (workload.hpp): each plugin made with its
// errors reported at the experiment's keys, then the model's weights, the
// training setup, the optimizer and a data-parallel rank's gradient synchronisation.
#include "workload.hpp"

#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/process_group.hpp"

namespace runner {

std::unique_ptr<Loader> make_loader_for(const Experiment& exp, const PluginHost& host,
                                        const LoaderContext& context) {
  try {
    return host.make_loader(exp.data->plugin, exp.data->options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, *exp.data);
  } catch (const PluginDataError& e) {
    throw Error(exp.data->where, e.what(), e.hint());
  }
}

std::unique_ptr<Model> make_model_for(const Experiment& exp, const PluginHost& host,
                                      const ModelContext& context) {
  try {
    return host.make_model(exp.model.plugin, exp.model.options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, exp.model);
  } catch (const PluginDataError& e) {
    throw Error(exp.model.where, e.what(), e.hint());
  }
}

std::unique_ptr<Optimizer> make_optimizer_for(const Experiment& exp, const PluginHost& host,
                                              const OptimizerContext& context) {
  try {
    return host.make_optimizer(exp.optimizer->plugin, exp.optimizer->options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, *exp.optimizer);
  }
}

LoaderContext loader_context(const Experiment& exp, std::uint64_t seed, std::int64_t rank,
                             std::int64_t world_size, Split split) {
  LoaderContext context;
  context.seed = seed;
  context.rank = rank;
  context.world_size = world_size;
  context.split = split;
  context.skip_bad_samples = exp.data_settings.on_error == "skip";
  return context;
}

namespace {

// A data-parallel run's process group and gradient synchronisation. Every
// rank starts from rank 0's parameters and buffers, as DDP does.
void build_sync(Workload& w, const Experiment& exp, const PluginHost& host, const RankInfo& rank) {
  try {
    w.group = make_process_group(exp.distributed.backend, *rank.rendezvous, store_of(*rank.link));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The usual cause: a rank that never came (a wrong port, a node that did not start).
    const std::vector<int> missing = rank.link->missing_ranks();
    if (missing.empty()) throw;
    std::vector<std::string> names;
    for (int r : missing) names.push_back(std::to_string(r));
    throw Error("the rendezvous timed out after " +
                    std::to_string(rank.rendezvous->timeout.count() / 1000) + " s: rank" +
                    (names.size() == 1 ? " " : "s ") + join(names, ", ") + " of " +
                    std::to_string(rank.world_size()) + " never joined (" +
                    message_of(e).substr(0, message_of(e).find('\n')) + ")",
                "start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or "
                "raise [distributed] timeout",
                ErrorKind::run);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<torch::Tensor> parameters, buffers, everything;
  for (const auto& item : w.model->module().named_parameters())
    if (item.value().requires_grad()) {
      named.emplace_back(item.key(), item.value());
      parameters.push_back(item.value());
    }
  for (const auto& b : w.model->module().buffers()) buffers.push_back(b);
  everything = parameters;
  everything.insert(everything.end(), buffers.begin(), buffers.end());
  broadcast_from_rank0(everything, w.group);
  w.comm_hook = host.make_comm_hook(exp.comm_hook->plugin, exp.comm_hook->options);
  const DistributedSettings& d = exp.distributed;
  SyncOptions options;
  options.bucket_bytes = static_cast<std::int64_t>(d.bucket_mb * 1024.0 * 1024.0);
  options.first_bucket_bytes = static_cast<std::int64_t>(d.first_bucket_mb * 1024.0 * 1024.0);
  options.find_unused_parameters = d.find_unused_parameters;
  options.gradient_as_bucket_view = d.gradient_as_bucket_view;
  options.static_graph = d.static_graph;
  options.broadcast_buffers = d.broadcast_buffers;
  w.sync = d.reducer == "after_backward"
               ? make_after_backward_sync(parameters, buffers, w.group, *w.comm_hook, options)
               : make_ddp_sync(named, buffers, w.group, *w.comm_hook, options);
}

}  // namespace

void build(Workload& w, const Experiment& exp, const PluginHost& host, std::uint64_t seed,
           torch::Device device, const RankInfo& rank) {
  ModelContext model_context;
  model_context.device = device;
  model_context.seed = seed;
  model_context.rank = rank.rank();
  model_context.world_size = rank.world_size();
  model_context.batch_size = exp.data_settings.batch_size;
  model_context.training = exp.kind == RunKind::train;
  if (exp.data) {
    const auto make_loader = [&] {
      w.loader =
          make_loader_for(exp, host, loader_context(exp, seed, rank.rank(), rank.world_size()));
    };
    if (w.memory)
      w.memory->count_data(make_loader);
    else
      make_loader();
    // The pipeline starts reading now, while the model is built.
    try {
      w.batches = std::make_unique<BatchSource>(w.loader.get(), exp.data_settings, seed, device,
                                                rank.rank(), rank.world_size());
    } catch (const AugmentError& e) {
      rethrow_at_key(e, exp);
    }
    const DataSpec spec = w.batches->pipeline().spec();
    model_context.input_shape = spec.input_shape;
    model_context.num_classes = spec.num_classes;
  }
  w.setup = std::make_unique<TrainingSetup>(exp, device);
  if (w.loader) w.setup->check_input_shape(model_context.input_shape);
  w.model = make_model_for(exp, host, model_context);
  if (!exp.model_settings.init_from.empty())  // on the CPU, before the move
    w.init_file = load_initial_weights(exp, *w.model, w.skipped);
  w.model->module().to(device);
  w.setup->prepare_model(w.model->module());
  w.batch_size = exp.data_settings.batch_size;
  if (!w.loader) {
    Batch example = w.model->example_batch(exp.data_settings.batch_size, device);
    if (example.inputs.defined() && example.inputs.dim() >= 1) {
      const auto sizes = example.inputs.sizes();
      w.setup->check_input_shape(std::vector<std::int64_t>(sizes.begin() + 1, sizes.end()));
    }
    w.setup->prepare_batch(example);
    w.batches = std::make_unique<BatchSource>(std::move(example), device);
  }
  if (exp.kind == RunKind::train) {
    w.accumulate = exp.train.accumulate;
    const OptimizerContext optimizer_context =
        make_optimizer_context(w.model->module(), exp.total_train_steps(), device);
    w.optimizer = make_optimizer_for(exp, host, optimizer_context);
    w.optimizer_plugin = host.find(PluginKind::optimizer, exp.optimizer->plugin);
    w.setup->attach(*w.optimizer, optimizer_context.parameters);
  }
  if (rank.rendezvous != nullptr) build_sync(w, exp, host, rank);
}

}  // namespace runner
