// The cluster scheduling policy: a pure function from a snapshot of the
// cluster (nodes, running jobs, the queue, usage, quotas, options, the time)
// to a decision (which jobs start where, why the others wait, when they may
// start). No clock, no I/O, no RNG: the same snapshot always gives the same
// decision, so a test can replay any situation and the controller can call it
// as often as it likes.
//
// The policy, in order of application:
//  1. Order. Jobs are taken by effective priority (higher first), then fair
//     share (the user with less decayed GPU-seconds first), then submission
//     time, then queue position. Aging: effective priority =
//       priority + floor((now - submit) / aging_threshold_us)
//     (no aging when aging_threshold_us is 0), so a job waiting one threshold
//     gains +1, two thresholds +2, and eventually passes every newer job.
//  2. Gang. Every replica of a job starts or none does. Replicas may land on
//     different nodes; one replica never spans nodes. GPU replicas are packed
//     (nodes this gang already uses first, then best fit: the node left with
//     the fewest free GPUs); fractional GPUs go to the most-booked GPU that
//     still has room.
//  3. GPUs are never over-committed. A whole-GPU request (count >= 1, a whole
//     number) takes GPUs with nothing booked; a fractional request (0 < count
//     < 1) takes one GPU whose booked fraction + count <= 1. The fraction is
//     also the share of the GPU's memory the replica may use (memory_bytes in
//     GpuShare), so memory can never be over-committed either.
//  4. CPUs and memory are soft: booked up to node capacity x
//     cpu_oversubscription on each node.
//  5. Accelerators: GPUs of the exact type first; with
//     accelerator_substitution, any GPU with at least as much memory as the
//     requested type, recorded in ReplicaPlacement::substitutions.
//  6. Quotas: a job whose user would exceed max_gpus or max_running_jobs is
//     skipped (it neither starts nor blocks others); the reason says which.
//  7. EASY backfill. The first job in order that does not fit now (and is not
//     skipped by quota) gets a Reservation: the earliest time at which it fits
//     once running jobs end at start + runtime bound (a bound of 0 = never
//     ends), and the resources it would take then. A later job starts now only
//     if it fits now and either ends (now + its bound) by the reservation time
//     or leaves the reserved resources untouched. With backfill off, nothing
//     after that first blocked job starts. When no finite reservation time
//     exists (jobs without a bound hold what it needs), the reservation holds
//     what the job would take on the emptied cluster, preferring nodes with
//     the most free GPUs now, so those drain for it.
//  8. Why. Every job that does not start gets a reason and, when run
//     times make it computable, an estimated start time: when its shape
//     first fits as the jobs ahead end, not before the reservation holder's
//     own estimate. The run times are the jobs' expected ones
//     (expected_runtime_s: what similar jobs took, RunHistory), capped by
//     their bounds; a job without one holds its resources "forever", so what
//     waits on it has no estimate (0, "unknown"), never one from a timeout.
//     Only when no job of the snapshot has an expected_runtime_s set
//     (kRuntimeFromBound everywhere) are the bounds taken as run times. The
//     reason is detailed ("needs 2x NVIDIA_H100_80GB, 1 free; 3 jobs ahead in
//     the queue") for the reservation holder, for quota holds and for the
//     first PolicyOptions::detailed_reasons other waiting jobs in queue order;
//     the waiting jobs after those get only their place in line, exactly
//     "N jobs ahead in the queue" ("1 job" for one; N > detailed_reasons),
//     which WaitingJob::Reason() spells from WaitingJob::jobs_ahead.
//     A detailed reason costs a string per job and, after every start, a
//     cluster scan per shape, so a 10,000-job queue would otherwise spend
//     much of a call on reasons nobody reads. Estimates are unaffected.
//  9. Preemption (off unless options.preemption.enabled). After rules 1-8,
//     the waiting jobs are taken again in queue order (quota holds and jobs
//     past the first preemption.max_jobs_considered skipped). A job that
//     fits once the stopping jobs (RunningJob::stopping: already being
//     preempted or stopped) have let go claims those resources and waits
//     for them. Otherwise it may preempt running jobs that are preemptible,
//     not stopping, have run at least min_run_us in their current attempt,
//     and whose priority is at least priority_margin below its own (base
//     priorities, without aging): whole jobs only, the ones with the least
//     unsaved work first (GPU-seconds since RunningJob::progress_us, then
//     CPU-seconds), adding victims until its gang fits, then dropping every
//     victim it fits without (the costliest first). If even all of them do
//     not make room, nothing is preempted for it. A job preempted for one
//     waiting job is not counted twice; what it frees is claimed for that
//     job. Because a victim's priority is lower by the margin, it can never
//     preempt back: no loops. Decision::preempt lists the victims.
//
// Thread safety: Schedule and the other functions are pure and reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "resources/resources.h"

namespace stoker::scheduler {

// One GPU (or a share of one) held by a replica.
struct GpuShare {
  int gpu = 0;                // resources::Gpu::index on the replica's node
  double fraction = 1.0;      // 1 for a whole GPU, (0, 1) for a shared one
  uint64_t memory_bytes = 0;  // fraction x the GPU's memory: the replica's limit
};

// Where one replica runs and what it holds. Replica i of a job is entry i.
struct PlacedReplica {
  int node = 0;  // index into Snapshot::nodes
  double cpus = 0;
  uint64_t memory_bytes = 0;
  std::vector<GpuShare> gpus;
  // "NVIDIA_TESLA_T4 served by GPU 3 (NVIDIA_L4)", one per substituted GPU.
  std::vector<std::string> substitutions;
};

// expected_runtime_s of a job that has none set: the estimates of rule 8
// take the runtime bound as its run time (kept for callers that know no
// better; the daemon always sets expected_runtime_s, 0 when unknown).
inline constexpr int64_t kRuntimeFromBound = -1;

struct RunningJob {
  std::string id;
  std::string user;
  int priority = 0;
  std::vector<PlacedReplica> replicas;  // only node, cpus, memory, gpus are read
  int64_t start_us = 0;                 // microseconds since the epoch
  int64_t runtime_bound_s = 0;          // scheduling.timeout; 0 = unbounded
  // Rule 8's estimates only (never backfill): how long it is expected to run
  // in all, from start_us; 0 = unknown; kRuntimeFromBound = runtime_bound_s.
  int64_t expected_runtime_s = kRuntimeFromBound;
  // Rule 9: whether it may be preempted (Vertex scheduling.strategy SPOT,
  // or Stoker's label), whether it is already being stopped (its resources
  // are about to be free; never a victim), and since when its work is
  // unsaved (its last checkpoint, or start_us; 0 = start_us).
  bool preemptible = false;
  bool stopping = false;
  int64_t progress_us = 0;
};

// What one replica of a queued job asks for.
struct ReplicaAsk {
  double cpus = 0;
  uint64_t memory_bytes = 0;
  // 0 = no GPU; (0, 1) = that share of one GPU and of its memory; >= 1 = that
  // many whole GPUs (must be a whole number).
  double gpus = 0;
  std::string gpu_type;  // Vertex AcceleratorType name; "" when gpus == 0
};

struct QueuedJob {
  std::string id;
  std::string user;
  int priority = 0;  // higher runs first
  int64_t submit_us = 0;
  std::vector<ReplicaAsk> replicas;  // all of them: pools flattened
  int64_t runtime_bound_s = 0;       // 0 = unbounded
  // As RunningJob::expected_runtime_s, once it starts.
  int64_t expected_runtime_s = kRuntimeFromBound;
};

struct Quota {
  std::optional<double> max_gpus;  // whole-GPU equivalents, running
  std::optional<int> max_running_jobs;
};

// Rule 9's settings (config `preemption:`, docs/preemption.md).
struct PreemptionOptions {
  bool enabled = false;
  int priority_margin = 100;     // a job preempts only jobs this much lower (>= 1)
  int64_t min_run_us = 0;        // never preempt an attempt younger than this
  int max_jobs_considered = 16;  // waiting jobs examined per call, in queue order
};

struct PolicyOptions {
  double cpu_oversubscription = 1.0;  // also applies to memory
  bool accelerator_substitution = true;
  bool backfill = true;
  int64_t aging_threshold_us = 3600LL * 1000000;  // +1 priority per hour waited
  // How many distinct job shapes get an estimated start computed per call
  // (each costs a replay of the running jobs' ends); the rest report 0.
  int max_estimated_shapes = 16;
  // How many waiting jobs (in queue order, after the reservation holder, not
  // counting quota holds) get a detailed reason (rule 8); the rest get
  // "N jobs ahead in the queue". Negative: every waiting job.
  int detailed_reasons = 200;
  PreemptionOptions preemption;
};

// Memory a user holds on a node outside any job (a warm interpreter,
// docs/warm-starts.md "Memory"): booked before anything is placed, for as
// long as it is in the snapshot.
struct Held {
  std::string user;
  std::string what;  // "warm interpreter (torch)", for the nodes view
  int node = 0;      // index into Snapshot::nodes
  uint64_t memory_bytes = 0;
};

struct Snapshot {
  std::vector<resources::Node> nodes;
  std::vector<RunningJob> running;
  std::vector<Held> held;
  std::vector<QueuedJob> queued;                    // in submission order
  std::map<std::string, double> usage_gpu_seconds;  // per user, decayed by the caller
  std::map<std::string, Quota> quotas;              // absent user = unlimited
  PolicyOptions options;
  int64_t now_us = 0;
};

struct StartJob {
  std::string job_id;
  std::vector<PlacedReplica> replicas;  // one per QueuedJob::replicas entry
  bool backfilled = false;              // started behind a blocked job without delaying it
};

struct WaitingJob {
  std::string job_id;
  // The detailed reason (rule 8): "needs 2x NVIDIA_H100_80GB, 1 free; 3 jobs
  // ahead in the queue", "quota: user alice already runs 4 of 4 allowed
  // jobs", ... Empty for a job past the detailed ones, whose reason is its
  // place in line alone: Reason() spells it from jobs_ahead. Leaving it empty
  // saves a string per waiting job on long queues.
  std::string detail;
  // Jobs ahead of this one in queue order that wait for resources (quota
  // holds do not count; the reservation holder does).
  int jobs_ahead = 0;
  int64_t estimated_start_us = 0;  // not before; 0 = unknown
  bool quota_hold = false;         // waits for its user's quota (rule 6), not for resources

  // The reason to show: `detail`, or "N jobs ahead in the queue" ("1 job"
  // for one) when it is empty.
  std::string Reason() const;
};

// The kind of a wait, for events: the first clause of the detail with its
// numbers left out ("needs x NVIDIA_H_GB,  free"), or "place in line" for a
// job whose reason is its place in line alone.
std::string WaitKind(const WaitingJob& w);

// Whether a wait deserves a new "waiting: ..." event, given the kind the last
// one named (WaitKind; "" for none yet) and when it was written: when the kind
// changes; the same detailed kind again at most every `repeat_us`; the bare
// place in line never again, since its count changes with every start and a
// deep queue would otherwise fill the events table. The job's wait reason
// (describe, list) always shows the current text.
bool WaitEventDue(const WaitingJob& w, const std::string& last_kind, int64_t last_event_us,
                  int64_t now_us, int64_t repeat_us);

// A job that can never run as asked (bad GPU count, or larger than the whole
// cluster). The controller should fail it with the status.
struct RejectedJob {
  std::string job_id;
  Status status;
};

// The resources held for the first blocked job.
struct Reservation {
  std::string job_id;
  int64_t start_us = 0;  // 0 = unknown (waits on jobs without a bound)
  std::vector<PlacedReplica> replicas;
  std::vector<std::string> after_jobs;  // running jobs whose end it waits for
};

// Rule 9: a running job to stop and requeue so that a waiting job can start.
struct Preemption {
  std::string job_id;           // the victim
  std::string for_job_id;       // the waiting job it makes room for
  double lost_gpu_seconds = 0;  // its GPUs x the time since its progress_us
};

struct Decision {
  std::vector<StartJob> start;   // in the order they were placed
  std::vector<WaitingJob> wait;  // in queue order
  std::vector<RejectedJob> rejected;
  std::optional<Reservation> reservation;
  std::vector<Preemption> preempt;  // rule 9, in the order chosen
};

// The decision for this snapshot. Never fails: bad jobs go to `rejected`.
// Cost: O(Q) to read and order the queue when the (effective priority,
// usage) classes are few (a counting sort; O(Q log Q) otherwise) plus, per
// job that gets a placement attempt, O(replicas x candidate nodes), where the
// candidates are the nodes with enough free GPUs of the type (found from
// per-count node sets, best fit first) or, for CPU-only and shared-GPU
// replicas, those with the fewest free GPUs or a GPU with room (O(nodes) at
// worst). Jobs whose shape already failed to fit in this call are answered
// from a cache (free resources only shrink during a call), and only the first
// options.detailed_reasons waiting jobs pay for an explanation. Measured in
// bench/scheduler.
Decision Schedule(const Snapshot& snapshot);

// InvalidArgument naming the job when a GPU count is negative, above 1 and
// not whole, or without a type; or when the job could not run even on the
// idle cluster (nodes, options) as given.
Status ValidateJob(const QueuedJob& job, const std::vector<resources::Node>& nodes,
                   const PolicyOptions& options);

// Indices into snapshot.queued in the order the policy considers them (rule 1).
std::vector<size_t> QueueOrder(const Snapshot& snapshot);

// Effective priority of `job` at `now_us` (rule 1's aging formula).
int64_t EffectivePriority(const QueuedJob& job, int64_t now_us, const PolicyOptions& options);

}  // namespace stoker::scheduler
