// The control loop: the one thread that changes job state (DESIGN.md §2).
//
// It owns the job table (job_table.h): the active jobs and what they hold,
// which its concern units read and change: attempts (attempts.h), usage
// and budgets (usage_meter.h), launches (launcher.h), and scheduling
// (scheduling_bridge.h: the policy's snapshot and decision, wait reasons,
// the queue and node views); the controller keeps the loop, the inbox,
// adoption and recovery. API handlers tell it about new
// jobs and cancel requests after they are durable in the store; it also finds them on its own at
// start (Recover), so a crash between the store commit and the notification loses nothing. Each
// state change is committed to the store before anything acts on it, and a launch is idempotent, so
// a crash anywhere is resolved by recovery.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "admission/admission.h"
#include "api/control_plane.h"
#include "common/clock.h"
#include "config/config.h"
#include "cost/accounting.h"
#include "exec/environments.h"
#include "exec/executor.h"
#include "metrics/daemon_metrics.h"
#include "resources/nvml.h"
#include "resources/resources.h"
#include "scheduler/placement.h"
#include "scheduler/policy.h"
#include "scheduler/run_history.h"
#include "server/attempts.h"
#include "server/job_table.h"
#include "server/launcher.h"
#include "server/retention.h"
#include "server/scheduling_bridge.h"
#include "server/study_driver.h"
#include "server/usage_meter.h"
#include "spec/custom_job.h"
#include "spec/study.h"
#include "storage/buckets.h"
#include "store/store.h"
#include "tune/sampler.h"

namespace stoker::server {

// What the controller works with. Every pointer must outlive it.
struct ControllerDeps {
  const config::Config* config = nullptr;
  const resources::Node* node = nullptr;  // the local executor's inventory
  store::Store* store = nullptr;
  exec::Executor* executor = nullptr;
  storage::Buckets* buckets = nullptr;
  const exec::Environments* environments = nullptr;
  const admission::Admission* admission = nullptr;  // the trials the study driver starts
  const Clock* clock = &SystemClock();              // every time it reads or stamps
  cost::Accountant* accountant = nullptr;           // budgets to enforce; null = none
  // Reads the node's GPUs (resources::QueryGpuUsage) for the daemon's
  // gauges; null = none (GPUs declared in the config, tests). The ledger's
  // GPU use comes from the replicas' telemetry (usage_meter.h).
  std::function<std::vector<resources::GpuUsage>()> sample_gpus;
  // Where the loop counts its passes, scheduling times, first starts and
  // GPU samples for GET /metrics (docs/metrics.md); null = nowhere.
  metrics::DaemonMetrics* metrics = nullptr;
};

class Controller final : public api::ControlPlane, private TrialJobs {
 public:
  explicit Controller(ControllerDeps deps);
  ~Controller() override;

  // Recover, then start the loop thread (which calls RunOnce whenever told
  // of something, and every poll_interval_ms).
  Status Start();
  // Stops the loop thread. Running replicas keep running.
  void Stop();

  // The loop's two steps, for a caller that drives the loop itself (tests)
  // instead of Start; never while the loop thread runs.
  // Recover: loads active jobs and studies from the store (re-adopting
  // running replicas), stops replicas of jobs that ended, rebuilds fair share.
  Status Recover();
  // One turn: takes the notifications, polls replicas, judges attempts,
  // drives studies, schedules, applies retention.
  void RunOnce();

  // api::ControlPlane: thread-safe notifications from API handlers (a
  // submission's before its commit ends), and the views of the last decision.
  void Submitted(const store::JobRecord& job) override;
  void SubmitFailed(int64_t job_id) override;
  void CancelRequested(int64_t job_id) override;
  void StudySubmitted(int64_t study_id) override;
  void StudyCancelRequested(int64_t study_id) override;
  void NoteJobEvent(int64_t job_id, const std::string& note) override;
  std::vector<QueueEntry> Queue() const override;
  nlohmann::json Nodes() const override;

 private:
  // TrialJobs: the study driver stored a trial job, or a cancel of one.
  void TrialJobStored(const store::JobRecord& job) override { Adopt(job); }
  void TrialJobCancelRequested(int64_t job_id) override;

  // Runs `change` on the inbox under its lock and wakes the loop.
  template <typename F>
  void Tell(F&& change) {
    {
      std::lock_guard lock(mu_);
      change();
    }
    cv_.notify_all();
  }
  void Loop();
  void Tick();
  // Takes a job into the table (from the inbox, the study driver or the
  // store at recovery); one found PENDING is launched again.
  void Adopt(store::JobRecord rec);
  // Takes a job whose submission's commit failed out of the table.
  void Forget(int64_t job_id);

  const config::Config& config_;
  const resources::Node& node_;
  store::Store& store_;
  exec::Executor& executor_;
  const Clock& clock_;
  // GET /metrics' measurements (ControllerDeps::metrics); may be null.
  metrics::DaemonMetrics* metrics_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<store::JobRecord> inbox_submitted_;
  std::vector<int64_t> inbox_not_stored_;  // SubmitFailed
  std::set<int64_t> inbox_cancel_;
  std::set<int64_t> inbox_studies_;
  std::set<int64_t> inbox_study_cancel_;
  std::vector<std::pair<int64_t, std::string>> inbox_notes_;  // NoteJobEvent, bounded

  // Loop-thread state: the job table and the concern units over it.
  JobTable table_;
  // How long similar jobs ran (the queue's estimated starts, policy.h rule
  // 8): successful runs from the store at start, then as they end.
  scheduler::RunHistory run_history_;
  JobFunnel funnel_;
  UsageMeter usage_;
  Attempts attempts_;
  Launcher launcher_;
  SchedulingBridge bridge_;   // also serves the API's Queue and Nodes, from any thread
  RetentionState retention_;  // finished replica dirs (retention.h)
  StudyDriver studies_;       // the tuning jobs
  std::thread thread_;
};

}  // namespace stoker::server
