#include "exec/replica_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "runner/replica_processes.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How long ReadReplicaStatus waits for a dead supervisor's processes to die
// after SIGKILL. Only processes stuck in the kernel take that long; a lost
// replica is polled a few times at most before its job ends.
constexpr int64_t kOrphanKillMs = 2000;

// An integer field of a replica file, 0 when absent or of another type.
int64_t IntField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// Fills `st` from dir/status.json; false when there is none (yet).
bool ReadFinalStatus(const fs::path& dir, ReplicaStatus& st) {
  auto s = ReadJsonObject(dir, "status.json");
  // Damaged files (valid JSON of the wrong shape included) read as absent:
  // the caller reports them; they must never throw in the control loop.
  if (!s || !s->is_object()) return false;
  try {
    ReplicaStatus read = st;
    read.phase = ReplicaPhase::kEnded;
    read.end_state = s->value("state", "");
    if ((*s)["exit_code"].is_number_integer()) read.exit_code = (*s)["exit_code"].get<int>();
    if ((*s)["signal"].is_number_integer()) read.signal = (*s)["signal"].get<int>();
    read.message = s->value("message", "");
    read.start_us = s->value("start_time_us", int64_t{0});
    read.end_us = s->value("end_time_us", int64_t{0});
    st = std::move(read);
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace

// Control files are small: status.json's message is the longest field.
constexpr size_t kControlFileMax = 64 * 1024;

std::optional<json> ReadJsonObject(const fs::path& dir, const std::string& name) {
  auto text = ReadOwnFileNoFollow(dir, name, kControlFileMax);
  if (!text.ok()) return std::nullopt;
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

Status WriteLaunchFile(const fs::path& dir, const ReplicaLaunch& r) {
  STOKER_RETURN_IF_ERROR(MakeDirs(dir));
  json spec = {{"argv", r.argv},
               {"env", r.env},
               {"packages", r.packages},
               {"timeout_seconds", r.timeout_seconds},
               {"grace_seconds", r.grace_seconds},
               {"log_max_bytes", r.log_max_bytes},
               {"log_max_files", r.log_max_files}};
  if (r.run_as)
    spec["run_as"] = {{"user", r.run_as->user},
                      {"uid", r.run_as->uid},
                      {"gid", r.run_as->gid},
                      {"extra_gids", r.run_as->extra_gids},
                      {"home", r.run_as->home}};
  if (r.isolation.mode != "off") {
    spec["isolation"] = {{"mode", r.isolation.mode},
                         {"hide", r.isolation.hide},
                         {"keep", r.isolation.keep},
                         {"keep_read_only", r.isolation.keep_read_only}};
  }
  return WriteFileAtomic(dir / "launch.json", spec.dump(2), Durability::kNoSync);
}

bool Claimed(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(dir / "claim", ec));
}

bool SupervisorAlive(const fs::path& replica_dir) {
  auto opened = OpenReadNoFollow(replica_dir, "runner.lock");
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
  if (ReadFinalStatus(dir, st)) return st;
  std::error_code ec;
  if (!Claimed(dir)) {
    if (!fs::exists(dir, ec)) {
      st.phase = ReplicaPhase::kLost;
      st.message = "replica directory " + dir.string() + " was deleted";
    }
    return st;  // kStarting
  }
  if (auto t = ReadJsonObject(dir, "trainer.json")) st.start_us = IntField(*t, "start_time_us");
  if (SupervisorAlive(dir)) {
    st.phase = st.start_us ? ReplicaPhase::kRunning : ReplicaPhase::kStarting;
    return st;
  }
  // The lock is free: the supervisor has exited. It writes status.json before
  // it exits, so look once more before calling the replica lost.
  if (ReadFinalStatus(dir, st)) return st;
  st.phase = ReplicaPhase::kLost;
  if (fs::exists(dir / "status.json", ec)) {
    // Written but unreadable (damaged by hand or by the file system): say so
    // rather than blame the supervisor.
    st.message = "its status file " + (dir / "status.json").string() +
                 " cannot be read (damaged), so how the trainer ended is unknown";
  } else {
    st.message = "the replica supervisor (stoker-run) died without reporting an exit status";
  }
  if (options.kill_orphans) {
    // Make sure nothing of the replica keeps running without its supervisor:
    // its process group, then every process that carries its cookie (those
    // that left the group, e.g. with setsid, included), waited for.
    if (auto t = ReadJsonObject(dir, "trainer.json")) {
      int64_t pgid = IntField(*t, "pgid");
      if (pgid > 1) ::kill(-static_cast<pid_t>(pgid), SIGKILL);
    }
    if (runner::KillReplicaProcesses(runner::ReplicaCookie(dir), kOrphanKillMs) < 0) {
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
  int fd = ::open((dir / "claim").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    return Internal("cannot create " + (dir / "claim").string() + ": " + std::strerror(errno));
  }
  ::close(fd);
  json st = {{"state", "cancelled"}, {"exit_code", nullptr},
             {"signal", nullptr},    {"start_time_us", 0},
             {"end_time_us", 0},     {"message", "cancelled before it started"}};
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / "status.json", st.dump()));
  return true;
}

}  // namespace stoker::exec
