#include "runner/telemetry_sampler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/files.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

TEST(VisibleGpuIndicesTest, ReadsIndicesAndUuidsAndSkipsTheRest) {
  std::vector<std::string> uuids = {"GPU-aaaa-1", "GPU-bbbb-2"};
  EXPECT_EQ(VisibleGpuIndices("1,0", uuids), (std::vector<int>{1, 0}));
  EXPECT_EQ(VisibleGpuIndices(" GPU-bbbb , x, -1", uuids), (std::vector<int>{1}));
  EXPECT_TRUE(VisibleGpuIndices("", uuids).empty());
}

// A child that forks a grandchild; both sleep until killed.
pid_t SpawnTree() {
  pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    if (::fork() == 0) {
      ::pause();
      ::_exit(0);
    }
    ::pause();
    ::_exit(0);
  }
  return child;
}

TEST(ProcessTableTest, FindsChildrenAndGrandchildrenAndForgetsTheDead) {
  pid_t child = SpawnTree();
  ASSERT_GT(child, 0);
  ProcessTable table;
  std::vector<std::pair<pid_t, ProcStat>> below;
  for (int i = 0; i < 200 && below.size() < 2; ++i) {
    below = table.Below(::getpid());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(below.size(), 2u);
  EXPECT_EQ(below[0].first, child);
  EXPECT_EQ(below[1].second.ppid, child);
  ::kill(-child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // The grandchild goes to init (or a subreaper): nothing is below us.
  for (int i = 0; i < 200 && !below.empty(); ++i) {
    below = table.Below(::getpid());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(below.empty());
}

TEST(TelemetrySamplerTest, SamplesABusyChildIntoTheFile) {
  fs::path dir = fs::temp_directory_path() / ("sampler-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  pid_t child = ::fork();
  if (child == 0) {
    volatile unsigned long x = 0;
    for (;;) x = x + 1;  // one core, until killed
  }
  ASSERT_GT(child, 0);
  {
    TelemetrySampler sampler(dir / "telemetry.jsonl", {0.2, 2, 1 << 30}, {}, ::getpid());
    sampler.Start();
    std::this_thread::sleep_for(std::chrono::milliseconds(1800));
    sampler.Stop();
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  Result<std::string> text = ReadFile(dir / "telemetry.jsonl");
  ASSERT_TRUE(text.ok()) << text.status().message();
  std::vector<telemetry::Point> points = telemetry::ParsePoints(*text);
  ASSERT_GE(points.size(), 3u);
  const telemetry::Point& last = points.back();
  EXPECT_EQ(last.processes, 1);
  EXPECT_GT(last.cpu_percent, 30);  // a shared CI core still gives it a good part
  EXPECT_LT(last.cpu_percent, 110);
  EXPECT_GT(last.rss_bytes, 0u);
  EXPECT_EQ(last.cpus, 2);
  EXPECT_GT(last.sampler_cpu_seconds, 0);
  EXPECT_TRUE(last.gpus.empty());
  // The child is named once, in the first point, as a process of the replica.
  EXPECT_EQ(points.front().new_pids, std::vector<int64_t>{child});
  EXPECT_EQ(telemetry::ProcessesSeen(points), std::vector<int64_t>{child});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker::runner
