// Deleting ended jobs and studies, and the operations that record it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "store/store.h"

namespace stoker::store {
namespace {

using spec::JobState;

class StoreDeletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker_store_deletion_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = std::move(Store::Open(dir_)).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  JobRecord Job() {
    return store_->CreateJob(NewJob{"p", "l", "j", nlohmann::json{{"displayName", "j"}}, {}})
        .value();
  }
  static OperationRecord Op(const std::string& target) {
    return {.project = "p",
            .location = "l",
            .user = "alice",
            .type = "DeleteCustomJob",
            .target = target};
  }
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreDeletionTest, AnEndedJobGoesAndItsOperationStaysAcrossAReopen) {
  JobRecord job = Job();
  ASSERT_TRUE(store_->Transition(job.id, JobState::kQueued, JobState::kSucceeded, "done").ok());
  auto op = store_->DeleteJob(job.id, Op("projects/p/locations/l/customJobs/1"));
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_GT(op->id, 0);
  EXPECT_GT(op->create_time_us, 0);
  EXPECT_EQ(store_->GetJob(job.id).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->Events(job.id)->empty());
  // The counts by state (GET /metrics) forget it too.
  auto counts = store_->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->jobs[JobState::kSucceeded], 0);

  store_.reset();
  store_ = std::move(Store::Open(dir_)).value();
  auto again = store_->GetOperation(op->id);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->target, "projects/p/locations/l/customJobs/1");
  EXPECT_EQ(again->user, "alice");
  EXPECT_EQ(again->type, "DeleteCustomJob");
  EXPECT_EQ(again->create_time_us, op->create_time_us);
  // Ids are never reused: the next job is not the deleted one.
  EXPECT_GT(Job().id, job.id);
  EXPECT_EQ(store_->GetOperation(op->id + 1).status().code(), Code::kNotFound);
}

TEST_F(StoreDeletionTest, AJobThatHasNotEndedStays) {
  JobRecord job = Job();
  ASSERT_TRUE(store_->Transition(job.id, JobState::kQueued, JobState::kRunning, "started").ok());
  auto op = store_->DeleteJob(job.id, Op("x"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(op.status().message().find("JOB_STATE_RUNNING"), std::string::npos);
  EXPECT_TRUE(store_->GetJob(job.id).ok());
  EXPECT_EQ(store_->DeleteJob(job.id + 100, Op("x")).status().code(), Code::kNotFound);
}

TEST_F(StoreDeletionTest, AStudyGoesWithItsTrialsAndTheirJobs) {
  auto study = store_->CreateStudy("p", "l", "s", nlohmann::json::object(), "alice");
  ASSERT_TRUE(study.ok());
  TrialRecord trial;
  trial.study_id = study->id;
  trial.trial_id = 1;
  NewJob nj{"p", "l", "t", nlohmann::json{{"displayName", "t"}}, {}};
  nj.study_id = study->id;
  nj.trial_id = "1";
  auto trial_job = store_->CreateTrial(trial, nj);
  ASSERT_TRUE(trial_job.ok()) << trial_job.status().ToString();
  ASSERT_TRUE(store_->TransitionStudy(study->id, JobState::kQueued, JobState::kSucceeded).ok());
  // A trial's job still running keeps the study.
  ASSERT_TRUE(
      store_->Transition(trial_job->id, JobState::kQueued, JobState::kRunning, "started").ok());
  EXPECT_EQ(store_->DeleteStudy(study->id, Op("s")).status().code(), Code::kFailedPrecondition);
  // A trial's job is deleted with its study, never alone.
  ASSERT_TRUE(
      store_->Transition(trial_job->id, JobState::kRunning, JobState::kSucceeded, "done").ok());
  EXPECT_EQ(store_->DeleteJob(trial_job->id, Op("t")).status().code(), Code::kFailedPrecondition);
  auto op = store_->DeleteStudy(study->id, Op("s"));
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_EQ(store_->GetStudy(study->id).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetJob(trial_job->id).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->Trials(study->id)->empty());
}

}  // namespace
}  // namespace stoker::store
