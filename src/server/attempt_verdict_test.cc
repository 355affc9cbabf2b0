#include "server/attempt_verdict.h"

#include <gtest/gtest.h>

#include "spec/job_state.h"

namespace stoker::server {
namespace {

using exec::EndState;
using exec::ReplicaPhase;
using exec::ReplicaStatus;
using Kind = Verdict::Kind;

ReplicaStatus Running(const std::string& name) {
  return {.name = name, .phase = ReplicaPhase::kRunning, .start_us = 10};
}
ReplicaStatus Exited(const std::string& name, int code) {
  return {.name = name,
          .phase = ReplicaPhase::kEnded,
          .end_state = EndState::kExited,
          .exit_code = code,
          .start_us = 10,
          .end_us = 20};
}
ReplicaStatus Ended(const std::string& name, EndState state, const std::string& message) {
  return {.name = name, .phase = ReplicaPhase::kEnded, .end_state = state, .message = message};
}

TEST(AttemptVerdictTest, RunningReplicasDecideNothing) {
  EXPECT_EQ(JudgeAttempt({Running("workerpool0-0"), Running("workerpool1-0")}, {}).kind,
            Kind::kUndecided);
}

TEST(AttemptVerdictTest, ThePrimaryExitingZeroSucceedsWhileWorkersStillRun) {
  Verdict v = JudgeAttempt({Exited("workerpool0-0", 0), Running("workerpool1-0")}, {});
  EXPECT_EQ(v.kind, Kind::kSucceeded);
  EXPECT_EQ(v.what, "workerpool0-0 exited with status 0");
  EXPECT_EQ(v.start_us, 10);
}

TEST(AttemptVerdictTest, AWorkerExitingZeroDecidesNothing) {
  EXPECT_EQ(JudgeAttempt({Running("workerpool0-0"), Exited("workerpool1-0", 0)}, {}).kind,
            Kind::kUndecided);
}

TEST(AttemptVerdictTest, ANonZeroExitIsARetriableUserFailure) {
  Verdict v = JudgeAttempt({Running("workerpool0-0"), Exited("workerpool1-0", 3)}, {});
  EXPECT_EQ(v.kind, Kind::kFailed);
  EXPECT_EQ(v.replica, "workerpool1-0");
  EXPECT_EQ(v.what, "The replica workerpool1-0 exited with a non-zero status of 3.");
  EXPECT_TRUE(v.retriable);
  EXPECT_FALSE(v.infrastructure);
  EXPECT_TRUE(v.worker);
  EXPECT_EQ(v.error_code, spec::kRpcUnknown);
}

TEST(AttemptVerdictTest, ALostOrUnlaunchableReplicaIsTheInfrastructuresFault) {
  ReplicaStatus lost{.name = "workerpool0-0", .phase = ReplicaPhase::kLost, .message = "gone"};
  Verdict v = JudgeAttempt({lost}, {});
  EXPECT_EQ(v.kind, Kind::kFailed);
  EXPECT_TRUE(v.infrastructure);
  EXPECT_TRUE(v.retriable);
  EXPECT_EQ(v.error_code, spec::kRpcInternal);
  EXPECT_EQ(v.what, "The replica workerpool0-0 was lost: gone.");

  v = JudgeAttempt({Ended("workerpool0-0", EndState::kLaunchFailed, "no python3")}, {});
  EXPECT_TRUE(v.infrastructure);
  EXPECT_EQ(v.what, "The replica workerpool0-0 could not start: no python3.");
}

TEST(AttemptVerdictTest, ALaunchFailureTheSupervisorCallsPermanentIsFinal) {
  ReplicaStatus r = Ended("workerpool0-0", EndState::kLaunchFailed, "no CDI spec");
  r.permanent = true;
  Verdict v = JudgeAttempt({r}, {});
  EXPECT_EQ(v.kind, Verdict::Kind::kFailed);
  EXPECT_FALSE(v.retriable);
  EXPECT_FALSE(v.infrastructure);
  EXPECT_EQ(v.what, "The replica workerpool0-0 could not start: no CDI spec.");
  // Only a launch failure is: a trainer's own exit is judged as before.
  r = Ended("workerpool0-0", EndState::kExited, "exited with code 1");
  r.exit_code = 1;
  r.permanent = true;
  EXPECT_TRUE(JudgeAttempt({r}, {}).retriable);
}

TEST(AttemptVerdictTest, ATimeoutOrAnOutsideStopIsFinal) {
  Verdict v = JudgeAttempt({Ended("workerpool0-0", EndState::kTimeout, "SIGTERM")},
                           {.timeout_seconds = 7200});
  EXPECT_EQ(v.error_code, spec::kRpcDeadlineExceeded);
  EXPECT_FALSE(v.retriable);
  EXPECT_NE(v.what.find("scheduling.timeout of 7200s"), std::string::npos) << v.what;

  v = JudgeAttempt({Ended("workerpool0-0", EndState::kCancelled, "")}, {});
  EXPECT_FALSE(v.retriable);
  EXPECT_NE(v.what.find("stopped from outside Stoker"), std::string::npos);
}

TEST(AttemptVerdictTest, ASignalIsNamed) {
  ReplicaStatus killed = Ended("workerpool0-0", EndState::kSignaled, "");
  killed.signal = 9;
  EXPECT_EQ(JudgeAttempt({killed}, {}).what,
            "The replica workerpool0-0 was killed by signal 9 (SIGKILL).");
}

TEST(AttemptVerdictTest, TheFirstReplicaInOrderThatDecidesDecides) {
  Verdict v = JudgeAttempt({Exited("workerpool0-0", 2), Exited("workerpool1-0", 5)}, {});
  EXPECT_EQ(v.replica, "workerpool0-0");
  EXPECT_FALSE(v.worker);
}

TEST(AttemptVerdictTest, AReplicaStartingTooLongFailsUnlessTheExecutorPlacesReplicas) {
  ReplicaStatus starting{.name = "workerpool0-0", .phase = ReplicaPhase::kStarting};
  AttemptFacts facts{.placed_us = 1'000'000, .now_us = 62'000'000};
  Verdict v = JudgeAttempt({starting}, facts);
  EXPECT_EQ(v.kind, Kind::kNeverStarted);
  EXPECT_EQ(v.what, "The replica workerpool0-0 did not start within 60s");
  facts.executor_places_replicas = true;
  EXPECT_EQ(JudgeAttempt({starting}, facts).kind, Kind::kUndecided);
  facts = {.placed_us = 1'000'000, .now_us = 30'000'000};
  EXPECT_EQ(JudgeAttempt({starting}, facts).kind, Kind::kUndecided);
}

TEST(AttemptVerdictTest, AReplicaInstallingItsRequirementsIsNeverTooLongToStart) {
  ReplicaStatus preparing{.name = "workerpool0-0",
                          .phase = ReplicaPhase::kStarting,
                          .message = "workerpool0-0: installing requirements [a]",
                          .preparing = true};
  AttemptFacts facts{.placed_us = 1'000'000, .now_us = 600'000'000};
  EXPECT_EQ(JudgeAttempt({preparing}, facts).kind, Kind::kUndecided);
}

TEST(AttemptVerdictTest, AllEndedWellWithoutAPrimaryIsReported) {
  EXPECT_EQ(JudgeAttempt({Exited("workerpool1-0", 0)}, {}).kind, Kind::kNoPrimary);
  EXPECT_EQ(JudgeAttempt({}, {}).kind, Kind::kUndecided);
}

}  // namespace
}  // namespace stoker::server
