// The daemon's own measurements for GET /metrics (docs/metrics.md): what the
// control loop and the HTTP handler count as they go, and the control loop's
// latest GPU sample. main.cc makes one and hands it to the controller
// (server::ControllerDeps) and to the API (ApiDeps), which renders it; it
// has a folder of its own, so that neither the API nor the server includes
// the other for it (docs/decisions/0017).
//
// Thread-safe: every method may be called from any thread. Writes are a few
// atomic adds or a short critical section, so the control loop never waits
// on a scrape for longer than a copy of the GPU sample.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "resources/nvml.h"

namespace stoker::metrics {

// A Prometheus histogram: observations counted into fixed buckets.
class Histogram {
 public:
  // `upper_bounds`: ascending, finite; the +Inf bucket is implied.
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    // Cumulative: cumulative[i] observations were <= upper_bounds[i]; the
    // last element (one more than the bounds) is the +Inf bucket, == count.
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  // A consistent copy (count, sum and buckets of the same observations).
  Snapshot Read() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; +Inf last
  double sum_ = 0;
};

class DaemonMetrics {
 public:
  // Times it stamps (start, the control loop's passes) come from `clock`,
  // which must outlive it; its construction is the daemon's start time.
  explicit DaemonMetrics(const Clock& clock = SystemClock());

  // ---- written by the control loop ----
  // One turn of the loop (Controller::RunOnce) ended.
  void ControlLoopPassed();
  // A scheduling decision took `seconds` (wall time).
  void SchedulingPassTook(double seconds) { scheduling_pass_seconds_.Observe(seconds); }
  // A job started for the first time, `seconds` after it was submitted.
  void JobStarted(double seconds_since_submit) {
    submit_to_start_seconds_.Observe(seconds_since_submit);
  }
  // The GPUs as last read through NVML (resources::QueryGpuUsage).
  void SetGpuSample(std::vector<resources::GpuUsage> gpus);

  // ---- written by the HTTP handler ----
  // A response went out with HTTP `status`.
  void Responded(int status);

  // ---- read by GET /metrics ----
  int64_t start_time_us() const { return start_time_us_; }
  // When the control loop last finished a pass; 0 = never.
  int64_t last_pass_us() const { return last_pass_us_.load(); }
  uint64_t passes() const { return passes_.load(); }
  Histogram::Snapshot scheduling_pass_seconds() const { return scheduling_pass_seconds_.Read(); }
  Histogram::Snapshot submit_to_start_seconds() const { return submit_to_start_seconds_.Read(); }
  struct GpuSample {
    int64_t time_us = 0;  // 0 = no sample yet
    std::vector<resources::GpuUsage> gpus;
  };
  GpuSample gpu_sample() const;
  // Responses by status class: [1] = 1xx ... [5] = 5xx ([0] unused).
  std::array<uint64_t, 6> responses() const;

  const Clock& clock() const { return clock_; }

  // How this binary was built: CMAKE_BUILD_TYPE and the compiler's version.
  static const char* BuildType();
  static const char* Compiler();

  // The buckets' upper bounds, in seconds.
  static std::vector<double> SchedulingPassBounds();
  static std::vector<double> SubmitToStartBounds();

 private:
  const Clock& clock_;
  const int64_t start_time_us_;
  std::atomic<int64_t> last_pass_us_{0};
  std::atomic<uint64_t> passes_{0};
  Histogram scheduling_pass_seconds_;
  Histogram submit_to_start_seconds_;
  std::array<std::atomic<uint64_t>, 6> responses_{};
  mutable std::mutex gpu_mu_;
  GpuSample gpu_sample_;
};

}  // namespace stoker::metrics
