// Which Unix account runs a job's trainers, as executors see it
// (docs/security.md): the daemon decides the account per job
// (TrainerAccounts); the executor prepares each replica directory with
// PrepareReplicaDir, which hands the directory to that account before the
// supervisor starts, and stoker-run switches to it (launch.json run_as).
// Shared by the local and the Slurm executor so that both apply one rule.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "exec/executor.h"

namespace stoker::exec {

// The account that runs the replicas of a job `user` submitted
// (JobLaunch::user); nullopt = the supervisor's own account. An error fails
// the launch with its message.
using TrainerAccounts = std::function<Result<std::optional<RunAs>>(const std::string& user)>;

// What PrepareReplicaDir needs to know of an executor.
struct ReplicaDirPlan {
  std::filesystem::path data_dir;   // stokerd's data dir: holds buckets/
  std::filesystem::path jobs_root;  // <data dir or slurm.shared_dir>/jobs
  std::optional<RunAs> run_as;      // the job's trainer account (TrainerAccounts)
  IsolationPlan isolation;          // the executor's base plan (job_isolation)
};

// Prepares the replica directory `dir` (jobs_root/<job>/[attempt-<n>/]<name>)
// for `replica` of job `job_id`, the same way for every executor: when a
// supervisor already claimed it (launched before a crash) it does nothing
// and returns false; else it writes dir/launch.json with the plan's
// isolation (unless the mode is off: jobs_root/<job> kept read-only, and the
// replica's work/ and hypertune/ read-write on top) and run_as, after
// HandOverReplicaDir, and returns true.
Result<bool> PrepareReplicaDir(const ReplicaDirPlan& plan, int64_t job_id,
                               const std::filesystem::path& dir, const ReplicaLaunch& replica);

// Lays out the replica directory `dir` for a trainer running as `who`
// (nullopt: as the daemon itself), creating what is missing
// (docs/decisions/0012-trainer-writes-only-its-work-dir.md). `dir` holds
// the supervisor's control files, which the daemon (root) reads and trusts,
// so it is the daemon's: mode 0750 with the trainer's group, which may read
// its log but change nothing (0700 without `who`). The trainer writes only
// below it, in `dir/work` (its working directory) and `dir/hypertune` (its
// metrics file), which stoker-run makes and hands to it. Everything above
// (jobs_root, jobs_root/<job>, attempt-<n>) stays, or becomes again, the
// daemon's with mode 0711 (enterable, not listable). Each directory is
// opened without following a link, and a link is refused. The job's output
// directory (the parent of AIP_MODEL_DIR in `env`), when the daemon created
// it inside `data_dir`, goes to `who` (its group stays) so the trainer can write its model.
// Needs root when `who` is another account. FailedPrecondition naming the
// path for a link or a file in the way, and when the file system refuses
// root's chown (root_squash); Internal for any other failure.
Status HandOverReplicaDir(const std::filesystem::path& data_dir,
                          const std::filesystem::path& jobs_root, const std::filesystem::path& dir,
                          const std::optional<RunAs>& who,
                          const std::map<std::string, std::string>& env);

}  // namespace stoker::exec
