// What the ranks of a data-parallel run tell each other through its store (ranks.hpp).
#include "runner/engine/ranks.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/process_group.hpp"

namespace runner {

namespace {

std::vector<std::uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}
std::string text_of(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

std::string key(const char* what, int rank) { return std::string(what) + "/" + std::to_string(rank); }

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown host";
  return name;
}

std::string seconds_text(std::chrono::milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return text;
}

// The current value of a counter (add 0), or -1 when it does not exist.
std::int64_t counter(c10d::Store& store, const std::string& name) {
  if (!store.check({name})) return -1;
  return store.add(name, 0);
}

}  // namespace

std::optional<JobEnvironment> job_environment(
    const std::function<const char*(const char*)>& lookup) {
  static const std::vector<std::string> kNames{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                               "MASTER_PORT"};
  std::vector<std::string> set, missing;
  for (const auto& name : kNames) {
    const char* value = lookup(name.c_str());
    (value != nullptr && *value != '\0' ? set : missing).push_back(name);
  }
  if (set.empty()) return std::nullopt;
  if (!missing.empty())
    throw Error(join(set, ", ") + (set.size() == 1 ? " is" : " are") + " set but " +
                    join(missing, ", ") + (missing.size() == 1 ? " is" : " are") +
                    " not: runner joins a launched job only when all of RANK, WORLD_SIZE, "
                    "LOCAL_RANK, MASTER_ADDR and MASTER_PORT are set",
                "launch through torchrun (or export all five), or unset them to let runner "
                "start the ranks itself");
  const auto number = [&](const char* name, std::int64_t min, std::int64_t max) {
    const std::string text = lookup(name);
    const auto value = parse_int64(text);
    if (!value || *value < min || *value > max)
      throw Error(std::string(name) + " is '" + text + "', not a whole number between " +
                      std::to_string(min) + " and " + std::to_string(max),
                  "fix the launcher's environment");
    return static_cast<int>(*value);
  };
  JobEnvironment job;
  job.world_size = number("WORLD_SIZE", 1, 1 << 20);
  job.rank = number("RANK", 0, job.world_size - 1);
  job.local_rank = number("LOCAL_RANK", 0, job.world_size - 1);
  job.master_addr = lookup("MASTER_ADDR");
  job.master_port = number("MASTER_PORT", 1, 65535);
  if (const char* agent = lookup("TORCHELASTIC_USE_AGENT_STORE"))
    job.agent_store = std::string(agent) == "True" || std::string(agent) == "1";
  if (const char* restarts = lookup("TORCHELASTIC_RESTART_COUNT"); restarts && *restarts)
    job.restart_count = number("TORCHELASTIC_RESTART_COUNT", 0, std::numeric_limits<int>::max());
  return job;
}

namespace {

// Every key of a job under one prefix, fresh for each restart of the job.
std::string job_prefix(const JobEnvironment& job) {
  return "runner/" + std::to_string(job.restart_count) + "/";
}

std::string c10_text(const std::exception& e) {
  std::string text = e.what();
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    text = c10_error->what_without_backtrace();
  return text.substr(0, text.find('\n'));
}

}  // namespace

struct JobChannel::Impl {
  JobEnvironment job;
  c10::intrusive_ptr<c10d::Store> server;  // rank 0, unless the agent serves
  c10::intrusive_ptr<c10d::Store> store;   // this job's keys
};

JobChannel::JobChannel(const JobEnvironment& job, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->job = job;
  const std::string where = job.master_addr + ":" + std::to_string(job.master_port);
  if (job.rank == 0 && !job.agent_store) {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(job.master_port);
    options.isServer = true;
    options.waitWorkers = false;
    options.timeout = timeout;
    try {
      impl_->server = c10::make_intrusive<c10d::TCPStore>(job.master_addr, options);
    } catch (const std::exception& e) {
      throw Error("rank 0 cannot serve the rendezvous at " + where + ": " + c10_text(e),
                  "choose a free MASTER_PORT (and a MASTER_ADDR of this machine)", ErrorKind::run);
    }
  }
  Rendezvous here;
  here.rank = job.rank;
  here.world_size = job.world_size;
  here.timeout = timeout;
  here.host = job.master_addr;
  here.port = job.master_port;
  here.prefix = job_prefix(job);
  impl_->store = connect_store(here);
}

JobChannel::~JobChannel() = default;

void JobChannel::announce(std::int64_t sequence, const std::string& text) {
  impl_->store->set("job/" + std::to_string(sequence), bytes_of(text));
}

void JobChannel::acknowledge_end() { impl_->store->add("ended", 1); }

int JobChannel::wait_for_end(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::int64_t ended = 0;
  while ((ended = impl_->store->add("ended", 0)) < impl_->job.world_size - 1 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return static_cast<int>(ended);
}

std::optional<std::string> JobChannel::next(std::int64_t sequence,
                                            const std::atomic<bool>* stop) const {
  const std::string name = "job/" + std::to_string(sequence);
  const JobEnvironment& job_ = impl_->job;
  while (stop == nullptr || !stop->load()) {
    try {
      if (impl_->store->check({name})) return text_of(impl_->store->get(name));
    } catch (const std::exception& e) {
      throw Error("rank " + std::to_string(job_.rank) + " lost rank 0's rendezvous store at " +
                      job_.master_addr + ":" + std::to_string(job_.master_port) + ": " +
                      c10_text(e),
                  "see rank 0's output: it ended, or its machine is unreachable", ErrorKind::run);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

Rendezvous JobChannel::rendezvous(std::int64_t sequence, std::chrono::milliseconds timeout) const {
  const JobEnvironment& job_ = impl_->job;
  Rendezvous r;
  r.rank = job_.rank;
  r.world_size = job_.world_size;
  r.local_rank = job_.local_rank;
  r.timeout = timeout;
  r.host = job_.master_addr;
  r.port = job_.master_port;
  r.prefix = job_prefix(job_) + "run/" + std::to_string(sequence) + "/";
  return r;
}

StragglerSteps straggler_steps(const std::vector<std::vector<double>>& per_rank,
                               const std::vector<bool>& measured) {
  StragglerSteps out;
  if (per_rank.empty()) return out;
  std::size_t steps = measured.size();
  for (const auto& times : per_rank) steps = std::min(steps, times.size());
  std::vector<double> at(per_rank.size());
  for (std::size_t i = 0; i < steps; ++i) {
    if (!measured[i]) continue;
    for (std::size_t r = 0; r < per_rank.size(); ++r) at[r] = per_rank[r][i];
    const auto slowest = std::max_element(at.begin(), at.end());
    out.max_ns.push_back(*slowest);
    out.slowest_rank.push_back(slowest - at.begin());
    std::vector<double> sorted = at;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    out.median_ns.push_back(n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2);
  }
  return out;
}

struct RankLink::Impl {
  Rendezvous rendezvous;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Store> beat_store;  // its own connection, for the heartbeat thread
  std::chrono::milliseconds beat{250};
  std::atomic<bool> stop{false};
  std::thread heartbeat;
};

struct RankLinkAccess {
  static c10::intrusive_ptr<c10d::Store> store(const RankLink& link) { return link.impl_->store; }
};

RankLink::RankLink(const Rendezvous& rendezvous, std::chrono::milliseconds beat)
    : impl_(std::make_unique<Impl>()) {
  Impl& i = *impl_;
  i.rendezvous = rendezvous;
  i.beat = beat;
  i.store = connect_store(rendezvous);
  i.beat_store = connect_store(rendezvous);
  i.store->set(key("host", rendezvous.rank),
               bytes_of(this_host() + ", pid " + std::to_string(::getpid())));
  const std::string alive = key("alive", rendezvous.rank);
  i.beat_store->add(alive, 1);
  i.heartbeat = std::thread([&i, alive] {
    while (!i.stop.load()) {
      std::this_thread::sleep_for(i.beat);
      try {
        i.beat_store->add(alive, 1);
      } catch (...) {
        return;  // the store is gone: so is rank 0, which the collectives will tell
      }
    }
  });
}

RankLink::~RankLink() {
  impl_->stop.store(true);
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
}

c10::intrusive_ptr<c10d::Store> store_of(const RankLink& link) { return RankLinkAccess::store(link); }

std::string RankLink::describe(int rank) const {
  try {
    if (impl_->store->check({key("host", rank)}))
      return "rank " + std::to_string(rank) + " (host " + text_of(impl_->store->get(key("host", rank))) +
             ")";
  } catch (...) {
  }
  return "rank " + std::to_string(rank);
}

void RankLink::fail(const std::string& reason) noexcept {
  try {
    impl_->store->set(key("failed", impl_->rendezvous.rank), bytes_of(reason));
  } catch (...) {
  }
}

bool RankLink::lost(int rank) const {
  try {
    const std::int64_t before = counter(*impl_->store, key("alive", rank));
    std::this_thread::sleep_for(6 * impl_->beat);
    return counter(*impl_->store, key("alive", rank)) == before;
  } catch (const std::exception&) {
    return true;
  }
}

std::vector<int> RankLink::missing_ranks() const {
  std::vector<int> missing;
  for (int r = 0; r < impl_->rendezvous.world_size; ++r)
    if (!impl_->store->check({key("host", r)})) missing.push_back(r);
  return missing;
}

std::string RankLink::explain_failure() const {
  const int self = impl_->rendezvous.rank;
  const auto recorded = [&] {
    std::string text;
    for (int r = 0; r < impl_->rendezvous.world_size; ++r)
      if (r != self && impl_->store->check({key("failed", r)}))
        text += (text.empty() ? "" : "; ") + describe(r) + " failed: " +
                text_of(impl_->store->get(key("failed", r)));
    return text;
  };
  try {
    if (std::string text = recorded(); !text.empty()) return text;
    // Watch the heartbeats for a few beats: a rank whose counter stands
    // still is gone (killed, or its machine lost).
    std::vector<std::int64_t> before(static_cast<std::size_t>(impl_->rendezvous.world_size));
    for (int r = 0; r < impl_->rendezvous.world_size; ++r)
      before[static_cast<std::size_t>(r)] = counter(*impl_->store, key("alive", r));
    const auto watch = 6 * impl_->beat;
    std::this_thread::sleep_for(watch);
    if (std::string text = recorded(); !text.empty()) return text;  // recorded meanwhile
    std::string lost;
    for (int r = 0; r < impl_->rendezvous.world_size; ++r) {
      if (r == self) continue;
      const std::int64_t now = counter(*impl_->store, key("alive", r));
      if (now == before[static_cast<std::size_t>(r)])
        lost += (lost.empty() ? "lost " : "; lost ") + describe(r) + ": " +
                (now < 0 ? "it never joined"
                         : "no heartbeat for " + seconds_text(watch) +
                               " (killed, or its machine is unreachable)");
    }
    return lost;
  } catch (const std::exception&) {
    // The store itself is gone: rank 0's runner (or torchrun's agent) served it.
    return "lost the rendezvous store" +
           (impl_->rendezvous.store_path.empty()
                ? " at " + impl_->rendezvous.host + ":" + std::to_string(impl_->rendezvous.port)
                : std::string()) +
           " (rank 0 ended)";
  }
}

void RankLink::finish(std::int64_t steps) {
  impl_->store->set("done", bytes_of(std::to_string(steps)));
}

std::optional<std::int64_t> RankLink::finished_steps(std::chrono::milliseconds wait) const {
  try {
    // (c10d reads a zero timeout as "no timeout": check instead.)
    if (wait.count() <= 0) {
      if (!impl_->store->check({"done"})) return std::nullopt;
    } else {
      impl_->store->wait({"done"}, wait);
    }
    return parse_int64(text_of(impl_->store->get("done")));
  } catch (...) {
    return std::nullopt;
  }
}

void RankLink::post_step_times(const std::vector<double>& wall_ns) {
  std::vector<std::uint8_t> bytes(wall_ns.size() * sizeof(double));
  if (!wall_ns.empty()) std::memcpy(bytes.data(), wall_ns.data(), bytes.size());
  impl_->store->set(key("times", impl_->rendezvous.rank), bytes);
}

std::vector<std::vector<double>> RankLink::collect_step_times() const {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(impl_->rendezvous.world_size));
  for (int r = 1; r < impl_->rendezvous.world_size; ++r) {
    try {
      impl_->store->wait({key("times", r)}, impl_->rendezvous.timeout);
      const auto bytes = impl_->store->get(key("times", r));
      auto& times = out[static_cast<std::size_t>(r)];
      times.resize(bytes.size() / sizeof(double));
      if (!times.empty()) std::memcpy(times.data(), bytes.data(), times.size() * sizeof(double));
    } catch (...) {
      // None in time: that rank's steps are left out of the straggler figures.
    }
  }
  return out;
}

}  // namespace runner
