#include "runner/scheduler/job.hpp"

#include <nlohmann/json.hpp>

#include "runner/common/error.hpp"
#include "runner/engine/engine.hpp"
#include "runner/fingerprint/node_layout.hpp"
#include "runner/process/isolation.hpp"
#include "runner/runtime/runtime.hpp"

namespace runner {

JobAnnouncer::JobAnnouncer(const JobEnvironment& job, std::chrono::milliseconds timeout)
    : channel_(job, timeout), timeout_(timeout), world_size_(job.world_size) {}

JobAnnouncer::~JobAnnouncer() {
  try {
    channel_.announce(next_, "end");
    // This process serves the store: it stays until the others have read the end.
    (void)channel_.wait_for_end(timeout_, lost_);
  } catch (...) {
    // The other ranks see the store go away instead.
  }
}

Rendezvous JobAnnouncer::announce(std::size_t experiment, std::size_t trial, std::int64_t repeat,
                                  const Trial& which) {
  if (next_ > 0)
    if (const auto lost = channel_.lost_in_run(next_ - 1)) {
      lost_ = static_cast<int>(lost->first.size());
      throw Error("the job lost " + lost->second + " in its last run, so its other runs cannot run",
                  "restart the job (the same torchrun command): runner resumes, running what "
                  "is missing",
                  ErrorKind::run);
    }
  if (layout_.empty())
    layout_ = nlohmann::json(job_layout_fields(channel_.places(timeout_), world_size_)).dump();
  const std::int64_t sequence = next_++;
  channel_.describe_run(sequence, layout_);
  const nlohmann::json text = {{"experiment", experiment},
                               {"trial", trial},
                               {"repeat", repeat},
                               {"config", which.experiment.config_hash()},
                               {"name", trial_name(which)}};
  channel_.announce(sequence, text.dump());
  const auto timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(which.experiment.distributed.timeout_s * 1000.0));
  return channel_.rendezvous(sequence, timeout);
}

int follow_job(const JobEnvironment& job, const Sweep& sweep, std::chrono::milliseconds timeout,
               const std::function<void(const std::string&)>& say,
               const std::atomic<bool>* stop) {
  const std::string me = "rank " + std::to_string(job.rank);
  std::unique_ptr<JobChannel> channel;
  try {
    channel = std::make_unique<JobChannel>(job, timeout);
  } catch (const Error& e) {
    say(e.what());
    return 3;
  }
  say(me + " of " + std::to_string(job.world_size) + ": following rank 0 at " + job.master_addr +
      ":" + std::to_string(job.master_port));
  int code = 0;
  for (std::int64_t sequence = 0;; ++sequence) {
    std::optional<std::string> text;
    try {
      text = channel->next(sequence, stop);
    } catch (const Error& e) {
      say(e.what());
      return 3;
    }
    if (!text) return 130;  // interrupted
    if (*text == "end") {
      channel->acknowledge_end();
      return code;
    }
    const nlohmann::json run = nlohmann::json::parse(*text);
    const auto experiment = run.at("experiment").get<std::size_t>();
    const auto trial = run.at("trial").get<std::size_t>();
    const auto repeat = run.at("repeat").get<std::int64_t>();
    const std::string name = run.at("name").get<std::string>();
    if (experiment >= sweep.size() || trial >= sweep[experiment]->trials.size() ||
        sweep[experiment]->trials[trial].experiment.config_hash() !=
            run.at("config").get<std::string>()) {
      say(me + ": rank 0 runs " + name + ", which is not trial " + std::to_string(trial + 1) +
          " of this rank's experiment files: every rank must run the same files with the same "
          "--set options");
      return 2;
    }
    const PreparedExperiment& prepared = *sweep[experiment];
    const Experiment& exp = prepared.trials[trial].experiment;
    const Rendezvous rendezvous = channel->rendezvous(
        sequence,
        std::chrono::milliseconds(static_cast<std::int64_t>(exp.distributed.timeout_s * 1000.0)));
    std::string outcome;
    try {
      outcome = capture_in_child([&] {
        const RuntimeRequest runtime = exp.runtime_request();
        apply_runtime(runtime);
        configure_runtime(exp);
        verify_runtime(runtime);
        RunRequest request;
        request.experiment = &exp;
        request.host = prepared.host.get();
        request.repeat_index = repeat;
        request.stop = stop;
        const std::string failure = execute_rank(request, rendezvous);
        return failure.empty() ? std::string("ok") : "failed: " + failure;
      });
    } catch (const Error& e) {
      outcome = std::string("failed: ") + e.what();
    }
    if (outcome != "ok") code = 1;
    say(me + ": " + name + " repetition " + std::to_string(repeat + 1) + ": " +
        (outcome == "ok" ? std::string("done") : outcome));
  }
}

}  // namespace runner
