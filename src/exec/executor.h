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
// Implementations are called from the control loop thread only, except
// ReplicaDir, which is pure and thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::exec {

// The Unix account a replica's trainer runs as (stoker-run switches to it
// before exec; see docs/security.md).
struct RunAs {
  std::string user;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> extra_gids;  // added to the account's groups (bucket writers)
  std::string home;                  // the account's home directory (passwd), "" if none
};

// What a trainer's view of the file system hides and keeps (config
// job_isolation; stoker-run's src/runner/isolation.h does it): `hide` paths
// become empty and unreadable; the `keep` (read-write) and `keep_read_only`
// paths under them reappear at the same place.
struct IsolationPlan {
  std::string mode = "off";  // off | auto | required
  std::vector<std::string> hide;
  std::vector<std::string> keep;
  std::vector<std::string> keep_read_only;
};

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
};

struct JobLaunch {
  int64_t job_id = 0;
  int attempt = 0;
  std::vector<ReplicaLaunch> replicas;        // in rank order: pool, then index
  std::map<std::string, std::string> labels;  // the job's labels (e.g. slurm-partition)
  // jobSpec.scheduling.priority (-1000..1000, higher first), for executors
  // whose own scheduler orders the jobs (Slurm: --nice).
  int priority = 0;
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
  // For kEnded: the supervisor's state: exited, signaled, timeout, cancelled, launch_failed.
  std::string end_state;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string message;
  int64_t start_us = 0;  // trainer start; 0 if not started
  int64_t end_us = 0;

  bool Succeeded() const {
    return phase == ReplicaPhase::kEnded && end_state == "exited" && exit_code == 0;
  }
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Where a replica's files live (log, status, metrics): known before launch.
  virtual std::filesystem::path ReplicaDir(int64_t job_id, int attempt,
                                           const std::string& replica) const = 0;

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
