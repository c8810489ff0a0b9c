// Profiler traces: the only file that includes LibTorch's profiler headers.
#include "runner/engine/profile.hpp"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <sys/stat.h>
#include <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/common/files.hpp"
#include "runner/common/output_path.hpp"
#include "runner/common/sha256.hpp"

namespace runner {

namespace fs = std::filesystem;

fs::path trace_directory(const fs::path& db) {
  const fs::path absolute = fs::absolute(db).lexically_normal();
  return absolute.parent_path() / (absolute.filename().string() + ".traces");
}

fs::path trace_path(const fs::path& db, const std::string& uuid) {
  return trace_directory(db) / ("run-" + uuid + ".json");
}

void prepare_trace_directory(const fs::path& db) {
  const fs::path dir = trace_directory(db);
  const auto fail = [&](int error_number) {
    throw Error("cannot write profiler traces to '" + dir.string() + "': " +
                    std::strerror(error_number),
                "[profile] steps writes one trace per run next to the database; choose a "
                "database in a writable folder with --db PATH, or remove [profile]");
  };
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    if (errno != ENOENT) fail(errno);
    if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) fail(errno);
    if (::stat(dir.c_str(), &info) != 0) fail(errno);
  }
  if (!S_ISDIR(info.st_mode)) fail(ENOTDIR);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) fail(errno);
}

namespace {

// Intervals of one thread's CPU events, to find each one's direct parent.
struct Interval {
  std::int64_t start, end;
  std::size_t index;
};

struct OpKey {
  std::string name, shapes;
  bool operator<(const OpKey& o) const {
    return name != o.name ? name < o.name : shapes < o.shapes;
  }
};

}  // namespace

std::vector<store::OpStat> aggregate_ops(const std::vector<ProfiledEvent>& events) {
  const std::size_t n = events.size();
  std::vector<std::int64_t> children_cpu(n, 0), own_cuda(n, 0), subtree_cuda(n, 0);
  std::vector<std::ptrdiff_t> parent(n, -1);
  std::unordered_map<std::uint64_t, std::size_t> by_correlation;
  std::map<std::uint64_t, std::vector<Interval>> threads;
  for (std::size_t i = 0; i < n; ++i) {
    const ProfiledEvent& e = events[i];
    if (e.on_cuda) continue;
    threads[e.thread].push_back({e.start_ns, e.end_ns, i});
    if (e.correlation != 0) by_correlation.emplace(e.correlation, i);
  }
  // Parents by containment: sorted by start, the longer first on a tie, an
  // event's parent is the innermost open interval that contains it.
  for (auto& [thread, intervals] : threads) {
    std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Interval*> open;
    for (const Interval& iv : intervals) {
      while (!open.empty() && open.back()->end <= iv.start) open.pop_back();
      // Partial overlap (an async event) is not nesting.
      while (!open.empty() && open.back()->end < iv.end) open.pop_back();
      if (!open.empty()) {
        parent[iv.index] = static_cast<std::ptrdiff_t>(open.back()->index);
        children_cpu[open.back()->index] += iv.end - iv.start;
      }
      open.push_back(&iv);
    }
  }
  // CUDA time: each kernel to the CPU event that launched it (the runtime
  // call), then up through its ancestors for the totals. Self CUDA time goes
  // to the innermost operator: a runtime call (cudaLaunchKernel) passes its
  // kernels to its parent, as torch.profiler's key_averages() shows them.
  for (std::size_t i = 0; i < n; ++i) {
    const ProfiledEvent& e = events[i];
    if (!e.on_cuda || e.linked == 0) continue;
    const auto it = by_correlation.find(e.linked);
    if (it == by_correlation.end()) continue;
    const std::int64_t duration = std::max<std::int64_t>(e.end_ns - e.start_ns, 0);
    std::size_t owner = it->second;
    if (parent[owner] >= 0 && events[owner].name.starts_with("cuda"))
      owner = static_cast<std::size_t>(parent[owner]);
    own_cuda[owner] += duration;
    for (std::ptrdiff_t at = static_cast<std::ptrdiff_t>(it->second); at >= 0;
         at = parent[static_cast<std::size_t>(at)])
      subtree_cuda[static_cast<std::size_t>(at)] += duration;
  }
  std::map<OpKey, store::OpStat> ops;
  for (std::size_t i = 0; i < n; ++i) {
    const ProfiledEvent& e = events[i];
    if (e.on_cuda || e.name.empty()) continue;
    store::OpStat& op = ops[OpKey{e.name, e.input_shapes}];
    op.name = e.name;
    op.input_shapes = e.input_shapes;
    const std::int64_t total = std::max<std::int64_t>(e.end_ns - e.start_ns, 0);
    ++op.calls;
    op.total_cpu_ns += total;
    op.self_cpu_ns += std::max<std::int64_t>(total - children_cpu[i], 0);
    op.self_cuda_ns += own_cuda[i];
    op.total_cuda_ns += subtree_cuda[i];
  }
  std::vector<store::OpStat> out;
  out.reserve(ops.size());
  for (auto& [key, op] : ops) {
    op.total_cuda_ns = std::max(op.total_cuda_ns, op.self_cuda_ns);
    out.push_back(std::move(op));
  }
  std::stable_sort(out.begin(), out.end(), [](const store::OpStat& a, const store::OpStat& b) {
    return a.self_cpu_ns != b.self_cpu_ns ? a.self_cpu_ns > b.self_cpu_ns
                                          : a.total_cpu_ns > b.total_cpu_ns;
  });
  return out;
}

namespace {

namespace prof = torch::profiler::impl;

// As torch.profiler prints them: [[64, 784], [256, 784], []].
std::string shapes_text(c10::ArrayRef<std::vector<std::int64_t>> shapes) {
  std::string text = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) text += ", ";
    text += "[";
    for (std::size_t d = 0; d < shapes[i].size(); ++d) {
      if (d > 0) text += ", ";
      text += std::to_string(shapes[i][d]);
    }
    text += "]";
  }
  return text + "]";
}

}  // namespace

struct StepProfiler::State {
  bool running = false;
  std::unique_ptr<at::RecordFunction> step;
};

StepProfiler::StepProfiler(std::int64_t steps, bool record_shapes, bool cuda, fs::path trace)
    : steps_(steps),
      record_shapes_(record_shapes),
      cuda_(cuda),
      trace_(std::move(trace)),
      state_(std::make_unique<State>()) {}

StepProfiler::~StepProfiler() {
  if (!state_->running) return;
  state_->step.reset();
  try {
    (void)torch::autograd::profiler::disableProfiler();
  } catch (...) {  // a destructor during unwinding: the run's own error is the one to report
  }
}

void StepProfiler::start() {
  // Kineto logs its start and stop (and, in a CUDA build on a machine without
  // a GPU, a device-count error) to stderr, between runner's own lines; 6 is
  // above its highest level. The user's own setting wins.
  ::setenv("KINETO_LOG_LEVEL", "6", /*overwrite=*/0);
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO, record_shapes_);
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda_) activities.insert(prof::ActivityType::CUDA);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  state_->running = true;
}

void StepProfiler::begin_step(std::int64_t step) {
  state_->step = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (state_->step->isActive())
    state_->step->before("runner::step", c10::ArrayRef<const c10::IValue>{}, step);
}

void StepProfiler::end_step() { state_->step.reset(); }

void StepProfiler::finish(std::int64_t done, RunOutcome& out) {
  if (!state_->running) return;
  state_->step.reset();
  state_->running = false;
  const std::unique_ptr<torch::autograd::profiler::ProfilerResult> result =
      torch::autograd::profiler::disableProfiler();
  out.metrics.push_back({"profiled_steps", static_cast<double>(done), "count"});
  std::vector<ProfiledEvent> events;
  events.reserve(result->events().size());
  for (const auto& k : result->events()) {
    ProfiledEvent e;
    e.name = k.name();
    e.on_cuda = k.deviceType() != c10::DeviceType::CPU;
    e.thread = k.startThreadId();
    e.start_ns = static_cast<std::int64_t>(k.startNs());
    e.end_ns = static_cast<std::int64_t>(k.endNs());
    if (record_shapes_ && !e.on_cuda && k.hasShapes()) e.input_shapes = shapes_text(k.shapes());
    if (e.on_cuda) {
      e.linked = k.linkedCorrelationId();
    } else {
      e.correlation = k.correlationId();
    }
    events.push_back(std::move(e));
  }
  out.ops = aggregate_ops(events);
  if (trace_.empty()) return;
  // Atomic: a reader (or a crash) never sees half a trace. And under the
  // output-path rule (runner/common/output_path.hpp): whatever is not a
  // regular file at the trace's path is left as it is, the run fails.
  try {
    OutputUse use;
    use.standard_output = false;
    refuse_non_regular(trace_, use);
    TemporaryFile partial(trace_);
    result->save(partial.path().string());
    if (fs::file_size(partial.path()) == 0)
      throw Error("LibTorch's profiler wrote no trace file", {}, ErrorKind::run);
    partial.commit();
  } catch (const Error& e) {  // names the path and the reason already
    throw Error(e.what(), e.hint(), ErrorKind::run);
  } catch (const std::exception& e) {
    throw Error("cannot write the profiler trace '" + trace_.string() + "': " + e.what(), {},
                ErrorKind::run);
  }
  store::RunFile file;
  file.role = "profile_trace";
  file.path = trace_.string();
  file.sha256 = sha256_file_hex(trace_);
  file.bytes = static_cast<std::int64_t>(fs::file_size(trace_));
  out.files.push_back(std::move(file));
}

}  // namespace runner
