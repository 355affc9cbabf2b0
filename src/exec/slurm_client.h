// SlurmClient: everything SlurmExecutor asks of Slurm, one method per
// question, so that the executor's own logic (adoption after a crash, the
// squeue cache, cancel escalation) is tested against FakeSlurmClient and the
// commands themselves against a real Slurm (tests/e2e/test_executor_contract.py).
//
// CommandSlurmClient runs the Slurm client commands (sbatch, squeue,
// scancel) found in PATH, each with a time limit. Errors: Unavailable when a
// command ran and failed; FailedPrecondition "cannot run NAME ..." when it
// could not be started (no Slurm client installed). Not thread-safe: one
// caller (the control loop) at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::exec {

// One job as squeue sees it.
struct SlurmJobInfo {
  std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;  // Priority, Resources, NonZeroExitCode, None, ...
  std::string nodes;
  // When Slurm began to preempt the job (squeue's PreemptTime, e.g.
  // "2026-11-26T10:14:45"); "" when it never did. Set before Slurm signals
  // the job, and kept after it ended.
  std::string preempt_time;
  std::string partition;
};

// What sbatch answered: the new job's id, or why it refused the script.
struct SbatchResult {
  int64_t id = 0;       // > 0 when accepted
  std::string refusal;  // when not: sbatch's own words (or its exit status)
};

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;

  // sbatch --parsable [extra_args...] script.
  virtual Result<SbatchResult> Submit(const std::filesystem::path& script,
                                      const std::vector<std::string>& extra_args) = 0;
  // Every job of this daemon's Unix user that Slurm still knows, in any
  // state (recently ended ones included, with their final state).
  virtual Result<std::map<int64_t, SlurmJobInfo>> Queue() = 0;
  // The ids of the jobs named `name` whose comment is exactly `comment`.
  virtual Result<std::vector<int64_t>> FindJobs(const std::string& name,
                                                const std::string& comment) = 0;
  // scancel: `graceful` sends SIGTERM to the job's steps (not the batch
  // shell), else the job is cancelled outright. A job that already ended is
  // not an error.
  virtual Status Cancel(int64_t id, bool graceful) = 0;
};

class CommandSlurmClient : public SlurmClient {
 public:
  Result<SbatchResult> Submit(const std::filesystem::path& script,
                              const std::vector<std::string>& extra_args) override;
  Result<std::map<int64_t, SlurmJobInfo>> Queue() override;
  Result<std::vector<int64_t>> FindJobs(const std::string& name,
                                        const std::string& comment) override;
  Status Cancel(int64_t id, bool graceful) override;
};

// The squeue --Format that Queue asks for: id|state|reason|nodes|preempt
// time|partition, each field whole (size 0).
extern const char kSqueueFormat[];

// Parses squeue output in kSqueueFormat (the first four fields are enough:
// `--format=%i|%T|%r|%N` parses too); lines that do not parse are skipped
// (array and het job ids like 12_3 included). A PreemptTime of N/A, None or
// Unknown reads as "".
std::map<int64_t, SlurmJobInfo> ParseSqueue(const std::string& text);

// True for job states after which nothing of the job runs any more.
bool SlurmStateIsFinal(const std::string& state);

// True when Slurm preempted the job (or is preempting it, within the
// partition's or QOS's GraceTime): its state is PREEMPTED, or it has a
// PreemptTime. Slurm before 23.02 ends a job whose steps exit within the
// GraceTime COMPLETED or FAILED, so the state alone does not tell.
bool SlurmPreempted(const SlurmJobInfo& info);

}  // namespace stoker::exec
