// A job's attempts once placed: polling its replicas and judging the
// attempt (attempt_verdict.h), retries and requeues, preemption, hung
// replicas, cancels, and stopping an ended attempt's replicas (draining).
// State changes go through the funnel; the ledger through the usage meter.
// Loop thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "config/config.h"
#include "exec/executor.h"
#include "server/job_table.h"
#include "server/usage_meter.h"
#include "storage/buckets.h"
#include "store/store.h"

namespace stoker::server {

struct AttemptsDeps {
  const config::Config* config = nullptr;
  store::Store* store = nullptr;
  exec::Executor* executor = nullptr;
  storage::Buckets* buckets = nullptr;  // where checkpoints are looked for
  const Clock* clock = nullptr;
  JobTable* table = nullptr;
  JobFunnel* funnel = nullptr;
  UsageMeter* usage = nullptr;
};

class Attempts {
 public:
  // Every pointer in `deps` must outlive this.
  explicit Attempts(AttemptsDeps deps);

  // Polls the attempt's replicas: records its start, the executor's wait
  // reason and start notes, hung replicas, and judges it: success, failure,
  // a retry as the next attempt, or the executor's preemption.
  void Poll(ActiveJob& a);
  // A cancel was asked for: a queued job ends at once; a placed one is
  // CANCELLING and its replicas are told (again every 2 s until Poll sees
  // them gone).
  void HandleCancel(ActiveJob& a);
  // Stops the current attempt's replicas (an event says which and why); they
  // stay in the table's draining attempts, holding their resources, until gone.
  void Drain(ActiveJob& a);
  // Polls the draining attempts; those whose replicas are all gone let go
  // of their resources (their ledger rows get the real end times).
  void ReapDrained();
  // Preemption (scheduler rule 9, or the executor's own): records the
  // attempt's usage, stops it with the preemption grace and requeues the
  // job with the same checkpoint directory; `by` names who preempted it.
  // `stop`: Stoker stops the replicas (false: the executor already does,
  // with its own grace). Never counts against maxRetries.
  void Preempt(ActiveJob& a, const std::string& by, bool stop = true);
  // When the job's unsaved work began, for rule 9: the newest file in its
  // AIP_CHECKPOINT_DIR (looked at most every 10 s), or its attempt's start.
  int64_t LastCheckpointUs(ActiveJob& a, int64_t now_us);

 private:
  // Restarts the whole gang as the next attempt when the job's retry rules
  // allow it after `what` (a replica failure); false when the job must fail.
  bool Retry(ActiveJob& a, const std::string& what, bool infrastructure, bool worker);
  // Stops the current attempt (Drain) and queues the job again as attempt
  // *u.attempt with `reason` as the event; false if the store refused.
  bool Requeue(ActiveJob& a, const std::string& reason, store::TransitionUpdate u);
  // How many retries the job's rules allow after such a failure, and whether one is left.
  int RetryLimit(const ActiveJob& a, bool infrastructure, bool worker) const;
  bool CanRetry(const ActiveJob& a, bool infrastructure, bool worker) const;
  void CheckHung(ActiveJob& a, const std::vector<exec::ReplicaStatus>& st);
  // The last 20 lines of a replica's log, for a failed job's message.
  std::string LogTail(const ActiveJob& a, const std::string& replica) const;

  const config::Config& config_;
  store::Store& store_;
  exec::Executor& executor_;
  storage::Buckets& buckets_;
  const Clock& clock_;
  JobTable& table_;
  JobFunnel& funnel_;
  UsageMeter& usage_;
};

}  // namespace stoker::server
