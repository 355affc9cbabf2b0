#include "exec/replica_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "replica/replica_cgroup.h"
#include "replica/replica_processes.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How long ReadReplicaStatus waits for a dead supervisor's processes to die
// after SIGKILL. Only processes stuck in the kernel take that long; a lost
// replica is polled a few times at most before its job ends.
constexpr int64_t kOrphanKillMs = 2000;

// Fills `st` from dir/status.json; false when there is none (yet).
bool ReadFinalStatus(const fs::path& dir, ReplicaStatus& st) {
  // Believed only as the supervisor's own file (ReadOwnFileNoFollow).
  // Damaged files (valid JSON of the wrong shape, an unknown state) read as
  // absent: the caller reports them.
  auto text = ReadOwnFileNoFollow(dir, replica::kStatusFile, replica::kControlFileMax);
  if (!text.ok()) return false;
  auto s = replica::ParseStatus(*text);
  if (!s.ok()) return false;
  st.phase = ReplicaPhase::kEnded;
  st.end_state = s->state;
  st.exit_code = s->exit_code;
  st.signal = s->signal;
  st.message = std::move(s->message);
  st.oom_killed = s->oom_killed;
  st.permanent = s->permanent;
  st.start_us = s->start_time_us;
  st.end_us = s->end_time_us;
  return true;
}

}  // namespace

std::optional<replica::TrainerInfo> ReadTrainerInfo(const fs::path& dir) {
  auto text = ReadOwnFileNoFollow(dir, replica::kTrainerFile, replica::kControlFileMax);
  if (!text.ok()) return std::nullopt;
  auto info = replica::ParseTrainerInfo(*text);
  return info.ok() ? std::optional(*info) : std::nullopt;
}

std::optional<json> ReadJsonObject(const fs::path& dir, const std::string& name) {
  auto text = ReadOwnFileNoFollow(dir, name, replica::kControlFileMax);
  if (!text.ok()) return std::nullopt;
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

replica::LaunchSpec LaunchSpecOf(const ReplicaLaunch& r) {
  replica::LaunchSpec spec;
  spec.argv = r.argv;
  spec.env = r.env;
  spec.packages.assign(r.packages.begin(), r.packages.end());
  spec.timeout_seconds = r.timeout_seconds;
  spec.grace_seconds = r.grace_seconds;
  spec.log_limits = {r.log_max_bytes, r.log_max_files};
  spec.run_as = r.run_as;
  spec.isolation = r.isolation;
  spec.telemetry = {r.telemetry_seconds, r.cpus, r.memory_bytes};
  spec.limits = {r.memory_bytes, r.machine_type};
  spec.warm = r.warm;
  spec.container = r.container;
  spec.python_env = r.python_env;
  spec.cluster = r.cluster;
  spec.gpu_indexes = r.gpu_indexes;
  return spec;
}

Status WriteLaunchFile(const fs::path& dir, const ReplicaLaunch& r) {
  STOKER_RETURN_IF_ERROR(MakeDirs(dir));
  return WriteFileAtomic(dir / replica::kLaunchFile, replica::FormatLaunchSpec(LaunchSpecOf(r)),
                         Durability::kNoSync);
}

bool Claimed(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(dir / replica::kClaimFile, ec));
}

bool SupervisorAlive(const fs::path& replica_dir) {
  auto opened = OpenReadNoFollow(replica_dir, replica::kLockFile);
  if (!opened.ok()) return false;
  int fd = *opened;
  bool alive = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return alive;
}

ReplicaStatus ReadReplicaStatus(const fs::path& dir, const std::string& name,
                                const ReadStatusOptions& options) {
  ReplicaStatus st;
  st.name = name;
  if (ReadFinalStatus(dir, st)) {
    // How it started, also for a replica that ended between two polls.
    if (auto t = ReadTrainerInfo(dir)) st.start_note = t->start_note;
    return st;
  }
  std::error_code ec;
  if (!Claimed(dir)) {
    if (!fs::exists(dir, ec)) {
      st.phase = ReplicaPhase::kLost;
      st.message = "replica directory " + dir.string() + " was deleted";
    }
    return st;  // kStarting
  }
  if (auto t = ReadTrainerInfo(dir)) {
    st.start_us = t->start_time_us;
    st.start_note = t->start_note;
  }
  if (SupervisorAlive(dir)) {
    st.phase = st.start_us ? ReplicaPhase::kRunning : ReplicaPhase::kStarting;
    if (!st.start_us) {
      // Claimed and preparing (installing requirements): say what for.
      auto text = ReadOwnFileNoFollow(dir, replica::kPreparingFile, replica::kControlFileMax);
      auto info = text.ok() ? replica::ParsePreparingInfo(*text)
                            : Result<replica::PreparingInfo>(text.status());
      if (info.ok()) {
        st.preparing = true;
        st.message = st.name + ": " + info->note;
      }
    }
    return st;
  }
  // The lock is free: the supervisor has exited. It writes status.json before
  // it exits, so look once more before calling the replica lost.
  if (ReadFinalStatus(dir, st)) return st;
  st.phase = ReplicaPhase::kLost;
  if (fs::exists(dir / replica::kStatusFile, ec)) {
    // Written but unreadable (damaged by hand or by the file system): say so
    // rather than blame the supervisor.
    st.message = "its status file " + (dir / replica::kStatusFile).string() +
                 " cannot be read (damaged), so how the trainer ended is unknown";
  } else {
    st.message = "the replica supervisor (stoker-run) died without reporting an exit status";
  }
  if (options.kill_orphans) {
    // Make sure nothing of the replica keeps running without its supervisor:
    // its process group, then every process that carries its cookie (those
    // that left the group, e.g. with setsid, included), waited for.
    if (auto t = ReadTrainerInfo(dir); t && t->pgid > 1) {
      ::kill(-static_cast<pid_t>(t->pgid), SIGKILL);
    }
    // The replica's cgroup (the supervisor made it in stokerd's own
    // hierarchy position, replica/replica_cgroup.h) holds every process it
    // started, those without the cookie too.
    const std::string cookie = runner::ReplicaCookie(dir);
    if (auto cg = runner::ReplicaCgroup::Open(runner::DetectCgroupLayout(),
                                              runner::ReplicaCgroupName(cookie))) {
      if (cg->KillAll(kOrphanKillMs) < 0) {
        st.message += " (some of its processes in cgroup " + cg->name() + " did not stop within " +
                      std::to_string(kOrphanKillMs / 1000) + "s of SIGKILL)";
      }
      (void)cg->Remove();
    } else if (runner::KillReplicaProcesses(runner::ReplicaCookie(dir), kOrphanKillMs) < 0) {
      st.message += " (some of its processes did not stop within " +
                    std::to_string(kOrphanKillMs / 1000) + "s of SIGKILL; see " +
                    std::string(runner::kReplicaCookieVar) + "=" + runner::ReplicaCookie(dir) +
                    " in /proc/*/environ)";
    }
  }
  return st;
}

Result<bool> ClaimAsCancelled(const fs::path& dir) {
  STOKER_RETURN_IF_ERROR(MakeDirs(dir));
  int fd =
      ::open((dir / replica::kClaimFile).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    return Internal("cannot create " + (dir / replica::kClaimFile).string() + ": " +
                    std::strerror(errno));
  }
  ::close(fd);
  replica::FinalStatus st;
  st.state = replica::EndState::kCancelled;
  st.message = "cancelled before it started";
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / replica::kStatusFile, replica::FormatStatus(st)));
  return true;
}

}  // namespace stoker::exec
