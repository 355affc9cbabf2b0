// Fair-share usage: per-user GPU time, decayed with a half-life.
//
// A user's usage at time `now` is the integral over the GPU time they held of
// 2^-((now - t) / half_life): an hour of one GPU just ended counts 3600
// GPU-seconds, the same hour one half-life ago counts 1800. The control loop
// accrues it tick by tick while jobs run (Controller::AccrueUsage); after a
// restart it rebuilds it from the store's history with UsageFromHistory, so
// fair share survives a daemon restart without a table of its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace stoker::server {

// GPUs (whole-GPU equivalents) held by one user from start_us to end_us.
struct GpuInterval {
  std::string user;
  double gpus = 0;
  int64_t start_us = 0;
  int64_t end_us = 0;
};

// Decayed GPU-seconds per user at `now_us`. Intervals ending after `now_us`
// count up to `now_us`; empty or inverted intervals count nothing.
// half_life_s must be > 0.
std::map<std::string, double> UsageFromHistory(const std::vector<GpuInterval>& intervals,
                                               int64_t now_us, double half_life_s);

// Whole-GPU equivalents that placed replicas hold: the sum of their GPU
// shares' fractions (a whole GPU is 1).
double HeldGpus(const std::vector<scheduler::PlacedReplica>& placed);

}  // namespace stoker::server
