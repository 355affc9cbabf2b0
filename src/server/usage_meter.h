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
  // Reads the node's GPUs; null = no GPU telemetry.
  std::function<std::vector<resources::GpuUsage>()> sample_gpus;
  metrics::DaemonMetrics* metrics = nullptr;  // gets each GPU sample; may be null
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
  // `st`, GPU telemetry from a.telemetry) and keeps them in
  // a.recorded_usage for the draining attempt. `end`: how it ended.
  void RecordAttempt(ActiveJob& a, const std::vector<exec::ReplicaStatus>& st,
                     const std::string& end);
  // A draining attempt's replicas are all gone: its rows are written again
  // with their real end times when they ran on past the judgement (a
  // preemption's or a cancel's grace).
  void RecordDrained(int64_t job_id, DrainingAttempt& d,
                     const std::vector<exec::ReplicaStatus>& st);

  // Every gpu_telemetry_seconds: reads the GPUs' utilisation and energy,
  // adds each running replica's share (its booked fractions) to its
  // telemetry, and tells job.gpu_idle hooks of jobs whose GPUs idle.
  void SampleGpus();

  // Every 10 s when budgets exist: a warning event on the running jobs of a
  // budget past its threshold (once a month), and a cancel request for the
  // jobs of a budget whose hard limit is reached with stopRunning. Returns
  // the studies whose cancel it requested (the study driver must be told).
  std::vector<int64_t> EnforceBudgets();

 private:
  // job.gpu_idle: tells each hook that asked once the job's GPUs have been
  // under 15% busy for its gpu_idle_minutes (again after a busy spell).
  void CheckGpuIdle(ActiveJob& a, double busy_percent, int64_t since_us, int64_t now_us);

  const config::Config& config_;
  const resources::Node& node_;
  store::Store& store_;
  const Clock& clock_;
  cost::Accountant* accountant_;
  std::function<std::vector<resources::GpuUsage>()> sample_gpus_;
  metrics::DaemonMetrics* metrics_;
  JobTable& table_;

  std::map<std::string, double> usage_;    // decayed GPU-seconds per user (fair share)
  int64_t usage_us_ = 0;                   // when usage_ was last brought up to date
  int64_t gpu_sample_us_ = 0;              // the last GPU sample
  std::map<int, uint64_t> gpu_energy_mj_;  // each GPU's energy counter at it
  int64_t budget_check_us_ = 0;
  std::set<std::string> budget_warned_;  // "scope month" already warned about
};

}  // namespace stoker::server
