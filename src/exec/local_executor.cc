#include "exec/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "exec/command.h"
#include "exec/replica_files.h"
#include "exec/trainer_account.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

}  // namespace

LocalExecutor::LocalExecutor(LocalOptions options)
    : data_dir_(std::move(options.data_dir)),
      runner_path_(std::move(options.runner)),
      accounts_(std::move(options.trainer_accounts)),
      isolation_(std::move(options.isolation)),
      supervisors_(std::make_unique<SupervisorPool>(runner_path_, options.standby_supervisors)) {
  supervisors_->Refill();
}

LocalExecutor::LocalExecutor(fs::path data_dir, fs::path runner_path)
    : LocalExecutor(LocalOptions{std::move(data_dir), std::move(runner_path), nullptr, {}}) {}

fs::path LocalExecutor::ReplicaDir(int64_t job_id, int attempt, const std::string& replica) const {
  fs::path dir = data_dir_ / "jobs" / std::to_string(job_id);
  if (attempt > 0) dir /= "attempt-" + std::to_string(attempt);
  return dir / replica;
}

Status LocalExecutor::Launch(const JobLaunch& launch) {
  ReplicaDirPlan plan{data_dir_, data_dir_ / "jobs", std::nullopt, isolation_};
  if (accounts_) {
    STOKER_ASSIGN_OR_RETURN(plan.run_as, accounts_(launch.user));
  }
  for (const ReplicaLaunch& r : launch.replicas) {
    fs::path dir = ReplicaDir(launch.job_id, launch.attempt, r.name);
    STOKER_ASSIGN_OR_RETURN(bool prepared, PrepareReplicaDir(plan, launch.job_id, dir, r));
    if (prepared) STOKER_RETURN_IF_ERROR(supervisors_->Start(dir));
  }
  // The next launch's supervisors start now, after this one's.
  supervisors_->Refill();
  return OkStatus();
}

Status LocalExecutor::ProbeIsolation() const {
  // Bounded: a probe that hangs must not keep the daemon from starting.
  // Absolute, as posix_spawn takes it: never looked up in PATH.
  std::string runner = fs::absolute(runner_path_).string();
  STOKER_ASSIGN_OR_RETURN(CommandResult r,
                          RunCommand({runner, "--probe-isolation", data_dir_.string()}, 10,
                                     " (check --runner or that stoker-run sits beside stokerd)"));
  if (r.exit_code == 0) return OkStatus();
  if (r.timed_out) {
    return FailedPrecondition(runner + " --probe-isolation did not finish within 10 s " + r.err);
  }
  auto trim = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  };
  std::string why = trim(r.out);  // the probe says why on stdout
  std::string err = trim(r.err);
  if (!err.empty()) why += (why.empty() ? "" : "; ") + err;
  return FailedPrecondition(why.empty() ? runner + " --probe-isolation failed" : why);
}

Result<std::vector<ReplicaStatus>> LocalExecutor::Poll(int64_t job_id, int attempt,
                                                       const std::vector<std::string>& replicas) {
  std::vector<ReplicaStatus> out;
  out.reserve(replicas.size());
  for (const std::string& name : replicas) {
    out.push_back(ReadReplicaStatus(ReplicaDir(job_id, attempt, name), name));
  }
  return out;
}

Status LocalExecutor::Cancel(int64_t job_id, int attempt,
                             const std::vector<std::string>& replicas) {
  for (const std::string& name : replicas) {
    fs::path dir = ReplicaDir(job_id, attempt, name);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir / replica::kStatusFile, ec))) continue;
    // The supervisor turns SIGTERM into SIGTERM, grace, SIGKILL for the trainer.
    // runner.json is believed only as the supervisor's own file.
    auto text = ReadOwnFileNoFollow(dir, replica::kRunnerFile, replica::kControlFileMax);
    auto r = text.ok() ? replica::ParseRunnerInfo(*text) : text.status();
    if (r.ok() && SupervisorAlive(dir)) {
      if (r->pid > 1) ::kill(static_cast<pid_t>(r->pid), SIGTERM);
      continue;
    }
    // Not claimed yet: claim it ourselves so that no supervisor starts it later.
    STOKER_RETURN_IF_ERROR(ClaimAsCancelled(dir).status());
  }
  return OkStatus();
}

}  // namespace stoker::exec
