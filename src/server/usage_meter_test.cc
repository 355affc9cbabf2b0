// The usage meter over a real store and a FakeClock, with the job table
// filled as the controller fills it and the replicas' telemetry files given
// by a FakeExecutor: GPU telemetry into the ledger, the job.gpu_idle
// warning and webhook, budgets that warn and that stop jobs, and fair
// share's GPU time.
#include "server/usage_meter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/time.h"
#include "exec/fake_executor.h"
#include "telemetry/telemetry.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using spec::JobState;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;

class UsageMeterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("usage_meter_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    store_ = std::move(store::Store::Open(dir_, clock_)).value();
    node_.name = "box";
    node_.cpus = 16;
    node_.gpus = {{0, "NVIDIA_TESLA_T4", 16ull << 30, ""}, {1, "NVIDIA_TESLA_T4", 16ull << 30, ""}};
    config_.gpu_telemetry_seconds = 10;
    config_.webhooks = {
        {.url = "http://127.0.0.1:9/hook", .events = {"job.gpu_idle"}, .gpu_idle_minutes = 5}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  void MakeMeter(cost::Accountant* accountant = nullptr) {
    meter_ = std::make_unique<UsageMeter>(UsageMeterDeps{.config = &config_,
                                                         .node = &node_,
                                                         .store = store_.get(),
                                                         .clock = &clock_,
                                                         .accountant = accountant,
                                                         .files = &files_},
                                          table_);
  }

  // A job of `user` holding GPU `gpu` (a `fraction` of it), RUNNING since
  // now, in the store and in the table, as the controller leaves it.
  ActiveJob& RunningJob(const std::string& user, int gpu, double fraction = 1,
                        int64_t study_id = 0) {
    store::NewJob n{.project = "p", .location = "l", .display_name = "j"};
    n.user = user;
    n.study_id = study_id;
    n.trial_id = study_id ? "1" : "";
    n.spec = {{"displayName", "j"},
              {"jobSpec",
               {{"workerPoolSpecs",
                 {{{"machineSpec",
                    {{"machineType", "n1-standard-4"},
                     {"acceleratorType", "NVIDIA_TESLA_T4"},
                     {"acceleratorCount", 1}}},
                   {"replicaCount", 1},
                   {"containerSpec", {{"imageUri", "local/sh"}}}}}}}}};
    store::JobRecord rec = store_->CreateJob(n).value();
    json alloc = {{"node", "box"},
                  {"replicas",
                   {{{"name", "workerpool0-0"},
                     {"pool", 0},
                     {"cpus", 4.0},
                     {"memory_bytes", 15'000'000'000ull},
                     {"gpus", {gpu}},
                     {"gpu_shares", {{{"gpu", gpu}, {"fraction", fraction}}}},
                     {"gpu_type", "NVIDIA_TESLA_T4"}}}}};
    EXPECT_TRUE(store_
                    ->Transition(rec.id, JobState::kQueued, JobState::kPending, "placed",
                                 {.allocation = alloc})
                    .ok());
    EXPECT_TRUE(store_
                    ->Transition(rec.id, JobState::kPending, JobState::kRunning, "started",
                                 {.start_time_us = clock_.NowMicros()})
                    .ok());
    ActiveJob a;
    a.rec = store_->GetJob(rec.id).value();
    a.job = spec::ParseCustomJob(a.rec.spec).value();
    a.replicas = {"workerpool0-0"};
    a.placed = PlacedFromAllocation(alloc, node_);
    a.placed_us = clock_.NowMicros();
    return table_.active[rec.id] = std::move(a);
  }

  // For `seconds`, every 10 s (gpu_telemetry_seconds): the replica's
  // supervisor appends a telemetry point of its GPU `gpu` `busy` percent
  // busy (the device's use; NVML gave no per-process sample) and drawing
  // `watts`, and the loop runs WatchGpus.
  void Sample(const ActiveJob& a, int gpu, double busy, double watts, int seconds) {
    for (int t = 0; t < seconds; t += 10) {
      clock_.Advance(10 * kSecond);
      energy_j_ += watts * 10;
      telemetry::Point p;
      p.t = static_cast<double>(clock_.NowMicros()) / 1e6;
      p.dt = 10;
      p.processes = 1;
      p.gpus = {{.index = gpu, .device_util_percent = busy, .energy_joules = energy_j_}};
      telemetry_ += telemetry::FormatPoint(p) + "\n";
      files_.SetTelemetry({a.rec.id, a.rec.attempt, "workerpool0-0"}, telemetry_);
      meter_->WatchGpus();
    }
  }

  std::vector<std::string> Events(int64_t id) {
    std::vector<std::string> out;
    std::vector<store::Event> events = store_->Events(id).value();
    for (const store::Event& e : events) out.push_back(e.reason);
    return out;
  }
  int CountEvents(int64_t id, const std::string& text) {
    int n = 0;
    for (const std::string& e : Events(id)) n += e.find(text) != std::string::npos;
    return n;
  }

  FakeClock clock_{*ParseRfc3339Micros("2026-11-10T00:00:00Z")};
  fs::path dir_;
  std::unique_ptr<store::Store> store_;
  config::Config config_;
  resources::Node node_;
  JobTable table_;
  exec::FakeExecutor files_{fs::temp_directory_path()};
  std::string telemetry_;  // the running replica's telemetry.jsonl
  double energy_j_ = 0;    // its GPU's energy since its sampler started
  std::unique_ptr<UsageMeter> meter_;
};

TEST_F(UsageMeterTest, TheLedgerGetsEachReplicasShareOfItsGpusBusyTimeAndEnergy) {
  MakeMeter();
  ActiveJob& a = RunningJob("ada", 1, 0.5);
  Sample(a, /*gpu=*/1, /*busy=*/80, /*watts=*/200, /*seconds=*/50);
  clock_.Advance(3 * kSecond);  // the trainer's exit, before the next point
  meter_->RecordAttempt(
      a, {{.name = "workerpool0-0", .start_us = a.rec.start_time_us, .end_us = clock_.NowMicros()}},
      "succeeded");
  std::vector<store::UsageRecord> rows = store_->JobUsage(a.rec.id).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].sampled_seconds, 50);
  // Half of GPU 1, 80% busy for 50 s; half of its 200 W for 50 s.
  EXPECT_NEAR(rows[0].busy_gpu_seconds, 0.5 * 0.8 * 50, 1e-6);
  ASSERT_TRUE(rows[0].energy_joules.has_value());
  EXPECT_NEAR(*rows[0].energy_joules, 0.5 * 200 * 50, 1e-6);
  EXPECT_EQ(a.recorded_usage.size(), 1u);
}

TEST_F(UsageMeterTest, IdleGpusWarnOnceAfterTheHooksMinutesAndAgainAfterABusySpell) {
  MakeMeter();
  ActiveJob& a = RunningJob("ada", 0);
  Sample(a, 0, /*busy=*/5, 100, 4 * 60);
  EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 0);  // 4 of the hook's 5 minutes
  Sample(a, 0, 5, 100, 2 * 60);
  EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 1);
  std::vector<store::OutboxMessage> sent = store_->OutboxHeads().value();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].event, "job.gpu_idle");
  json body = json::parse(sent[0].body);
  EXPECT_EQ(body["job"]["id"], std::to_string(a.rec.id));
  EXPECT_NEAR(body["gpuBusyPercent"].get<double>(), 5, 1e-9);
  Sample(a, 0, 5, 100, 10 * 60);  // the same idle stretch: told once
  EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 1);
  Sample(a, 0, 90, 100, 60);  // busy again, then idle again: a new stretch
  Sample(a, 0, 5, 100, 6 * 60);
  EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 2);
}

TEST_F(UsageMeterTest, ASharedGpuIsJudgedByTheReplicasOwnProcessesAndStalePointsNotAtAll) {
  config_.webhooks[0].gpu_idle_minutes = 1;
  MakeMeter();
  ActiveJob& a = RunningJob("ada", 0, 0.5);
  // The neighbour keeps the GPU 90% busy; the replica's own processes ran
  // kernels 2% of the time (NVML's per-process samples).
  telemetry::Point p;
  p.t = static_cast<double>(clock_.NowMicros()) / 1e6 + 10;
  p.dt = 10;
  p.processes = 1;
  p.gpus = {{.index = 0, .util_percent = 2, .device_util_percent = 90}};
  files_.SetTelemetry({a.rec.id, a.rec.attempt, "workerpool0-0"}, telemetry::FormatPoint(p) + "\n");
  // Its sampler then stops writing (say it hangs): that old point is not
  // the GPUs' state minutes later, and the gap is not idle time.
  for (int i = 0; i < 30; ++i) {
    clock_.Advance(10 * kSecond);
    meter_->WatchGpus();
  }
  EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 0);
  // Fresh points saying the same: idle by its own use, told once a
  // minute later.
  for (int i = 0; i < 8; ++i) {
    if (i == 5) {
      EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 0);  // 50 s
    }
    clock_.Advance(10 * kSecond);
    p.t = static_cast<double>(clock_.NowMicros()) / 1e6;
    files_.SetTelemetry({a.rec.id, a.rec.attempt, "workerpool0-0"},
                        telemetry::FormatPoint(p) + "\n");
    meter_->WatchGpus();
  }
  EXPECT_EQ(CountEvents(a.rec.id, "under 15% busy"), 1);
  json body = json::parse(store_->OutboxHeads().value().at(0).body);
  EXPECT_NEAR(body["gpuBusyPercent"].get<double>(), 2 / 0.5,
              1e-9);  // 2% of the whole GPU, of its half
}

TEST_F(UsageMeterTest, ABudgetPastItsThresholdWarnsItsScopesRunningJobsOnce) {
  cost::Accountant accountant(*store_, cost::Catalog::BuiltIn(),
                              cost::NodeShape{.cpus = 16, .gpu_types = {"NVIDIA_TESLA_T4"}},
                              clock_);
  ASSERT_TRUE(accountant.PutBudget({.scope = "user:ada", .monthly_gpu_hours = 10}).ok());
  MakeMeter(&accountant);
  ActiveJob& ada = RunningJob("ada", 0);
  ActiveJob& bob = RunningJob("bob", 1);
  clock_.Advance(9 * 3600 * kSecond);  // 9 of 10 GPU-hours: past the 80% threshold
  EXPECT_TRUE(meter_->EnforceBudgets().empty());
  EXPECT_EQ(CountEvents(ada.rec.id, "warning: budget user:ada"), 1);
  EXPECT_EQ(CountEvents(bob.rec.id, "budget"), 0);
  EXPECT_FALSE(ada.rec.cancel_requested);
  clock_.Advance(kMinute);
  meter_->EnforceBudgets();
  EXPECT_EQ(CountEvents(ada.rec.id, "warning: budget user:ada"), 1);
}

TEST_F(UsageMeterTest, AHardLimitWithStopRunningCancelsTheScopesJobsAndTheirStudies) {
  cost::Accountant accountant(*store_, cost::Catalog::BuiltIn(),
                              cost::NodeShape{.cpus = 16, .gpu_types = {"NVIDIA_TESLA_T4"}},
                              clock_);
  ASSERT_TRUE(
      accountant.PutBudget({.scope = "user:ada", .monthly_gpu_hours = 1, .stop_running = true})
          .ok());
  MakeMeter(&accountant);
  store::StudyRecord study = store_->CreateStudy("p", "l", "s", json::object(), "ada").value();
  ActiveJob& trial = RunningJob("ada", 0, 1, study.id);
  ActiveJob& bob = RunningJob("bob", 1);
  clock_.Advance(2 * 3600 * kSecond);
  std::vector<int64_t> studies = meter_->EnforceBudgets();
  EXPECT_EQ(studies, std::vector<int64_t>{study.id});
  EXPECT_TRUE(trial.rec.cancel_requested);
  EXPECT_TRUE(store_->GetJob(trial.rec.id)->cancel_requested);
  EXPECT_EQ(CountEvents(trial.rec.id, "its hard limit stops the scope's jobs (stopRunning)"), 1);
  EXPECT_FALSE(bob.rec.cancel_requested);
}

TEST_F(UsageMeterTest, FairShareCountsHeldGpuTimeAndSurvivesARestart) {
  config_.fair_share_half_life_hours = 1e9;  // no decay worth seeing
  MakeMeter();
  RunningJob("ada", 0, 0.5);
  RunningJob("bob", 1);
  meter_->Accrue(clock_.NowMicros());
  clock_.Advance(100 * kSecond);
  meter_->Accrue(clock_.NowMicros());
  EXPECT_NEAR(meter_->FairShareUsage().at("ada"), 50, 1e-3);
  EXPECT_NEAR(meter_->FairShareUsage().at("bob"), 100, 1e-3);
  // A restarted daemon rebuilds the same numbers from the store.
  UsageMeter again({.config = &config_, .node = &node_, .store = store_.get(), .clock = &clock_},
                   table_);
  again.Rebuild(clock_.NowMicros());
  EXPECT_NEAR(again.FairShareUsage().at("ada"), 50, 1e-3);
  EXPECT_NEAR(again.FairShareUsage().at("bob"), 100, 1e-3);
}

}  // namespace
}  // namespace stoker::server
