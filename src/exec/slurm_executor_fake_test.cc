// SlurmExecutor's own logic against FakeSlurmClient and a fake clock:
// adoption of a job submitted right before a crash, the squeue cache, and
// cancel escalation (SIGTERM to the steps, a plain scancel after the grace).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "exec/fake_slurm_client.h"
#include "exec/slurm_executor.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

class SlurmExecutorFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stoker_slurm_fake_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = fs::canonical(tmpl);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // A new executor (a restarted daemon) over the same shared dir and Slurm.
  std::unique_ptr<SlurmExecutor> Executor() {
    SlurmOptions o;
    o.shared_dir = tmp_;
    o.runner = "/opt/stoker/bin/stoker-run";
    o.instance = "inst";
    o.queue_refresh_seconds = 1;
    o.grace_seconds = 30;
    auto client = std::make_unique<FakeSlurmClient>();
    slurm_ = client.get();
    return std::make_unique<SlurmExecutor>(o, std::move(client), [this] { return now_us_; });
  }
  static JobLaunch Launch(int64_t job, int attempt) {
    JobLaunch l;
    l.job_id = job;
    l.attempt = attempt;
    l.replicas.resize(2);
    l.replicas[0].name = "workerpool0-0";
    l.replicas[1].name = "workerpool1-0";
    for (ReplicaLaunch& r : l.replicas) r.argv = {"true"};
    return l;
  }

  fs::path tmp_;
  FakeSlurmClient* slurm_ = nullptr;  // owned by the executor
  int64_t now_us_ = 1'000'000;
};

const std::vector<std::string> kBoth = {"workerpool0-0", "workerpool1-0"};

TEST_F(SlurmExecutorFakeTest, AdoptsAJobSlurmAlreadyHasInsteadOfSubmittingAgain) {
  auto ex = Executor();
  // sbatch ran, then the daemon died before it recorded the id: the intent
  // (slurm.json) is there, slurm-job-id is not.
  fs::path job_dir = tmp_ / "jobs/12/attempt-1";
  ASSERT_TRUE(MakeDirs(job_dir).ok());
  std::ofstream(job_dir / "slurm.json") << "{}\n";
  slurm_->AddJob(SlurmJobName(12, 1), SlurmComment("another-daemon", 12, 1));
  int64_t ours = slurm_->AddJob(SlurmJobName(12, 1), SlurmComment("inst", 12, 1));
  ASSERT_TRUE(ex->Launch(Launch(12, 1)).ok());
  EXPECT_EQ(slurm_->submits(), 0);
  EXPECT_EQ(*ReadFile(job_dir / "slurm-job-id"), std::to_string(ours) + "\n");
  // Launching again asks nobody.
  ASSERT_TRUE(ex->Launch(Launch(12, 1)).ok());
  EXPECT_EQ(slurm_->submits(), 0);
  EXPECT_EQ(slurm_->find_calls(), 1);
}

TEST_F(SlurmExecutorFakeTest, SubmitsWhenOnlyAnotherDaemonsJobHasTheNameAndRecordsTheId) {
  auto ex = Executor();
  fs::path job_dir = tmp_ / "jobs/12";
  slurm_->AddJob(SlurmJobName(12, 0), SlurmComment("another-daemon", 12, 0));
  ASSERT_TRUE(ex->Launch(Launch(12, 0)).ok());
  EXPECT_EQ(slurm_->submits(), 1);
  std::string id = *ReadFile(job_dir / "slurm-job-id");
  EXPECT_EQ(slurm_->jobs().at(std::stoll(id)).comment, SlurmComment("inst", 12, 0));
  // A restarted daemon reads the recorded id: no second submission, no search.
  auto restarted = Executor();
  ASSERT_TRUE(restarted->Launch(Launch(12, 0)).ok());
  EXPECT_EQ(slurm_->submits(), 0);  // the new fake has seen none
  EXPECT_EQ(slurm_->find_calls(), 0);
}

TEST_F(SlurmExecutorFakeTest, ARefusedSubmissionSaysWhyAndWhereTheScriptIs) {
  auto ex = Executor();
  slurm_->RefuseNextSubmit("sbatch: error: invalid partition specified: gpu");
  Status s = ex->Launch(Launch(3, 0));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("invalid partition"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("slurm.sbatch"), std::string::npos) << s.message();
}

TEST_F(SlurmExecutorFakeTest, PollsShareOneSqueueWithinTheRefreshInterval) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(1, 0)).ok());
  auto st = ex->Poll(1, 0, kBoth);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)[0].phase, ReplicaPhase::kStarting);
  EXPECT_NE((*st)[0].message.find("is pending: Priority"), std::string::npos) << (*st)[0].message;
  ASSERT_TRUE(ex->Poll(1, 0, kBoth).ok());
  EXPECT_EQ(slurm_->queue_calls(), 1);
  now_us_ += 1'500'000;  // past queue_refresh_seconds
  ASSERT_TRUE(ex->Poll(1, 0, kBoth).ok());
  EXPECT_EQ(slurm_->queue_calls(), 2);
}

TEST_F(SlurmExecutorFakeTest, AJobLearnedAfterTheCachedSqueueIsNotJudgedByIt) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(1, 0)).ok());
  ASSERT_TRUE(ex->Poll(1, 0, kBoth).ok());
  EXPECT_EQ(slurm_->queue_calls(), 1);
  now_us_ += 100'000;  // well within the refresh interval
  ASSERT_TRUE(ex->Launch(Launch(2, 0)).ok());
  now_us_ += 100'000;
  auto st = ex->Poll(2, 0, kBoth);
  ASSERT_TRUE(st.ok());
  // The cached squeue predates job 2: asking it would call job 2 unknown.
  EXPECT_EQ(slurm_->queue_calls(), 2);
  EXPECT_EQ((*st)[0].phase, ReplicaPhase::kStarting);
}

TEST_F(SlurmExecutorFakeTest, AJobThatEndsBeforeAnyReplicaStartedLosesThem) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(1, 0)).ok());
  int64_t id = std::stoll(*ReadFile(tmp_ / "jobs/1/slurm-job-id"));
  slurm_->SetState(id, "FAILED", "NonZeroExitCode", "vm");
  auto st = ex->Poll(1, 0, kBoth);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)[0].phase, ReplicaPhase::kLost);
  EXPECT_NE((*st)[0].message.find("ended FAILED (NonZeroExitCode)"), std::string::npos)
      << (*st)[0].message;
  slurm_->Forget(id);
  now_us_ += 2'000'000;
  st = ex->Poll(1, 0, {"workerpool1-0"});
  EXPECT_NE((*st)[0].message.find("is no longer known to Slurm"), std::string::npos);
}

TEST_F(SlurmExecutorFakeTest, CancelStopsRunningStepsGracefullyThenCancelsAfterTheGrace) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(1, 0)).ok());
  int64_t id = std::stoll(*ReadFile(tmp_ / "jobs/1/slurm-job-id"));
  // A supervisor claimed workerpool0-0 (it runs); workerpool1-0 has not started.
  std::ofstream(ex->ReplicaDir(1, 0, "workerpool0-0") / "claim").close();
  ASSERT_TRUE(ex->Cancel(1, 0, kBoth).ok());
  ASSERT_EQ(slurm_->cancels().size(), 1u);
  EXPECT_EQ(slurm_->cancels()[0].id, id);
  EXPECT_TRUE(slurm_->cancels()[0].graceful);
  // The one that had not started never will.
  auto st = ex->Poll(1, 0, {"workerpool1-0"});
  EXPECT_EQ((*st)[0].end_state, EndState::kCancelled);

  now_us_ += 10'000'000;  // within the 30 s grace: nothing more
  ASSERT_TRUE(ex->Cancel(1, 0, kBoth).ok());
  ASSERT_TRUE(ex->Poll(1, 0, kBoth).ok());
  EXPECT_EQ(slurm_->cancels().size(), 1u);

  now_us_ += 25'000'000;  // past the grace: Poll ends it outright, once
  ASSERT_TRUE(ex->Poll(1, 0, kBoth).ok());
  ASSERT_EQ(slurm_->cancels().size(), 2u);
  EXPECT_FALSE(slurm_->cancels()[1].graceful);
  ASSERT_TRUE(ex->Cancel(1, 0, kBoth).ok());
  ASSERT_TRUE(ex->Poll(1, 0, kBoth).ok());
  EXPECT_EQ(slurm_->cancels().size(), 2u);
}

TEST_F(SlurmExecutorFakeTest, CancelOfAQueuedJobRemovesItAtOnce) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(1, 0)).ok());
  ASSERT_TRUE(ex->Cancel(1, 0, kBoth).ok());
  ASSERT_EQ(slurm_->cancels().size(), 1u);
  EXPECT_FALSE(slurm_->cancels()[0].graceful);
  ASSERT_TRUE(ex->Cancel(1, 0, kBoth).ok());  // idempotent
  EXPECT_EQ(slurm_->cancels().size(), 1u);
}

}  // namespace
}  // namespace stoker::exec
