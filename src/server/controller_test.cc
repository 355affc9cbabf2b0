// The control loop driven turn by turn (Controller::RunOnce) against a real
// store on a temp directory, a FakeExecutor and a FakeClock: every lifecycle
// a user relies on, without a process or a sleep.
#include "server/controller.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "exec/fake_executor.h"
#include "telemetry/telemetry.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using spec::JobState;
using Key = exec::FakeExecutor::Key;

constexpr int64_t kT0 = 1'800'000'000'000'000;  // 2027-01-15, in µs
constexpr int64_t kSecond = 1'000'000;

json Pool(const std::string& command, int replicas = 1) {
  return {{"machineSpec", {{"machineType", "e2-standard-4"}}},
          {"replicaCount", std::to_string(replicas)},
          {"containerSpec", {{"imageUri", "local/sh"}, {"command", {"/bin/sh", "-c", command}}}}};
}

json Job(json pools, json scheduling = json::object()) {
  json j = {{"displayName", "j"}, {"jobSpec", {{"workerPoolSpecs", std::move(pools)}}}};
  if (!scheduling.empty()) j["jobSpec"]["scheduling"] = std::move(scheduling);
  return j;
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_ = std::move(store::Store::Open(dir_, clock_)).value();
    config_.data_dir = dir_;
    node_.name = "local";
    node_.cpus = 16;
    node_.memory_bytes = 64ull << 30;
    node_.gpus = {{0, "NVIDIA_TESLA_T4", 16ull << 30, ""}, {1, "NVIDIA_TESLA_T4", 16ull << 30, ""}};
    executor_.SetNow(kT0);
    StartController();
  }
  void TearDown() override {
    controller_.reset();
    fs::remove_all(dir_);
  }

  // A controller as a restarted daemon makes it: Recover from the store.
  void StartController() {
    controller_ = std::make_unique<Controller>(ControllerDeps{.config = &config_,
                                                              .node = &node_,
                                                              .store = store_.get(),
                                                              .executor = &executor_,
                                                              .buckets = &buckets_,
                                                              .environments = &environments_,
                                                              .admission = &admission_,
                                                              .clock = &clock_});
    ASSERT_TRUE(controller_->Recover().ok());
  }

  // What the API does: admit, store, notify. Then one turn of the loop.
  int64_t Submit(const json& job) {
    auto parsed = spec::ParseCustomJob(job);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto admitted = admission_.AdmitJob(*parsed);
    EXPECT_TRUE(admitted.ok()) << admitted.status().ToString();
    store::NewJob nj{.project = "p", .location = "l", .display_name = "j", .spec = admitted->spec};
    nj.user = "ada";
    auto rec = store_->CreateJob(nj);
    EXPECT_TRUE(rec.ok());
    controller_->Submitted(*rec);
    controller_->RunOnce();
    return rec->id;
  }

  store::JobRecord Get(int64_t id) { return store_->GetJob(id).value(); }
  // Advances the clock (the fake executor's too), then one turn.
  void Turn(int64_t advance_us = 0) {
    clock_.Advance(advance_us);
    executor_.SetNow(clock_.NowMicros());
    controller_->RunOnce();
  }
  bool HasEvent(int64_t id, const std::string& text) {
    std::string all;
    std::vector<store::Event> events = store_->Events(id).value();
    for (const store::Event& e : events) {
      if (e.reason.find(text) != std::string::npos) return true;
      all += e.reason + "\n";
    }
    ADD_FAILURE() << "no event with '" << text << "' among:\n" << all;
    return false;
  }

  fs::path dir_ = fs::temp_directory_path() / ("controller_test_" + std::to_string(getpid()));
  FakeClock clock_{kT0};
  std::unique_ptr<store::Store> store_;
  config::Config config_;
  resources::Node node_;
  storage::Buckets buckets_{dir_, {}};
  exec::Environments environments_{
      {{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "config.yaml"};
  admission::Admission admission_{
      {.buckets = &buckets_, .environments = &environments_, .node = &node_}};
  exec::FakeExecutor executor_{dir_};
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, AJobGoesFromQueuedThroughRunningToSucceededWhenItsPrimaryExitsZero) {
  int64_t id = Submit(Job({Pool("true")}));
  Key primary{id, 0, "workerpool0-0"};
  ASSERT_TRUE(executor_.launched(primary));
  EXPECT_EQ(Get(id).state, JobState::kPending);
  exec::JobLaunch launch = executor_.launches().at(0);
  EXPECT_EQ(launch.replicas.at(0).env.at("CLOUD_ML_JOB_ID"), std::to_string(id));

  executor_.SetRunning(primary, kT0 + 2 * kSecond);
  Turn(3 * kSecond);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  EXPECT_EQ(Get(id).start_time_us, kT0 + 2 * kSecond);

  executor_.Exit(primary, 0, kT0 + 9 * kSecond);
  Turn(7 * kSecond);
  store::JobRecord done = Get(id);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(done.end_time_us, kT0 + 10 * kSecond);  // stamped by the store from the clock
  EXPECT_EQ(done.error_code, 0);
}

TEST_F(ControllerTest, AFailureEndsTheJobWithTheExitStatusAndTheLogTail) {
  int64_t id = Submit(Job({Pool("exit 3")}));
  Key primary{id, 0, "workerpool0-0"};
  executor_.SetRunning(primary, kT0);
  executor_.AppendLog(primary, "loading data\nValueError: boom\n");
  executor_.Exit(primary, 3, kT0 + kSecond);
  Turn(kSecond);
  store::JobRecord done = Get(id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, spec::kRpcUnknown);
  EXPECT_NE(done.error_message.find("exited with a non-zero status of 3"), std::string::npos);
  EXPECT_NE(done.error_message.find("ValueError: boom"), std::string::npos) << done.error_message;
  EXPECT_EQ(executor_.launches().size(), 1u);
}

TEST_F(ControllerTest, AFailedAttemptIsRetriedAsANewAttemptUpToMaxRetries) {
  int64_t id = Submit(Job({Pool("exit 1")}, {{"maxRetries", 1}}));
  executor_.Exit({id, 0, "workerpool0-0"}, 1, kT0 + kSecond);
  Turn(kSecond);  // judged, requeued and placed again in the same turn
  ASSERT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(executor_.launches()[1].attempt, 1);
  EXPECT_EQ(Get(id).attempt, 1);
  EXPECT_TRUE(HasEvent(id, "Restarting all replicas as attempt 2 of 2"));
  EXPECT_EQ(Get(id).restart_reason, "retry");

  executor_.Exit({id, 1, "workerpool0-0"}, 1, kT0 + 3 * kSecond);
  Turn(2 * kSecond);
  EXPECT_EQ(Get(id).state, JobState::kFailed);
  EXPECT_EQ(executor_.launches().size(), 2u);
}

TEST_F(ControllerTest, ALostReplicaIsTheInfrastructuresFaultAndRestartsWithoutMaxRetries) {
  int64_t id = Submit(Job({Pool("sleep 100")}));
  executor_.SetRunning({id, 0, "workerpool0-0"}, kT0);
  executor_.Lose({id, 0, "workerpool0-0"}, "the supervisor died without a status");
  Turn(kSecond);
  ASSERT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(Get(id).attempt, 1);
  EXPECT_TRUE(HasEvent(id, "was lost: the supervisor died without a status"));
  EXPECT_EQ(Get(id).restart_reason, "node_failure");  // the next attempt's STOKER_RESTART_REASON
  EXPECT_EQ(executor_.launches()[1].replicas[0].env.at("STOKER_RESTART_REASON"), "node_failure");
}

TEST_F(ControllerTest, AFailedWorkerRestartsTheGangWhenAskedAndSaysWhy) {
  int64_t id = Submit(Job({Pool("train"), Pool("work")}, {{"restartJobOnWorkerRestart", true}}));
  executor_.SetRunning({id, 0, "workerpool0-0"}, kT0);
  executor_.Exit({id, 0, "workerpool1-0"}, 1, kT0 + kSecond);
  Turn(kSecond);
  EXPECT_EQ(Get(id).attempt, 1);
  EXPECT_EQ(Get(id).restart_reason, "worker_restart");
  ASSERT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(executor_.launches()[1].replicas[1].env.at("STOKER_RESTART_REASON"), "worker_restart");
}

TEST_F(ControllerTest, ATimeoutFailsWithDeadlineExceededAndIsNotRetried) {
  int64_t id = Submit(Job({Pool("sleep 100")}, {{"timeout", "30s"}, {"maxRetries", 2}}));
  executor_.SetRunning({id, 0, "workerpool0-0"}, kT0);
  executor_.TimeOut({id, 0, "workerpool0-0"}, kT0 + 31 * kSecond);
  Turn(31 * kSecond);
  store::JobRecord done = Get(id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, spec::kRpcDeadlineExceeded);
  EXPECT_NE(done.error_message.find("scheduling.timeout of 30s"), std::string::npos);
  EXPECT_EQ(executor_.launches().size(), 1u);
}

TEST_F(ControllerTest, ACancelStopsTheReplicasAndEndsCancelledOnceTheyAreGone) {
  int64_t id = Submit(Job({Pool("sleep 100")}));
  Key primary{id, 0, "workerpool0-0"};
  executor_.SetRunning(primary, kT0);
  executor_.SetCancelEndsAtOnce(false);  // the trainer takes its grace period
  Turn(kSecond);
  ASSERT_TRUE(store_->RequestCancel(id).ok());
  controller_->CancelRequested(id);
  Turn(kSecond);
  EXPECT_EQ(Get(id).state, JobState::kCancelling);
  EXPECT_TRUE(executor_.cancel_requested(primary));

  Turn(kSecond);
  EXPECT_EQ(Get(id).state, JobState::kCancelling);  // still stopping
  executor_.EndCancelled(primary, kT0 + 5 * kSecond);
  Turn(kSecond);
  EXPECT_EQ(Get(id).state, JobState::kCancelled);
  EXPECT_EQ(Get(id).error_code, spec::kRpcCancelled);
}

TEST_F(ControllerTest, AQueuedJobCancelledBeforeItStartsNeverLaunches) {
  // Both GPUs held by the first job: the second waits in the queue.
  json gpus = Pool("sleep 100");
  gpus["machineSpec"] = {{"machineType", "n1-standard-4"},
                         {"acceleratorType", "NVIDIA_TESLA_T4"},
                         {"acceleratorCount", 2}};
  int64_t holder = Submit(Job({gpus}));
  int64_t waiting = Submit(Job({gpus}));
  EXPECT_EQ(Get(waiting).state, JobState::kQueued);
  EXPECT_FALSE(Get(waiting).wait_reason.empty());
  ASSERT_TRUE(store_->RequestCancel(waiting).ok());
  controller_->CancelRequested(waiting);
  Turn(kSecond);
  EXPECT_EQ(Get(waiting).state, JobState::kCancelled);
  EXPECT_FALSE(executor_.launched({waiting, 0, "workerpool0-0"}));
  EXPECT_EQ(Get(holder).state, JobState::kPending);
}

TEST_F(ControllerTest, OneWorkerFailingFailsTheGangAndStopsTheOthers) {
  int64_t id = Submit(Job({Pool("python3 chief.py"), Pool("python3 worker.py", 2)}));
  for (const char* r : {"workerpool0-0", "workerpool1-0", "workerpool1-1"}) {
    executor_.SetRunning({id, 0, r}, kT0);
  }
  Turn(kSecond);
  executor_.Kill({id, 0, "workerpool1-1"}, 9, kT0 + 2 * kSecond);
  Turn(kSecond);
  store::JobRecord done = Get(id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_NE(done.error_message.find("workerpool1-1 was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << done.error_message;
  ASSERT_FALSE(executor_.cancels().empty());
  EXPECT_EQ(executor_.cancels().back().replicas.size(), 3u);  // the gang is stopped whole
  EXPECT_EQ(executor_.status({id, 0, "workerpool0-0"}).end_state, exec::EndState::kCancelled);
}

TEST_F(ControllerTest, AReplicaWithoutProgressIsReportedHungOnceAndAgainWhenItRecovers) {
  config_.hang_timeout_seconds = 60;
  int64_t id = Submit(Job({Pool("sleep 1000")}));
  Key primary{id, 0, "workerpool0-0"};
  executor_.SetRunning(primary, kT0);
  Turn(kSecond);
  Turn(90 * kSecond);
  EXPECT_TRUE(HasEvent(id, "workerpool0-0 looks hung: no output or progress for"));
  executor_.SetLastActivity(primary, clock_.NowMicros());
  Turn(10 * kSecond);
  EXPECT_TRUE(HasEvent(id, "workerpool0-0 made progress again"));
  EXPECT_EQ(Get(id).state, JobState::kRunning);  // a warning, not a verdict
}

TEST_F(ControllerTest, ANoteFromTheApiBecomesOneEventEvenWhenAskedAgainAfterARestart) {
  int64_t id = Submit(Job({Pool("sleep 1000")}));
  auto count = [&](const std::string& note) {
    int n = 0;
    std::vector<store::Event> events = store_->Events(id).value();
    for (const store::Event& e : events) n += e.reason == note;
    return n;
  };
  const std::string note = "training metrics: skipped logs/x: record 2: data CRC mismatch";
  controller_->NoteJobEvent(id, note);
  controller_->NoteJobEvent(id, note);
  Turn(kSecond);
  EXPECT_EQ(count(note), 1);
  controller_->NoteJobEvent(id, note);
  Turn(kSecond);
  StartController();  // forgets what it noted; the store still knows
  controller_->NoteJobEvent(id, note);
  controller_->NoteJobEvent(id + 1000, note);  // no such job: nothing, no error
  Turn(kSecond);
  EXPECT_EQ(count(note), 1);
  EXPECT_EQ(Get(id).state, JobState::kPending);  // a note changes no state
}

TEST_F(ControllerTest, AReplicaThatNeverStartsFailsTheJobAfterAMinute) {
  int64_t id = Submit(Job({Pool("true")}));
  Turn(30 * kSecond);
  EXPECT_EQ(Get(id).state, JobState::kPending);
  Turn(31 * kSecond);
  store::JobRecord done = Get(id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_NE(done.error_message.find("did not start within 60s"), std::string::npos)
      << done.error_message;
}

TEST_F(ControllerTest, ARestartedControllerAdoptsRunningReplicasWithoutLaunchingAgain) {
  int64_t id = Submit(Job({Pool("sleep 100")}));
  Key primary{id, 0, "workerpool0-0"};
  executor_.SetRunning(primary, kT0);
  Turn(kSecond);
  ASSERT_EQ(Get(id).state, JobState::kRunning);

  StartController();  // the daemon restarted; the replica kept running
  Turn(kSecond);
  EXPECT_EQ(executor_.launches().size(), 1u);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  executor_.Exit(primary, 0, clock_.NowMicros());
  Turn(kSecond);
  EXPECT_EQ(Get(id).state, JobState::kSucceeded);
}

TEST_F(ControllerTest, AJobPendingAtACrashIsLaunchedAgainAndKeepsItsRunningReplica) {
  int64_t id = Submit(Job({Pool("sleep 100")}));
  Key primary{id, 0, "workerpool0-0"};
  executor_.SetRunning(primary, kT0 + kSecond);  // started; the daemon died before it saw that
  ASSERT_EQ(Get(id).state, JobState::kPending);

  StartController();  // recovery launches the PENDING job again: idempotent
  EXPECT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(executor_.status(primary).phase, exec::ReplicaPhase::kRunning);
  Turn(kSecond);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  EXPECT_EQ(Get(id).start_time_us, kT0 + kSecond);
}

TEST_F(ControllerTest, ALaunchTheExecutorRefusesFailsTheJobWithItsWords) {
  executor_.FailNextLaunch(Unavailable("executor down"));
  int64_t id = Submit(Job({Pool("true")}));
  // The launch failed after the allocation was committed: the job failed
  // with the executor's words, and nothing runs.
  EXPECT_EQ(Get(id).state, JobState::kFailed);
  EXPECT_NE(Get(id).error_message.find("executor down"), std::string::npos);
  EXPECT_TRUE(executor_.launches().empty());
}

json GpuPool(const std::string& command, double gpus) {
  json pool = Pool(command);
  pool["machineSpec"] = {{"machineType", "n1-standard-4"},
                         {"acceleratorType", "NVIDIA_TESLA_T4"},
                         {"acceleratorCount", gpus}};
  return pool;
}

TEST_F(ControllerTest, TheLedgerHasEachAttemptWithTheSupervisorsOwnTimes) {
  int64_t id = Submit(Job({GpuPool("exit 1", 0.5)}, {{"maxRetries", 1}}));
  executor_.SetRunning({id, 0, "workerpool0-0"}, kT0 + kSecond);
  executor_.Exit({id, 0, "workerpool0-0"}, 1, kT0 + 4 * kSecond);
  Turn(5 * kSecond);  // judged much later than the exit: the exit time counts
  executor_.SetRunning({id, 1, "workerpool0-0"}, kT0 + 6 * kSecond);
  executor_.Exit({id, 1, "workerpool0-0"}, 0, kT0 + 16 * kSecond);
  Turn(20 * kSecond);
  ASSERT_EQ(Get(id).state, JobState::kSucceeded);
  std::vector<store::UsageRecord> rows = store_->JobUsage(id).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].attempt, 0);
  EXPECT_EQ(rows[0].end, "retried");
  EXPECT_DOUBLE_EQ(rows[0].seconds(), 3);
  EXPECT_EQ(rows[1].end, "succeeded");
  EXPECT_DOUBLE_EQ(rows[1].seconds(), 10);
  EXPECT_DOUBLE_EQ(rows[1].gpus, 0.5);
  EXPECT_EQ(rows[1].gpu_type, "NVIDIA_TESLA_T4");
  EXPECT_EQ(rows[1].user, "ada");
  EXPECT_EQ(rows[1].sampled_seconds, 0);  // no telemetry here

  // A restarted daemon that judges nothing new writes nothing new.
  controller_.reset();
  StartController();
  Turn(kSecond);
  EXPECT_EQ(store_->JobUsage(id).value().size(), 2u);
}

TEST_F(ControllerTest, TheLedgerTakesEachReplicasShareOfItsGpusFromItsTelemetry) {
  int64_t id = Submit(Job({GpuPool("sleep 20", 0.5)}));
  Key primary{id, 0, "workerpool0-0"};
  executor_.SetRunning(primary, kT0);
  // The replica's supervisor samples its GPU every 5 s: 40% busy (the
  // device's use), 100 W; three points before the trainer exits at 20 s.
  std::string telemetry;
  for (int i = 1; i <= 3; ++i) {
    telemetry::Point p;
    p.t = static_cast<double>(kT0) / 1e6 + 5 * i;
    p.dt = 5;
    p.processes = 1;
    p.gpus = {{.index = 0, .device_util_percent = 40, .energy_joules = 500.0 * i}};
    telemetry += telemetry::FormatPoint(p) + "\n";
  }
  executor_.SetTelemetry(primary, telemetry);
  executor_.Exit(primary, 0, kT0 + 20 * kSecond);
  Turn(5 * kSecond);
  ASSERT_EQ(Get(id).state, JobState::kSucceeded);
  std::vector<store::UsageRecord> rows = store_->JobUsage(id).value();
  ASSERT_EQ(rows.size(), 1u);
  // Half the GPU: half its busy time and energy over the 15 s sampled.
  EXPECT_DOUBLE_EQ(rows[0].seconds(), 20);
  EXPECT_DOUBLE_EQ(rows[0].sampled_seconds, 15);
  EXPECT_DOUBLE_EQ(rows[0].busy_gpu_seconds, 0.5 * 0.4 * 15);
  ASSERT_TRUE(rows[0].energy_joules);
  EXPECT_DOUBLE_EQ(*rows[0].energy_joules, 0.5 * 1500);
}

}  // namespace
}  // namespace stoker::server

// Preemption (docs/preemption.md): rule 9 of the scheduler, acted on.
namespace stoker::server {
namespace {

json GpuPool(int gpus) {
  return {{"machineSpec",
           {{"machineType", "n1-standard-4"},
            {"acceleratorType", "NVIDIA_TESLA_T4"},
            {"acceleratorCount", gpus}}},
          {"replicaCount", "1"},
          {"containerSpec", {{"imageUri", "local/sh"}, {"command", {"/bin/sh", "-c", "train"}}}}};
}

// The API tells the loop of a submission before its commit ends (decision
// 0048). A submission whose commit failed never reaches the store: the loop
// cannot move it, and forgets it when told, before a later job that got the
// same id (told in the same turn) is taken in.
TEST_F(ControllerTest, ASubmissionWhoseCommitFailedIsForgottenAndItsIdCanComeAgain) {
  int64_t first = Submit(Job({Pool("true")}));
  store::JobRecord phantom = Get(first);
  phantom.id = first + 1;  // the id the store gives next
  phantom.state = JobState::kQueued;
  phantom.allocation = json();
  controller_->Submitted(phantom);
  controller_->RunOnce();
  // Placed, but its PENDING could not be recorded: nothing launched.
  EXPECT_FALSE(executor_.launched(Key{phantom.id, 0, "workerpool0-0"}));
  EXPECT_FALSE(store_->GetJob(phantom.id).ok());

  // The failed commit is told, then a new submission gets the same id.
  controller_->SubmitFailed(phantom.id);
  auto parsed = spec::ParseCustomJob(Job({Pool("sleep 1")}));
  auto admitted = admission_.AdmitJob(*parsed);
  store::NewJob nj{
      .project = "p", .location = "l", .display_name = "again", .spec = admitted->spec};
  nj.user = "ada";
  store::JobRecord again = store_->CreateJob(nj).value();
  ASSERT_EQ(again.id, phantom.id);
  controller_->Submitted(again);
  controller_->RunOnce();
  ASSERT_TRUE(executor_.launched(Key{again.id, 0, "workerpool0-0"}));
  // Launched from its own spec, not from the forgotten one's.
  const std::vector<exec::JobLaunch> launches = executor_.launches();  // a copy
  const exec::JobLaunch& launch = launches.back();
  EXPECT_EQ(launch.job_id, again.id);
  EXPECT_EQ(launch.replicas[0].argv.back(), "sleep 1");
  EXPECT_EQ(Get(again.id).state, JobState::kPending);
  EXPECT_EQ(Get(again.id).display_name, "again");
  EXPECT_TRUE(controller_->Queue().empty());
}

class PreemptionTest : public ControllerTest {
 protected:
  void SetUp() override {
    config_.preemption.enabled = true;
    config_.preemption.priority_margin = 10;
    config_.preemption.min_run_seconds = 0;
    config_.preemption.grace_seconds = 45;
    ControllerTest::SetUp();
  }
};

TEST_F(PreemptionTest, AHigherJobPreemptsASpotJobWhichResumesAsTheSameJobWithoutUsingARetry) {
  int64_t low = Submit(Job({GpuPool(2)}, {{"strategy", "SPOT"}, {"maxRetries", 1}}));
  Key low0{low, 0, "workerpool0-0"};
  EXPECT_EQ(executor_.launches()[0].replicas[0].grace_seconds, 45);  // the preemption grace
  EXPECT_EQ(executor_.launches()[0].replicas[0].env.at("STOKER_ATTEMPT"), "1");
  executor_.SetRunning(low0, kT0);
  executor_.SetCancelEndsAtOnce(false);  // the trainer uses its grace to save a checkpoint
  Turn(60 * kSecond);

  int64_t high = Submit(Job({GpuPool(2)}, {{"priority", 50}}));
  store::JobRecord v = Get(low);
  EXPECT_EQ(v.state, JobState::kQueued);
  EXPECT_EQ(v.attempt, 1);
  EXPECT_EQ(v.preemptions, 1);
  EXPECT_EQ(v.restart_reason, "preemption");
  EXPECT_TRUE(executor_.cancel_requested(low0));
  EXPECT_TRUE(
      HasEvent(low, "PREEMPTED by job " + std::to_string(high) + " (user ada, priority 50)"));
  EXPECT_TRUE(HasEvent(high, "preempting job " + std::to_string(low)));
  // Its GPUs are held until its replicas are gone: the high job waits, and
  // nothing else is preempted meanwhile.
  Turn(kSecond);
  EXPECT_EQ(Get(high).state, JobState::kQueued);
  EXPECT_EQ(executor_.launches().size(), 1u);

  const int64_t stopped_us = clock_.NowMicros();
  executor_.Kill(low0, SIGTERM, stopped_us);  // it saved and exited within the grace
  Turn(kSecond);
  // The ledger's row of the preempted attempt runs until its trainer ended,
  // the grace included (61 s from its start, not the 60 s to the decision).
  std::vector<store::UsageRecord> rows = store_->JobUsage(low).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].end, "preempted");
  EXPECT_EQ(rows[0].end_us, stopped_us);
  EXPECT_DOUBLE_EQ(rows[0].seconds(), 61);
  ASSERT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(executor_.launches()[1].job_id, high);
  EXPECT_EQ(Get(low).state, JobState::kQueued);  // lower priority: waits for the high job

  executor_.Exit({high, 0, "workerpool0-0"}, 0, clock_.NowMicros());
  Turn(kSecond);
  ASSERT_EQ(executor_.launches().size(), 3u);
  const exec::JobLaunch again = executor_.launches()[2];  // a copy: launches() returns one
  EXPECT_EQ(again.job_id, low);
  EXPECT_EQ(again.attempt, 1);
  EXPECT_EQ(again.replicas[0].env.at("STOKER_ATTEMPT"), "2");
  EXPECT_EQ(again.replicas[0].env.at("STOKER_RESTART_REASON"), "preemption");
  EXPECT_EQ(again.replicas[0].env.at("AIP_CHECKPOINT_DIR"),
            executor_.launches()[0].replicas[0].env.at("AIP_CHECKPOINT_DIR"));

  // maxRetries 1 is still whole: a failure now is retried once.
  executor_.Exit({low, 1, "workerpool0-0"}, 1, clock_.NowMicros());
  Turn(kSecond);
  EXPECT_EQ(Get(low).state, JobState::kPending);
  EXPECT_TRUE(HasEvent(low, "Restarting all replicas as attempt 3 of 3"));
  EXPECT_EQ(Get(low).restart_reason, "retry");
}

TEST_F(PreemptionTest, OnlyPreemptibleJobsLowerByTheMarginAndOldEnoughArePreempted) {
  node_.gpus.push_back({2, "NVIDIA_TESLA_T4", 16ull << 30, ""});
  json pinned_job = Job({GpuPool(1)}, {{"strategy", "SPOT"}});
  pinned_job["labels"] = {{"stoker-preemptible", "false"}};  // the label overrides SPOT
  int64_t pinned = Submit(pinned_job);
  int64_t near = Submit(Job({GpuPool(1)}, {{"strategy", "SPOT"}, {"priority", 45}}));
  int64_t old = Submit(Job({GpuPool(1)}, {{"strategy", "SPOT"}}));
  for (int64_t id : {pinned, near, old}) executor_.SetRunning({id, 0, "workerpool0-0"}, kT0);
  config_.preemption.min_run_seconds = 3600;
  Turn(60 * kSecond);
  int64_t high = Submit(Job({GpuPool(1)}, {{"priority", 50}}));
  Turn(kSecond);
  // Nobody yet: `old` ran a minute of the 3600 s min_run_seconds.
  for (int64_t id : {pinned, near, old}) EXPECT_EQ(Get(id).preemptions, 0) << id;
  EXPECT_EQ(Get(high).state, JobState::kQueued);
  config_.preemption.min_run_seconds = 60;
  Turn(6 * kSecond);  // the next periodic decision
  // `near` is only 5 below (margin 10); `pinned` opted out.
  EXPECT_EQ(Get(pinned).preemptions, 0);
  EXPECT_EQ(Get(near).preemptions, 0);
  EXPECT_EQ(Get(old).preemptions, 1);
}

TEST_F(PreemptionTest, TheExecutorsOwnPreemptionRequeuesTooAndNeverFails) {
  int64_t id = Submit(Job({Pool("sleep 100")}));
  executor_.SetRunning({id, 0, "workerpool0-0"}, kT0);
  executor_.EndPreempted({id, 0, "workerpool0-0"}, "preempted by Slurm (partition low)",
                         kT0 + kSecond);
  Turn(kSecond);
  store::JobRecord r = Get(id);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.restart_reason, "preemption");
  ASSERT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(executor_.launches()[1].replicas[0].env.at("STOKER_RESTART_REASON"), "preemption");
  EXPECT_TRUE(HasEvent(id,
                       "PREEMPTED by the executor's scheduler (workerpool0-0: preempted by "
                       "Slurm (partition low))"));
}

}  // namespace
}  // namespace stoker::server
