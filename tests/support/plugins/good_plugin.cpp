// Test plugin: a well-formed library registering a tiny model, a loader, an
// optimizer and comm hooks that misbehave on purpose. The model can be told
// to fail or diverge at a given step, so the engine's failure paths are
// exercised through a real shared library.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <runner/comm_hook.hpp>
#include <runner/sdk.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>

namespace {

class TinyLinear final : public runner::Model {
 public:
  TinyLinear(const runner::Options& o, const runner::ModelContext& ctx)
      : linear_(ctx.input_shape.empty() ? 4 : ctx.input_shape[0],
                ctx.num_classes > 0 ? ctx.num_classes : 2),
        throw_at_(o.integer("throw_at_step")),
        nan_at_(o.integer("nan_at_step")),
        crash_at_(o.integer("crash_at_step")),
        hang_at_(o.integer("hang_at_step")),
        kill_at_(o.integer("kill_at_step")),
        delay_(std::chrono::duration<double, std::micro>(o.number("delay_us"))) {
    // In a data-parallel run, the failures above happen on fail_rank only.
    const std::int64_t fail_rank = o.integer("fail_rank");
    if (fail_rank >= 0 && fail_rank != ctx.rank)
      throw_at_ = nan_at_ = crash_at_ = hang_at_ = kill_at_ = -2;
    // Hangs before the run's loop starts, where no stop request is ever looked at.
    if (o.boolean("hang_in_factory"))
      for (;;) ::pause();
  }

  torch::nn::Module& module() override { return *linear_; }

  torch::Tensor forward(const runner::Batch& batch) override {
    if (calls_ == crash_at_) std::raise(SIGSEGV);
    if (calls_ == kill_at_) std::raise(SIGKILL);  // as kill -9, or a lost machine
    if (calls_ == hang_at_) {
      // A deliberate hang: blocks until the process is killed (SIGINT only
      // sets the stop flag, which a hung plugin never looks at).
      for (;;) ::pause();
    }
    if (calls_++ == throw_at_) throw std::runtime_error("forward failed on purpose");
    if (delay_.count() > 0) {
      // A known, injected cost (busy-waiting: a sleep would add the
      // scheduler's wake-up latency, which is neither known nor stable).
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(delay_);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    return linear_->forward(batch.inputs);
  }

  torch::Tensor loss(const torch::Tensor& output, const runner::Batch& batch) override {
    torch::Tensor l = torch::nn::functional::cross_entropy(output, batch.targets);
    if (calls_ - 1 == nan_at_) l = l * std::numeric_limits<float>::quiet_NaN();
    return l;
  }

  runner::Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    return {torch::randn({batch_size, linear_->options.in_features()},
                         torch::TensorOptions().device(device)),
            {}, batch_size};
  }

 private:
  torch::nn::Linear linear_;
  std::int64_t throw_at_;
  std::int64_t nan_at_;
  std::int64_t crash_at_;
  std::int64_t hang_at_;
  std::int64_t kill_at_;
  std::chrono::duration<double, std::micro> delay_;
  std::int64_t calls_ = 0;
};

class TinyData final : public runner::Loader {
 public:
  explicit TinyData(const runner::Options& o) : size_(o.integer("size")) {}
  runner::DataSpec spec() const override { return {{4}, 2}; }
  std::int64_t size() const override { return size_; }
  runner::Example get(std::int64_t index) override {
    const float sign = index % 2 == 0 ? 1.0f : -1.0f;
    return {torch::full({4}, sign * static_cast<float>(index % 7 + 1)),
            torch::tensor(index % 2 == 0 ? 1 : 0, torch::kLong)};
  }

 private:
  std::int64_t size_;
};

// Data for the pipeline's tests: sample i is recognisable from its values
// (float [4], or uint8 [3, 4, 4] images), its target is i % classes. It can
// be slow (sleep_ms per batch: the time a disk or a decoder would take),
// have unreadable samples (bad: runner::SampleError), fail outright
// (throw_at), or be streaming (the same samples, in order, per epoch).
class PatternData final : public runner::Loader {
 public:
  explicit PatternData(const runner::Options& o)
      : size_(o.integer("size")),
        classes_(o.integer("classes")),
        image_(o.boolean("image")),
        stream_(o.boolean("stream")),
        sleep_(std::chrono::milliseconds(o.integer("sleep_ms"))),
        bad_(o.integers("bad")),
        throw_at_(o.integer("throw_at")) {}
  runner::DataSpec spec() const override {
    return {image_ ? std::vector<std::int64_t>{3, 4, 4} : std::vector<std::int64_t>{4}, classes_};
  }
  std::int64_t size() const override { return size_; }
  runner::Example get(std::int64_t i) override {
    if (std::find(bad_.begin(), bad_.end(), i) != bad_.end())
      throw runner::SampleError("sample " + std::to_string(i) + " is corrupt");
    if (i == throw_at_)
      throw std::runtime_error("reading sample " + std::to_string(i) + " failed on purpose");
    torch::Tensor input =
        image_ ? (torch::arange(48, torch::kLong).mul_(7).add_(i) % 256).to(torch::kUInt8).view({3, 4, 4})
               : torch::full({4}, static_cast<float>(i)) + torch::arange(4, torch::kFloat32);
    return {input, torch::tensor(i % classes_, torch::kLong)};
  }
  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    if (sleep_.count() > 0) std::this_thread::sleep_for(sleep_);
    return runner::Loader::get_batch(indices);
  }
  bool streaming() const override { return stream_; }
  std::unique_ptr<runner::SampleStream> open(std::int64_t) override {
    return std::make_unique<Stream>(*this);
  }

 private:
  class Stream final : public runner::SampleStream {
   public:
    explicit Stream(PatternData& data) : data_(data) {}
    std::optional<runner::Example> next() override {
      if (next_ == data_.size_) return std::nullopt;
      return data_.get(next_++);
    }

   private:
    PatternData& data_;
    std::int64_t next_ = 0;
  };

  std::int64_t size_, classes_;
  bool image_, stream_;
  std::chrono::milliseconds sleep_;
  std::vector<std::int64_t> bad_;
  std::int64_t throw_at_;
};

// A future already completed with `tensor`.
c10::intrusive_ptr<c10::ivalue::Future> completed(const torch::Tensor& tensor) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  future->markCompleted(c10::IValue(tensor));
  return future;
}

// A broken comm hook: returns half of the bucket.
class TruncatingHook final : public runner::CommHook {
 public:
  runner::CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>&) override {
    return {completed(bucket.getBuffer().narrow(0, 0, bucket.getBuffer().numel() / 2)), 0};
  }
};

// An optimizer that steps copies of the model's parameters, not the
// parameters themselves: what amp_fp16 must refuse, since its scaler unscales
// the gradients of the parameters the optimizer holds.
class CopyingSgd final : public runner::Optimizer {
 public:
  explicit CopyingSgd(const runner::OptimizerContext& ctx)
      : sgd_(copies(ctx.parameters), torch::optim::SGDOptions(0.1)) {}
  torch::optim::Optimizer& get() override { return sgd_; }

 private:
  static std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& parameters) {
    std::vector<torch::Tensor> out;
    for (const auto& p : parameters) out.push_back(p.detach().clone().requires_grad_(true));
    return out;
  }
  torch::optim::SGD sgd_;
};

// Counts its own calls and reports the count as the bytes it sent, so a
// test reads from comm_bytes_per_step how often the engine reduced; returns
// the bucket as it is.
class CallCountingHook final : public runner::CommHook {
 public:
  runner::CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>&) override {
    return {completed(bucket.getBuffer()), ++calls_};
  }

 private:
  std::int64_t calls_ = 0;
};

// Writes to a socket whose peer has closed, as Gloo does when another rank
// has died, then returns the bucket as it is. The write must fail with EPIPE:
// a process that does not ignore SIGPIPE is killed by it instead.
class ClosedPeerHook final : public runner::CommHook {
 public:
  runner::CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>&) override {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
      throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    ::close(fds[1]);
    const char byte = 0;
    const ssize_t written = ::write(fds[0], &byte, 1);
    const int error = errno;
    ::close(fds[0]);
    if (written != -1 || error != EPIPE)
      throw std::runtime_error("a write to a closed peer did not fail with EPIPE");
    return {completed(bucket.getBuffer()), 0};
  }
};

void register_plugins(runner::Registrar& r) {
  runner::OptionSchema model_options;
  model_options.integer("throw_at_step", -1, "forward throws at this call (-1: never)");
  model_options.integer("nan_at_step", -1, "loss becomes NaN at this call (-1: never)");
  model_options.integer("crash_at_step", -1, "raise SIGSEGV at this call (-1: never)");
  model_options.integer("hang_at_step", -1, "block forever at this call (-1: never)");
  model_options.integer("kill_at_step", -1, "raise SIGKILL at this call (-1: never)");
  model_options.boolean("hang_in_factory", false, "block forever while being built");
  model_options.integer("fail_rank", -1,
                        "the *_at_step failures happen on this rank only (-1: every rank)");
  model_options.number("delay_us", 0.0, "extra time spent in every forward, microseconds")
      .range(0.0, 1e7);
  r.add_model("tiny_linear", "one linear layer (test plugin)", std::move(model_options),
              [](const runner::Options& o, const runner::ModelContext& ctx) {
                return std::make_unique<TinyLinear>(o, ctx);
              });
  // impl = "fused" is refused as a fused impl on a device without its
  // kernel is (runner::OptionError naming the option), for the host to
  // report at the option's position in the experiment file.
  runner::OptionSchema copying_options;
  copying_options.string("impl", "loop", "loop, or fused (always refused)").one_of({"loop", "fused"});
  r.add_optimizer("copying_sgd", "SGD over copies of the parameters (test plugin)",
                  std::move(copying_options),
                  [](const runner::Options& o, const runner::OptimizerContext& ctx) {
                    if (o.string("impl") == "fused")
                      throw runner::OptionError("impl", "impl = \"fused\" has no kernel for "
                                                        "device '" + ctx.device.str() + "'");
                    return std::make_unique<CopyingSgd>(ctx);
                  });
  r.add_comm_hook("call_counting", "reports its call count as its bytes (test plugin)",
                  runner::OptionSchema{},
                  [](const runner::Options&) { return std::make_unique<CallCountingHook>(); });
  r.add_comm_hook("closed_peer", "writes to a closed socket, as Gloo after a rank died (test plugin)",
                  runner::OptionSchema{},
                  [](const runner::Options&) { return std::make_unique<ClosedPeerHook>(); });
  r.add_comm_hook("truncating", "returns half of each bucket (test plugin)", runner::OptionSchema{},
                  [](const runner::Options&) { return std::make_unique<TruncatingHook>(); });
  runner::OptionSchema pattern_options;
  pattern_options.integer("size", 64, "samples").range(1, std::nullopt);
  pattern_options.integer("classes", 2, "targets are the sample index modulo this").range(1, std::nullopt);
  pattern_options.boolean("image", false, "uint8 [3, 4, 4] samples instead of float [4]");
  pattern_options.boolean("stream", false, "a streaming data set");
  pattern_options.integer("sleep_ms", 0, "time every batch takes").range(0, 10000);
  pattern_options.integers("bad", {}, "samples that cannot be read");
  pattern_options.integer("throw_at", -1, "reading this sample throws (-1: none)");
  r.add_loader("pattern", "recognisable samples, slow or failing on request (test plugin)",
               std::move(pattern_options),
               [](const runner::Options& o, const runner::LoaderContext&) {
                 return std::make_unique<PatternData>(o);
               });
  runner::OptionSchema data_options;
  data_options.integer("size", 64, "samples").range(1, std::nullopt);
  r.add_loader("tiny_data", "separable 4-feature data (test plugin)", std::move(data_options),
               [](const runner::Options& o, const runner::LoaderContext&) {
                 return std::make_unique<TinyData>(o);
               });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
