// The study driver turn by turn against a real store, a FakeExecutor for the
// trials' measurements and a fake job side: what a tuning job's user sees
// (trials, their parameters and results, the study's end) without a process.
#include "server/study_driver.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/json_yaml.h"
#include "exec/fake_executor.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using spec::JobState;
using store::TrialState;

constexpr int64_t kT0 = 1'800'000'000'000'000;

// The job side: records what the driver told it.
class FakeTrialJobs final : public TrialJobs {
 public:
  void TrialJobStored(const store::JobRecord& job) override { stored.push_back(job); }
  void TrialJobCancelRequested(int64_t job_id) override { cancelled.push_back(job_id); }
  std::vector<store::JobRecord> stored;
  std::vector<int64_t> cancelled;
};

constexpr char kStudy[] = R"(
displayName: tune
studySpec:
  metrics: [{metricId: accuracy, goal: MAXIMIZE}]
  parameters:
  - parameterId: lr
    doubleValueSpec: {minValue: 0.001, maxValue: 0.1}
  algorithm: RANDOM_SEARCH
maxTrialCount: 2
parallelTrialCount: 1
trialJobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: e2-standard-4}
    replicaCount: 1
    containerSpec: {imageUri: local/sh, command: [python3, train.py, --data, gs://data/x]}
)";

class StudyDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_ = std::move(store::Store::Open(dir_, clock_)).value();
    node_ = {"local", 8, 32ull << 30, {}};
    ASSERT_TRUE(buckets_.Create("data").ok());
    driver_ = std::make_unique<StudyDriver>(StudyDriverDeps{.store = store_.get(),
                                                            .executor = &executor_,
                                                            .admission = &admission_,
                                                            .clock = &clock_,
                                                            .jobs = &jobs_});
  }
  void TearDown() override { fs::remove_all(dir_); }

  int64_t SubmitStudy(const std::string& yaml = kStudy) {
    json spec = ParseYamlOrJson(yaml, "study").value();
    auto job = spec::ParseHyperparameterTuningJob(spec);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_TRUE(admission_.AdmitStudy(*job).ok());
    auto rec = store_->CreateStudy("p", "l", "tune", spec::ToJson(*job), "ada");
    EXPECT_TRUE(rec.ok());
    driver_->Adopt(rec->id);
    return rec->id;
  }
  // What the controller would do with a trial job: run it to `to`.
  void EndJob(int64_t job_id, JobState to, const std::string& metrics = "") {
    if (!metrics.empty()) executor_.SetMetrics({job_id, 0, "workerpool0-0"}, metrics);
    ASSERT_TRUE(store_
                    ->Transition(job_id, JobState::kQueued, JobState::kRunning, "started",
                                 {.start_time_us = clock_.NowMicros()})
                    .ok());
    clock_.Advance(5'000'000);
    driver_->Tick();  // reads the measurements while the trial runs
    ASSERT_TRUE(store_
                    ->Transition(job_id, JobState::kRunning, to, "ended",
                                 {.end_time_us = clock_.NowMicros()})
                    .ok());
  }
  std::vector<store::TrialRecord> Trials(int64_t study) { return store_->Trials(study).value(); }

  fs::path dir_ = fs::temp_directory_path() / ("study_driver_test_" + std::to_string(getpid()));
  FakeClock clock_{kT0};
  std::unique_ptr<store::Store> store_;
  resources::Node node_;
  storage::Buckets buckets_{dir_, {}};
  exec::Environments environments_{
      {{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "config.yaml"};
  admission::Admission admission_{
      {.buckets = &buckets_, .environments = &environments_, .node = &node_}};
  exec::FakeExecutor executor_{dir_};
  FakeTrialJobs jobs_;
  std::unique_ptr<StudyDriver> driver_;
};

TEST_F(StudyDriverTest, RunsTrialsOneAtATimeUntilTheBudgetIsSpentAndKeepsTheirResults) {
  int64_t id = SubmitStudy();
  driver_->Tick();
  EXPECT_EQ(store_->GetStudy(id)->state, JobState::kRunning);
  ASSERT_EQ(jobs_.stored.size(), 1u);  // parallelTrialCount 1
  const store::JobRecord& first = jobs_.stored[0];
  EXPECT_EQ(first.trial_id, "1");
  json pool = first.spec["jobSpec"]["workerPoolSpecs"][0];
  std::string lr_arg = pool["containerSpec"]["args"].back();
  EXPECT_EQ(lr_arg.rfind("--lr=", 0), 0u) << lr_arg;
  EXPECT_EQ(first.spec["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"],
            "gs://stoker-outputs/hptuning-" + std::to_string(id) + "/1/");

  EndJob(first.id, JobState::kSucceeded,
         R"({"accuracy": 0.5, "global_step": "10", "timestamp": 1.0})");
  driver_->Tick();
  std::vector<store::TrialRecord> trials = Trials(id);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::kSucceeded);
  EXPECT_EQ(trials[0].final_measurement["metrics"][0]["value"], 0.5);
  ASSERT_EQ(jobs_.stored.size(), 2u);

  EndJob(jobs_.stored[1].id, JobState::kSucceeded,
         R"({"accuracy": 0.7, "global_step": "10", "timestamp": 1.0})");
  driver_->Tick();
  EXPECT_EQ(store_->GetStudy(id)->state, JobState::kSucceeded);
  EXPECT_EQ(jobs_.stored.size(), 2u);
}

TEST_F(StudyDriverTest, ATrialThatNeverReportsTheMetricIsInfeasibleWithTheFix) {
  int64_t id = SubmitStudy();
  driver_->Tick();
  EndJob(jobs_.stored[0].id, JobState::kSucceeded);
  driver_->Tick();
  store::TrialRecord t = Trials(id)[0];
  EXPECT_EQ(t.state, TrialState::kInfeasible);
  EXPECT_NE(t.infeasible_reason.find("report_hyperparameter_tuning_metric"), std::string::npos);
}

TEST_F(StudyDriverTest, CancellingAStudyStopsItsRunningTrialsThenEndsIt) {
  int64_t id = SubmitStudy();
  driver_->Tick();
  int64_t trial_job = jobs_.stored[0].id;
  ASSERT_TRUE(store_->RequestStudyCancel(id).ok());
  driver_->CancelRequested(id);
  driver_->Tick();
  EXPECT_EQ(jobs_.cancelled, std::vector<int64_t>{trial_job});
  EXPECT_TRUE(store_->GetJob(trial_job)->cancel_requested);
  EXPECT_EQ(store_->GetStudy(id)->state, JobState::kCancelling);
  ASSERT_TRUE(store_
                  ->Transition(trial_job, JobState::kQueued, JobState::kCancelled, "cancelled",
                               {.end_time_us = clock_.NowMicros()})
                  .ok());
  driver_->Tick();
  EXPECT_EQ(store_->GetStudy(id)->state, JobState::kCancelled);
}

TEST_F(StudyDriverTest, ATrialAdmissionNoLongerAcceptsFailsTheStudyWithItsReason) {
  int64_t id = SubmitStudy();
  fs::remove_all(buckets_.BucketDir("data"));  // gone after the study was admitted
  driver_->Tick();
  EXPECT_TRUE(jobs_.stored.empty());
  driver_->Tick();
  store::StudyRecord s = store_->GetStudy(id).value();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_NE(s.error_message.find("trial 1 cannot start: "), std::string::npos) << s.error_message;
  EXPECT_NE(s.error_message.find("gs://data"), std::string::npos) << s.error_message;
}

TEST_F(StudyDriverTest, ARestartedDriverContinuesTheSameStudy) {
  int64_t id = SubmitStudy();
  driver_->Tick();
  ASSERT_EQ(jobs_.stored.size(), 1u);
  driver_ = std::make_unique<StudyDriver>(StudyDriverDeps{.store = store_.get(),
                                                          .executor = &executor_,
                                                          .admission = &admission_,
                                                          .clock = &clock_,
                                                          .jobs = &jobs_});
  ASSERT_TRUE(driver_->Recover().ok());
  driver_->Tick();
  EXPECT_EQ(jobs_.stored.size(), 1u);  // trial 1 still runs: no second one
  EXPECT_EQ(Trials(id).size(), 1u);
}

}  // namespace
}  // namespace stoker::server
