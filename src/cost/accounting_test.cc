// The Accountant over a real store: a replayed history with known answers
// (retries, a restart that rewrites rows, fractional GPUs, trials, a running
// attempt, a month boundary) and budgets.
#include "cost/accounting.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/time.h"

namespace stoker::cost {
namespace {

using nlohmann::json;
using spec::JobState;

constexpr int64_t kHour = 3'600'000'000;

class AccountingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker_cost_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = std::move(store::Store::Open(dir_, clock_)).value();
    accountant_ = std::make_unique<Accountant>(
        *store_, Catalog::BuiltIn(), NodeShape{.cpus = 16, .gpu_types = {"NVIDIA_TESLA_T4"}},
        clock_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A job of `user` in `location` on n1-standard-4 + `gpus` T4 that runs:
  // QUEUED -> PENDING -> RUNNING now.
  store::JobRecord RunningJob(const std::string& user, double gpus, int64_t study_id = 0,
                              const std::string& location = "l") {
    store::NewJob n;
    n.project = "p";
    n.location = location;
    n.display_name = "j";
    n.user = user;
    n.study_id = study_id;
    n.trial_id = study_id ? "1" : "";
    n.spec = {{"displayName", "j"},
              {"labels", {{"team", user == "alice" ? "cv" : "nlp"}}},
              {"jobSpec",
               {{"workerPoolSpecs",
                 {{{"machineSpec",
                    {{"machineType", "n1-standard-4"},
                     {"acceleratorType", "NVIDIA_TESLA_T4"},
                     {"acceleratorCount", gpus}}},
                   {"replicaCount", 1}}}}}}};
    store::JobRecord rec = store_->CreateJob(n).value();
    json alloc = {{"node", "box"},
                  {"replicas",
                   {{{"name", "workerpool0-0"},
                     {"pool", 0},
                     {"cpus", 4.0},
                     {"memory_bytes", 15'000'000'000ull},
                     {"gpus", {0}},
                     {"gpu_shares", {{{"gpu", 0}, {"fraction", gpus}}}},
                     {"gpu_type", "NVIDIA_TESLA_T4"}}}}};
    EXPECT_TRUE(store_
                    ->Transition(rec.id, JobState::kQueued, JobState::kPending, "placed",
                                 {.allocation = alloc})
                    .ok());
    EXPECT_TRUE(store_
                    ->Transition(rec.id, JobState::kPending, JobState::kRunning, "started",
                                 {.start_time_us = clock_.NowMicros()})
                    .ok());
    return store_->GetJob(rec.id).value();
  }

  // Ends the job's current attempt after `hours` as the controller does: ledger rows first.
  void EndAttempt(store::JobRecord& rec, double hours, const std::string& end) {
    int64_t start = clock_.NowMicros();
    clock_.Advance(static_cast<int64_t>(hours * kHour));
    auto rows = AttemptUsage(rec, {{"workerpool0-0", {start, clock_.NowMicros()}}}, end,
                             clock_.NowMicros());
    ASSERT_TRUE(store_->RecordUsage(rows).ok());
  }

  FakeClock clock_{*ParseRfc3339Micros("2026-11-10T00:00:00Z")};
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Accountant> accountant_;
};

TEST_F(AccountingTest, ReportsPriceEachRowInItsJobsRegion) {
  const int64_t from = clock_.NowMicros();
  store::JobRecord eu = RunningJob("alice", 1, 0, "europe-west4");
  EndAttempt(eu, 1, "succeeded");  // one hour, recorded in the ledger
  store::JobRecord local = RunningJob("bob", 1);
  clock_.Advance(kHour);  // one hour, still running: not in the ledger yet
  auto rows = accountant_->RowsBetween(from, clock_.NowMicros()).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].location, "europe-west4");  // read back from the store
  EXPECT_EQ(rows[1].location, "l");
  // europe-west4: n1-standard-4 $0.209168 (S1) + T4 $0.3675 (S2); "l": cost.region, us-central1.
  Totals t = accountant_->Price(rows);
  ASSERT_TRUE(t.usd[PriceKind::kComputeEngine]);
  EXPECT_NEAR(*t.usd[PriceKind::kComputeEngine], (0.209168 + 0.3675) + (0.19 + 0.35), 1e-6);
}

TEST_F(AccountingTest, RetriesAndARestartAreCountedExactlyOnce) {
  store::JobRecord job = RunningJob("alice", 1);
  EndAttempt(job, 1, "retried");  // attempt 0: one hour, then a retry
  ASSERT_TRUE(store_
                  ->Transition(job.id, JobState::kRunning, JobState::kQueued, "retry",
                               {.allocation = json(), .attempt = 1})
                  .ok());
  ASSERT_TRUE(store_
                  ->Transition(job.id, JobState::kQueued, JobState::kPending, "placed",
                               {.allocation = job.allocation})
                  .ok());
  ASSERT_TRUE(store_
                  ->Transition(job.id, JobState::kPending, JobState::kRunning, "started",
                               {.start_time_us = clock_.NowMicros()})
                  .ok());
  job = store_->GetJob(job.id).value();
  ASSERT_EQ(job.attempt, 1);
  // While attempt 1 runs (30 min so far), the job shows 1.5 hours.
  clock_.Advance(kHour / 2);
  Totals running = accountant_->Price(accountant_->JobRows(job).value());
  EXPECT_NEAR(running.gpu_seconds, 1.5 * 3600, 1e-6);
  // Attempt 1 ends after 2 hours; a restarted daemon records the same rows again.
  clock_.Advance(-kHour / 2);
  EndAttempt(job, 2, "succeeded");
  auto again =
      AttemptUsage(job, {{"workerpool0-0", {clock_.NowMicros() - 2 * kHour, clock_.NowMicros()}}},
                   "succeeded", clock_.NowMicros() + 5 * kHour);
  ASSERT_TRUE(store_->RecordUsage(again).ok());
  // The job is still RUNNING in the store (the crash came before its
  // transition): its running attempt must not be counted twice.
  auto rows = accountant_->JobRows(job).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].end, "retried");
  EXPECT_EQ(rows[1].end, "succeeded");
  Totals t = accountant_->Price(rows);
  EXPECT_NEAR(t.gpu_seconds, 3 * 3600, 1e-6);
  EXPECT_NEAR(t.vcpu_seconds, 4 * 3 * 3600, 1e-6);
  // 3 h of n1-standard-4 + 1 T4 at Vertex $0.21849885 + $0.4025 per hour.
  ASSERT_TRUE(t.usd[PriceKind::kVertex]);
  EXPECT_NEAR(*t.usd[PriceKind::kVertex], 3 * (0.21849885 + 0.4025), 1e-6);
}

TEST_F(AccountingTest, AStudySumsItsTrialsAndAWindowClipsRows) {
  store::StudyRecord study =
      store_->CreateStudy("p", "l", "s", json{{"displayName", "s"}}, "alice").value();
  store::JobRecord t1 = RunningJob("alice", 0.5, study.id);
  EndAttempt(t1, 2, "succeeded");
  store::JobRecord t2 = RunningJob("alice", 0.5, study.id);  // still running: 1 h so far
  clock_.Advance(kHour);
  Totals s = accountant_->Price(accountant_->StudyRows(study.id).value());
  EXPECT_NEAR(s.gpu_seconds, (2 * 0.5 + 1 * 0.5) * 3600, 1e-6);

  // A window ending before t2 started sees t1 only; one starting mid-t1 is clipped.
  int64_t t1_start = *ParseRfc3339Micros("2026-11-10T00:00:00Z");
  auto early = accountant_->RowsBetween(t1_start, t1_start + kHour).value();
  ASSERT_EQ(early.size(), 1u);
  EXPECT_NEAR(early[0].seconds(), 3600, 1e-6);
}

TEST_F(AccountingTest, BudgetsRefuseWarnAndNameTheirNumbers) {
  store::JobRecord a = RunningJob("alice", 1);
  EndAttempt(a, 3, "succeeded");  // alice: 3 GPU-hours this month
  store::JobRecord b = RunningJob("bob", 0.5);
  clock_.Advance(kHour / 2);  // bob: 0.25 GPU-hours so far, running

  std::vector<std::string> warnings;
  ASSERT_TRUE(accountant_->CheckSubmission("alice", "p", json{{"team", "cv"}}, &warnings).ok());
  EXPECT_TRUE(warnings.empty());  // no budgets: nothing to say

  ASSERT_TRUE(accountant_->PutBudget({.scope = "user:alice", .monthly_gpu_hours = 2.0}).ok());
  ASSERT_TRUE(
      accountant_->PutBudget({.scope = "label:team=nlp", .monthly_usd = 0.4, .warn_at = 0.5}).ok());
  Status refused = accountant_->CheckSubmission("alice", "p", json{{"team", "cv"}}, &warnings);
  EXPECT_EQ(refused.code(), Code::kResourceExhausted);
  EXPECT_NE(refused.message().find("user:alice: 3 of 2 GPU-hours used in 2026-11"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("stoker budgets set user:alice"), std::string::npos);

  // bob: 0.5 h × (0.2185 + 0.4025) Vertex = $0.31 of $0.40: past the 50% warning.
  warnings.clear();
  ASSERT_TRUE(accountant_->CheckSubmission("bob", "p", json{{"team", "nlp"}}, &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("label:team=nlp: $0.31 of $0.40 (vertex price)"), std::string::npos)
      << warnings[0];

  auto states = accountant_->BudgetStates().value();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].budget.scope, "label:team=nlp");
  EXPECT_FALSE(states[0].exceeded);
  EXPECT_TRUE(states[1].exceeded);

  // Next month the budget starts again.
  clock_.Set(*ParseRfc3339Micros("2026-12-01T00:00:01Z"));
  ASSERT_TRUE(store_
                  ->Transition(b.id, JobState::kRunning, JobState::kSucceeded, "done",
                               {.end_time_us = clock_.NowMicros()})
                  .ok());
  EXPECT_TRUE(accountant_->CheckSubmission("alice", "p", json{{"team", "cv"}}, &warnings).ok());
}

TEST_F(AccountingTest, WithTheRefresherReadersNeverWaitForAScan) {
  store::JobRecord a = RunningJob("alice", 1);
  EndAttempt(a, 1, "succeeded");
  ASSERT_TRUE(accountant_->PutBudget({.scope = "user:alice", .monthly_gpu_hours = 10.0}).ok());
  accountant_->StartRefresher();  // its first pass computes the states
  std::vector<BudgetState> states;
  for (int i = 0; i < 200 && states.empty(); ++i) {
    states = accountant_->BudgetStates().value();
    if (states.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(states.size(), 1u);
  EXPECT_NEAR(states[0].used_gpu_hours, 1, 1e-9);
  // Its first pass starts at once and takes milliseconds; the next is 5 s away.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // More usage and a clock past the refresh period: readers still get the
  // refresher's last states at once; they never scan the ledger themselves.
  store::JobRecord b = RunningJob("alice", 1);
  EndAttempt(b, 2, "succeeded");
  EXPECT_NEAR(accountant_->BudgetStates().value()[0].used_gpu_hours, 1, 1e-9);
  accountant_->StopRefresher();
  // Without it, a reader recomputes stale states itself.
  EXPECT_NEAR(accountant_->BudgetStates().value()[0].used_gpu_hours, 3, 1e-9);
}

TEST_F(AccountingTest, BadBudgetsAreRefusedNamingTheField) {
  auto message = [&](const store::Budget& b) { return accountant_->PutBudget(b).message(); };
  EXPECT_NE(message({.scope = "alice", .monthly_usd = 1.0}).find("user:NAME"), std::string::npos);
  EXPECT_NE(message({.scope = "user:alice"}).find("monthlyUsd"), std::string::npos);
  EXPECT_NE(message({.scope = "user:alice", .monthly_usd = -1.0}).find("monthlyUsd"),
            std::string::npos);
  EXPECT_NE(message({.scope = "user:alice", .monthly_usd = 1.0, .price = "cheap"}).find("price"),
            std::string::npos);
  EXPECT_NE(message({.scope = "user:alice", .monthly_usd = 1.0, .warn_at = 1.5}).find("warnAt"),
            std::string::npos);
  EXPECT_TRUE(store_->Budgets().value().empty());
  EXPECT_EQ(accountant_->DeleteBudget("user:nobody").code(), Code::kNotFound);
}

}  // namespace
}  // namespace stoker::cost
