// Between the job table and the scheduling policy (scheduler/policy.h): the
// snapshot of the table the policy decides on, and what the loop does with
// its decision: starts the placed jobs (allocation committed, then the
// launch, then the start notes), records why the others wait (failing those
// past their maxWaitDuration), fails those that can never be placed, and
// preempts (through the attempts unit). It publishes the queue and node
// views the API reads. With an executor that places replicas itself
// (Slurm) it hands every queued job over at once instead.
//
// It owns when the last decision was made, the warm interpreters' bookings
// (warm_holdings.h) and the views. Threads: Schedule and LaunchOrFail run on
// the loop thread only (they read and change the job table); Queue and
// Nodes are for any thread (the views are copies under their own lock).
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/control_plane.h"
#include "common/clock.h"
#include "config/config.h"
#include "exec/executor.h"
#include "metrics/daemon_metrics.h"
#include "resources/resources.h"
#include "scheduler/policy.h"
#include "scheduler/run_history.h"
#include "server/attempts.h"
#include "server/job_table.h"
#include "server/launcher.h"
#include "server/usage_meter.h"
#include "server/warm_holdings.h"
#include "store/store.h"

namespace stoker::server {

struct SchedulingBridgeDeps {
  const config::Config* config = nullptr;
  const resources::Node* node = nullptr;  // the local executor's inventory
  store::Store* store = nullptr;
  const exec::Executor* executor = nullptr;  // asked only whether it places replicas
  const Clock* clock = nullptr;
  metrics::DaemonMetrics* metrics = nullptr;  // each pass's time; may be null
  JobTable* table = nullptr;
  JobFunnel* funnel = nullptr;
  Attempts* attempts = nullptr;  // preemption, and rule 9's checkpoint clock
  UsageMeter* usage = nullptr;   // fair share, brought up to the snapshot's time
  Launcher* launcher = nullptr;
  // How long similar jobs ran, for the queue's estimated starts (rule 8).
  const scheduler::RunHistory* run_history = nullptr;
};

class SchedulingBridge {
 public:
  // Every pointer in `deps` must outlive the bridge.
  explicit SchedulingBridge(SchedulingBridgeDeps deps);

  // One scheduling pass when the table changed (JobTable::schedule_dirty),
  // and every 5 s for aging and estimates; nothing otherwise. Wait reasons
  // of the pass are written in one commit; if that commit fails they are
  // forgotten and the next turn decides again. Loop thread.
  void Schedule();
  // Launches the attempt `a` holds (its allocation is stored); a launch
  // error fails the job. Idempotent, as the executor's Launch: the
  // controller calls it again for a job it finds PENDING. (A job the pass
  // places itself has its launch prepared before its PENDING commit, and
  // started after it: Launcher::Prepare.) Loop thread.
  void LaunchOrFail(ActiveJob& a);

  // The views of the last pass (api::ControlPlane::Queue and Nodes): empty
  // before the first. Any thread.
  std::vector<api::ControlPlane::QueueEntry> Queue() const;
  nlohmann::json Nodes() const;

 private:
  // Builds the policy's view of the cluster and brings fair share to `now_us`.
  scheduler::Snapshot TakeSnapshot(int64_t now_us);
  // The run history's expected run time of an active job (0 = unknown).
  int64_t ExpectedRunS(ActiveJob& a);
  // Stores the placed job's allocation as PENDING, launches it, then writes
  // its start notes (substitutions, clamping, backfill ahead of `ahead_of`).
  void StartPlaced(ActiveJob& a, const scheduler::StartJob& start, const std::string& ahead_of);
  // Fails a job past its maxWaitDuration; otherwise adds its new wait reason
  // (and an event, when due) to `notes`, which Schedule commits at once.
  void RecordWait(ActiveJob& a, const scheduler::WaitingJob& w, int64_t now_us,
                  std::vector<store::Store::WaitNote>& notes);
  // The decision's preemptions: a note on the job that needs the room, and
  // the victim preempted by the attempts unit.
  void Preempt(const std::vector<scheduler::Preemption>& preempt);
  void PublishViews(const scheduler::Snapshot& snap, const scheduler::Decision& d);
  // Executors that place replicas themselves (Slurm): launch queued jobs at once.
  void HandOverQueued();

  const config::Config& config_;
  const resources::Node& node_;
  store::Store& store_;
  const exec::Executor& executor_;
  const Clock& clock_;
  metrics::DaemonMetrics* metrics_;
  JobTable& table_;
  JobFunnel& funnel_;
  Attempts& attempts_;
  UsageMeter& usage_;
  Launcher& launcher_;
  const scheduler::RunHistory& run_history_;

  int64_t last_schedule_us_ = 0;
  WarmHoldings warm_holdings_;  // booked when warm starts are on

  // Views for the API, replaced after each pass.
  mutable std::mutex view_mu_;
  std::vector<api::ControlPlane::QueueEntry> queue_view_;
  nlohmann::json nodes_view_ = nlohmann::json::object();
};

}  // namespace stoker::server
