#include "telemetry/telemetry.h"

#include <gtest/gtest.h>

namespace stoker::telemetry {
namespace {

Point At(double t, double cpu, uint64_t rss, std::optional<double> gpu_util = std::nullopt) {
  Point p;
  p.t = t;
  p.dt = 5;
  p.cpu_percent = cpu;
  p.rss_bytes = p.rss_max_bytes = rss;
  p.cpus = 4;
  p.memory_booked_bytes = 1000;
  p.processes = 2;
  if (gpu_util) {
    GpuPoint g;
    g.index = 1;
    g.util_percent = gpu_util;
    g.memory_bytes = 50;
    g.device_util_percent = 99;
    g.device_memory_total_bytes = 100;
    g.power_watts = 200;
    p.gpus.push_back(g);
  }
  return p;
}

TEST(TelemetryTest, APointSurvivesItsLineFormat) {
  Point p = At(1764139200.5, 93.25, 123456, 42.0);
  p.sampler_cpu_seconds = 0.125;
  p.gpus[0].energy_joules = 7.5;
  std::optional<Point> back = ParsePoint(FormatPoint(p));
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->t, 1764139200.5);
  EXPECT_DOUBLE_EQ(back->cpu_percent, 93.25);
  EXPECT_EQ(back->rss_bytes, 123456u);
  EXPECT_DOUBLE_EQ(back->sampler_cpu_seconds, 0.125);
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0].index, 1);
  EXPECT_DOUBLE_EQ(*back->gpus[0].util_percent, 42.0);
  EXPECT_DOUBLE_EQ(*back->gpus[0].energy_joules, 7.5);
}

TEST(TelemetryTest, ParsingSkipsATornLastLineAndGarbage) {
  std::string text = FormatPoint(At(1, 10, 1)) + "\nnot json\n[1,2]\n" + FormatPoint(At(2, 20, 2)) +
                     "\n" + FormatPoint(At(3, 30, 3)).substr(0, 20);
  std::vector<Point> points = ParsePoints(text);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_DOUBLE_EQ(points[1].cpu_percent, 20);
}

TEST(TelemetryTest, HostileNumbersAreClampedNotTrusted) {
  std::optional<Point> p = ParsePoint(
      R"({"t":1,"dt":-5,"cpuPercent":-3,"rssBytes":-1,"processes":1e300,"gpus":[5,{"index":-2}]})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->dt, 0);
  EXPECT_EQ(p->cpu_percent, 0);
  EXPECT_EQ(p->rss_bytes, 0u);
  EXPECT_EQ(p->processes, 1000000000);
  ASSERT_EQ(p->gpus.size(), 1u);
  EXPECT_EQ(p->gpus[0].index, 0);
}

TEST(TelemetryTest, MergeWeighsByTimeAndKeepsTheNewerCounters) {
  Point a = At(5, 100, 100, 10.0);
  Point b = At(20, 0, 300, 40.0);
  b.dt = 15;
  b.sampler_cpu_seconds = 2;
  Point m = Merge(a, b);
  EXPECT_DOUBLE_EQ(m.t, 20);
  EXPECT_DOUBLE_EQ(m.dt, 20);
  EXPECT_DOUBLE_EQ(m.cpu_percent, 25);  // 100 for 5 s, 0 for 15 s
  EXPECT_EQ(m.rss_bytes, 250u);
  EXPECT_EQ(m.rss_max_bytes, 300u);
  EXPECT_DOUBLE_EQ(*m.gpus[0].util_percent, 32.5);
  EXPECT_DOUBLE_EQ(m.sampler_cpu_seconds, 2);
}

TEST(TelemetryTest, CompactBoundsTheFileAndKeepsTheRecentPastWhole) {
  std::vector<Point> points;
  for (size_t i = 0; i <= kMaxPoints; ++i) points.push_back(At(5.0 * (i + 1), 50, 10));
  const double covered_before = 5.0 * points.size();
  Compact(points);
  EXPECT_LE(points.size(), kMaxPoints);
  double covered = 0;
  for (const Point& p : points) covered += p.dt;
  EXPECT_DOUBLE_EQ(covered, covered_before);  // the whole run, coarser
  EXPECT_DOUBLE_EQ(points.back().t, 5.0 * (kMaxPoints + 1));
  for (size_t i = points.size() - kKeepRecent; i < points.size(); ++i) EXPECT_EQ(points[i].dt, 5);
  EXPECT_EQ(points.front().dt, 10);
  // Many compactions later, still bounded and still the whole run.
  for (int round = 0; round < 20; ++round) {
    while (points.size() <= kMaxPoints) points.push_back(At(points.back().t + 5, 50, 10));
    Compact(points);
  }
  EXPECT_LE(points.size(), kMaxPoints);
}

TEST(TelemetryTest, SummaryFlagsAnIdleGpuAndIdleCpus) {
  std::vector<Point> points = {At(5, 40, 100, 5.0), At(10, 40, 200, 3.0), At(15, 40, 950, 90.0),
                               At(20, 40, 100, 1.0)};
  std::optional<Summary> s = Summarize(points);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->sampled_seconds, 20);
  EXPECT_DOUBLE_EQ(*s->cpu_util_percent, 10);  // 40% of one core over 4 booked
  EXPECT_EQ(s->rss_max_bytes, 950u);
  EXPECT_DOUBLE_EQ(*s->memory_util_percent, 95);
  ASSERT_EQ(s->gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(*s->gpus[0].util_percent, 24.75);
  EXPECT_DOUBLE_EQ(s->gpus[0].idle_share, 0.75);
  EXPECT_DOUBLE_EQ(s->gpus[0].memory_util_percent, 50);
  ASSERT_EQ(s->flags.size(), 3u);
  EXPECT_NE(s->flags[0].find("GPU 1 was under 15% busy for 75% of the run"), std::string::npos);
  EXPECT_NE(s->flags[1].find("CPUs: 10% of the 4 booked"), std::string::npos);
  EXPECT_NE(s->flags[2].find("memory: the peak was 95%"), std::string::npos);
}

TEST(TelemetryTest, ABusyRunHasNoFlagsAndTooFewSamplesAreNotJudged) {
  std::vector<Point> busy = {At(5, 390, 100, 95.0), At(10, 390, 100, 97.0), At(15, 390, 100, 96.0)};
  EXPECT_TRUE(Summarize(busy)->flags.empty());
  std::vector<Point> short_run = {At(5, 0, 100, 0.0)};
  EXPECT_TRUE(Summarize(short_run)->flags.empty());
  EXPECT_FALSE(Summarize({}));
}

TEST(TelemetryTest, DeviceUseStandsInWhenNvmlGaveNoProcessSample) {
  Point p = At(5, 0, 0, 0.0);
  p.gpus[0].util_percent.reset();
  p.gpus[0].device_util_percent = 80;
  EXPECT_DOUBLE_EQ(*Summarize({p})->gpus[0].util_percent, 80);
}

// Two GPUs over three 5 s points: GPU 1 with the replica's own SM samples,
// GPU 2 (half of it the replica's) with the device's use only.
std::vector<Point> TwoGpuRun() {
  std::vector<Point> run;
  for (int i = 1; i <= 3; ++i) {
    Point p = At(5.0 * i, 0, 0, 40.0);  // GPU 1: the replica's processes 40% busy
    p.gpus[0].energy_joules = 1000.0 * i;
    GpuPoint two;
    two.index = 2;
    two.device_util_percent = 60;
    two.energy_joules = 500.0 * i;
    p.gpus.push_back(two);
    run.push_back(p);
  }
  return run;
}

TEST(TelemetryTest, TheLedgerCountsOwnSamplesWholeAndDeviceUseByShare) {
  GpuUse use = UseOfGpus(TwoGpuRun(), [](int index) { return index == 2 ? 0.5 : 1.0; });
  EXPECT_DOUBLE_EQ(use.sampled_s, 15);
  // GPU 1: 40% of 15 s; GPU 2: half of 60% of 15 s.
  EXPECT_DOUBLE_EQ(use.busy_gpu_s, 0.4 * 15 + 0.5 * 0.6 * 15);
  ASSERT_TRUE(use.energy_j.has_value());
  EXPECT_DOUBLE_EQ(*use.energy_j, 3000 + 0.5 * 1500);  // each counter's last value
}

TEST(TelemetryTest, EnergyIsUnknownWhenAGpuNeverHadACounterAndCpuPointsAreNotSampledTime) {
  std::vector<Point> run = TwoGpuRun();
  for (Point& p : run) p.gpus[1].energy_joules.reset();
  run.push_back(At(20, 100, 10));  // a point without GPUs (NVML failed)
  GpuUse use = UseOfGpus(run, [](int) { return 1.0; });
  EXPECT_DOUBLE_EQ(use.sampled_s, 15);
  EXPECT_FALSE(use.energy_j.has_value());
  // A counter missing from the last point only (it went backwards): the
  // last value it had still counts.
  run = TwoGpuRun();
  run.back().gpus[0].energy_joules.reset();
  EXPECT_DOUBLE_EQ(*UseOfGpus(run, [](int) { return 1.0; }).energy_j, 2000 + 1500);
  EXPECT_DOUBLE_EQ(UseOfGpus({}, [](int) { return 1.0; }).sampled_s, 0);
}

TEST(TelemetryTest, TheProcessesSeenSurviveTheFormatAndMergesKeepTheEarliest) {
  Point a = At(5, 0, 0);
  a.new_pids = {101, 102};
  Point b = At(10, 0, 0);
  b.new_pids = {103};
  EXPECT_EQ(ParsePoint(FormatPoint(a))->new_pids, (std::vector<int64_t>{101, 102}));
  EXPECT_EQ(ParsePoint(FormatPoint(At(5, 0, 0)))->new_pids, std::vector<int64_t>{});
  EXPECT_EQ(ProcessesSeen({a, b, a}), (std::vector<int64_t>{101, 102, 103}));
  EXPECT_EQ(Merge(a, b).new_pids, (std::vector<int64_t>{101, 102, 103}));
  // Bounded, the earliest kept; a hostile line's junk is dropped.
  Point many = At(5, 0, 0);
  for (int i = 1; i <= 100; ++i) many.new_pids.push_back(i);
  EXPECT_EQ(Merge(many, b).new_pids.size(), kMaxNewPids);
  EXPECT_EQ(Merge(many, b).new_pids.back(), static_cast<int64_t>(kMaxNewPids));
  EXPECT_EQ(ParsePoint(R"({"t": 1, "newPids": [-1, "x", 7, 0, 9]})")->new_pids,
            (std::vector<int64_t>{7, 9}));
}

}  // namespace
}  // namespace stoker::telemetry
