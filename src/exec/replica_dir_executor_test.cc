// The reads every replica-directory executor shares (ReplicaDirExecutor),
// through the local executor: what the API, the controller and the studies
// see of a replica's files, and that a trainer's link or FIFO is not believed.
#include "exec/replica_dir_executor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "exec/local_executor.h"
#include "replica/log_stream.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

// Appends a mark of output.times as stoker-run writes one
// (replica/log_stream.h): the line start's offset, then its time, both
// 64-bit little-endian.
void AppendMark(const fs::path& times, uint64_t offset, int64_t time_us) {
  std::string rec;
  for (uint64_t v : {offset, static_cast<uint64_t>(time_us)}) {
    for (int b = 0; b < 8; ++b) rec.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
  }
  ASSERT_EQ(rec.size(), replica::kLogMarkBytes);
  std::ofstream(times, std::ios::app | std::ios::binary) << rec;
}

class ReplicaDirExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_replica_dir_executor_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = fs::canonical(tmpl);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
};

TEST_F(ReplicaDirExecutorTest, ReadsTheLogStreamAndItsTail) {
  LocalExecutor ex(root_, "/bin/false");
  fs::path dir = ex.ReplicaDir(7, 1, "workerpool0-0");
  fs::create_directories(dir);
  auto empty = ex.ReadLog(7, 1, "workerpool0-0", 0, 100);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->size, 0u);
  std::ofstream(dir / "output.log") << "one\ntwo\n";
  auto chunk = ex.ReadLog(7, 1, "workerpool0-0", 4, 100);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->data, "two\n");
  EXPECT_EQ(chunk->next_offset, 8u);
  EXPECT_EQ(chunk->size, 8u);
  EXPECT_EQ(ex.ReadLogTail(7, 1, "workerpool0-0", 4), "two\n");
  EXPECT_EQ(ex.SupervisorLog(7, 1, "workerpool0-0"), dir / "runner.log");
}

TEST_F(ReplicaDirExecutorTest, TelemetryPastItsLimitIsItsLastWholeLines) {
  LocalExecutor ex(root_, "/bin/false");
  fs::path dir = ex.ReplicaDir(7, 1, "workerpool0-0");
  EXPECT_EQ(ex.ReadTelemetry(7, 1, "workerpool0-0", 100), "");  // none yet
  fs::create_directories(dir);
  std::ofstream(dir / "telemetry.jsonl") << "aaaa\nbbbb\ncccc\n";
  EXPECT_EQ(ex.ReadTelemetry(7, 1, "workerpool0-0", 100), "aaaa\nbbbb\ncccc\n");
  EXPECT_EQ(ex.ReadTelemetry(7, 1, "workerpool0-0", 12), "bbbb\ncccc\n");  // "a\n" cut: dropped
  EXPECT_EQ(ex.ReadTelemetry(7, 1, "workerpool0-0", 10), "bbbb\ncccc\n");  // starts on a line
  EXPECT_EQ(ex.ReadTelemetry(7, 1, "workerpool0-0", 3), "");               // no whole line
  // A trainer's link in its place is not followed.
  fs::remove(dir / "telemetry.jsonl");
  fs::create_symlink("/etc/passwd", dir / "telemetry.jsonl");
  EXPECT_EQ(ex.ReadTelemetry(7, 1, "workerpool0-0", 100), "");
}

TEST_F(ReplicaDirExecutorTest, ReadsTheTimesOfTheLinesOfAChunk) {
  LocalExecutor ex(root_, "/bin/false");
  fs::path dir = ex.ReplicaDir(7, 1, "workerpool0-0");
  fs::create_directories(dir);
  std::ofstream(dir / "output.log") << "a first line of output\n"  // 0..23
                                    << "a second line\n";          // 23..37
  AppendMark(dir / "output.times", 0, 1'000'000);
  AppendMark(dir / "output.times", 23, 2'200'000);
  auto all = ex.ReadLog(7, 1, "workerpool0-0", 0, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->marks.size(), 2u);
  EXPECT_EQ(all->marks[1].offset, 23u);
  EXPECT_EQ(all->marks[1].time_us, 2'200'000);
  // A chunk inside the first line still gets the mark that dates it.
  auto inside = ex.ReadLog(7, 1, "workerpool0-0", 5, 10);
  ASSERT_TRUE(inside.ok());
  ASSERT_EQ(inside->marks.size(), 1u);
  EXPECT_EQ(inside->marks[0].offset, 0u);
  EXPECT_EQ(inside->marks[0].time_us, 1'000'000);
}

TEST_F(ReplicaDirExecutorTest, TrialMetricsComeFromTheTrainersFileThenThePushedOnes) {
  LocalExecutor ex(root_, "/bin/false");
  fs::path dir = ex.ReplicaDir(7, 1, "workerpool0-0");
  fs::create_directories(dir / "hypertune");
  EXPECT_EQ(ex.ReadTrialMetrics(7, 1, "workerpool0-0", 1 << 20).stamp, 0);
  EXPECT_EQ(ex.MetricFilePath(7, 1, "workerpool0-0"), dir / "hypertune/output.metrics");
  std::ofstream(dir / "hypertune/output.metrics") << "{\"a\": \"1\"}\n";
  ASSERT_TRUE(ex.AppendPushedMetrics(7, 1, "workerpool0-0", "{\"a\": \"2\"}").ok());
  TrialMetrics m = ex.ReadTrialMetrics(7, 1, "workerpool0-0", 1 << 20);
  EXPECT_NE(m.stamp, 0);
  EXPECT_EQ(m.text, "{\"a\": \"1\"}\n\n{\"a\": \"2\"}\n\n");
  EXPECT_TRUE(m.too_large.empty());
  // Unchanged: not read again.
  TrialMetrics again = ex.ReadTrialMetrics(7, 1, "workerpool0-0", 1 << 20, m.stamp);
  EXPECT_EQ(again.stamp, m.stamp);
  EXPECT_TRUE(again.text.empty());
  // Over the bound: named, not read.
  TrialMetrics big = ex.ReadTrialMetrics(7, 1, "workerpool0-0", 4);
  EXPECT_EQ(big.too_large,
            (std::vector<std::string>{"hypertune/output.metrics", "pushed.metrics"}));
}

TEST_F(ReplicaDirExecutorTest, ATrainersLinksLendNoProgressAndNoMetrics) {
  LocalExecutor ex(root_, "/bin/false");
  fs::path dir = ex.ReplicaDir(7, 1, "workerpool0-0");
  fs::create_directories(dir / "hypertune");
  std::ofstream(root_ / "secret") << "{\"a\": \"9\"}\n";
  fs::create_symlink(root_ / "secret", dir / "hypertune/output.metrics");
  EXPECT_EQ(ex.LastActivityUs(7, 1, "workerpool0-0"), 0);
  TrialMetrics m = ex.ReadTrialMetrics(7, 1, "workerpool0-0", 1 << 20);
  EXPECT_EQ(m.text.find("9"), std::string::npos) << m.text;
  ASSERT_EQ(::mkfifo((dir / "output.log").c_str(), 0600), 0);
  EXPECT_EQ(ex.LastActivityUs(7, 1, "workerpool0-0"), 0);
  fs::remove(dir / "output.log");
  std::ofstream(dir / "output.log") << "x\n";
  EXPECT_GT(ex.LastActivityUs(7, 1, "workerpool0-0"), 0);
}

}  // namespace
}  // namespace stoker::exec
