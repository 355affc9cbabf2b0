#include "exec/trainer_account.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"
#include "exec/replica_files.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// `e` from a failed chown/chmod of `path`: the file system's refusal (root
// squashed to nobody on NFS, a read-only mount) is the admin's to fix.
Status ChangeFailed(const fs::path& path, const std::string& to_whom, int e) {
  std::string msg = "cannot hand " + path.string() + " to " + to_whom + ": " + std::strerror(e);
  if (e == EPERM || e == EROFS) {
    return FailedPrecondition(msg +
                              " (the filesystem refuses chown by root (root_squash?); export "
                              "shared_dir with no_root_squash, see docs/slurm.md)");
  }
  return Internal(msg);
}

// Gives the directory open as `fd` to uid:gid with `mode`.
Status Own(const Fd& fd, const fs::path& path, uid_t uid, gid_t gid, mode_t mode,
           const std::string& to_whom) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ChangeFailed(path, to_whom, errno);
  if ((st.st_uid != uid || st.st_gid != gid) && ::fchown(fd.get(), uid, gid) != 0) {
    return ChangeFailed(path, to_whom, errno);
  }
  if ((st.st_mode & 07777) != mode && ::fchmod(fd.get(), mode) != 0) {
    return ChangeFailed(path, to_whom, errno);
  }
  return OkStatus();
}

Status Refused(const fs::path& path) {
  return FailedPrecondition(path.string() +
                            " is a symbolic link or not a directory; refusing to hand it over "
                            "(the daemon creates this directory itself: remove what is there)");
}

// Opens the directory `name` in the directory open as `parent` (path
// `path`), creating it (0700) if missing; never follows a link.
Result<Fd> OpenDirAt(const Fd& parent, const std::string& name, const fs::path& path) {
  if (::mkdirat(parent.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
    return Internal("cannot create directory " + path.string() + ": " + std::strerror(errno));
  }
  Fd fd(::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR) return Refused(path);
    return Internal("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  return fd;
}

// The job's output directory (the parent of AIP_MODEL_DIR), when the daemon
// made it inside `data_dir` and still owns it, goes to `who`.
Status HandOverOutputDir(const fs::path& data_dir, const RunAs& who,
                         const std::map<std::string, std::string>& env) {
  auto it = env.find("AIP_MODEL_DIR");
  if (it == env.end()) return OkStatus();
  std::string model = it->second;  // ".../out/model/" -> ".../out"
  while (model.size() > 1 && model.back() == '/') model.pop_back();
  std::error_code ec, ec2;
  fs::path data = fs::weakly_canonical(data_dir, ec);
  fs::path out = fs::weakly_canonical(fs::path(model).parent_path(), ec2);
  if (ec || ec2) return OkStatus();
  fs::path rel = out.lexically_relative(data);
  if (rel.empty() || *rel.begin() == ".." || *rel.begin() == ".") return OkStatus();
  Fd fd(::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return OkStatus();  // not made by the daemon (or not a directory)
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid()) return OkStatus();
  // The owner only: the group stays (the bucket group, which other trainers
  // of the bucket write through).
  if (::fchown(fd.get(), who.uid, static_cast<gid_t>(-1)) != 0) {
    return ChangeFailed(out, who.user + " (the job's output directory)", errno);
  }
  return OkStatus();
}

}  // namespace

Status HandOverReplicaDir(const fs::path& data_dir, const fs::path& jobs_root, const fs::path& dir,
                          const std::optional<RunAs>& who,
                          const std::map<std::string, std::string>& env) {
  fs::path rel = dir.lexically_relative(jobs_root);
  std::vector<std::string> parts;
  for (const fs::path& p : rel) parts.push_back(p.string());
  if (parts.size() < 2 || parts[0] == ".." || parts[0] == ".") {
    return Internal("replica directory " + dir.string() + " is not below " + jobs_root.string());
  }
  const std::string daemon = "the daemon (uid " + std::to_string(::geteuid()) + ")";
  STOKER_RETURN_IF_ERROR(MakeDirs(jobs_root));
  Fd at(::open(jobs_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (at.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR) return Refused(jobs_root);
    return Internal("cannot open " + jobs_root.string() + ": " + std::strerror(errno));
  }
  STOKER_RETURN_IF_ERROR(Own(at, jobs_root, ::geteuid(), ::getegid(), 0711, daemon));
  fs::path path = jobs_root;
  for (size_t i = 0; i < parts.size(); ++i) {
    path /= parts[i];
    STOKER_ASSIGN_OR_RETURN(Fd next, OpenDirAt(at, parts[i], path));
    at = std::move(next);
    if (i + 1 < parts.size()) {
      // jobs/<job> and attempt-<n>: the daemon's, also when a daemon before
      // this rule gave them to a trainer.
      STOKER_RETURN_IF_ERROR(Own(at, path, ::geteuid(), ::getegid(), 0711, daemon));
    } else if (who) {
      // The replica dir: the daemon's; the trainer's group may read it (its
      // log, its status) and enter it (its work dir), not change it.
      STOKER_RETURN_IF_ERROR(Own(at, path, ::geteuid(), who->gid, 0750, daemon));
    } else {
      STOKER_RETURN_IF_ERROR(Own(at, path, ::geteuid(), ::getegid(), 0700, daemon));
    }
  }
  return who ? HandOverOutputDir(data_dir, *who, env) : OkStatus();
}

Result<bool> PrepareReplicaDir(const ReplicaDirPlan& plan, int64_t job_id, const fs::path& dir,
                               const ReplicaLaunch& replica) {
  // Already claimed by a supervisor: launched before a crash. Never again.
  if (Claimed(dir)) return false;
  ReplicaLaunch copy = replica;
  copy.isolation = plan.isolation;
  if (plan.isolation.mode != IsolationMode::kOff) {
    // The trainer sees its job's directory (its other replicas' logs, the
    // packages) but writes only its own work and metrics directories
    // (stoker-run makes them before the trainer's view is built).
    copy.isolation.keep_read_only.push_back(plan.jobs_root / std::to_string(job_id));
    copy.isolation.keep.push_back(dir / "work");
    copy.isolation.keep.push_back(dir / "hypertune");
  }
  if (copy.container) {
    // In a container the trainer sees the same: its job's directory read
    // only, its own work and metrics directories writable.
    copy.container->mounts_read_only.push_back(plan.jobs_root / std::to_string(job_id));
    copy.container->mounts.push_back(dir / "work");
    copy.container->mounts.push_back(dir / "hypertune");
  }
  copy.run_as = plan.run_as;
  STOKER_RETURN_IF_ERROR(
      HandOverReplicaDir(plan.data_dir, plan.jobs_root, dir, plan.run_as, copy.env));
  // Not synced: the PENDING commit in the store is the durable record, and
  // recovery writes launch.json again for a replica that has no claim.
  STOKER_RETURN_IF_ERROR(WriteLaunchFile(dir, copy));
  return true;
}

}  // namespace stoker::exec
