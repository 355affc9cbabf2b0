// Which Unix account runs a job's trainers, as executors see it
// (docs/security.md): the daemon decides the account per job
// (TrainerAccounts); the executor hands the job's directories to it before
// the supervisors start, and stoker-run switches to it (launch.json run_as).
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

// The account that runs `job_id`'s replicas; nullopt = the supervisor's own
// account. An error fails the launch with its message.
using TrainerAccounts = std::function<Result<std::optional<RunAs>>(int64_t job_id)>;

// Gives `who` the directories between `jobs_root` (exclusive) and the
// replica directory `dir` (which must exist) with mode 0700, so that no
// other trainer account can read them; jobs_root itself becomes 0711
// (enterable, not listable). The job's output directory (the parent of
// AIP_MODEL_DIR in `env`), when the daemon created it inside the parent of
// jobs_root, goes to `who` as well so the trainer can write its model.
// Needs root (chown); Internal naming the path when a change fails.
Status HandOverReplicaDir(const std::filesystem::path& jobs_root, const std::filesystem::path& dir,
                          const RunAs& who, const std::map<std::string, std::string>& env);

}  // namespace stoker::exec
