// Probe: DDP's engine, c10d::Reducer, driven from C++ over a Gloo process
// group, with a C++ comm hook (docs/libtorch-probes.md).
//
// Two ranks, forked before any operator runs, meet through a FileStore and
// build the same small MLP (same seed). Buckets come from
// compute_bucket_assignment_by_size over the parameters in reverse order
// (DDP's rule: the last layer's gradients are ready first), with caps small
// enough for several buckets. Each step follows DDP's protocol:
// prepare_for_forward, forward, prepare_for_backward, backward (the Reducer's
// autograd hooks launch each bucket's hook as soon as its gradients are
// ready), optimizer step. The hook is a CppCommHookInterface that divides the
// bucket by the world size and allreduces it, recording when it started.
// Checked on every rank:
//   1. gradients equal the mean of both ranks' local gradients (computed
//      without the Reducer from both ranks' data, which every rank can
//      generate), to 1e-6, at every step of 3;
//   2. overlap: the first bucket's hook started before the gradient of the
//      first layer's weight (the last one backward computes) was produced;
//   3. the hooks saw every parameter exactly once per step, buckets in order.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "probe_common.hpp"

namespace {

constexpr std::string_view kProbe = "c10d_reducer";
constexpr std::chrono::milliseconds kTimeout{20000};
constexpr int kWorld = 2;
constexpr int kSteps = 3;

using Clock = std::chrono::steady_clock;

struct Timeline {
  std::vector<std::pair<std::size_t, Clock::time_point>> hooks;  // bucket index, start
  Clock::time_point first_weight_grad{};
  std::size_t parameters_seen = 0;
};

class TimedAllReduce final
    : public c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>> {
 public:
  TimedAllReduce(c10::intrusive_ptr<c10d::ProcessGroup> group, Timeline* timeline)
      : CppCommHookInterface(std::move(group)), timeline_(timeline) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    timeline_->hooks.emplace_back(bucket.getIndex(), Clock::now());
    timeline_->parameters_seen += bucket.getParameters().size();
    std::vector<at::Tensor> tensors{bucket.getBufferRef().div_(state_->getSize())};
    return state_->allreduce(tensors)->getFuture();
  }

 private:
  Timeline* timeline_;
};

torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(16, 64), torch::nn::ReLU(),
                               torch::nn::Linear(64, 64), torch::nn::ReLU(),
                               torch::nn::Linear(64, 64), torch::nn::ReLU(),
                               torch::nn::Linear(64, 4));
}

// Rank r's batch at `step`: every rank can make every rank's batch.
std::pair<torch::Tensor, torch::Tensor> batch(int rank, int step) {
  torch::manual_seed(1000 + 10 * step + rank);
  return {torch::randn({8, 16}), torch::randn({8, 4})};
}

// The mean over ranks of the local gradients, computed without the Reducer.
std::vector<torch::Tensor> expected_gradients(torch::nn::Sequential& model, int step) {
  std::vector<torch::Tensor> sum;
  for (int r = 0; r < kWorld; ++r) {
    model->zero_grad(true);
    auto [x, y] = batch(r, step);
    torch::mse_loss(model->forward(x), y).backward();
    std::size_t i = 0;
    for (const auto& p : model->parameters()) {
      if (sum.size() <= i) sum.push_back(p.grad().clone());
      else sum[i] += p.grad();
      ++i;
    }
  }
  for (auto& g : sum) g /= kWorld;
  model->zero_grad(true);
  return sum;
}

void run_rank(const std::string& store_path, int rank) {
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, kWorld);
  store->setTimeout(kTimeout);
  auto options = c10d::ProcessGroupGloo::Options::create(kTimeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, kWorld, options);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, kWorld);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);

  torch::nn::Sequential model = make_model();
  std::vector<at::Tensor> params = model->parameters();
  // DDP's bucketing: parameters in reverse order, a small first bucket.
  std::vector<int64_t> reversed;
  for (std::size_t i = params.size(); i-- > 0;) reversed.push_back(static_cast<int64_t>(i));
  const std::vector<size_t> caps{4 * 1024, 16 * 1024};
  auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      params, caps, std::vector<bool>(params.size(), false), reversed);
  probe::expect(buckets.size() >= 3, "expected several buckets, got " + std::to_string(buckets.size()));
  probe::expect(buckets.front().front() == params.size() - 1 || buckets.front().front() == params.size() - 2,
                "the first bucket does not hold the last layer");
  std::vector<int64_t> bucket_caps(limits.begin(), limits.end());
  c10d::Reducer reducer(params, buckets, group, std::vector<bool>(params.size(), false),
                        /*bucket_bytes_cap=*/16 * 1024, /*find_unused_parameters=*/false,
                        /*gradient_as_bucket_view=*/false, /*param_names=*/{},
                        /*first_bucket_bytes_cap=*/4 * 1024,
                        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                        bucket_caps);
  Timeline timeline;
  reducer.register_comm_hook(std::make_unique<TimedAllReduce>(group, &timeline));
  params[0].register_hook([&timeline](const torch::Tensor& g) {
    timeline.first_weight_grad = Clock::now();
    return g;
  });
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.05));
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<torch::Tensor> expected = expected_gradients(model, step);
    timeline = Timeline{};
    reducer.prepare_for_forward();
    auto [x, y] = batch(rank, step);
    const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    reducer.prepare_for_backward({loss});
    loss.backward();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const double error = (params[i].grad() - expected[i]).abs().max().item<double>();
      probe::expect(error < 1e-6, "rank " + std::to_string(rank) + " step " +
                                      std::to_string(step) + ": parameter " + std::to_string(i) +
                                      "'s gradient is " + std::to_string(error) +
                                      " away from the mean over ranks");
    }
    probe::expect(timeline.parameters_seen == params.size(),
                  "the hooks saw " + std::to_string(timeline.parameters_seen) + " parameters, not " +
                      std::to_string(params.size()));
    for (std::size_t i = 0; i < timeline.hooks.size(); ++i)
      probe::expect(timeline.hooks[i].first == i, "buckets were reduced out of order");
    probe::expect(!timeline.hooks.empty() &&
                      timeline.hooks.front().second < timeline.first_weight_grad,
                  "no overlap: the first bucket's hook started after backward computed the first "
                  "layer's gradient");
    sgd.step();
    model->zero_grad(true);
    // DDP rebuilds buckets once, after the first step, in the order gradients came.
    static_cast<void>(reducer.rebuild_buckets());
  }
  probe::say(kProbe, "rank " + std::to_string(rank) + ": " + std::to_string(buckets.size()) +
                         " buckets; gradients are the mean over ranks at every step; the first "
                         "bucket's hook ran before backward reached the first layer");
}

}  // namespace

int main() {
  const std::string store_path = (std::filesystem::temp_directory_path() /
                                  ("runner-reducer-probe-" + std::to_string(::getpid())))
                                     .string();
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(60);  // a hung collective must not hang the probe
      try {
        run_rank(store_path, rank);
      } catch (const std::exception& e) {
        probe::say(kProbe, "FAIL: rank " + std::to_string(rank) + ": " + e.what());
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove(store_path);
  if (!ok) probe::fail(kProbe, "a rank failed (see above)");
  probe::say(kProbe, "OK");
  return 0;
}
