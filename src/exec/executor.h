// The executor boundary (DESIGN.md §4): launches the replicas of one
// allocated job, reports their states when polled, cancels them, and after a
// daemon restart answers for replicas it launched before.
//
// Contract shared by every implementation (local, Slurm):
// - Launch is idempotent on (job_id, attempt, replica name): calling it again
//   after a crash never starts a second trainer for the same replica.
// - Poll never blocks on the trainers; it reads what the supervisors wrote.
// - Cancel is graceful (SIGTERM to the trainer's process group, SIGKILL after
//   the grace period given at launch) and idempotent.
// - The reads (ReadLog, ReadLogTail, LastActivityUs, ReadTrialMetrics,
//   AppendPushedMetrics, MetricFilePath, SupervisorLog) are the only way the
//   rest of the daemon (API, controller, studies) sees a replica's files:
//   nothing outside exec and runner opens a replica directory. They never
//   believe a link or block on a FIFO the trainer planted (docs/security.md,
//   "Trust boundary") and never change the executor's state.
// Threads: Launch, Poll and Cancel are called from the control loop thread
// only. ReplicaDir and the reads are const and thread-safe: the API calls
// them from its handler threads while the control loop runs. The reads and
// the job files' removal are the ReplicaFiles side, all the API is given.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "replica/replica_contract.h"

namespace stoker::exec {

// The replica contract's types (replica/replica_contract.h), which exec and
// stoker-run share: one definition of what launch.json and status.json hold.
//
// The Unix account a replica's trainer runs as (stoker-run switches to it
// before exec; see docs/security.md).
using RunAs = replica::RunAs;
// What a trainer's view of the file system hides and keeps (config
// job_isolation; stoker-run's src/runner/isolation.h does it): `hide` paths
// become empty and unreadable; the `keep` (read-write) and `keep_read_only`
// paths under them reappear at the same place.
using IsolationPlan = replica::IsolationSpec;
using IsolationMode = replica::IsolationMode;
// How an ended replica ended (status.json's "state").
using EndState = replica::EndState;

struct ReplicaLaunch {
  std::string name;  // "workerpool0-0"
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the complete trainer environment
  std::vector<std::string> packages;       // local .tar.gz paths to unpack first
  double timeout_seconds = 0;              // 0 = none
  double grace_seconds = 10;
  // output.log rotation (src/runner/README.md): bytes per file (0 = never
  // rotate) and rotated files kept.
  uint64_t log_max_bytes = 64ull << 20;
  int log_max_files = 3;
  std::optional<RunAs> run_as;  // unset: the supervisor's own account
  IsolationPlan isolation;      // filled by the executor (it knows the job's directory)
  // What the replica's machine type asks for. Executors that place replicas
  // themselves (PlacesReplicas) request this much per replica; the local
  // executor ignores it (the scheduler already booked it).
  double cpus = 0;
  uint64_t memory_bytes = 0;
  int gpus = 0;
  // The pool's machine type ("n1-standard-4"): named when the replica
  // exceeds memory_bytes, which its cgroup holds it to.
  std::string machine_type;
  // stoker-run samples the replica's resource use this often into its
  // telemetry.jsonl (src/telemetry); 0 = not at all.
  double telemetry_seconds = 0;
  // Start the trainer from a warm interpreter (docs/warm-starts.md);
  // requested = false: a cold start, and nothing said about it.
  replica::WarmSpec warm;
  // Set: the trainer runs in this container (docs/containers.md); argv then
  // only shows what runs inside. The executor adds the replica's own mounts.
  std::optional<replica::ContainerSpec> container;
  // Set: the packages' requirements are installed into a cached
  // environment before the trainer starts (docs/python-packages.md).
  std::optional<replica::PythonEnvSpec> python_env;
  // The replica's place in the job (launch.json's "cluster").
  std::optional<replica::ClusterTask> cluster;
  // The host GPUs placed for it (launch.json's "gpu_indexes"); empty for
  // none and where the executor places replicas (Slurm binds them).
  std::vector<int> gpu_indexes;
};

struct JobLaunch {
  int64_t job_id = 0;
  int attempt = 0;
  std::string user;                           // who submitted the job ("" = nobody named)
  std::vector<ReplicaLaunch> replicas;        // in rank order: pool, then index
  std::map<std::string, std::string> labels;  // the job's labels (e.g. slurm-partition)
  // jobSpec.scheduling.priority (-1000..1000, higher first), for executors
  // whose own scheduler orders the jobs (Slurm: --nice).
  int priority = 0;
  // The job may be preempted (docs/preemption.md: scheduling.strategy SPOT,
  // label stoker-preemptible, or a priority in the configured band), for
  // executors whose own scheduler preempts (Slurm: slurm.preemptible_partition
  // and slurm.preemptible_qos).
  bool preemptible = false;
};

enum class ReplicaPhase {
  kStarting,  // launched, the supervisor has not claimed it yet
  kRunning,   // the trainer process exists
  kEnded,     // the supervisor wrote the final status
  kLost,      // the supervisor died without a final status
};

struct ReplicaStatus {
  std::string name;
  ReplicaPhase phase = ReplicaPhase::kStarting;
  // Set exactly when phase is kEnded: how the supervisor says it ended.
  std::optional<EndState> end_state;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  // kEnded: the kernel killed a process of it for exceeding its memory
  // limit (`message` says the limit and the machine type).
  bool oom_killed = false;
  // kEnded, kLaunchFailed: a retry would fail the same way (status.json's
  // "permanent").
  bool permanent = false;
  int64_t start_us = 0;  // trainer start; 0 if not started
  int64_t end_us = 0;
  // How the supervisor started the trainer, once it knows ("warm start: ...",
  // "cold start: <why>"); the controller records it once as a job event.
  // Empty: nothing to say.
  std::string start_note;
  // The executor's own scheduler stopped the replica to make room for another
  // job (Slurm's PREEMPTED state). The controller requeues the job as its next
  // attempt; a preemption never counts as a failure or against maxRetries.
  bool preempted = false;
  // kStarting with a supervisor that claimed the replica and is preparing
  // its start (installing the packages' requirements; `message` says what):
  // progressing, so the controller's start limit does not apply.
  bool preparing = false;

  bool Succeeded() const {
    return phase == ReplicaPhase::kEnded && end_state == EndState::kExited && exit_code == 0;
  }
};

// A piece of a replica's log, which readers see as one stream of bytes
// numbered from 0 since the replica started, across rotated files
// (src/runner/README.md, "Log rotation").
struct LogChunk {
  std::string data;          // never spans two files; empty at the end of the stream
  uint64_t offset = 0;       // where `data` starts (> the asked offset if skipped)
  uint64_t skipped = 0;      // bytes before `offset` that rotation already deleted
  uint64_t next_offset = 0;  // offset + data.size()
  uint64_t size = 0;         // the stream's length now
  // When its lines were written (runner/log_rotation.h, output.times): the
  // mark at or before `offset`, then the marks inside `data`, by offset; a
  // line's time is that of the latest mark at or before its start. Empty
  // when `data` is, or when the executor keeps no times.
  struct Mark {
    uint64_t offset = 0;  // in the stream, like `offset`
    int64_t time_us = 0;  // Unix microseconds
  };
  std::vector<Mark> marks;
};

// A trial's metric reports (ReadTrialMetrics): what the trainer wrote to
// CLOUD_ML_HP_METRIC_FILE and what was pushed through the API
// (AppendPushedMetrics), both in the hypertune line format.
struct TrialMetrics {
  // Changes whenever either source changes (modification time and size);
  // 0 when neither exists yet.
  int64_t stamp = 0;
  // The trainer's reports, then the pushed ones, each source followed by
  // "\n". Empty when `stamp` equals the caller's `unchanged_stamp` (not read).
  std::string text;
  // Sources left unread because they are over the caller's bound, by name
  // ("hypertune/output.metrics"), for a warning.
  std::vector<std::string> too_large;
};

// What the API and the control loop read of replicas: their files (logs,
// metrics, telemetry, the supervisor's diagnostics) and a job's files as a
// whole (retention). The API gets only this side of an executor.
class ReplicaFiles {
 public:
  virtual ~ReplicaFiles() = default;

  // Where a replica's files live (log, status, metrics): known before launch.
  virtual std::filesystem::path ReplicaDir(int64_t job_id, int attempt,
                                           const std::string& replica) const = 0;

  // Up to `max_bytes` of the replica's log stream from `offset`. A replica
  // with no log yet reads as an empty stream (size 0). Unavailable when the
  // log keeps rotating under the read.
  virtual Result<LogChunk> ReadLog(int64_t job_id, int attempt, const std::string& replica,
                                   uint64_t offset, size_t max_bytes) const = 0;

  // The log stream's last `max_bytes` bytes (fewer if it is shorter), across
  // a rotation that just happened; "" when there is no log.
  virtual std::string ReadLogTail(int64_t job_id, int attempt, const std::string& replica,
                                  size_t max_bytes) const = 0;

  // When the replica last showed progress (output or a metric report), in
  // microseconds since the epoch; 0 when it has shown none. The hang check.
  virtual int64_t LastActivityUs(int64_t job_id, int attempt, const std::string& replica) const = 0;

  // The replica's metric reports, each source read only when it holds at
  // most `max_bytes` (so a trainer cannot fill the daemon's memory). When
  // the current stamp equals `unchanged_stamp`, nothing is read: the result
  // has the stamp and no text.
  virtual TrialMetrics ReadTrialMetrics(int64_t job_id, int attempt, const std::string& replica,
                                        size_t max_bytes, int64_t unchanged_stamp = -1) const = 0;

  // Appends one measurement `line` (hypertune format, no newline) to the
  // replica's pushed metrics, which ReadTrialMetrics returns after the
  // trainer's own. Changes no executor state (hence const); safe to call
  // from any thread, concurrent appends stay whole lines.
  virtual Status AppendPushedMetrics(int64_t job_id, int attempt, const std::string& replica,
                                     const std::string& line) const = 0;

  // The replica's resource samples: its telemetry.jsonl (src/telemetry),
  // written by its supervisor; "" when there is none (yet). Past
  // `max_bytes`, the whole lines of its last `max_bytes` (TailWholeLines):
  // the latest points.
  virtual std::string ReadTelemetry(int64_t job_id, int attempt, const std::string& replica,
                                    size_t max_bytes) const = 0;

  // The path the trainer is given as CLOUD_ML_HP_METRIC_FILE (where its
  // machine writes metric reports). Pure.
  virtual std::filesystem::path MetricFilePath(int64_t job_id, int attempt,
                                               const std::string& replica) const = 0;

  // Where the replica's supervisor writes its own diagnostics (why a replica
  // never started), for error messages. Pure.
  virtual std::filesystem::path SupervisorLog(int64_t job_id, int attempt,
                                              const std::string& replica) const = 0;

  // ---- a job's files, all attempts and replicas (retention) ----

  // Whether any file of job `job_id` is still kept.
  virtual bool HasJobFiles(int64_t job_id) const = 0;
  // Removes every file of job `job_id`, never following a link a trainer
  // made. Ok(false), removing nothing, while a supervisor of the job still
  // runs; Ok(true) once nothing of it is left (also when nothing was).
  virtual Result<bool> RemoveJobFiles(int64_t job_id) = 0;
};

// Runs replicas: launches, polls and cancels them (and, for Slurm, places
// them); its replicas' files are the ReplicaFiles side.
class Executor : public ReplicaFiles {
 public:
  virtual Status Launch(const JobLaunch& launch) = 0;

  // One status per name in `replicas`, in the same order.
  virtual Result<std::vector<ReplicaStatus>> Poll(int64_t job_id, int attempt,
                                                  const std::vector<std::string>& replicas) = 0;

  virtual Status Cancel(int64_t job_id, int attempt, const std::vector<std::string>& replicas) = 0;

  // True when the executor decides where replicas run (Slurm): the
  // controller then launches a QUEUED job at once, without booking this
  // node's resources, and shows the message of a kStarting replica as the
  // job's wait reason (e.g. Slurm's pending reason).
  virtual bool PlacesReplicas() const { return false; }
};

}  // namespace stoker::exec
