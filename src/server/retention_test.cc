// The retention rule (pure) and ApplyRetention against a real SQLite store
// and real directories.
#include "server/retention.h"

#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "exec/local_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kDay = 86400'000'000LL;
constexpr int64_t kNow = 1000 * kDay;

TEST(JobsToRemoveTest, RemovesJobsThatEndedLongerAgoThanTheLimit) {
  config::RetentionPolicy p{.replica_dirs_days = 7, .max_finished_replica_dirs = -1};
  auto out =
      JobsToRemove({{1, kNow - 8 * kDay}, {2, kNow - 6 * kDay}, {3, kNow - 7 * kDay}}, kNow, p);
  EXPECT_THAT(out, ElementsAre(1, 3));
}

TEST(JobsToRemoveTest, ZeroDaysRemovesEveryFinishedJob) {
  config::RetentionPolicy p{.replica_dirs_days = 0, .max_finished_replica_dirs = -1};
  EXPECT_THAT(JobsToRemove({{5, kNow}, {4, kNow - 1}}, kNow, p), ElementsAre(4, 5));
}

TEST(JobsToRemoveTest, KeepsOnlyTheNewestWhenOverTheCount) {
  config::RetentionPolicy p{.replica_dirs_days = -1, .max_finished_replica_dirs = 2};
  // Oldest end first; equal ends go by id.
  auto out = JobsToRemove({{10, kNow - 5}, {11, kNow - 9}, {12, kNow - 9}, {13, kNow}}, kNow, p);
  EXPECT_THAT(out, ElementsAre(11, 12));
}

TEST(JobsToRemoveTest, AppliesBothRulesTogether) {
  config::RetentionPolicy p{.replica_dirs_days = 1, .max_finished_replica_dirs = 1};
  auto out = JobsToRemove({{1, kNow - 2 * kDay}, {2, kNow - 10}, {3, kNow - 5}}, kNow, p);
  EXPECT_THAT(out, ElementsAre(1, 2));
}

TEST(JobsToRemoveTest, KeepsEverythingWhenBothRulesAreOff) {
  config::RetentionPolicy p{.replica_dirs_days = -1, .max_finished_replica_dirs = -1};
  EXPECT_THAT(JobsToRemove({{1, 0}, {2, kNow}}, kNow, p), IsEmpty());
}

class ApplyRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_retention_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = store::Store::Open(dir_).value();
    executor_ = std::make_unique<exec::LocalExecutor>(dir_, dir_ / "stoker-run");
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  // A job with a replica directory; ended `ended_ago` before kNow, or running.
  int64_t Job(std::optional<int64_t> ended_ago) {
    auto job = store_->CreateJob({"p", "l", "j", nlohmann::json{{"displayName", "j"}}, {}}).value();
    EXPECT_TRUE(MakeDirs(ReplicaDir(job.id)).ok());
    EXPECT_TRUE(WriteFileAtomic(ReplicaDir(job.id) / "output.log", "hello\n").ok());
    if (ended_ago) End(job.id, *ended_ago);
    return job.id;
  }
  void End(int64_t id, int64_t ended_ago) {
    store::TransitionUpdate u;
    u.end_time_us = kNow - ended_ago;
    EXPECT_TRUE(
        store_->Transition(id, spec::JobState::kQueued, spec::JobState::kSucceeded, "done", u)
            .ok());
  }
  fs::path ReplicaDir(int64_t id) { return dir_ / "jobs" / std::to_string(id) / "workerpool0-0"; }
  bool Exists(int64_t id) { return fs::exists(dir_ / "jobs" / std::to_string(id)); }

  fs::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<exec::LocalExecutor> executor_;  // the real replica-directory layout
  RetentionState state_;
};

TEST_F(ApplyRetentionTest, RemovesOnlyFinishedJobsPastThePolicyAndNeverBuckets) {
  config::RetentionPolicy p{.replica_dirs_days = 7, .max_finished_replica_dirs = 100};
  ASSERT_TRUE(MakeDirs(dir_ / "buckets" / "b").ok());
  int64_t old_job = Job(8 * kDay), recent = Job(kDay), running = Job(std::nullopt);
  ApplyRetention(state_, p, *store_, *executor_, kNow);
  EXPECT_FALSE(Exists(old_job));
  EXPECT_TRUE(Exists(recent));
  EXPECT_TRUE(Exists(running));
  EXPECT_TRUE(fs::exists(dir_ / "buckets" / "b"));
  EXPECT_EQ(state_.removed_total, 1);
}

TEST_F(ApplyRetentionTest, WaitsForTheScanIntervalThenSeesJobsThatEndedMeanwhile) {
  config::RetentionPolicy p{
      .replica_dirs_days = 0, .max_finished_replica_dirs = -1, .scan_interval_seconds = 60};
  int64_t running = Job(std::nullopt);
  ApplyRetention(state_, p, *store_, *executor_, kNow);
  EXPECT_TRUE(Exists(running));
  End(running, 0);
  ApplyRetention(state_, p, *store_, *executor_, kNow + 1'000'000);  // within the interval
  EXPECT_TRUE(Exists(running));
  ApplyRetention(state_, p, *store_, *executor_, kNow + 61'000'000);
  EXPECT_FALSE(Exists(running));
  EXPECT_THAT(state_.unfinished, IsEmpty());
  EXPECT_THAT(state_.finished, IsEmpty());
}

TEST_F(ApplyRetentionTest, TheCountLimitBoundsItsOwnMemory) {
  config::RetentionPolicy p{
      .replica_dirs_days = -1, .max_finished_replica_dirs = 3, .scan_interval_seconds = 0};
  for (int i = 0; i < 20; ++i) Job(100 - i);
  for (int tick = 0; tick < 3; ++tick) ApplyRetention(state_, p, *store_, *executor_, kNow + tick);
  EXPECT_EQ(state_.finished.size(), 3u);
  EXPECT_EQ(state_.removed_total, 17);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "jobs"), fs::directory_iterator()), 3);
}

TEST_F(ApplyRetentionTest, JobsEndingPastTheCountLimitBringTheScanForward) {
  config::RetentionPolicy p{
      .replica_dirs_days = -1, .max_finished_replica_dirs = 2, .scan_interval_seconds = 60};
  Job(30);
  Job(20);
  ApplyRetention(state_, p, *store_, *executor_, kNow);  // at the limit, nothing to remove
  EXPECT_EQ(state_.next_scan_us, kNow + 60'000'000);
  int64_t newer = Job(10);
  ApplyRetention(state_, p, *store_, *executor_, kNow + 3'000'000);  // nobody said a job ended
  EXPECT_EQ(state_.removed_total, 0);
  state_.ended_since_scan = 1;
  ApplyRetention(state_, p, *store_, *executor_, kNow + 1'000'000);  // too soon after the last scan
  EXPECT_EQ(state_.removed_total, 0);
  ApplyRetention(state_, p, *store_, *executor_, kNow + 2'000'000);
  EXPECT_EQ(state_.removed_total, 1);
  EXPECT_TRUE(Exists(newer));
  EXPECT_EQ(state_.ended_since_scan, 0);
}

TEST_F(ApplyRetentionTest, JobsEndingBelowTheCountLimitWaitForTheInterval) {
  config::RetentionPolicy p{
      .replica_dirs_days = -1, .max_finished_replica_dirs = 5, .scan_interval_seconds = 60};
  Job(30);
  ApplyRetention(state_, p, *store_, *executor_, kNow);
  Job(20);
  state_.ended_since_scan = 1;
  ApplyRetention(state_, p, *store_, *executor_, kNow + 10'000'000);
  EXPECT_EQ(state_.last_scan_us, kNow);
}

}  // namespace
}  // namespace stoker::server
