// FakeExecutor keeps the Executor contract the controller relies on.
#include "exec/fake_executor.h"

#include <gtest/gtest.h>

#include <csignal>

namespace stoker::exec {
namespace {

JobLaunch TwoReplicas(int64_t job, int attempt) {
  JobLaunch l;
  l.job_id = job;
  l.attempt = attempt;
  l.replicas.resize(2);
  l.replicas[0].name = "workerpool0-0";
  l.replicas[1].name = "workerpool1-0";
  return l;
}

const std::vector<std::string> kBoth = {"workerpool0-0", "workerpool1-0"};

TEST(FakeExecutorTest, LaunchedReplicasStartUntilTheTestRunsAndEndsThem) {
  FakeExecutor ex("/tmp/fake");
  ASSERT_TRUE(ex.Launch(TwoReplicas(7, 0)).ok());
  auto st = ex.Poll(7, 0, kBoth);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)[0].phase, ReplicaPhase::kStarting);
  EXPECT_EQ((*st)[1].name, "workerpool1-0");

  ex.SetRunning({7, 0, "workerpool0-0"}, 1000);
  ex.Exit({7, 0, "workerpool0-0"}, 0, 2000);
  ex.Kill({7, 0, "workerpool1-0"}, SIGKILL, 2500);
  st = ex.Poll(7, 0, kBoth);
  EXPECT_TRUE((*st)[0].Succeeded());
  EXPECT_EQ((*st)[0].start_us, 1000);
  EXPECT_EQ((*st)[0].end_us, 2000);
  EXPECT_FALSE((*st)[1].Succeeded());
  EXPECT_EQ((*st)[1].signal, SIGKILL);
  EXPECT_EQ((*st)[1].message, "killed by signal 9 (SIGKILL)");
}

TEST(FakeExecutorTest, LaunchIsIdempotentAndCanBeToldToFail) {
  FakeExecutor ex("/tmp/fake");
  ASSERT_TRUE(ex.Launch(TwoReplicas(7, 0)).ok());
  ex.SetRunning({7, 0, "workerpool0-0"}, 1000);
  ASSERT_TRUE(ex.Launch(TwoReplicas(7, 0)).ok());  // a relaunch after a crash
  EXPECT_EQ(ex.status({7, 0, "workerpool0-0"}).phase, ReplicaPhase::kRunning);
  EXPECT_EQ(ex.launches().size(), 2u);

  ex.FailNextLaunch(Unavailable("no room"));
  EXPECT_EQ(ex.Launch(TwoReplicas(8, 0)).code(), Code::kUnavailable);
  EXPECT_FALSE(ex.launched({8, 0, "workerpool0-0"}));
  EXPECT_EQ(ex.Poll(8, 0, kBoth)->at(0).phase, ReplicaPhase::kLost);
  EXPECT_TRUE(ex.Launch(TwoReplicas(8, 0)).ok());  // only the next one fails
  EXPECT_TRUE(ex.launched({8, 0, "workerpool0-0"}));
}

TEST(FakeExecutorTest, EndsTimeoutsLaunchFailuresAndLosses) {
  FakeExecutor ex("/tmp/fake");
  ex.TimeOut({1, 0, "a"}, 5);
  ex.FailLaunch({1, 0, "b"}, "launch.json: argv: missing", 6);
  ex.Lose({1, 0, "c"}, "the supervisor died");
  auto st = *ex.Poll(1, 0, {"a", "b", "c"});
  EXPECT_EQ(st[0].end_state, EndState::kTimeout);
  EXPECT_EQ(st[1].end_state, EndState::kLaunchFailed);
  EXPECT_EQ(st[1].message, "launch failed: launch.json: argv: missing");
  EXPECT_EQ(st[2].phase, ReplicaPhase::kLost);
  EXPECT_EQ(st[2].message, "the supervisor died");
}

TEST(FakeExecutorTest, CancelEndsLiveReplicasAtOnceOrAfterTheTestSaysSo) {
  FakeExecutor ex("/tmp/fake");
  ASSERT_TRUE(ex.Launch(TwoReplicas(7, 0)).ok());
  ex.SetRunning({7, 0, "workerpool0-0"}, 1000);
  ex.SetNow(3000);
  ASSERT_TRUE(ex.Cancel(7, 0, kBoth).ok());
  auto st = *ex.Poll(7, 0, kBoth);
  EXPECT_EQ(st[0].end_state, EndState::kCancelled);
  EXPECT_EQ(st[0].message, "cancelled; stopped with SIGTERM");
  EXPECT_EQ(st[0].end_us, 3000);
  EXPECT_EQ(st[1].message, "cancelled before the trainer started");
  ASSERT_EQ(ex.cancels().size(), 1u);
  EXPECT_EQ(ex.cancels()[0].replicas, kBoth);

  ex.SetCancelEndsAtOnce(false);  // the grace period
  ASSERT_TRUE(ex.Launch(TwoReplicas(7, 1)).ok());
  ex.SetRunning({7, 1, "workerpool0-0"}, 1000);
  ASSERT_TRUE(ex.Cancel(7, 1, kBoth).ok());
  EXPECT_TRUE(ex.cancel_requested({7, 1, "workerpool0-0"}));
  EXPECT_EQ(ex.status({7, 1, "workerpool0-0"}).phase, ReplicaPhase::kRunning);
  ex.EndCancelled({7, 1, "workerpool0-0"}, 4000);
  EXPECT_EQ(ex.status({7, 1, "workerpool0-0"}).end_state, EndState::kCancelled);
}

TEST(FakeExecutorTest, ReadsReturnWhatTheTestPut) {
  FakeExecutor ex("/tmp/fake");
  FakeExecutor::Key k{7, 2, "workerpool0-0"};
  EXPECT_EQ(ex.ReplicaDir(7, 2, "workerpool0-0"), "/tmp/fake/jobs/7/attempt-2/workerpool0-0");
  EXPECT_EQ(ex.ReplicaDir(7, 0, "workerpool0-0"), "/tmp/fake/jobs/7/workerpool0-0");
  EXPECT_EQ(ex.MetricFilePath(7, 2, "workerpool0-0"),
            "/tmp/fake/jobs/7/attempt-2/workerpool0-0/hypertune/output.metrics");

  ex.AppendLog(k, "line 1\n");
  ex.AppendLog(k, "line 2\n");
  auto chunk = ex.ReadLog(7, 2, "workerpool0-0", 3, 6);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->data, "e 1\nli");
  EXPECT_EQ(chunk->next_offset, 9u);
  EXPECT_EQ(chunk->size, 14u);
  EXPECT_EQ(ex.ReadLogTail(7, 2, "workerpool0-0", 7), "line 2\n");

  ex.SetLastActivity(k, 42);
  EXPECT_EQ(ex.LastActivityUs(7, 2, "workerpool0-0"), 42);

  EXPECT_EQ(ex.ReadTrialMetrics(7, 2, "workerpool0-0", 1 << 20).stamp, 0);
  ex.SetMetrics(k, R"({"acc": "0.5"})");
  ASSERT_TRUE(ex.AppendPushedMetrics(7, 2, "workerpool0-0", R"({"acc": "0.6"})").ok());
  TrialMetrics m = ex.ReadTrialMetrics(7, 2, "workerpool0-0", 1 << 20);
  EXPECT_EQ(m.text, "{\"acc\": \"0.5\"}\n{\"acc\": \"0.6\"}\n\n");
  EXPECT_TRUE(ex.ReadTrialMetrics(7, 2, "workerpool0-0", 1 << 20, m.stamp).text.empty());
  EXPECT_EQ(ex.ReadTrialMetrics(7, 2, "workerpool0-0", 4).too_large.size(), 2u);
  EXPECT_EQ(ex.pushed_metrics(k), std::vector<std::string>{R"({"acc": "0.6"})"});
}

TEST(FakeExecutorTest, AJobsFilesGoOnlyOnceNothingOfItRuns) {
  FakeExecutor ex("/tmp/fake");
  EXPECT_FALSE(ex.HasJobFiles(3));
  ex.SetRunning({3, 0, "workerpool0-0"}, 1);
  ex.Exit({3, 1, "workerpool0-0"}, 0, 2);
  EXPECT_TRUE(ex.HasJobFiles(3));
  EXPECT_FALSE(ex.RemoveJobFiles(3).value());  // attempt 0 still runs
  EXPECT_TRUE(ex.HasJobFiles(3));
  ex.Exit({3, 0, "workerpool0-0"}, 0, 3);
  EXPECT_TRUE(ex.RemoveJobFiles(3).value());
  EXPECT_FALSE(ex.HasJobFiles(3));
}

}  // namespace
}  // namespace stoker::exec
