#include "metrics/daemon_metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace stoker::metrics {
namespace {

TEST(HistogramTest, CountsEachObservationInTheFirstBucketWhoseBoundHoldsIt) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 100.0}) h.Observe(v);
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.upper_bounds, (std::vector<double>{0.1, 1, 10}));
  // le is inclusive: 0.1 counts in the 0.1 bucket, 1.0 in the 1 bucket.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 104.65);
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  Histogram h({1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 10000; ++i) h.Observe(i % 2 ? 0.5 : 2);
    });
  }
  for (std::thread& t : threads) t.join();
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, 40000u);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{20000, 40000}));
  EXPECT_DOUBLE_EQ(s.sum, 20000 * 0.5 + 20000 * 2);
}

TEST(DaemonMetricsTest, StampsPassesAndSamplesWithItsClockAndCountsResponsesByClass) {
  FakeClock clock(5'000'000);
  DaemonMetrics m(clock);
  EXPECT_EQ(m.start_time_us(), 5'000'000);
  EXPECT_EQ(m.last_pass_us(), 0);
  EXPECT_EQ(m.gpu_sample().time_us, 0);
  clock.Advance(1'000'000);
  m.ControlLoopPassed();
  m.ControlLoopPassed();
  EXPECT_EQ(m.last_pass_us(), 6'000'000);
  EXPECT_EQ(m.passes(), 2u);
  m.SetGpuSample({{.index = 1, .utilization_percent = 37, .memory_used_bytes = 1 << 30}});
  DaemonMetrics::GpuSample g = m.gpu_sample();
  EXPECT_EQ(g.time_us, 6'000'000);
  ASSERT_EQ(g.gpus.size(), 1u);
  EXPECT_EQ(g.gpus[0].index, 1);
  for (int status : {200, 201, 404, 500, 503, 302, 99, 600}) m.Responded(status);
  EXPECT_EQ(m.responses(), (std::array<uint64_t, 6>{0, 0, 2, 1, 1, 2}));
  m.JobStarted(0.3);
  m.SchedulingPassTook(0.002);
  EXPECT_EQ(m.submit_to_start_seconds().count, 1u);
  EXPECT_EQ(m.scheduling_pass_seconds().count, 1u);
}

}  // namespace
}  // namespace stoker::metrics
