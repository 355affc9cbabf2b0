// SlurmExecutor's own logic against FakeSlurmClient and a fake clock:
// adoption of a job submitted right before a crash, the squeue cache,
// cancel escalation (SIGTERM to the steps, a plain scancel after the grace),
// and telling a Slurm preemption or node failure from other ends.
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

  // What a supervisor leaves: it claimed `replica` (and holds no lock: it
  // has exited), and, unless `state` is empty, wrote its final status.
  void Supervised(SlurmExecutor& ex, int64_t job, int attempt, const std::string& replica,
                  const std::string& state, int exit_code = 0) {
    fs::path dir = ex.ReplicaDir(job, attempt, replica);
    ASSERT_TRUE(MakeDirs(dir).ok());
    std::ofstream(dir / "claim").close();
    std::ofstream(dir / "trainer.json") << R"({"pid": 0, "pgid": 0, "start_time_us": 5})";
    if (state.empty()) return;
    std::ofstream(dir / "status.json") << R"({"state": ")" << state << R"(", "exit_code": )"
                                       << exit_code << R"(, "signal": null, "message": "stopped"})";
  }
  int64_t SlurmId(int64_t job, int attempt) {
    fs::path dir = tmp_ / "jobs" / std::to_string(job);
    if (attempt > 0) dir /= "attempt-" + std::to_string(attempt);
    return std::stoll(*ReadFile(dir / "slurm-job-id"));
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
  EXPECT_EQ(s.message().find("preemptible_partition"), std::string::npos) << s.message();
  // For a preemptible job, the keys that placed it are named too.
  JobLaunch spot = Launch(4, 0);
  spot.preemptible = true;
  slurm_->RefuseNextSubmit("sbatch: error: invalid partition specified: low");
  s = ex->Launch(spot);
  EXPECT_NE(s.message().find("slurm.preemptible_partition/preemptible_qos"), std::string::npos)
      << s.message();
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

TEST_F(SlurmExecutorFakeTest, SupervisorsStoppedBySlurmsPreemptionArePreemptedNotCancelled) {
  auto ex = Executor();
  JobLaunch l = Launch(5, 1);
  l.preemptible = true;
  ASSERT_TRUE(ex->Launch(l).ok());
  int64_t id = SlurmId(5, 1);
  EXPECT_EQ(slurm_->jobs().at(id).info.partition, "");  // no preemptible_partition set
  slurm_->jobs().at(id).info.partition = "low";
  // The job runs, stoker-run has not started the replicas yet: Poll caches
  // a squeue without any preemption.
  slurm_->SetState(id, "RUNNING", "None", "vm");
  ASSERT_TRUE(ex->Poll(5, 1, kBoth).ok());
  EXPECT_EQ(slurm_->queue_calls(), 1);
  // Slurm preempts the job (GraceTime): SIGTERM to every step, so both
  // supervisors stop their trainers and write "cancelled" while the Slurm
  // job still runs. The cached squeue predates that: Poll asks again.
  slurm_->SetPreemptTime(id, "2026-11-26T10:14:45");
  Supervised(*ex, 5, 1, "workerpool0-0", "cancelled");
  Supervised(*ex, 5, 1, "workerpool1-0", "cancelled");
  auto st = ex->Poll(5, 1, kBoth);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(slurm_->queue_calls(), 2);
  for (const ReplicaStatus& r : *st) {
    EXPECT_TRUE(r.preempted) << r.name;
    EXPECT_EQ(r.phase, ReplicaPhase::kEnded);
    EXPECT_EQ(r.message, "preempted by Slurm (job " + std::to_string(id) +
                             " in partition low at 2026-11-26T10:14:45, now RUNNING)");
  }
  // Decided once: the job ending COMPLETED (Slurm 22.05, steps done within
  // the GraceTime) changes nothing, and costs no more squeue calls.
  slurm_->SetState(id, "COMPLETED", "None", "vm");
  now_us_ += 5'000'000;
  st = ex->Poll(5, 1, kBoth);
  EXPECT_TRUE((*st)[0].preempted && (*st)[1].preempted);
  EXPECT_EQ(slurm_->queue_calls(), 2);
  // The controller stops the attempt: Slurm is doing that already (its
  // GraceTime may be longer than grace_seconds), so nothing is sent, not
  // even after the grace; its replicas still read as preempted.
  ASSERT_TRUE(ex->Cancel(5, 1, kBoth).ok());
  now_us_ += 60'000'000;
  ASSERT_TRUE(ex->Cancel(5, 1, kBoth).ok());
  EXPECT_TRUE((*ex->Poll(5, 1, kBoth))[1].preempted);
  EXPECT_TRUE(slurm_->cancels().empty());
  // A restarted daemon finds the same from Slurm.
  auto restarted = Executor();
  slurm_->jobs()[id].info = {"COMPLETED", "None", "vm", "2026-11-26T10:14:45", "low"};
  st = restarted->Poll(5, 1, kBoth);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE((*st)[0].preempted && (*st)[1].preempted);
}

TEST_F(SlurmExecutorFakeTest, SupervisorsKilledAtTheEndOfTheGraceTimeArePreempted) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(6, 0)).ok());
  int64_t id = SlurmId(6, 0);
  // The trainers outlived the partition's GraceTime: Slurm SIGKILLed the
  // supervisors before they wrote a status; the job ends PREEMPTED.
  Supervised(*ex, 6, 0, "workerpool0-0", "");
  Supervised(*ex, 6, 0, "workerpool1-0", "exited", 143);
  slurm_->jobs()[id].info = {"PREEMPTED", "None", "vm", "2026-11-26T10:17:06", "low"};
  auto st = ex->Poll(6, 0, kBoth);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)[0].phase, ReplicaPhase::kLost);
  EXPECT_TRUE((*st)[0].preempted);
  EXPECT_EQ((*st)[1].exit_code, 143);  // the supervisor's own words stay, but for the message
  EXPECT_TRUE((*st)[1].preempted);
  EXPECT_NE((*st)[1].message.find("now PREEMPTED"), std::string::npos) << (*st)[1].message;
}

TEST_F(SlurmExecutorFakeTest, AJobPreemptedBeforeAnyReplicaStartedIsPreempted) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(7, 0)).ok());
  slurm_->jobs()[SlurmId(7, 0)].info = {"PREEMPTED", "None", "vm", "2026-11-26T10:17:06", "low"};
  auto st = ex->Poll(7, 0, kBoth);
  ASSERT_TRUE(st.ok());
  for (const ReplicaStatus& r : *st) {
    EXPECT_EQ(r.phase, ReplicaPhase::kLost);
    EXPECT_TRUE(r.preempted);
    EXPECT_NE(r.message.find("before stoker-run started"), std::string::npos) << r.message;
  }
}

TEST_F(SlurmExecutorFakeTest, StokersOwnCancelAndOtherStopsAreNotPreemptions) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(8, 0)).ok());
  ASSERT_TRUE(ex->Launch(Launch(9, 0)).ok());
  slurm_->SetState(SlurmId(8, 0), "RUNNING", "None", "vm");
  slurm_->SetState(SlurmId(9, 0), "RUNNING", "None", "vm");
  // Stoker cancels job 8: its ends are not Slurm's to explain.
  Supervised(*ex, 8, 0, "workerpool0-0", "");
  Supervised(*ex, 8, 0, "workerpool1-0", "");
  ASSERT_TRUE(ex->Cancel(8, 0, kBoth).ok());
  Supervised(*ex, 8, 0, "workerpool0-0", "cancelled");
  Supervised(*ex, 8, 0, "workerpool1-0", "cancelled");
  auto st = ex->Poll(8, 0, kBoth);
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE((*st)[0].preempted || (*st)[1].preempted);
  EXPECT_EQ((*st)[0].end_state, EndState::kCancelled);
  EXPECT_EQ(slurm_->queue_calls(), 0);
  // Job 9's supervisor got SIGTERM from someone else (scancel --signal by
  // hand): Slurm is asked once, says no preemption; it stays cancelled.
  Supervised(*ex, 9, 0, "workerpool0-0", "cancelled");
  Supervised(*ex, 9, 0, "workerpool1-0", "exited", 0);
  st = ex->Poll(9, 0, kBoth);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(slurm_->queue_calls(), 1);
  EXPECT_FALSE((*st)[0].preempted);
  EXPECT_EQ((*st)[0].end_state, EndState::kCancelled);
  EXPECT_EQ((*st)[0].message, "stopped");
  now_us_ += 5'000'000;
  ASSERT_TRUE(ex->Poll(9, 0, kBoth).ok());
  EXPECT_EQ(slurm_->queue_calls(), 1);
}

TEST_F(SlurmExecutorFakeTest, ANodeFailureLosesTheReplicasWithSlurmsWords) {
  auto ex = Executor();
  ASSERT_TRUE(ex->Launch(Launch(10, 0)).ok());
  // The node died with its supervisors (claimed, no lock, no status); a
  // supervisor elsewhere was told to stop.
  Supervised(*ex, 10, 0, "workerpool0-0", "");
  Supervised(*ex, 10, 0, "workerpool1-0", "cancelled");
  slurm_->SetState(SlurmId(10, 0), "NODE_FAIL", "None", "vm2");
  auto st = ex->Poll(10, 0, kBoth);
  ASSERT_TRUE(st.ok());
  for (const ReplicaStatus& r : *st) {
    EXPECT_EQ(r.phase, ReplicaPhase::kLost) << r.name;
    EXPECT_FALSE(r.preempted);
    EXPECT_FALSE(r.end_state.has_value());
    EXPECT_EQ(r.message.rfind(
                  "Slurm job " + std::to_string(SlurmId(10, 0)) + " ended NODE_FAIL on vm2", 0),
              0u)
        << r.message;
  }
}

}  // namespace
}  // namespace stoker::exec
