// ReplicaDirExecutor: the reading side of Executor for every executor whose
// replicas live in replica directories run by `stoker-run` (local, Slurm),
// written once here so that both read the files of src/runner/README.md the
// same way. A subclass gives ReplicaDir (and may override SupervisorLog);
// the rest of the replica-directory contract (launch.json, status, claims)
// is in replica_files.h.
//
// Every read here is const, keeps no state and is thread-safe. Files the
// trainer's account may write (hypertune/) are read without following a
// link, never block on a FIFO and are bounded (docs/security.md, "Trust
// boundary").
#pragma once

#include "exec/executor.h"

namespace stoker::exec {

class ReplicaDirExecutor : public Executor {
 public:
  Result<LogChunk> ReadLog(int64_t job_id, int attempt, const std::string& replica, uint64_t offset,
                           size_t max_bytes) const override;
  std::string ReadLogTail(int64_t job_id, int attempt, const std::string& replica,
                          size_t max_bytes) const override;
  // The newest modification time of output.log and hypertune/output.metrics
  // (lstat: a link the trainer put there lends no other file's time); 0 when
  // neither is a regular file.
  int64_t LastActivityUs(int64_t job_id, int attempt, const std::string& replica) const override;
  // hypertune/output.metrics (the trainer's) and pushed.metrics (the
  // daemon's), each through ReadFileNoFollow; the stamp sums their lstat
  // modification times (ns) and sizes.
  TrialMetrics ReadTrialMetrics(int64_t job_id, int attempt, const std::string& replica,
                                size_t max_bytes, int64_t unchanged_stamp = -1) const override;
  // <replica dir>/telemetry.jsonl, never through a link.
  std::string ReadTelemetry(int64_t job_id, int attempt, const std::string& replica,
                            size_t max_bytes) const override;
  // pushed.metrics, through AppendLineNoFollow (O_APPEND: whole lines).
  Status AppendPushedMetrics(int64_t job_id, int attempt, const std::string& replica,
                             const std::string& line) const override;
  // <replica dir>/hypertune/output.metrics.
  std::filesystem::path MetricFilePath(int64_t job_id, int attempt,
                                       const std::string& replica) const override;
  // <replica dir>/runner.log (stoker-run --detach writes its stderr there).
  std::filesystem::path SupervisorLog(int64_t job_id, int attempt,
                                      const std::string& replica) const override;
  // The job's directory: the parent of its attempt-0 replica directories
  // (<root>/jobs/<job>/, later attempts in attempt-N/ below it).
  bool HasJobFiles(int64_t job_id) const override;
  // RemoveTreeNoFollow of the job's directory, unless a supervisor holds a
  // runner.lock anywhere in it.
  Result<bool> RemoveJobFiles(int64_t job_id) override;
};

}  // namespace stoker::exec
