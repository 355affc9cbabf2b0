// The control loop's table of jobs (controller.h): each active job with
// what every concern keeps of it, the ended attempts whose replicas are
// still being stopped, and the funnel through which every job changes state.
//
// The concern units (attempts.h, usage_meter.h, launcher.h and
// scheduling_bridge.h) each read and write the table; a unit calls another
// only through its public interface and in one direction (server/README.md).
// All of it is loop-thread state.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "metrics/daemon_metrics.h"
#include "resources/resources.h"
#include "scheduler/placement.h"
#include "scheduler/run_history.h"
#include "server/webhooks.h"
#include "spec/custom_job.h"
#include "store/store.h"

namespace stoker::server {

// One job the loop watches (queued or placed), from Adopt until it ended.
struct ActiveJob {
  store::JobRecord rec;
  spec::CustomJob job;
  std::vector<scheduler::ReplicaRequest> requests;  // what each replica asks for
  std::vector<std::string> replicas;                // names, once placed
  std::vector<scheduler::PlacedReplica> placed;     // what the current attempt holds
  int64_t placed_us = 0;

  // Scheduling: why it waits, as last written.
  int64_t wait_event_us = 0;    // last "waiting: ..." event
  std::string wait_event_kind;  // its scheduler::WaitKind
  int wait_jobs_ahead = -1;     // rec.wait_reason is "N jobs ahead" with this N; -1 = not
  std::string run_shape;        // scheduler::ShapeKey of rec.spec; "" = not computed yet

  // Attempts: cancel repeats, hung replicas, the last checkpoint.
  int64_t last_cancel_us = 0;
  std::map<std::string, int64_t> hung_since_us;  // replicas reported hung, by name
  int64_t hang_check_us = 0;
  // Attempts::LastCheckpointUs's cache: the newest checkpoint's time, and when looked.
  int64_t checkpoint_us = 0;
  int64_t checkpoint_looked_us = 0;

  // Usage: since when every GPU of the job has been under 15% busy (0: not
  // idle), and the job.gpu_idle hooks (by index) told of this stretch.
  int64_t gpu_idle_since_us = 0;
  std::set<size_t> gpu_idle_told;
  std::vector<store::UsageRecord> recorded_usage;  // the ended attempt's ledger rows, for Drain
};

// An ended attempt whose replicas are still being stopped: it holds its
// resources until they are gone.
struct DrainingAttempt {
  std::vector<std::string> replicas;
  std::vector<scheduler::PlacedReplica> placed;
  std::string user;
  int priority = 0;
  std::set<int> ports;  // CLUSTER_SPEC ports it was given: not handed out again
  // The attempt's ledger rows as written when it was judged; written again
  // with the replicas' real end times once they are gone (the grace counts).
  std::vector<store::UsageRecord> usage;
};

struct JobTable {
  std::map<int64_t, ActiveJob> active;
  std::map<std::pair<int64_t, int>, DrainingAttempt> draining;  // by (job, attempt)
  bool schedule_dirty = true;  // something changed since the last scheduling decision
};

// What an allocation (as stored) holds. Allocations written before GPU
// sharing list whole GPUs as plain indexes (their memory taken from `node`).
std::vector<scheduler::PlacedReplica> PlacedFromAllocation(const nlohmann::json& allocation,
                                                           const resources::Node& node);
// Adds the ports an allocation (as stored) gives its replicas to `ports`.
void AddPorts(const nlohmann::json& allocation, std::set<int>& ports);
// The job's output directory as a gs:// URI ending in '/':
// baseOutputDirectory, or the outputs bucket's directory for the job.
std::string OutputUri(const spec::CustomJob& job, int64_t id);
// A job as webhook bodies name it.
nlohmann::json WebhookJob(const store::JobRecord& r, int attempt);
// What makes a job similar to others in a RunHistory.
scheduler::RunKey RunKeyOf(const store::JobRecord& rec);
// A number without trailing zeros: 4, 0.25, 15.5.
std::string Num(double v);

// The one way a job changes state: the store's transition (with its
// webhook deliveries in the same commit), then the in-memory record, the
// first-start metric and the run history.
class JobFunnel {
 public:
  // Every reference must outlive the funnel; `metrics` may be null.
  JobFunnel(store::Store& store, const std::vector<config::Webhook>& webhooks, const Clock& clock,
            metrics::DaemonMetrics* metrics, scheduler::RunHistory& run_history)
      : store_(store),
        webhooks_(webhooks),
        clock_(clock),
        metrics_(metrics),
        run_history_(run_history) {}

  // Commits a transition and updates the in-memory record; false (logged)
  // if the store refused.
  bool Move(ActiveJob& a, spec::JobState to, const std::string& reason,
            store::TransitionUpdate update = {});
  // Moves the job to its terminal state `to`, ending now, with its error.
  void Finish(ActiveJob& a, spec::JobState to, const std::string& reason, int error_code,
              const std::string& error_message);
  // Adds `note` as an event of job `job_id` unless the job already has an
  // event with exactly that reason.
  void RecordNote(int64_t job_id, const std::string& note);

 private:
  store::Store& store_;
  const std::vector<config::Webhook>& webhooks_;
  const Clock& clock_;
  metrics::DaemonMetrics* metrics_;
  scheduler::RunHistory& run_history_;
  // (job, note) pairs RecordNote already recorded; a cache of the store's
  // events, cleared when it grows past a bound.
  std::set<std::pair<int64_t, std::string>> noted_;
};

}  // namespace stoker::server
