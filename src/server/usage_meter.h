// What jobs use, as the control loop sees it: the usage ledger's rows for
// each ended attempt, fair share's decayed GPU time per user, the GPUs'
// utilisation and energy per replica (and the job.gpu_idle hooks), and
// budgets (warnings, stopRunning). It reads and writes the job table
// (job_table.h) and the store; it never changes a job's state: a budget
// that stops jobs asks for their cancel, as a user would. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "config/config.h"
#include "cost/accounting.h"
#include "exec/executor.h"
#include "metrics/daemon_metrics.h"
#include "resources/nvml.h"
#include "server/job_table.h"
#include "store/store.h"

namespace stoker::server {

struct UsageMeterDeps {
  const config::Config* config = nullptr;
  const resources::Node* node = nullptr;  // the local executor's inventory
  store::Store* store = nullptr;
  const Clock* clock = nullptr;
  cost::Accountant* accountant = nullptr;  // budgets to enforce; null = none
  // The replicas' files: their telemetry.jsonl, where each replica's
  // supervisor samples its own GPUs (runner/telemetry_sampler.h), is the one
  // source of the GPU use the ledger records and the job.gpu_idle hooks
  // watch (it covers Slurm's nodes too). Null = no GPU use recorded.
  const exec::ReplicaFiles* files = nullptr;
  // Reads this node's GPUs for the daemon's own gauges (metrics below, the
  // node's view); null = none.
  std::function<std::vector<resources::GpuUsage>()> sample_gpus;
  metrics::DaemonMetrics* metrics = nullptr;  // gets each node sample; may be null
};

class UsageMeter {
 public:
  // Every pointer in `deps` and `table` must outlive the meter.
  UsageMeter(UsageMeterDeps deps, JobTable& table);

  // Fair share (fair_share.h): decays each user's GPU-seconds to `now_us`
  // and adds the GPU time active and draining attempts held since the last call.
  void Accrue(int64_t now_us);
  // Sets the usage from the store's history (jobs that held GPUs, ended or
  // still running), so that fair share survives a restart.
  void Rebuild(int64_t now_us);
  // Decayed GPU-seconds per user, as of the last Accrue or Rebuild.
  const std::map<std::string, double>& FairShareUsage() const { return usage_; }

  // Writes the ended attempt's rows to the ledger (replica times from
  // `st`, GPU use from each replica's telemetry: telemetry::UseOfGpus with
  // its booked shares) and keeps them in a.recorded_usage for the draining
  // attempt. `end`: how it ended.
  void RecordAttempt(ActiveJob& a, const std::vector<exec::ReplicaStatus>& st,
                     const std::string& end);
  // A draining attempt's replicas are all gone: its rows are written again
  // with their real end times when they ran on past the judgement (a
  // preemption's or a cancel's grace).
  void RecordDrained(int64_t job_id, DrainingAttempt& d,
                     const std::vector<exec::ReplicaStatus>& st);

  // Every gpu_telemetry_seconds: gives the node's GPUs to the metrics, and
  // tells job.gpu_idle hooks of running jobs whose GPUs idle, by the
  // latest telemetry point of each replica (weighted by its shares).
  void WatchGpus();

  // Every 10 s when budgets exist: a warning event on the running jobs of a
  // budget past its threshold (once a month), and a cancel request for the
  // jobs of a budget whose hard limit is reached with stopRunning. Returns
  // the studies whose cancel it requested (the study driver must be told).
  std::vector<int64_t> EnforceBudgets();

 private:
  // job.gpu_idle: tells each hook that asked once the job's GPUs have been
  // under 15% busy for its gpu_idle_minutes (again after a busy spell).
  void CheckGpuIdle(ActiveJob& a, double busy_percent, int64_t since_us, int64_t now_us);
  // The fraction of each GPU (NVML index) replica `replica` of `a` booked;
  // 1 for a GPU its placement does not name.
  static std::function<double(int)> SharesOf(const ActiveJob& a, size_t replica);
  // Whether replica `replica` of `a` may have GPUs to read telemetry of.
  static bool MayUseGpus(const ActiveJob& a, size_t replica);

  const config::Config& config_;
  const resources::Node& node_;
  store::Store& store_;
  const Clock& clock_;
  cost::Accountant* accountant_;
  const exec::ReplicaFiles* files_;
  std::function<std::vector<resources::GpuUsage>()> sample_gpus_;
  metrics::DaemonMetrics* metrics_;
  JobTable& table_;

  std::map<std::string, double> usage_;  // decayed GPU-seconds per user (fair share)
  int64_t usage_us_ = 0;                 // when usage_ was last brought up to date
  int64_t gpu_check_us_ = 0;             // the last WatchGpus that ran
  int64_t budget_check_us_ = 0;
  std::set<std::string> budget_warned_;  // "scope month" already warned about
};

}  // namespace stoker::server
