#include "exec/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "exec/replica_files.h"

extern char** environ;

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Starts `stoker-run --replica-dir DIR` in a session of its own, with its
// output in DIR/runner.log. stokerd is the child subreaper of its
// supervisors and reaps them; should stokerd die they re-parent to init and
// keep running.
Status SpawnSupervisor(const fs::path& runner, const fs::path& dir) {
  std::string runner_s = runner.string(), dir_s = dir.string();
  std::string log = (dir / "runner.log").string();
  std::vector<char*> argv = {runner_s.data(), const_cast<char*>("--replica-dir"), dir_s.data(),
                             nullptr};
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  pid_t pid;
  int rc = posix_spawn(&pid, runner_s.c_str(), &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Internal("cannot start " + runner_s + ": " + std::strerror(rc) +
                    " (check --runner or that stoker-run sits beside stokerd)");
  }
  return OkStatus();
}

Status Chown(const fs::path& path, const RunAs& who, mode_t mode) {
  if (::chown(path.c_str(), who.uid, who.gid) != 0 || ::chmod(path.c_str(), mode) != 0) {
    return Internal("cannot hand " + path.string() + " to " + who.user + " (uid " +
                    std::to_string(who.uid) + "): " + std::strerror(errno));
  }
  return OkStatus();
}

// Gives `who` the directories between `jobs_root` (exclusive) and the
// replica directory `dir` with mode 0700, so that no other trainer account
// can read them; jobs_root itself becomes 0711 (enterable, not listable).
// The job's output directory (the parent of AIP_MODEL_DIR), when stokerd
// created it inside its data dir, goes to `who` as well so the trainer can
// write its model.
Status HandOver(const fs::path& jobs_root, const fs::path& dir, const RunAs& who,
                const std::map<std::string, std::string>& env) {
  if (::chmod(jobs_root.c_str(), 0711) != 0) {
    return Internal("cannot chmod " + jobs_root.string() + ": " + std::strerror(errno));
  }
  for (fs::path p = dir; p != jobs_root && p.has_relative_path() && p != p.parent_path();
       p = p.parent_path()) {
    STOKER_RETURN_IF_ERROR(Chown(p, who, 0700));
  }
  if (auto it = env.find("AIP_MODEL_DIR"); it != env.end()) {
    std::string model = it->second;  // ".../out/model/" -> ".../out"
    while (model.size() > 1 && model.back() == '/') model.pop_back();
    fs::path out = fs::path(model).parent_path();
    std::error_code ec;
    fs::path data = fs::weakly_canonical(jobs_root.parent_path(), ec);
    fs::path canon = fs::weakly_canonical(out, ec);
    auto rel = canon.lexically_relative(data);
    if (!ec && !rel.empty() && *rel.begin() != ".." && fs::is_directory(canon)) {
      struct stat st;
      if (::stat(canon.c_str(), &st) == 0 && st.st_uid == ::geteuid()) {
        if (::chown(canon.c_str(), who.uid, who.gid) != 0) {
          return Internal("cannot hand the output directory " + canon.string() + " to " + who.user +
                          ": " + std::strerror(errno));
        }
      }
    }
  }
  return OkStatus();
}

}  // namespace

LocalExecutor::LocalExecutor(fs::path data_dir, fs::path runner_path)
    : data_dir_(std::move(data_dir)), runner_path_(std::move(runner_path)) {}

fs::path LocalExecutor::ReplicaDir(int64_t job_id, int attempt, const std::string& replica) const {
  fs::path dir = data_dir_ / "jobs" / std::to_string(job_id);
  if (attempt > 0) dir /= "attempt-" + std::to_string(attempt);
  return dir / replica;
}

Status LocalExecutor::Launch(const JobLaunch& launch) {
  std::optional<RunAs> run_as;
  if (accounts_) {
    STOKER_ASSIGN_OR_RETURN(run_as, accounts_(launch.job_id));
  }
  for (const ReplicaLaunch& r : launch.replicas) {
    fs::path dir = ReplicaDir(launch.job_id, launch.attempt, r.name);
    // Already claimed by a supervisor: launched before a crash. Never again.
    if (Claimed(dir)) continue;
    ReplicaLaunch copy = r;
    if (run_as) {
      copy.run_as = run_as;
      STOKER_RETURN_IF_ERROR(MakeDirs(dir));
      STOKER_RETURN_IF_ERROR(HandOver(data_dir_ / "jobs", dir, *run_as, copy.env));
    }
    // Not synced: the PENDING commit in the store is the durable record, and
    // recovery writes launch.json again for a replica that has no claim.
    STOKER_RETURN_IF_ERROR(WriteLaunchFile(dir, copy));
    STOKER_RETURN_IF_ERROR(SpawnSupervisor(runner_path_, dir));
  }
  return OkStatus();
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
    if (fs::exists(dir / "status.json")) continue;
    // The supervisor turns SIGTERM into SIGTERM, grace, SIGKILL for the trainer.
    auto r = ReadJsonObject(dir / "runner.json");
    if (r && SupervisorAlive(dir)) {
      auto pid = r->find("pid");  // a damaged file must not throw in the control loop
      if (pid != r->end() && pid->is_number_integer() && pid->get<int64_t>() > 1)
        ::kill(static_cast<pid_t>(pid->get<int64_t>()), SIGTERM);
      continue;
    }
    // Not claimed yet: claim it ourselves so that no supervisor starts it later.
    STOKER_RETURN_IF_ERROR(ClaimAsCancelled(dir).status());
  }
  return OkStatus();
}

}  // namespace stoker::exec
