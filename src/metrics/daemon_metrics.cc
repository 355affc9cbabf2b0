#include "metrics/daemon_metrics.h"

#include <algorithm>

namespace stoker::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The first bucket whose bound is >= value (le is inclusive); +Inf when none.
  size_t i =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += value;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard lock(mu_);
  s.cumulative.reserve(counts_.size());
  uint64_t total = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(total += c);
  s.sum = sum_;
  s.count = total;
  return s;
}

DaemonMetrics::DaemonMetrics(const Clock& clock)
    : clock_(clock),
      start_time_us_(clock.NowMicros()),
      scheduling_pass_seconds_(SchedulingPassBounds()),
      submit_to_start_seconds_(SubmitToStartBounds()) {}

#ifndef STOKER_BUILD_TYPE
#define STOKER_BUILD_TYPE ""
#endif

const char* DaemonMetrics::BuildType() { return STOKER_BUILD_TYPE; }

const char* DaemonMetrics::Compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown";
#endif
}

std::vector<double> DaemonMetrics::SchedulingPassBounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

std::vector<double> DaemonMetrics::SubmitToStartBounds() {
  // From a launch on an idle node (well under a second) to a day in the queue.
  return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};
}

void DaemonMetrics::ControlLoopPassed() {
  last_pass_us_.store(clock_.NowMicros());
  passes_.fetch_add(1);
}

void DaemonMetrics::SetGpuSample(std::vector<resources::GpuUsage> gpus) {
  const int64_t now = clock_.NowMicros();
  std::lock_guard lock(gpu_mu_);
  gpu_sample_.time_us = now;
  gpu_sample_.gpus = std::move(gpus);
}

DaemonMetrics::GpuSample DaemonMetrics::gpu_sample() const {
  std::lock_guard lock(gpu_mu_);
  return gpu_sample_;
}

void DaemonMetrics::Responded(int status) {
  int cls = status / 100;
  if (cls >= 1 && cls <= 5) responses_[cls].fetch_add(1, std::memory_order_relaxed);
}

std::array<uint64_t, 6> DaemonMetrics::responses() const {
  std::array<uint64_t, 6> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = responses_[i].load(std::memory_order_relaxed);
  return out;
}

}  // namespace stoker::metrics
