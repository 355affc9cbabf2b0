// LocalExecutor: replicas as local processes, each under a detached
// `stoker-run` supervisor (src/runner/README.md has the file contract).
//
// Replica directory: <data_dir>/jobs/<job>/<replica>/ for attempt 0,
// <data_dir>/jobs/<job>/attempt-<n>/<replica>/ after. The supervisor outlives
// the daemon; a restarted daemon polls the same files and re-adopts it.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "exec/executor.h"
#include "exec/replica_dir_executor.h"
#include "exec/supervisor_pool.h"
#include "exec/trainer_account.h"

namespace stoker::exec {

struct LocalOptions {
  std::filesystem::path data_dir;  // holds jobs/ and buckets/
  std::filesystem::path runner;    // the stoker-run binary
  // Which account runs a job's replicas (an error fails the launch). When it
  // names one, Launch puts it in launch.json and hands each replica
  // directory (mode 0750) to it; the job's directory stays the daemon's
  // (PrepareReplicaDir). Empty: replicas run as the daemon's account.
  TrainerAccounts trainer_accounts;
  // Filesystem isolation of every trainer (config job_isolation): the mode
  // and what to hide and keep; Launch adds the job's own directory,
  // <data_dir>/jobs/<job>, to what is kept.
  IsolationPlan isolation;
  // Supervisors kept waiting for a launch (supervisor_pool.h); 0 starts
  // each one when its replica is launched.
  size_t standby_supervisors = 0;
};

class LocalExecutor : public ReplicaDirExecutor {
 public:
  explicit LocalExecutor(LocalOptions options);
  // No trainer accounts, no isolation.
  LocalExecutor(std::filesystem::path data_dir, std::filesystem::path runner_path);

  std::filesystem::path ReplicaDir(int64_t job_id, int attempt,
                                   const std::string& replica) const override;
  Status Launch(const JobLaunch& launch) override;
  Result<std::vector<ReplicaStatus>> Poll(int64_t job_id, int attempt,
                                          const std::vector<std::string>& replicas) override;
  Status Cancel(int64_t job_id, int attempt, const std::vector<std::string>& replicas) override;

  // Runs `stoker-run --probe-isolation <data_dir>` once: OK when stoker-run
  // can isolate trainers on this machine, else FailedPrecondition saying
  // why (what the probe wrote). Blocks for as long as that process runs
  // (milliseconds), at most 10 s: a probe that hangs is killed and counts
  // as "cannot isolate".
  Status ProbeIsolation() const;

 private:
  std::filesystem::path data_dir_;
  std::filesystem::path runner_path_;
  TrainerAccounts accounts_;
  IsolationPlan isolation_;
  std::unique_ptr<SupervisorPool> supervisors_;
};

}  // namespace stoker::exec
