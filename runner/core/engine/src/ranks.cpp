// What the ranks of a data-parallel run tell each other through its store (ranks.hpp).
#include "runner/engine/ranks.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/process_group.hpp"
#include "runner/fingerprint/node_layout.hpp"

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
  // torchrun's node layout, recorded in the fingerprint; other launchers may not set it.
  if (const char* node = lookup("GROUP_RANK"); node && *node)
    job.node_rank = number("GROUP_RANK", 0, job.world_size - 1);
  if (const char* local = lookup("LOCAL_WORLD_SIZE"); local && *local)
    job.local_world_size = number("LOCAL_WORLD_SIZE", 1, job.world_size);
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
  RankPlace place;
  place.rank = job.rank;
  place.host = this_host();
  place.node = job.node_rank;
  place.local_rank = job.local_rank;
  place.local_world_size = job.local_world_size;
  impl_->store->set(key("place", job.rank), bytes_of(rank_place_json(place)));
}

JobChannel::~JobChannel() = default;

void JobChannel::announce(std::int64_t sequence, const std::string& text) {
  impl_->store->set("job/" + std::to_string(sequence), bytes_of(text));
}

void JobChannel::acknowledge_end() { impl_->store->add("ended", 1); }

int JobChannel::wait_for_end(std::chrono::milliseconds timeout, int lost) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::int64_t ended = 0;
  while ((ended = impl_->store->add("ended", 0)) < impl_->job.world_size - 1 - lost &&
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

std::vector<RankPlace> JobChannel::places(std::chrono::milliseconds wait) const {
  std::vector<std::string> names;
  for (int r = 0; r < impl_->job.world_size; ++r) names.push_back(key("place", r));
  try {
    impl_->store->wait(names, wait);
  } catch (const std::exception&) {
    // Some rank has not come (yet): the run's rendezvous will say which.
  }
  std::vector<RankPlace> out;
  for (const auto& name : names)
    if (impl_->store->check({name}))
      out.push_back(rank_place_from_json(text_of(impl_->store->get(name))));
  return out;
}

namespace {

// Run `sequence`'s keys as its ranks see them (a PrefixStore of the same
// connection: prefixes nest with a '/' between them, so "run/N/" under the
// job's prefix is not the run's own prefix).
c10::intrusive_ptr<c10d::Store> run_keys(const c10::intrusive_ptr<c10d::Store>& job_store,
                                         const std::string& run_prefix) {
  const auto prefixed = c10::dynamic_intrusive_pointer_cast<c10d::PrefixStore>(job_store);
  return c10::make_intrusive<c10d::PrefixStore>(run_prefix, prefixed->getUnderlyingStore());
}

}  // namespace

void JobChannel::describe_run(std::int64_t sequence, const std::string& layout_json) {
  run_keys(impl_->store, rendezvous(sequence, {}).prefix)->set("layout", bytes_of(layout_json));
}

std::optional<std::pair<std::vector<int>, std::string>> JobChannel::lost_in_run(
    std::int64_t sequence) const {
  const auto store = run_keys(impl_->store, rendezvous(sequence, {}).prefix);
  if (!store->check({"lost"})) return std::nullopt;
  const nlohmann::json lost = nlohmann::json::parse(text_of(store->get("lost")), nullptr, false);
  if (!lost.is_object()) return std::nullopt;
  return std::pair{lost.value("ranks", std::vector<int>{}), lost.value("text", std::string())};
}

std::map<std::string, std::string> run_layout_fields(const Rendezvous& rendezvous) {
  std::map<std::string, std::string> fields;
  if (!rendezvous.store_path.empty()) return fields;  // ranks forked by runner: one host
  const auto store = connect_store(rendezvous);
  if (!store->check({"layout"})) return fields;
  const nlohmann::json layout = nlohmann::json::parse(text_of(store->get("layout")), nullptr, false);
  if (!layout.is_object()) return fields;
  for (const auto& [name, value] : layout.items())
    if (value.is_string()) fields[name] = value.get<std::string>();
  return fields;
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
  // The launcher's node rank, so that a lost node is named as one.
  if (const char* node = std::getenv("GROUP_RANK"); node && *node)
    i.store->set(key("node", rendezvous.rank), bytes_of(node));
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

namespace {

// What `rank` published under `what`, or "".
std::string published(c10d::Store& store, const char* what, int rank) {
  try {
    if (store.check({key(what, rank)})) return text_of(store.get(key(what, rank)));
  } catch (...) {
  }
  return {};
}

}  // namespace

std::string RankLink::describe(int rank) const {
  const std::string host = published(*impl_->store, "host", rank);
  if (host.empty()) return "rank " + std::to_string(rank);
  const std::string node = published(*impl_->store, "node", rank);
  return "rank " + std::to_string(rank) + " (host " + host + (node.empty() ? "" : ", node " + node) +
         ")";
}

std::vector<std::string> RankLink::name_lost(const std::vector<int>& gone) const {
  // Ranks by node, for the nodes whose every rank is gone: a lost machine.
  std::map<std::string, std::vector<int>> all_of, gone_of;
  for (int r = 0; r < impl_->rendezvous.world_size; ++r)
    if (const std::string node = published(*impl_->store, "node", r); !node.empty())
      all_of[node].push_back(r);
  for (int r : gone)
    if (const std::string node = published(*impl_->store, "node", r); !node.empty())
      gone_of[node].push_back(r);
  std::vector<std::string> parts;
  std::vector<int> named;
  for (const auto& [node, ranks] : gone_of) {
    if (ranks != all_of[node]) continue;
    std::vector<std::string> hosts, pids, numbers;
    for (int r : ranks) {
      const std::string text = published(*impl_->store, "host", r);
      const auto comma = text.find(", pid ");
      const std::string host = text.substr(0, comma);
      if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
      if (comma != std::string::npos) pids.push_back(text.substr(comma + 6));
      numbers.push_back(std::to_string(r));
      named.push_back(r);
    }
    parts.push_back("node " + node + " (host " + join(hosts, ", ") + ": ranks " +
                    join(numbers, ", ") + ", pids " + join(pids, ", ") + ")");
  }
  for (int r : gone)
    if (std::find(named.begin(), named.end(), r) == named.end()) parts.push_back(describe(r));
  return parts;
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
    // Under torchrun (ranks know their node), a survivor's failure may only
    // be the echo of a lost node: the heartbeats are watched anyway, and the
    // lost ranks named first.
    bool nodes = false;
    for (int r = 0; r < impl_->rendezvous.world_size && !nodes; ++r)
      nodes = !published(*impl_->store, "node", r).empty();
    std::string failed = recorded();
    if (!failed.empty() && !nodes) return failed;
    // Watch the heartbeats for a few beats: a rank whose counter stands
    // still is gone (killed, or its machine lost).
    std::vector<std::int64_t> before(static_cast<std::size_t>(impl_->rendezvous.world_size));
    for (int r = 0; r < impl_->rendezvous.world_size; ++r)
      before[static_cast<std::size_t>(r)] = counter(*impl_->store, key("alive", r));
    const auto watch = 6 * impl_->beat;
    std::this_thread::sleep_for(watch);
    if (failed.empty()) failed = recorded();  // recorded meanwhile
    if (!failed.empty() && !nodes) return failed;
    std::vector<int> gone, never;
    for (int r = 0; r < impl_->rendezvous.world_size; ++r) {
      if (r == self || impl_->store->check({key("failed", r)})) continue;
      const std::int64_t now = counter(*impl_->store, key("alive", r));
      if (now == before[static_cast<std::size_t>(r)]) (now < 0 ? never : gone).push_back(r);
    }
    std::string lost;
    std::vector<std::string> names;
    const auto say = [&](const std::vector<std::string>& parts, const std::string& why) {
      for (const auto& part : parts) lost += (lost.empty() ? "lost " : "; lost ") + part + ": " + why;
      names.insert(names.end(), parts.begin(), parts.end());
    };
    say(name_lost(gone), "no heartbeat for " + seconds_text(watch) +
                             " (killed, or its machine is unreachable)");
    say(name_lost(never), "it never joined");
    if (!names.empty()) {
      // For rank 0's runner: its job cannot go on without them (JobChannel::lost_in_run).
      std::vector<int> ranks = gone;
      ranks.insert(ranks.end(), never.begin(), never.end());
      impl_->store->set("lost", bytes_of(nlohmann::json{{"ranks", ranks}, {"text", join(names, "; ")}}
                                             .dump()));
    }
    if (lost.empty()) return failed;
    return failed.empty() ? lost : lost + "; " + failed;
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
