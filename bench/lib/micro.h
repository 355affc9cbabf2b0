// What the micro benchmarks (cgroup-micro, isolation-micro, store-micro)
// share: a monotonic clock in milliseconds and the p50/p90/p99 of a sample.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace stoker::bench {

inline double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Percentiles {
  double p50, p90, p99;
};

// The 50th, 90th and 99th percentile (nearest rank) of a non-empty sample.
inline Percentiles PercentilesOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return {v[n / 2], v[n * 9 / 10], v[std::min(n - 1, n * 99 / 100)]};
}

}  // namespace stoker::bench
