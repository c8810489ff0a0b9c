// A run's memory figures (run_memory.hpp).
#include "run_memory.hpp"

#include <algorithm>
#include <string>

#include "runner/training/memory.hpp"

namespace runner {

RunMemory::RunMemory() {
  if (!training::cpu_memory::installed()) return;
  cpu_.on = true;
  reset(false);
  cpu_.start = current(false);
}

void RunMemory::add_cuda(int index) {
  cuda_index_ = index;
  cuda_.on = true;
  reset(true);
  cuda_.start = current(true);
}

std::int64_t RunMemory::current(bool cuda) const {
  return cuda ? training::cuda_memory::current_bytes(*cuda_index_)
              : training::cpu_memory::current_bytes();
}

std::int64_t RunMemory::peak(bool cuda) const {
  return cuda ? training::cuda_memory::peak_bytes(*cuda_index_)
              : training::cpu_memory::peak_bytes();
}

void RunMemory::reset(bool cuda) {
  if (cuda)
    training::cuda_memory::reset_peak(*cuda_index_);
  else
    training::cpu_memory::reset_peak();
}

RunMemory::Bytes RunMemory::live() const {
  return {cpu_.on ? current(false) : 0, cuda_.on ? current(true) : 0};
}

void RunMemory::add_data(const Bytes& before) {
  const Bytes after = live();
  // A loader that frees more than it keeps (a cache of an earlier run) holds nothing.
  cpu_.data += std::max<std::int64_t>(0, after.cpu - before.cpu);
  cuda_.data += std::max<std::int64_t>(0, after.cuda - before.cuda);
}

void RunMemory::begin_steps() {
  for (const bool cuda : {false, true}) {
    Counter& c = counter(cuda);
    if (!c.on) continue;
    c.setup_peak = peak(cuda);
    reset(cuda);
    c.steps_peak = 0;
  }
  steps_begun_ = true;
}

void RunMemory::restart_peak() {
  if (!steps_begun_) return;
  for (const bool cuda : {false, true}) {
    Counter& c = counter(cuda);
    if (!c.on) continue;
    c.steps_peak = 0;
    if (!paused_) reset(cuda);
  }
}

void RunMemory::pause() {
  if (!steps_begun_ || paused_) return;
  for (const bool cuda : {false, true}) {
    Counter& c = counter(cuda);
    if (c.on) c.steps_peak = std::max(c.steps_peak, peak(cuda));
  }
  paused_ = true;
}

void RunMemory::resume() {
  if (!paused_) return;
  for (const bool cuda : {false, true})
    if (counter(cuda).on) reset(cuda);
  paused_ = false;
}

void RunMemory::add_metrics(std::vector<store::Metric>& metrics) {
  if (cpu_.on) metrics.push_back({"data_set_bytes", static_cast<double>(cpu_.data), "B"});
  for (const bool cuda : {false, true}) {
    Counter& c = counter(cuda);
    if (!c.on) continue;
    const std::string name = cuda ? "peak_cuda_allocated" : "peak_cpu_alloc";
    // A run that failed before its first step has only its setup's peak.
    if (!steps_begun_) c.setup_peak = peak(cuda);
    const std::int64_t setup = std::max<std::int64_t>(0, c.setup_peak - c.start);
    metrics.push_back({name + "_setup_bytes", static_cast<double>(setup), "B"});
    if (!steps_begun_) continue;
    const std::int64_t highest = paused_ ? c.steps_peak : std::max(c.steps_peak, peak(cuda));
    // The baseline's bytes live on through the steps; only a cache of an
    // earlier run freed meanwhile could take the peak below it.
    const std::int64_t above = std::max<std::int64_t>(0, highest - c.start - c.data);
    metrics.push_back({name + "_bytes", static_cast<double>(above), "B"});
  }
}

}  // namespace runner
