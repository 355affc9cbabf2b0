// The attempts unit alone, over a real store, a FakeExecutor and a
// FakeClock, with the job table filled as the controller fills it: what a
// drained attempt tells and bills, preemption's requeue, the checkpoint
// clock of rule 9, and retries counted without preemptions.
#include "server/attempts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/time.h"
#include "exec/fake_executor.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using spec::JobState;
using Key = exec::FakeExecutor::Key;

constexpr int64_t kSecond = 1'000'000;

class AttemptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_ = std::move(store::Store::Open(dir_, clock_)).value();
    config_.data_dir = dir_;
    config_.preemption.grace_seconds = 30;
    executor_.SetNow(clock_.NowMicros());
    funnel_ = std::make_unique<JobFunnel>(*store_, config_.webhooks, clock_, nullptr, history_);
    usage_ = std::make_unique<UsageMeter>(
        UsageMeterDeps{.config = &config_, .node = &node_, .store = store_.get(), .clock = &clock_},
        table_);
    attempts_ = std::make_unique<Attempts>(AttemptsDeps{.config = &config_,
                                                        .store = store_.get(),
                                                        .executor = &executor_,
                                                        .buckets = &buckets_,
                                                        .clock = &clock_,
                                                        .table = &table_,
                                                        .funnel = funnel_.get(),
                                                        .usage = usage_.get()});
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A job with `replicas` workers of pool 0, RUNNING since now (attempt 0),
  // in the store, the executor and the table.
  ActiveJob& RunningJob(int replicas, json scheduling = json::object()) {
    // The chief, then replicas - 1 workers of pool 1 (Vertex's first pool
    // has one replica).
    json pools = json::array();
    for (int p = 0; p < std::min(replicas, 2); ++p) {
      pools.push_back({{"machineSpec", {{"machineType", "e2-standard-4"}}},
                       {"replicaCount", p == 0 ? 1 : replicas - 1},
                       {"containerSpec", {{"imageUri", "local/sh"}}}});
    }
    json spec = {{"displayName", "j"}, {"jobSpec", {{"workerPoolSpecs", pools}}}};
    if (!scheduling.empty()) spec["jobSpec"]["scheduling"] = scheduling;
    store::NewJob n{.project = "p", .location = "l", .display_name = "j", .spec = spec};
    n.user = "ada";
    store::JobRecord rec = store_->CreateJob(n).value();
    ActiveJob a;
    a.rec = rec;
    a.job = spec::ParseCustomJob(a.rec.spec).value();
    table_.active[rec.id] = std::move(a);
    RunAgain(table_.active[rec.id]);
    return table_.active[rec.id];
  }

  void Advance(int64_t us) {
    clock_.Advance(us);
    executor_.SetNow(clock_.NowMicros());
  }
  bool HasEvent(int64_t id, const std::string& text) {
    std::vector<store::Event> events = store_->Events(id).value();
    for (const store::Event& e : events) {
      if (e.reason.find(text) != std::string::npos) return true;
    }
    return false;
  }

  // As the controller leaves a queued job once placed: its attempt RUNNING
  // (since now), its replicas running in the executor.
  void RunAgain(ActiveJob& a) {
    json alloc = {{"node", "box"}, {"replicas", json::array()}};
    const auto& pools = a.job.job_spec.worker_pool_specs;
    for (size_t p = 0; p < pools.size(); ++p) {
      for (int64_t i = 0; i < pools[p].replica_count; ++i) {
        alloc["replicas"].push_back(
            {{"name", "workerpool" + std::to_string(p) + "-" + std::to_string(i)},
             {"pool", p},
             {"index", i},
             {"cpus", 1.0},
             {"port", 0}});
      }
    }
    ASSERT_TRUE(funnel_->Move(a, JobState::kPending, "placed", {.allocation = alloc}));
    a.rec.allocation = alloc;
    for (const json& r : alloc["replicas"]) a.replicas.push_back(r["name"]);
    a.placed_us = clock_.NowMicros();
    ASSERT_TRUE(
        funnel_->Move(a, JobState::kRunning, "started", {.start_time_us = clock_.NowMicros()}));
    for (const std::string& name : a.replicas) {
      executor_.SetRunning({a.rec.id, a.rec.attempt, name}, clock_.NowMicros());
    }
  }

  FakeClock clock_{*ParseRfc3339Micros("2026-11-10T00:00:00Z")};
  fs::path dir_ =
      fs::temp_directory_path() / ("attempts_test_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::unique_ptr<store::Store> store_;
  config::Config config_;
  resources::Node node_;
  exec::FakeExecutor executor_{dir_};
  storage::Buckets buckets_{dir_, {}};
  JobTable table_;
  scheduler::RunHistory history_;
  std::unique_ptr<JobFunnel> funnel_;
  std::unique_ptr<UsageMeter> usage_;
  std::unique_ptr<Attempts> attempts_;
};

TEST_F(AttemptsTest, APreemptedAttemptIsBilledStoppedWithTheGraceAndRequeuedWithoutARetry) {
  ActiveJob& a = RunningJob(2);
  Advance(60 * kSecond);
  attempts_->Preempt(a, "by job 9 (user bob, priority 500)");
  store::JobRecord rec = store_->GetJob(a.rec.id).value();
  EXPECT_EQ(rec.state, JobState::kQueued);
  EXPECT_EQ(rec.attempt, 1);
  EXPECT_EQ(rec.preemptions, 1);
  EXPECT_EQ(rec.restart_reason, "preemption");
  EXPECT_TRUE(HasEvent(a.rec.id,
                       "PREEMPTED by job 9 (user bob, priority 500); its replicas get "
                       "SIGTERM and 30s to save a checkpoint, then SIGKILL"));
  EXPECT_TRUE(HasEvent(a.rec.id, "preemptions never count against maxRetries"));
  EXPECT_TRUE(HasEvent(a.rec.id,
                       "stopping workerpool0-0, workerpool1-0: its attempt ended; the "
                       "job runs again"));
  // The attempt's replicas were told to stop and hold their resources
  // until they are gone.
  ASSERT_EQ(executor_.cancels().size(), 1u);
  EXPECT_EQ(executor_.cancels()[0].attempt, 0);
  ASSERT_EQ(table_.draining.count({a.rec.id, 0}), 1u);
  std::vector<store::UsageRecord> rows = store_->JobUsage(a.rec.id).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].end, "preempted");
  EXPECT_TRUE(a.replicas.empty());
  table_.schedule_dirty = false;
  attempts_->ReapDrained();  // the fake's cancel ends them at once
  EXPECT_TRUE(table_.draining.empty());
  EXPECT_TRUE(table_.schedule_dirty);
}

TEST_F(AttemptsTest, ReplicasThatRunOnThroughTheGraceAreBilledUntilTheyEnd) {
  executor_.SetCancelEndsAtOnce(false);
  ActiveJob& a = RunningJob(1);
  Advance(100 * kSecond);
  const int64_t judged_us = clock_.NowMicros();
  attempts_->Preempt(a, "by job 9");
  attempts_->ReapDrained();
  ASSERT_EQ(table_.draining.size(), 1u);  // still stopping
  Advance(25 * kSecond);
  executor_.EndCancelled({a.rec.id, 0, "workerpool0-0"}, clock_.NowMicros());
  attempts_->ReapDrained();
  EXPECT_TRUE(table_.draining.empty());
  std::vector<store::UsageRecord> rows = store_->JobUsage(a.rec.id).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].end_us, judged_us + 25 * kSecond);
}

TEST_F(AttemptsTest, RetriesAfterAPreemptionCountOnlyTheFailures) {
  ActiveJob& a = RunningJob(1, {{"maxRetries", 1}});
  attempts_->Preempt(a, "by job 9");
  RunAgain(a);
  executor_.Exit({a.rec.id, 1, "workerpool0-0"}, 1, clock_.NowMicros());
  attempts_->Poll(a);
  EXPECT_EQ(a.rec.state, JobState::kQueued);
  EXPECT_EQ(a.rec.attempt, 2);
  EXPECT_TRUE(HasEvent(a.rec.id,
                       "Restarting all replicas as attempt 3 of 3 (its preemptions do "
                       "not count)."));
  RunAgain(a);
  executor_.Exit({a.rec.id, 2, "workerpool0-0"}, 1, clock_.NowMicros());
  attempts_->Poll(a);  // maxRetries 1 is used: the job fails
  EXPECT_EQ(store_->GetJob(a.rec.id)->state, JobState::kFailed);
}

TEST_F(AttemptsTest, UnsavedWorkStartsAtTheNewestCheckpointLookedAtMostEveryTenSeconds) {
  ActiveJob& a = RunningJob(1);
  const int64_t placed = a.placed_us;
  EXPECT_EQ(attempts_->LastCheckpointUs(a, clock_.NowMicros()), placed);  // none yet
  ASSERT_TRUE(buckets_.Create(storage::kOutputsBucket).ok());
  auto dir = buckets_.MakeDir(OutputUri(a.job, a.rec.id) + "checkpoints", "test");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  std::ofstream(*dir / "step-100.pt") << "weights";
  // The file's real mtime is after the fake clock's 2026-11-10.
  Advance(5 * kSecond);
  EXPECT_EQ(attempts_->LastCheckpointUs(a, clock_.NowMicros()), placed);  // not looked again yet
  Advance(6 * kSecond);
  EXPECT_GT(attempts_->LastCheckpointUs(a, clock_.NowMicros()), placed);
}

}  // namespace
}  // namespace stoker::server
