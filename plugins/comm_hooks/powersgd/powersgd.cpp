// Comm hook `powersgd`: PowerSGD gradient compression (Vogels, Karimireddy
// and Jaggi, NeurIPS 2019) as PyTorch's DDP hook
// torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook computes it:
// plain allreduce for the first start_powerSGD_iter steps, then per bucket
// error feedback, one allreduce of the tensors not worth compressing, and
// rank-r power iteration (P = M Q, allreduce P, orthogonalise, Q = M^T P,
// allreduce Q, M ~ P Q^T) for the others. docs/powersgd.md has the
// algorithm, the options and how this code maps to PyTorch's.
//
// Threading. The Python hook chains its stages with Future.then and each
// stage blocks (.wait()) on the next allreduce. In C++ a ProcessGroupGloo
// future completes on one of Gloo's worker threads (two by default) and
// `then` callbacks run inline there: a callback that waits on another
// collective holds a worker while that collective needs one, and two
// buckets in flight can hold both (one thread: the first bucket). So no
// callback here ever waits: each stage starts the next collective and hands
// its future to thenAsync, which completes the chain when it completes.
// Collectives must also be started in the same order on every rank (Gloo
// pairs them by sequence number), but stages run on whichever thread
// completes a future, concurrently with the next bucket's run() on the
// autograd thread. Each bucket's first collective therefore waits for a
// gate the previous bucket opens once it has started its last one: every
// rank starts, per step, bucket 0's collectives, then bucket 1's, ...
// The stages hold a plain pointer to the process group, which the caller
// keeps until the bucket's future has completed: a stage holding the last
// reference would destroy the group on one of Gloo's worker threads, which
// then joins itself.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <runner/comm_hook.hpp>
#include <runner/sdk.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;

struct PowerSgdOptions {
  std::int64_t matrix_approximation_rank = 1;
  std::int64_t start_powerSGD_iter = 1000;
  double min_compression_rate = 2.0;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;
  std::int64_t random_seed = 0;
  bool batch_tensors_with_same_shape = false;
};

// The smallest 2^k - 1 that is at least `largest`.
constexpr std::uint32_t smallest_mask(std::uint32_t largest) {
  std::uint32_t mask = largest;
  for (int shift = 1; shift < 32; shift *= 2) mask |= mask >> shift;
  return mask;
}

// numpy.random.RandomState(seed).randint(1_000_000_000), draw after draw:
// the seeds of the random initialisations of Q. RandomState seeded with an
// integer is MT19937 seeded by init_genrand (std::mt19937's seeding); its
// legacy bounded integers take 32-bit outputs, keep the bits of the smallest
// all-ones mask covering the largest value, and reject what exceeds it.
class SeedStream {
 public:
  explicit SeedStream(std::uint32_t seed) : engine_(seed) {}

  std::uint32_t next() {
    constexpr std::uint32_t kLargest = 999'999'999;  // randint's high (exclusive) minus 1
    constexpr std::uint32_t kMask = smallest_mask(kLargest);
    std::uint32_t value = 0;
    do {
      value = static_cast<std::uint32_t>(engine_()) & kMask;
    } while (value > kLargest);
    return value;
  }

 private:
  std::mt19937 engine_;
};

// The tensor a completed collective (a list of one tensor) or stage holds;
// rethrows the collective's error.
at::Tensor first_tensor(c10::ivalue::Future& done) {
  const c10::IValue& value = done.value();
  return value.isTensor() ? value.toTensor() : value.toTensorVector().at(0);
}

// Starts summing `tensor` over the group, in place.
FuturePtr start_allreduce(c10d::ProcessGroup& group, const at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  return group.allreduce(tensors)->getFuture();
}

// Orthonormalises the columns of each matrix of a batch [b, n, r] (r <= n)
// in place, as PyTorch's _orthogonalize: Gram-Schmidt for r <= 2 and for
// half-precision types, where a column is divided by its norm (plus epsilon
// when epsilon is not 0; with epsilon 0 a zero column becomes NaN, as in
// PyTorch), otherwise a reduced QR decomposition (epsilon unused).
void orthogonalize(const at::Tensor& matrices, double epsilon) {
  const std::int64_t columns = matrices.size(2);
  const bool half = matrices.scalar_type() == at::kHalf || matrices.scalar_type() == at::kBFloat16;
  if (columns > 2 && !half) {
    matrices.copy_(std::get<0>(at::linalg_qr(matrices, "reduced")));
    return;
  }
  for (std::int64_t i = 0; i < columns; ++i) {
    at::Tensor column = matrices.narrow(2, i, 1);
    at::Tensor norm = at::linalg_vector_norm(column, 2, at::IntArrayRef{1}, /*keepdim=*/true);
    if (epsilon == 0.0)
      column.div_(norm);
    else
      column.div_(norm + epsilon);
    if (i + 1 < columns) {
      at::Tensor rest = matrices.narrow(2, i + 1, columns - i - 1);
      rest.sub_(at::sum(column * rest, at::IntArrayRef{1}, /*keepdim=*/true) * column);
    }
  }
}

// Opened (once) when a bucket has started its last collective, or failed:
// the next bucket starts its first one then.
class Gate {
 public:
  explicit Gate(std::vector<c10::Device> devices)
      : future_(c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get(),
                                                         std::move(devices))) {}
  void open() {
    if (!opened_.exchange(true)) future_->markCompleted();
  }
  [[nodiscard]] const FuturePtr& future() const { return future_; }

 private:
  FuturePtr future_;
  std::atomic<bool> opened_{false};
};

std::vector<c10::Device> devices_of(const at::Tensor& tensor) {
  if (tensor.is_cpu()) return {};
  return {tensor.device()};
}

// What one bucket keeps from step to step.
struct BucketMemory {
  at::Tensor error;  // error feedback: input minus what the last compressed step output
  at::Tensor p;      // warm start: the Ps of all compressed tensors, one flat tensor
  at::Tensor q;      // warm start: the Qs (after the last step's allreduce and division)
};

// One product of the power iteration: a matrix viewed as a batch of one, or
// the stack of a bucket's matrices of one shape (batch_tensors_with_same_shape).
struct Unit {
  at::Tensor matrices;                 // [b, n, m]
  std::vector<at::Tensor> originals;   // when `matrices` is a stacked copy: where it goes back
  at::Tensor p;                        // [b, n, r], a view of the bucket's P memory
  at::Tensor q;                        // [b, m, r], a view of the Q memory
};

// Everything the stages of one compressed bucket need.
struct Job {
  at::Tensor buffer;
  at::Tensor input;                       // the buffer after error feedback, before compression
  std::vector<at::Tensor> uncompressed;   // views of the buffer, allreduced together
  at::Tensor uncompressed_memory;         // their concatenation
  std::vector<Unit> units;
  at::Tensor p_memory;
  at::Tensor q_memory;
  std::shared_ptr<BucketMemory> memory;
  std::int64_t world = 1;
  bool last = false;
};

class PowerSgd final : public runner::CommHook {
 public:
  explicit PowerSgd(const PowerSgdOptions& options)
      : options_(options), seeds_(static_cast<std::uint32_t>(options.random_seed)) {
    gate_->open();
  }

  runner::CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>& group) override {
    const at::Tensor buffer = bucket.getBuffer();
    std::lock_guard<std::mutex> lock(mutex_);
    auto gate = std::make_shared<Gate>(devices_of(buffer));
    runner::CommLaunch launch = iterations_->load() < options_.start_powerSGD_iter
                                    ? allreduce(bucket, group.get(), gate)
                                    : compress(bucket, group.get(), gate);
    launch.future->addCallback([gate](c10::ivalue::Future&) { gate->open(); });
    gate_ = std::move(gate);
    return launch;
  }

 private:
  // Before start_powerSGD_iter: the mean of the whole bucket (divided first).
  runner::CommLaunch allreduce(c10d::GradBucket& bucket, c10d::ProcessGroup* group,
                               const std::shared_ptr<Gate>& gate) {
    const at::Tensor buffer = bucket.getBuffer();
    if (bucket.isLast()) iterations_->fetch_add(1);
    buffer.div_(group->getSize());
    FuturePtr reduced = gate_->future()->thenAsync(
        [group, buffer, gate](c10::ivalue::Future&) {
          FuturePtr started = start_allreduce(*group, buffer);
          gate->open();
          return started;
        },
        c10::ListType::ofTensors());
    FuturePtr mean = reduced->then(
        [](c10::ivalue::Future& done) { return c10::IValue(first_tensor(done)); },
        c10::TensorType::get());
    return {mean, buffer.numel() * static_cast<std::int64_t>(buffer.element_size())};
  }

  // From start_powerSGD_iter on.
  runner::CommLaunch compress(c10d::GradBucket& bucket, c10d::ProcessGroup* group,
                              const std::shared_ptr<Gate>& gate) {
    auto job = std::make_shared<Job>();
    job->buffer = bucket.getBuffer();
    job->world = group->getSize();
    job->last = bucket.isLast();
    const at::Tensor& buffer = job->buffer;
    const auto index = static_cast<std::int64_t>(bucket.getIndex());
    std::shared_ptr<BucketMemory>& slot = memory_[index];
    if (!slot) slot = std::make_shared<BucketMemory>();
    job->memory = slot;
    BucketMemory& memory = *slot;

    if (options_.use_error_feedback) {
      if (memory.error.defined()) {
        check_unchanged(index, "values", memory.error.numel(), buffer.numel());
        buffer.add_(memory.error);
      } else {
        memory.error = at::zeros_like(buffer);
      }
      job->input = buffer.detach().clone();
    }

    // Split: each gradient as an n x m matrix (n its first dimension); worth
    // compressing at rank r = min(n, m, rank) when n m > (n + m) r rate.
    struct Shape {
      std::int64_t n, m, r;
      std::vector<at::Tensor> matrices;
    };
    std::vector<Shape> shapes;  // in order of first appearance
    std::int64_t p_size = 0;
    std::int64_t q_size = 0;
    for (const at::Tensor& gradient : bucket.getGradients()) {
      if (gradient.numel() == 0) {
        job->uncompressed.push_back(gradient);
        continue;
      }
      const std::int64_t n = gradient.dim() == 0 ? 1 : gradient.size(0);
      const std::int64_t m = gradient.numel() / n;
      const std::int64_t r = std::min({n, m, options_.matrix_approximation_rank});
      const bool worth = static_cast<double>((n + m) * r) * options_.min_compression_rate <
                         static_cast<double>(n * m);
      if (!worth) {
        job->uncompressed.push_back(gradient);
        continue;
      }
      auto same = std::find_if(shapes.begin(), shapes.end(),
                               [&](const Shape& s) { return s.n == n && s.m == m; });
      if (same == shapes.end()) same = shapes.insert(shapes.end(), Shape{n, m, r, {}});
      same->matrices.push_back(gradient.view({n, m}));
      p_size += n * r;
      q_size += m * r;
    }
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : job->uncompressed) flat.push_back(t.reshape({-1}));
    job->uncompressed_memory = flat.empty() ? at::empty({0}, buffer.options()) : at::cat(flat);

    // P and Q memory: kept across steps with warm start, fresh otherwise;
    // fresh Qs are drawn at random.
    const bool randomize = !options_.warm_start || !memory.p.defined();
    if (randomize) {
      job->p_memory = at::empty({p_size}, buffer.options());
      job->q_memory = at::empty({q_size}, buffer.options());
      if (options_.warm_start) {
        memory.p = job->p_memory;
        memory.q = job->q_memory;
      }
    } else {
      check_unchanged(index, "P values", memory.p.numel(), p_size);
      check_unchanged(index, "Q values", memory.q.numel(), q_size);
      job->p_memory = memory.p;
      job->q_memory = memory.q;
    }
    std::int64_t p_at = 0;
    std::int64_t q_at = 0;
    auto add_unit = [&](at::Tensor matrices, std::vector<at::Tensor> originals, const Shape& s) {
      const std::int64_t batch = matrices.size(0);
      Unit unit;
      unit.matrices = std::move(matrices);
      unit.originals = std::move(originals);
      unit.p = job->p_memory.narrow(0, p_at, batch * s.n * s.r).view({batch, s.n, s.r});
      unit.q = job->q_memory.narrow(0, q_at, batch * s.m * s.r).view({batch, s.m, s.r});
      p_at += batch * s.n * s.r;
      q_at += batch * s.m * s.r;
      job->units.push_back(std::move(unit));
    };
    for (const Shape& s : shapes) {
      if (options_.batch_tensors_with_same_shape && s.matrices.size() > 1)
        add_unit(at::stack(s.matrices), s.matrices, s);
      else if (options_.batch_tensors_with_same_shape)
        add_unit(s.matrices[0].unsqueeze(0), {}, s);
      else
        for (const at::Tensor& matrix : s.matrices) add_unit(matrix.unsqueeze(0), {}, s);
    }

    const double epsilon = options_.orthogonalization_epsilon;
    if (!randomize) {
      for (const Unit& unit : job->units) orthogonalize(unit.q, epsilon);
    } else {
      // One seed per initialisation, the same on every rank; each Q drawn on
      // the CPU in the bucket's dtype, in order, then moved to its device.
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seeds_.next());
      const auto cpu = at::TensorOptions().dtype(buffer.scalar_type()).device(at::kCPU);
      for (const Unit& unit : job->units) {
        unit.q.copy_(at::randn(unit.q.sizes(), generator, cpu));
        orthogonalize(unit.q, epsilon);
      }
    }
    for (Unit& unit : job->units) at::bmm_out(unit.p, unit.matrices, unit.q);

    const std::int64_t payload =
        (job->uncompressed_memory.numel() + p_size + q_size) *
        static_cast<std::int64_t>(buffer.element_size());

    // 1. the uncompressed tensors, once the previous bucket has started its collectives;
    FuturePtr uncompressed = gate_->future()->thenAsync(
        [group, job](c10::ivalue::Future&) {
          return start_allreduce(*group, job->uncompressed_memory);
        },
        c10::ListType::ofTensors());
    // 2. their mean back into the bucket, then the Ps;
    FuturePtr ps = uncompressed->thenAsync(
        [group, job](c10::ivalue::Future& done) {
          const at::Tensor mean = first_tensor(done).div_(job->world);
          std::int64_t at = 0;
          for (const at::Tensor& t : job->uncompressed) {
            t.copy_(mean.narrow(0, at, t.numel()).view_as(t));
            at += t.numel();
          }
          return start_allreduce(*group, job->p_memory);
        },
        c10::ListType::ofTensors());
    // 3. orthogonalised Ps, Q = M^T P, then the Qs;
    FuturePtr qs = ps->thenAsync(
        [group, job, gate, epsilon](c10::ivalue::Future& done) {
          (void)first_tensor(done);  // the Ps, summed in place
          for (const Unit& unit : job->units) orthogonalize(unit.p, epsilon);
          for (Unit& unit : job->units)
            at::bmm_out(unit.q, unit.matrices.transpose(1, 2), unit.p);
          FuturePtr started = start_allreduce(*group, job->q_memory);
          gate->open();
          return started;
        },
        c10::ListType::ofTensors());
    // 4. the mean Qs, M ~ P Q^T into the bucket, the error left.
    FuturePtr decompressed = qs->then(
        [job, iterations = iterations_](c10::ivalue::Future& done) {
          first_tensor(done).div_(job->world);
          for (Unit& unit : job->units)
            at::bmm_out(unit.matrices, unit.p, unit.q.transpose(1, 2));
          for (const Unit& unit : job->units)
            for (std::size_t i = 0; i < unit.originals.size(); ++i)
              unit.originals[i].copy_(unit.matrices[static_cast<std::int64_t>(i)]);
          if (job->input.defined()) job->memory->error = job->input - job->buffer;
          if (job->last) iterations->fetch_add(1);
          return c10::IValue(job->buffer);
        },
        c10::TensorType::get());
    return {decompressed, payload};
  }

  // A bucket whose layout changed under kept state (DDP rebuilt its buckets
  // after PowerSGD started) would mix one layout's state into another's.
  static void check_unchanged(std::int64_t index, const char* what, std::int64_t kept,
                              std::int64_t now) {
    if (kept != now)
      throw std::runtime_error("bucket " + std::to_string(index) + " needs " +
                               std::to_string(now) + " " + what + " but PowerSGD kept " +
                               std::to_string(kept) +
                               " from an earlier step: the buckets changed after compression "
                               "started; raise start_powerSGD_iter past the step they change at");
  }

  const PowerSgdOptions options_;
  std::mutex mutex_;  // run() may be called from more than one thread
  SeedStream seeds_;
  std::map<std::int64_t, std::shared_ptr<BucketMemory>> memory_;
  // Steps done: advanced when the last bucket of a step is done (by the
  // stage that finishes it, which may run after this hook is gone).
  std::shared_ptr<std::atomic<std::int64_t>> iterations_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>(std::vector<c10::Device>{});
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<PowerSgdOptions> options;
  options
      .field("matrix_approximation_rank", &PowerSgdOptions::matrix_approximation_rank,
             "rank r of the approximation P Q^T of each compressed gradient")
      .range(1, std::nullopt);
  options
      .field("start_powerSGD_iter", &PowerSgdOptions::start_powerSGD_iter,
             "steps of plain allreduce before compression (and error feedback) starts")
      .range(0, std::nullopt);
  options
      .field("min_compression_rate", &PowerSgdOptions::min_compression_rate,
             "a gradient is compressed only if n m / ((n + m) r) exceeds this")
      .range(0.0, std::nullopt);
  options.field("use_error_feedback", &PowerSgdOptions::use_error_feedback,
                "add what compression lost at the last step to the next");
  options.field("warm_start", &PowerSgdOptions::warm_start,
                "start each step's power iteration from the last step's Q");
  options
      .field("orthogonalization_epsilon", &PowerSgdOptions::orthogonalization_epsilon,
             "added to column norms in Gram-Schmidt (0: none; a zero column becomes NaN)")
      .range(0.0, std::nullopt);
  options
      .field("random_seed", &PowerSgdOptions::random_seed,
             "seed of the random initial Qs (numpy RandomState, as PyTorch)")
      .range(0, 4294967295.0);
  options.field("batch_tensors_with_same_shape", &PowerSgdOptions::batch_tensors_with_same_shape,
                "compress a bucket's same-shaped gradients in one batched product");
  registrar.add_comm_hook(
      "powersgd",
      "PowerSGD low-rank gradient compression with error feedback (PyTorch's powerSGD_hook)",
      options, [](const PowerSgdOptions& o) {
        if ((o.use_error_feedback || o.warm_start) && o.start_powerSGD_iter < 2)
          throw runner::OptionError(
              "start_powerSGD_iter",
              "must be at least 2 with use_error_feedback or warm_start on, found " +
                  std::to_string(o.start_powerSGD_iter) +
                  " (the state they keep per bucket must not see DDP rebuild its buckets "
                  "after the first step, as PyTorch's PowerSGDState requires)");
        return std::make_unique<PowerSgd>(o);
      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
