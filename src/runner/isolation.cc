#include "runner/isolation.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>  // ST_* flags of statfs::f_flags
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The tmpfs over a hidden directory: nobody may list it (search only), it
// holds only mount points, and it is read-only once they are made.
constexpr char kTmpfsOptions[] = "mode=0111,size=16k,nr_inodes=1024";

// Appends `s` to the NUL-terminated `buf` of `size` bytes (truncating).
void Append(char* buf, size_t size, const char* s) {
  size_t n = std::strlen(buf);
  while (*s && n + 1 < size) buf[n++] = *s++;
  buf[n] = '\0';
}

// `v` in decimal into `buf` (at least 21 bytes); no allocation.
const char* Decimal(unsigned long long v, char* buf) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  for (int i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return buf;
}

// Writes all of `text` to the file at `path`; 0 or an errno value.
int WriteProcFile(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t len = std::strlen(text);
  ssize_t n = ::write(fd, text, len);
  int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

// The flags a bind remount must repeat: a mount that came from a more
// privileged namespace has them locked, and dropping one is refused. Its
// atime flags are locked too (MNT_LOCK_ATIME), but a remount that names no
// atime flag keeps the mount's own (Linux >= 3.17), so none is named here:
// naming one that differs (MS_RELATIME on a noatime mount) is refused.
unsigned long LockedFlags(const char* path) {
  struct statfs st;
  if (::statfs(path, &st) != 0) return 0;
  unsigned long flags = 0;
  if (st.f_flags & ST_NOSUID) flags |= MS_NOSUID;
  if (st.f_flags & ST_NODEV) flags |= MS_NODEV;
  if (st.f_flags & ST_NOEXEC) flags |= MS_NOEXEC;
  return flags;
}

// Binds the directory open as `fd` (O_PATH) at `target`, recursively,
// through /proc/self/fd/N: the path it was opened by may be hidden by now.
// Syscalls only (it runs between fork and exec).
bool BindFd(int fd, const char* target) {
  char num[24], source[48] = "/proc/self/fd/";
  Append(source, sizeof source, Decimal(static_cast<unsigned long long>(fd), num));
  return ::mount(source, target, nullptr, MS_BIND | MS_REC, nullptr) == 0;
}

bool IsUnder(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end() || (std::next(d) == dir.end() && d->empty());
}

}  // namespace

Isolation::Isolation(const IsolationSpec& spec, bool trainer_is_root)
    : mode_(spec.mode), trainer_is_root_(trainer_is_root), root_(::geteuid() == 0) {
  if (mode_ == IsolationMode::kOff) return;
  if (root_) {
    uid_map_ = gid_map_ = "0 0 4294967295\n";
  } else {
    uid_map_ = std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1\n";
    gid_map_ = std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1\n";
  }
  std::error_code ec;

  // What to keep: every path that exists, in the spelling given and the
  // real one (a trainer may reach it through either).
  struct Kept {
    fs::path given, real;
    bool is_dir, read_only;
  };
  std::vector<Kept> kept;
  auto add_kept = [&](const std::vector<fs::path>& paths, bool read_only) {
    for (const fs::path& p : paths) {
      fs::path real = fs::canonical(p, ec);
      if (ec) continue;
      kept.push_back({p.lexically_normal(), real, fs::is_directory(real, ec), read_only});
    }
  };
  add_kept(spec.keep, false);
  add_kept(spec.keep_read_only, true);

  // What to hide: existing paths, not inside something kept (keep wins) nor
  // inside another hidden directory.
  struct Hidden {
    fs::path given, real;
  };
  std::vector<Hidden> dirs;
  std::vector<fs::path> files;
  for (const fs::path& p : spec.hide) {
    fs::path real = fs::canonical(p, ec);
    if (ec) continue;
    bool in_kept = std::any_of(kept.begin(), kept.end(), [&](const Kept& k) {
      return IsUnder(real, k.real) || IsUnder(real, k.given);
    });
    if (fs::is_directory(real, ec)) {
      if (!in_kept) dirs.push_back({p.lexically_normal(), real});
    } else {
      files.push_back(real);
    }
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const Hidden& a, const Hidden& b) { return a.real < b.real; });
  for (const Hidden& d : dirs) {
    bool nested = std::any_of(hide_dirs_.begin(), hide_dirs_.end(),
                              [&](const std::string& h) { return IsUnder(d.real, h); });
    if (!nested) hide_dirs_.push_back(d.real.string());
  }

  // Where each kept path reappears: under the real path of the hidden
  // directory that holds it (by either spelling).
  for (const Kept& k : kept) {
    for (const fs::path& candidate : {k.given, k.real}) {
      for (const Hidden& d : dirs) {
        std::optional<fs::path> rel;
        if (IsUnder(candidate, d.real)) {
          rel = candidate.lexically_relative(d.real);
        } else if (IsUnder(candidate, d.given)) {
          rel = candidate.lexically_relative(d.given);
        }
        if (!rel) continue;
        fs::path target = (d.real / *rel).lexically_normal();
        if (!target.empty() && target.filename().empty()) target = target.parent_path();
        bool hidden = std::any_of(hide_dirs_.begin(), hide_dirs_.end(),
                                  [&](const std::string& h) { return IsUnder(target, h); });
        bool dup = std::any_of(binds_.begin(), binds_.end(),
                               [&](const Bind& b) { return b.target == target.string(); });
        if (hidden && !dup) {
          binds_.push_back({k.real.string(), target.string(), k.is_dir, k.read_only});
        }
        break;
      }
    }
  }
  // Parents first, so that a path kept inside another kept path is bound
  // on top of it.
  std::sort(binds_.begin(), binds_.end(),
            [](const Bind& a, const Bind& b) { return fs::path(a.target) < fs::path(b.target); });

  PlanMountPoints();

  // Hidden files inside a hidden directory are gone already, unless they are
  // inside a kept path too.
  for (const fs::path& f : files) {
    bool under_dir = std::any_of(hide_dirs_.begin(), hide_dirs_.end(),
                                 [&](const std::string& h) { return IsUnder(f, h); });
    bool under_bind = std::any_of(binds_.begin(), binds_.end(), [&](const Bind& b) {
      return IsUnder(f, b.target) || IsUnder(f, b.source);
    });
    if (!under_dir || under_bind) hide_files_.push_back(f.string());
  }
  PlanSecondPaths(spec.bind);
  if (root_ && !trainer_is_root_ && !(hide_dirs_.empty() && hide_files_.empty())) {
    MakeRootUserNamespace();
  }
}

// The mount points to make in the tmpfs: each component between the hidden
// directory and a bind's target, unless an earlier bind already shows the
// real directory there.
void Isolation::PlanMountPoints() {
  for (size_t i = 0; i < binds_.size(); ++i) {
    fs::path target = binds_[i].target;
    const std::string* root = nullptr;
    for (const std::string& h : hide_dirs_) {
      if (IsUnder(target, h)) root = &h;
    }
    fs::path p = *root;
    for (const fs::path& part : target.lexically_relative(*root)) {
      p /= part;
      bool inside_bind = std::any_of(binds_.begin(), binds_.begin() + i,
                                     [&](const Bind& b) { return IsUnder(p, b.target); });
      if (inside_bind) break;
      bool is_target = p == target;
      bool dup = std::any_of(mount_points_.begin(), mount_points_.end(),
                             [&](const MountPoint& m) { return m.path == p.string(); });
      if (!dup) mount_points_.push_back({p.string(), !is_target || binds_[i].is_dir});
    }
  }
}

// Second paths: only onto directories that exist (the view makes nothing
// outside its tmpfs), parents first.
void Isolation::PlanSecondPaths(const std::vector<replica::BindSpec>& binds) {
  std::error_code ec;
  std::vector<replica::BindSpec> second = binds;
  std::sort(
      second.begin(), second.end(),
      [](const replica::BindSpec& a, const replica::BindSpec& b) { return a.target < b.target; });
  for (const replica::BindSpec& b : second) {
    fs::path source = fs::canonical(b.source, ec);
    if (ec || !fs::is_directory(source, ec)) continue;
    fs::path target = b.target.lexically_normal();
    // Where the target will be once the binds before it are made: inside an
    // earlier one, in that one's source.
    fs::path where = target;
    for (const Bind& earlier : extra_binds_) {
      if (IsUnder(target, earlier.target)) {
        where = fs::path(earlier.source) / target.lexically_relative(earlier.target);
      }
    }
    if (!fs::is_directory(where, ec)) continue;
    extra_binds_.push_back({source.string(), target.string(), true, false});
  }
}

std::vector<std::string> Isolation::Describe() const {
  std::vector<std::string> out;
  for (const std::string& h : hide_dirs_) out.push_back("hide " + h);
  for (const std::string& h : hide_files_) out.push_back("hide " + h);
  for (const std::vector<Bind>* list : {&binds_, &extra_binds_}) {
    for (const Bind& b : *list) {
      out.push_back(std::string(b.read_only ? "ro " : "rw ") + b.target +
                    (b.source == b.target ? "" : " <- " + b.source));
    }
  }
  return out;
}

void Isolation::SetMessage(const char* step, const char* path, int err) {
  message_[0] = '\0';
  Append(message_, sizeof message_, step);
  if (path) {
    Append(message_, sizeof message_, " ");
    Append(message_, sizeof message_, path);
  }
  if (err) {
    Append(message_, sizeof message_, ": ");
    Append(message_, sizeof message_, std::strerror(err));
  }
}

// Root: a map that names ids other than the caller's own can only be
// written from the parent namespace by a process with CAP_SETUID there. So
// the supervisor makes the namespace here, before the fork: a child created
// with CLONE_NEWUSER is in it from its first instruction, its maps are
// written from here at once (no waiting for it to run), and an fd of the
// namespace keeps it after the child is killed. The trainer's process joins
// it with setns in Enter.
void Isolation::MakeRootUserNamespace() {
  // CLONE_VM: no copy of the supervisor's page tables; the helper only
  // waits on its own small stack, in raw system calls (no libc or sanitizer
  // state of ours is touched from it).
  auto wait_to_be_killed = [](void*) -> int {
    ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // dies with us at the latest
    for (;;) ::syscall(SYS_ppoll, nullptr, 0, nullptr, nullptr, 0);
  };
  pid_t helper = ::clone(wait_to_be_killed, helper_stack_ + sizeof helper_stack_,
                         CLONE_NEWUSER | CLONE_VM | SIGCHLD, nullptr);
  if (helper < 0) {
    userns_errno_ = errno;
    return;
  }
  helper_ = helper;
  std::string proc = "/proc/" + std::to_string(helper);
  userns_step_ = "writing uid_map of the trainer's user namespace";
  int err = WriteProcFile((proc + "/uid_map").c_str(), uid_map_.c_str());
  if (err == 0) {
    userns_step_ = "writing gid_map of the trainer's user namespace";
    err = WriteProcFile((proc + "/gid_map").c_str(), gid_map_.c_str());
  }
  if (err == 0) {
    userns_step_ = "opening the trainer's user namespace (ns/user)";
    userns_fd_ = ::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
    if (userns_fd_ < 0) err = errno;
  }
  userns_errno_ = err;
  ::kill(helper, SIGKILL);  // reaped in the destructor, after the trainer's fork
}

Isolation::~Isolation() {
  if (userns_fd_ >= 0) ::close(userns_fd_);
  // Still unreaped, so its pid cannot have been reused; dead or nearly.
  if (helper_ > 0) {
    while (::waitpid(helper_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

bool Isolation::Unshare() {
  if (root_) {
    if (userns_fd_ >= 0) {
      if (::setns(userns_fd_, CLONE_NEWUSER) == 0) {
        changed_ = true;
        ::close(userns_fd_);
        userns_fd_ = -1;
        if (::unshare(CLONE_NEWNS) != 0) {
          SetMessage("unshare(CLONE_NEWNS)", nullptr, errno);
          return false;
        }
        user_namespace_ = true;
        return true;
      }
      userns_step_ = "setns(CLONE_NEWUSER)";
      userns_errno_ = errno;
    }
    // No user namespace for root here (user.max_user_namespaces = 0, a
    // seccomp filter): a mount namespace alone still hides the paths.
    if (::unshare(CLONE_NEWNS) == 0) {
      changed_ = true;
      return true;
    }
    SetMessage("unshare(CLONE_NEWNS)", nullptr, errno);
    return false;
  }
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    SetMessage("unshare(CLONE_NEWUSER | CLONE_NEWNS)", nullptr, errno);
    return false;
  }
  changed_ = true;
  // An unprivileged process may map only its own ids, and its gid only
  // after giving up setgroups.
  int err = WriteProcFile("/proc/self/setgroups", "deny");
  if (err == 0) err = WriteProcFile("/proc/self/uid_map", uid_map_.c_str());
  if (err == 0) err = WriteProcFile("/proc/self/gid_map", gid_map_.c_str());
  if (err != 0) {
    SetMessage("writing the uid/gid maps of the trainer's user namespace", nullptr, err);
    return false;
  }
  user_namespace_ = true;
  return true;
}

bool Isolation::Mount() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    SetMessage("making the mounts private (mount / MS_REC|MS_PRIVATE)", nullptr, errno);
    return false;
  }
  // Opened before anything is hidden: afterwards their paths lead into the
  // empty tmpfs. Opened in the new namespace, as a bind's source must be.
  for (std::vector<Bind>* list : {&binds_, &extra_binds_}) {
    for (Bind& b : *list) {
      b.fd = ::open(b.source.c_str(), O_PATH | O_CLOEXEC);
      if (b.fd < 0) {
        SetMessage("opening", b.source.c_str(), errno);
        return false;
      }
    }
  }
  for (const std::string& dir : hide_dirs_) {
    if (::mount("stoker-hidden", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                kTmpfsOptions) != 0) {
      SetMessage("mounting an empty tmpfs over", dir.c_str(), errno);
      return false;
    }
    ++mounted_dirs_;
  }
  for (const MountPoint& m : mount_points_) {
    int rc = 0;
    if (m.is_dir) {
      rc = ::mkdir(m.path.c_str(), 0111);
    } else {
      // close() only when open worked: close(-1) would replace open's errno.
      int fd = ::open(m.path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
      if (fd >= 0) ::close(fd);
      rc = fd >= 0 ? 0 : -1;
    }
    if (rc != 0 && errno != EEXIST) {
      SetMessage("making the mount point", m.path.c_str(), errno);
      return false;
    }
  }
  for (const Bind& b : binds_) {
    if (!BindFd(b.fd, b.target.c_str())) {
      SetMessage("binding back", b.target.c_str(), errno);
      return false;
    }
    if (b.read_only &&
        ::mount(nullptr, b.target.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | LockedFlags(b.target.c_str()), nullptr) != 0) {
      SetMessage("making read-only", b.target.c_str(), errno);
      return false;
    }
  }
  for (const Bind& b : extra_binds_) {
    if (!BindFd(b.fd, b.target.c_str())) {
      SetMessage("binding a second path", b.target.c_str(), errno);
      return false;
    }
    ++mounted_extra_;
  }
  for (const std::string& file : hide_files_) {
    if (::mount("/dev/null", file.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      SetMessage("hiding", file.c_str(), errno);
      return false;
    }
    ++mounted_files_;
    // nodev: opening it fails (EACCES) rather than reading nothing.
    if (::mount(nullptr, file.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC |
                    LockedFlags(file.c_str()),
                nullptr) != 0) {
      SetMessage("hiding", file.c_str(), errno);
      return false;
    }
  }
  for (const std::string& dir : hide_dirs_) {
    if (::mount(nullptr, dir.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                nullptr) != 0) {
      SetMessage("making read-only the tmpfs over", dir.c_str(), errno);
      return false;
    }
  }
  for (std::vector<Bind>* list : {&binds_, &extra_binds_}) {
    for (Bind& b : *list) {
      ::close(b.fd);
      b.fd = -1;
    }
  }
  return true;
}

void Isolation::Unmount() {
  for (int i = mounted_extra_ - 1; i >= 0; --i) {
    ::umount2(extra_binds_[i].target.c_str(), MNT_DETACH);
  }
  mounted_extra_ = 0;
  for (Bind& b : extra_binds_) {
    if (b.fd >= 0) ::close(b.fd);
    b.fd = -1;
  }
  for (int i = mounted_files_ - 1; i >= 0; --i) ::umount2(hide_files_[i].c_str(), MNT_DETACH);
  // Detaching a tmpfs takes the binds on it along.
  for (int i = mounted_dirs_ - 1; i >= 0; --i) ::umount2(hide_dirs_[i].c_str(), MNT_DETACH);
  mounted_files_ = mounted_dirs_ = 0;
  for (Bind& b : binds_) {
    if (b.fd >= 0) ::close(b.fd);
    b.fd = -1;
  }
}

const char* Isolation::Fail(int note_fd, bool can_fall_back) {
  char why[sizeof message_];
  std::memcpy(why, message_, sizeof why);
  if (mode_ == IsolationMode::kAuto && can_fall_back) {
    message_[0] = '\0';
    Append(message_, sizeof message_,
           "stoker-run: job_isolation is auto, and this trainer runs without filesystem "
           "isolation (it can read what its account can, the data dir included): ");
    Append(message_, sizeof message_, why);
    Append(message_, sizeof message_, "\n");
    if (note_fd >= 0) {
      ssize_t n = ::write(note_fd, message_, std::strlen(message_));
      (void)n;
    }
    return nullptr;
  }
  message_[0] = '\0';
  Append(message_, sizeof message_,
         mode_ == IsolationMode::kRequired
             ? "job_isolation is required, but stoker-run cannot isolate the trainer: "
             : "job_isolation: stoker-run could not finish isolating the trainer: ");
  Append(message_, sizeof message_, why);
  Append(message_, sizeof message_,
         trainer_is_root_
             ? " (give the job's user a unix_user that is not root, or set job_isolation: auto)"
         : root_ ? " (set job_isolation: auto or off in the daemon's config to run without it)"
                 : " (a stokerd that is not root needs unprivileged user namespaces: sysctl "
                   "kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; or "
                   "run stokerd as root, or set job_isolation: auto or off)");
  return message_;
}

const char* Isolation::Enter(int note_fd) {
  if (mode_ == IsolationMode::kOff) return nullptr;
  if (trainer_is_root_) {
    // Not isolated, but still shown the second paths (/gcs), which are for
    // its convenience, not its confinement: in a mount namespace of its own.
    if (root_ && !extra_binds_.empty() && mode_ == IsolationMode::kAuto) BindSecondPathsOnly();
    SetMessage("the trainer runs as root, which could undo any isolation", nullptr, 0);
    return Fail(note_fd, true);
  }
  if (hide_dirs_.empty() && hide_files_.empty()) return nullptr;  // nothing to hide
  // A failure before anything changed, or once the mounts are undone, can
  // fall back (auto); one that leaves a user namespace without ids cannot.
  if (!Unshare()) return Fail(note_fd, !changed_);
  if (!user_namespace_ && mode_ == IsolationMode::kRequired) {
    SetMessage("root may make a mount namespace here but no user namespace:", userns_step_,
               userns_errno_);
    return Fail(note_fd, false);
  }
  if (!Mount()) {
    Unmount();
    return Fail(note_fd, true);
  }
  if (!user_namespace_ && note_fd >= 0) {
    SetMessage(
        "stoker-run: job_isolation: the trainer's paths are hidden, but it has no user "
        "namespace, so processes of its account can still reach its files through "
        "/proc/PID/root:",
        userns_step_, userns_errno_);
    Append(message_, sizeof message_, "\n");
    ssize_t n = ::write(note_fd, message_, std::strlen(message_));
    (void)n;
  }
  return nullptr;
}

void Isolation::BindSecondPathsOnly() {
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return;  // without them the trainer runs as before: its gs:// paths still work
  }
  for (Bind& b : extra_binds_) {
    b.fd = ::open(b.source.c_str(), O_PATH | O_CLOEXEC);
    if (b.fd < 0 || !BindFd(b.fd, b.target.c_str())) break;
    ++mounted_extra_;
  }
  for (Bind& b : extra_binds_) {
    if (b.fd >= 0) ::close(b.fd);
    b.fd = -1;
  }
}

Status ProbeIsolation(const fs::path& dir) {
  IsolationSpec spec;
  spec.mode = IsolationMode::kRequired;
  spec.hide = {dir};
  spec.keep_read_only = {dir / "jobs"};
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir.string() + " is not a directory");
  Isolation isolation(spec, /*trainer_is_root=*/false);
  if (const char* error = isolation.Enter(-1)) return FailedPrecondition(error);
  if (fs::exists(dir / "stokerd.pid", ec) || fs::exists(dir / "stoker.db", ec)) {
    return Internal("isolation left " + dir.string() + " visible");
  }
  return OkStatus();
}

Result<HeldView> HoldViewInHelper(const std::function<std::string(std::string* note)>& enter) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  pid_t h = ::fork();
  if (h == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    std::string note;
    std::string error = enter(&note);
    std::string msg = error.empty() ? "+" + note : "-" + error;
    ssize_t n = ::write(p[1], msg.data(), msg.size());
    (void)n;
    ::close(p[1]);
    while (true) ::pause();  // holds the namespaces until the parent took them
  }
  ::close(p[1]);
  if (h < 0) {
    ::close(p[0]);
    return Internal(std::string("cannot fork the isolation helper: ") + std::strerror(errno));
  }
  char buf[1200];
  ssize_t n;
  do {
    n = ::read(p[0], buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(p[0]);
  Result<HeldView> out = Internal("the isolation helper died");
  if (n > 0 && buf[0] == '-') {
    out = FailedPrecondition("isolation: " + std::string(buf + 1, static_cast<size_t>(n - 1)));
  } else if (n > 0) {
    HeldView view;
    view.note.assign(buf + 1, static_cast<size_t>(n - 1));
    out = view;
    int* fds[2] = {&view.userns_fd, &view.mntns_fd};
    const char* names[2] = {"user", "mnt"};
    for (int i = 0; i < 2 && out.ok(); ++i) {
      std::string theirs = "/proc/" + std::to_string(h) + "/ns/" + names[i];
      std::string ours = std::string("/proc/self/ns/") + names[i];
      struct stat a = {}, b = {};
      if (::stat(theirs.c_str(), &a) != 0 || ::stat(ours.c_str(), &b) != 0) {
        out = Internal("cannot read " + theirs + ": " + std::strerror(errno));
      } else if (a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
        *fds[i] = ::open(theirs.c_str(), O_RDONLY | O_CLOEXEC);
        if (*fds[i] < 0) out = Internal("cannot open " + theirs + ": " + std::strerror(errno));
      }
    }
    if (out.ok()) {
      out = view;
    } else {
      for (int fd : {view.userns_fd, view.mntns_fd}) {
        if (fd >= 0) ::close(fd);
      }
    }
  }
  ::kill(h, SIGKILL);
  ::waitpid(h, nullptr, 0);
  return out;
}

}  // namespace stoker::runner
