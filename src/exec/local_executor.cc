#include "exec/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/files.h"

extern char** environ;

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<json> ReadJson(const fs::path& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

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

}  // namespace

bool SupervisorAlive(const fs::path& replica_dir) {
  int fd = ::open((replica_dir / "runner.lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool alive = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return alive;
}

LocalExecutor::LocalExecutor(fs::path data_dir, fs::path runner_path)
    : data_dir_(std::move(data_dir)), runner_path_(std::move(runner_path)) {}

fs::path LocalExecutor::ReplicaDir(int64_t job_id, int attempt, const std::string& replica) const {
  fs::path dir = data_dir_ / "jobs" / std::to_string(job_id);
  if (attempt > 0) dir /= "attempt-" + std::to_string(attempt);
  return dir / replica;
}

Status LocalExecutor::Launch(const JobLaunch& launch) {
  for (const ReplicaLaunch& r : launch.replicas) {
    fs::path dir = ReplicaDir(launch.job_id, launch.attempt, r.name);
    // Already claimed by a supervisor: launched before a crash. Never again.
    if (fs::exists(dir / "claim")) continue;
    STOKER_RETURN_IF_ERROR(MakeDirs(dir));
    json spec = {{"argv", r.argv},
                 {"env", r.env},
                 {"packages", r.packages},
                 {"timeout_seconds", r.timeout_seconds},
                 {"grace_seconds", r.grace_seconds}};
    // Not synced: the PENDING commit in the store is the durable record, and
    // recovery writes launch.json again for a replica that has no claim.
    STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "launch.json", spec.dump(2), Durability::kNoSync));
    STOKER_RETURN_IF_ERROR(SpawnSupervisor(runner_path_, dir));
  }
  return OkStatus();
}

ReplicaStatus LocalExecutor::PollOne(const fs::path& dir, const std::string& name) {
  ReplicaStatus st;
  st.name = name;
  auto read_status = [&]() -> bool {
    auto s = ReadJson(dir / "status.json");
    if (!s) return false;
    st.phase = ReplicaPhase::kEnded;
    st.end_state = s->value("state", "");
    if ((*s)["exit_code"].is_number_integer()) st.exit_code = (*s)["exit_code"].get<int>();
    if ((*s)["signal"].is_number_integer()) st.signal = (*s)["signal"].get<int>();
    st.message = s->value("message", "");
    st.start_us = s->value("start_time_us", int64_t{0});
    st.end_us = s->value("end_time_us", int64_t{0});
    return true;
  };
  if (read_status()) return st;
  if (!fs::exists(dir / "claim")) {
    if (!fs::exists(dir)) {
      st.phase = ReplicaPhase::kLost;
      st.message = "replica directory " + dir.string() + " was deleted";
    }
    return st;  // kStarting
  }
  if (auto t = ReadJson(dir / "trainer.json")) st.start_us = t->value("start_time_us", int64_t{0});
  if (SupervisorAlive(dir)) {
    st.phase = st.start_us ? ReplicaPhase::kRunning : ReplicaPhase::kStarting;
    return st;
  }
  // The lock is free: the supervisor has exited. It writes status.json before
  // it exits, so look once more before calling the replica lost.
  if (read_status()) return st;
  st.phase = ReplicaPhase::kLost;
  st.message = "the replica supervisor (stoker-run) died without reporting an exit status";
  // Make sure nothing of the replica keeps running without its supervisor.
  if (auto t = ReadJson(dir / "trainer.json")) {
    int pgid = t->value("pgid", 0);
    if (pgid > 1) ::kill(-pgid, SIGKILL);
  }
  return st;
}

Result<std::vector<ReplicaStatus>> LocalExecutor::Poll(int64_t job_id, int attempt,
                                                       const std::vector<std::string>& replicas) {
  std::vector<ReplicaStatus> out;
  out.reserve(replicas.size());
  for (const std::string& name : replicas) {
    out.push_back(PollOne(ReplicaDir(job_id, attempt, name), name));
  }
  return out;
}

Status LocalExecutor::Cancel(int64_t job_id, int attempt,
                             const std::vector<std::string>& replicas) {
  for (const std::string& name : replicas) {
    fs::path dir = ReplicaDir(job_id, attempt, name);
    if (fs::exists(dir / "status.json")) continue;
    // The supervisor turns SIGTERM into SIGTERM, grace, SIGKILL for the trainer.
    auto r = ReadJson(dir / "runner.json");
    if (r && SupervisorAlive(dir)) {
      int pid = r->value("pid", 0);
      if (pid > 1) ::kill(pid, SIGTERM);
      continue;
    }
    // Not claimed yet: claim it ourselves so that no supervisor starts it later.
    STOKER_RETURN_IF_ERROR(MakeDirs(dir));
    int fd = ::open((dir / "claim").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      json st = {{"state", "cancelled"}, {"exit_code", nullptr},
                 {"signal", nullptr},    {"start_time_us", 0},
                 {"end_time_us", 0},     {"message", "cancelled before it started"}};
      STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "status.json", st.dump()));
    }
  }
  return OkStatus();
}

}  // namespace stoker::exec
