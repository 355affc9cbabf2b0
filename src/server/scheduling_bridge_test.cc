// The scheduling bridge alone, over a real store, a FakeExecutor and a
// FakeClock, with the job table filled as the controller's Adopt fills it:
// when a pass runs, what the queue and node views show after one, a wait
// reason written once across passes, and maxWaitDuration.
#include "server/scheduling_bridge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "admission/admission.h"
#include "exec/fake_executor.h"

namespace stoker::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using spec::JobState;

constexpr int64_t kSecond = 1'000'000;

// A job of one replica asking for `gpus` T4s.
json GpuJob(int gpus, json scheduling = json::object()) {
  json pool = {{"machineSpec",
                {{"machineType", "n1-standard-4"},
                 {"acceleratorType", "NVIDIA_TESLA_T4"},
                 {"acceleratorCount", gpus}}},
               {"replicaCount", "1"},
               {"containerSpec", {{"imageUri", "local/sh"}, {"command", {"/bin/sh", "-c", "x"}}}}};
  json j = {{"displayName", "j"}, {"jobSpec", {{"workerPoolSpecs", {pool}}}}};
  if (!scheduling.empty()) j["jobSpec"]["scheduling"] = std::move(scheduling);
  return j;
}

class SchedulingBridgeTest : public ::testing::Test {
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
    launcher_ = std::make_unique<Launcher>(config_, buckets_, environments_, executor_, *store_);
    bridge_ = std::make_unique<SchedulingBridge>(SchedulingBridgeDeps{.config = &config_,
                                                                      .node = &node_,
                                                                      .store = store_.get(),
                                                                      .executor = &executor_,
                                                                      .clock = &clock_,
                                                                      .table = &table_,
                                                                      .funnel = funnel_.get(),
                                                                      .attempts = attempts_.get(),
                                                                      .usage = usage_.get(),
                                                                      .launcher = launcher_.get(),
                                                                      .run_history = &history_});
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Admits and stores `job` as QUEUED and puts it in the table as the
  // controller's Adopt does; `dirty`: whether the table says it changed.
  int64_t Queued(const json& job, bool dirty = true) {
    admission::AdmittedJob admitted =
        admission_.AdmitJob(spec::ParseCustomJob(job).value()).value();
    store::NewJob n{.project = "p", .location = "l", .display_name = "j", .spec = admitted.spec};
    n.user = "ada";
    store::JobRecord rec = store_->CreateJob(n).value();
    ActiveJob& a = table_.active[rec.id];
    a.rec = rec;
    a.job = spec::ParseCustomJob(rec.spec).value();
    a.requests =
        scheduler::RequestsFor(a.job.job_spec, {node_}, "jobSpec.", config_.machine_types).value();
    if (dirty) table_.schedule_dirty = true;
    return rec.id;
  }
  void Advance(int64_t us) {
    clock_.Advance(us);
    executor_.SetNow(clock_.NowMicros());
  }
  store::JobRecord Get(int64_t id) { return store_->GetJob(id).value(); }
  int EventsStartingWith(int64_t id, const std::string& prefix) {
    int n = 0;
    std::vector<store::Event> events = store_->Events(id).value();
    for (const store::Event& e : events) n += e.reason.rfind(prefix, 0) == 0;
    return n;
  }

  fs::path dir_ =
      fs::temp_directory_path() / ("scheduling_bridge_test_" + std::to_string(getpid()));
  FakeClock clock_{1'800'000'000'000'000};
  std::unique_ptr<store::Store> store_;
  config::Config config_;
  resources::Node node_;
  storage::Buckets buckets_{dir_, {}};
  exec::Environments environments_{
      {{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "config.yaml"};
  admission::Admission admission_{
      {.buckets = &buckets_, .environments = &environments_, .node = &node_}};
  exec::FakeExecutor executor_{dir_};
  scheduler::RunHistory history_;
  JobTable table_;
  std::unique_ptr<JobFunnel> funnel_;
  std::unique_ptr<UsageMeter> usage_;
  std::unique_ptr<Attempts> attempts_;
  std::unique_ptr<Launcher> launcher_;
  std::unique_ptr<SchedulingBridge> bridge_;
};

TEST_F(SchedulingBridgeTest, APassRunsWhenTheTableChangedOrFiveSecondsLater) {
  bridge_->Schedule();  // the first pass
  int64_t id = Queued(GpuJob(1), /*dirty=*/false);
  bridge_->Schedule();
  EXPECT_EQ(Get(id).state, JobState::kQueued);
  EXPECT_TRUE(executor_.launches().empty());

  Advance(5 * kSecond);
  bridge_->Schedule();
  EXPECT_EQ(Get(id).state, JobState::kPending);
  ASSERT_EQ(executor_.launches().size(), 1u);
  EXPECT_FALSE(table_.schedule_dirty);
}

TEST_F(SchedulingBridgeTest, TheViewsShowTheWaitingJobWithItsReasonAndWhoHoldsEachGpu) {
  EXPECT_TRUE(bridge_->Queue().empty());  // before the first pass
  int64_t running = Queued(GpuJob(2));
  int64_t waiting = Queued(GpuJob(2));
  bridge_->Schedule();
  EXPECT_EQ(Get(running).state, JobState::kPending);

  std::vector<api::ControlPlane::QueueEntry> queue = bridge_->Queue();
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue[0].job_id, waiting);
  EXPECT_EQ(queue[0].gpus, "2x NVIDIA_TESLA_T4");
  EXPECT_FALSE(queue[0].reason.empty());
  EXPECT_EQ(queue[0].reason, Get(waiting).wait_reason);  // the view says what the store keeps

  // The node view is the pass's snapshot: a job started in a pass holds
  // its GPUs in the next pass's view.
  Advance(5 * kSecond);
  bridge_->Schedule();
  json node = bridge_->Nodes()["nodes"].at(0);
  EXPECT_EQ(node["name"], "local");
  for (const json& gpu : node["gpus"]) {
    ASSERT_EQ(gpu["holders"].size(), 1u) << node.dump();
    EXPECT_EQ(gpu["holders"][0]["job"], std::to_string(running));
    EXPECT_EQ(gpu["holders"][0]["replica"], "workerpool0-0");
    EXPECT_EQ(gpu["holders"][0]["user"], "ada");
  }
}

TEST_F(SchedulingBridgeTest, AWaitReasonIsWrittenOnceAcrossPassesThatKeepIt) {
  Queued(GpuJob(2));
  int64_t waiting = Queued(GpuJob(2));
  bridge_->Schedule();
  std::string reason = Get(waiting).wait_reason;
  ASSERT_FALSE(reason.empty());
  for (int pass = 0; pass < 3; ++pass) {
    Advance(5 * kSecond);
    bridge_->Schedule();
  }
  EXPECT_EQ(Get(waiting).wait_reason, reason);
  EXPECT_EQ(EventsStartingWith(waiting, "waiting: "), 1);
}

TEST_F(SchedulingBridgeTest, AJobPastItsMaxWaitDurationFailsWithTheLastReason) {
  Queued(GpuJob(2));
  int64_t waiting = Queued(GpuJob(2, {{"maxWaitDuration", "60s"}}));
  bridge_->Schedule();
  std::string reason = Get(waiting).wait_reason;
  Advance(61 * kSecond);
  bridge_->Schedule();
  store::JobRecord done = Get(waiting);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, spec::kRpcDeadlineExceeded);
  EXPECT_NE(done.error_message.find("maxWaitDuration of 60s"), std::string::npos)
      << done.error_message;
  EXPECT_NE(done.error_message.find("last reason: " + reason), std::string::npos);
  EXPECT_TRUE(bridge_->Queue().empty());
}

}  // namespace
}  // namespace stoker::server
