// LocalExecutor: replicas as local processes, each under a detached
// `stoker-run` supervisor (src/runner/README.md has the file contract).
//
// Replica directory: <data_dir>/jobs/<job>/<replica>/ for attempt 0,
// <data_dir>/jobs/<job>/attempt-<n>/<replica>/ after. The supervisor outlives
// the daemon; a restarted daemon polls the same files and re-adopts it.
#pragma once

#include <filesystem>
#include <string>

#include "exec/executor.h"

namespace stoker::exec {

class LocalExecutor : public Executor {
 public:
  // `runner_path`: the stoker-run binary.
  LocalExecutor(std::filesystem::path data_dir, std::filesystem::path runner_path);

  std::filesystem::path ReplicaDir(int64_t job_id, int attempt,
                                   const std::string& replica) const override;
  Status Launch(const JobLaunch& launch) override;
  Result<std::vector<ReplicaStatus>> Poll(int64_t job_id, int attempt,
                                          const std::vector<std::string>& replicas) override;
  Status Cancel(int64_t job_id, int attempt, const std::vector<std::string>& replicas) override;

 private:
  ReplicaStatus PollOne(const std::filesystem::path& dir, const std::string& name);

  std::filesystem::path data_dir_;
  std::filesystem::path runner_path_;
};

// True when a live supervisor holds <dir>/runner.lock.
bool SupervisorAlive(const std::filesystem::path& replica_dir);

}  // namespace stoker::exec
