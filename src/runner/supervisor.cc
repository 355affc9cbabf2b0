#include "runner/supervisor.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/time.h"
#include "resources/nvml.h"
#include "runner/isolation.h"
#include "runner/launch.h"
#include "runner/log_rotation.h"
#include "runner/python_env.h"
#include "runner/replica_cgroup.h"
#include "runner/replica_processes.h"
#include "runner/telemetry_sampler.h"
#include "runner/warm_start.h"

#if STOKER_RUNNER_HAVE_STORAGE
#include "storage/archive.h"
#endif

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// How long the final clean-up keeps killing and reaping descendants before
// giving up on ones that cannot die (uninterruptible sleep).
constexpr int64_t kCleanupLimitMs = 30000;

// How often a supervisor checks that its replica directory still exists.
constexpr int64_t kOrphanCheckMs = 1000;

void Log(const std::string& line) {
  std::string l = "stoker-run[" + std::to_string(::getpid()) + "]: " + line + "\n";
  ssize_t n = ::write(STDERR_FILENO, l.data(), l.size());
  (void)n;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Every process below `root` in the /proc parent tree, `root` excluded.
// Empty when /proc cannot be listed: the callers also wait for waitpid's
// ECHILD before they believe no child is left.
std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // ppid -> pid
  Result<std::vector<pid_t>> pids = ListPids();
  if (!pids.ok()) return {};
  for (pid_t pid : *pids) {
    if (std::optional<ProcStat> st = ReadProcStat(pid)) children.emplace(st->ppid, pid);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

// How long, after the last process of the replica died, the log pump waits
// for the end of the trainer's output pipe (a process outside the replica's
// tree could still hold it) before it takes what is there and stops.
constexpr int kLogDrainMs = 2000;

// The trainer's output pipe: 1 MiB (the unprivileged maximum) rather than the
// default 64 KiB, so bursts do not wait on the pump.
constexpr int kPipeBytes = 1 << 20;

class Supervisor {
 public:
  Supervisor(fs::path dir, SupervisorHooks hooks)
      : dir_(std::move(dir)), cookie_(ReplicaCookie(dir_)), hooks_(std::move(hooks)) {}
  ~Supervisor() {
    pump_.reset();  // before the log it writes to
    for (int fd : {sfd_, lock_fd_, claim_fd_, null_fd_, warm_.conn, warm_.pidfd, warm_.go}) {
      if (fd >= 0) ::close(fd);
    }
  }

  int Run();

 private:
  // Returns false (after logging) when the claim is not ours to take:
  // *exit_code then says how to exit.
  bool Claim(int* exit_code);
  void SyncClaim();
  Result<LaunchSpec> LoadLaunch();
  // FailedPrecondition unless DIR is this process's own directory, writable
  // by no other account: the control files in it are what the daemon trusts.
  Status CheckDirIsOurs() const;
  // Makes DIR/work and DIR/hypertune (0700), the only places the trainer may
  // write, and gives them to its account.
  Status MakeTrainerDirs(const LaunchSpec& spec);
  Result<std::vector<fs::path>> UnpackPackages(const LaunchSpec& spec);
  // For launch.json's "python_env": installs the requirements (the
  // daemon's and those the unpacked packages under `package_roots`
  // declare) into the cached environment (python_env.h), or finds it
  // built; its site directories go first on *python_path, its scripts last
  // on the trainer's PATH, and one line in output.log says which it was.
  // Cancelled when a cancel came meanwhile (pip is stopped).
  Status PreparePythonEnv(LaunchSpec& spec, const std::vector<fs::path>& package_roots,
                          std::vector<fs::path>* python_path);
  // For a container whose image the engine lacks: `engine pull` (its
  // output into output.log), the replica preparing meanwhile. Cancelled
  // when a cancel came; FailedPrecondition with the engine's words and the
  // fix when the pull fails.
  Status PullImage(const replica::ContainerSpec& container);
  // Whether a cancel came (read from sfd_ while no trainer runs, so a
  // SIGCHLD there is only noted) or the daemon removed the claim.
  bool CancelRequested();
  void SetPreparing(const std::string& note);
  // A preparation step's failure as the launch's: its message, and
  // permanent (replica_contract.h) when the status says the input or this
  // machine is wrong (invalid argument, not found, failed precondition),
  // which another attempt would meet again.
  void FailLaunch(const Status& s);
  // Reaps on SIGCHLD; true when a cancel (SIGTERM, SIGINT, SIGHUP) came.
  bool DrainSignals();
  void StartTrainer(const LaunchSpec& spec, const std::vector<fs::path>& python_path);
  // For launch.json's "container": writes DIR/container.env and returns the
  // spec that runs `engine run ...` as the supervised process: the engine's
  // client runs as the supervisor with a clean environment of its own (the
  // job's variables reach only the container, never the engine, whose own
  // settings they could otherwise name), and the trainer's account,
  // isolation and GPUs go into the container's flags instead.
  Result<LaunchSpec> ContainerLaunch(const LaunchSpec& spec,
                                     const std::vector<fs::path>& python_path);
  // `engine rm -f` of the replica's container, so that none outlives the
  // supervisor (the client's --rm does it on a normal end; not after a
  // SIGKILL of the client).
  void RemoveContainer();
  // Starts the trainer from a warm interpreter (warm_start.h): true once it
  // runs (trainer_ and warm_ set); false with *cold_reason when it must
  // start cold instead (nothing of it ran).
  bool StartWarm(const LaunchSpec& spec, const std::vector<std::string>& env,
                 const std::vector<std::string>& candidates, const std::vector<gid_t>& groups,
                 int umask, int out_fd, Isolation& isolation, std::string* cold_reason);
  // For a warm trainer: reads the zygote's connection; sets trainer_status_
  // once it ended (or once the zygote died, taking it along).
  void ReadWarm();
  void Supervise();
  // Starts the resource sampler when launch.json asks for one.
  void StartSampler(const LaunchSpec& spec);
  // True when runner.lock (and so, in practice, the replica directory) was
  // deleted while the supervisor holds it.
  bool LockFileRemoved() const;
  void BeginStop(EndState reason);
  void ReapChildren();
  void KillEverythingLeft();
  int Finish();

  fs::path dir_;
  std::string cookie_;     // ReplicaCookie(dir_), fixed at the start
  SupervisorHooks hooks_;  // each may be empty
  int sfd_ = -1;
  int lock_fd_ = -1;
  int claim_fd_ = -1;                          // from Claim until SyncClaim
  std::unique_ptr<RotatingLog> log_;           // DIR/output.log
  std::unique_ptr<LogPump> pump_;              // trainer output pipe -> log_, while it runs
  std::unique_ptr<TelemetrySampler> sampler_;  // while the trainer runs, when asked for
  int null_fd_ = -1;
  int64_t supervisor_start_us_ = 0;

  double timeout_seconds_ = 0;
  double grace_seconds_ = 10;
  pid_t trainer_ = -1;
  std::optional<int> trainer_status_;  // wait status once reaped
  std::optional<EndState> stop_reason_;
  int stop_signal_ = 0;
  int64_t stop_at_ms_ = 0;  // when the SIGTERM went out

  Outcome outcome_;
  std::string start_note_;  // for trainer.json: how the trainer was started
  WarmChild warm_;          // a warm trainer: the zygote's child (pid -1: cold)
  std::string warm_buffer_;
  std::string late_log_line_;  // written to output.log after the trainer's last byte
  std::optional<replica::ContainerSpec> container_;  // set: the trainer runs in it
  // A cancel read from sfd_ outside DrainSignals (while pip ran).
  bool cancel_seen_ = false;
  // DescribePythonEnv of the requirement environment, for the start note.
  std::string env_note_;
  std::string pull_note_;       // "pulled image X in 2.1 s", for the start note
  std::string container_note_;  // "the image's root is nobody (uid 65534) on this host"
  // The replica's cgroup (replica_cgroup.h), made before anything of the
  // replica runs; unset where none can be made (cgroup_note_ says why, and
  // the clean up falls back to the process tree and the cookie).
  std::optional<ReplicaCgroup> cgroup_;
  std::string cgroup_note_;
  replica::LimitsSpec limits_;
  // Makes cgroup_ for the replica (its memory limit from launch.json).
  void MakeCgroup(const LaunchSpec& spec);
  // The cgroup's join fds for a child about to be forked (none without one).
  std::vector<int> CgroupJoinFds() const {
    return cgroup_ ? cgroup_->OpenJoinFds() : std::vector<int>{};
  }
};

// The NVIDIA container toolkit's CDI spec, where podman looks for one.
bool HaveNvidiaCdi() {
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::string name = e.path().filename().string();
      if (name.rfind("nvidia", 0) == 0) return true;
    }
  }
  return false;
}

// For a warm start: the isolated view the trainer must join, made by the
// same Isolation::Enter a cold trainer runs, in a helper process forked
// here; its user and mount namespaces are returned as fds (-1, -1 when
// Enter left the view as it is: mode off, or auto where it is impossible).
// Error: Enter refused (the cold start then reports it exactly).
Result<std::pair<int, int>> PrepareIsolatedView(Isolation& isolation) {
  STOKER_ASSIGN_OR_RETURN(HeldView view, HoldViewInHelper([&isolation](std::string*) {
                            const char* error = isolation.Enter(STDERR_FILENO);
                            return std::string(error ? error : "");
                          }));
  return std::pair<int, int>{view.userns_fd, view.mntns_fd};
}

// The interpreter a cold exec would run (the first candidate that can be
// executed), when stoker-run may trust it for a zygote: the file and the
// directories it lies in (where Python looks for pyvenv.cfg) writable by
// no account but root and stoker-run's. "" with *why otherwise.
std::string TrustedInterpreter(const std::vector<std::string>& candidates,
                               const std::string& environment_python, std::string* why) {
  std::string found;
  for (const std::string& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) {
      found = c;
      break;
    }
  }
  if (found.empty()) {
    *why = "the interpreter was not found";
    return "";
  }
  std::error_code ec1, ec2;
  fs::path real = fs::canonical(found, ec1);
  fs::path env_real = fs::canonical(environment_python, ec2);
  if (ec1 || ec2 || real != env_real) {
    *why =
        "the command runs " + found + ", not the environment's interpreter " + environment_python;
    return "";
  }
  fs::path p = fs::absolute(found);
  for (int level = 0; level < 3 && !p.empty(); ++level, p = p.parent_path()) {
    struct stat st = {};
    if (::lstat(p.c_str(), &st) != 0 || (st.st_uid != 0 && st.st_uid != ::geteuid()) ||
        (!S_ISLNK(st.st_mode) && (st.st_mode & 022) != 0)) {
      *why = p.string() + " may be changed by another account";
      return "";
    }
    if (p == p.root_path()) break;
  }
  return found;
}

// Closes the fds it holds when it goes.
struct ScopedFds {
  std::vector<int> fds;
  ~ScopedFds() {
    for (int fd : fds) ::close(fd);
  }
};

void Supervisor::MakeCgroup(const LaunchSpec& spec) {
  limits_ = spec.limits;
  const CgroupLayout layout = DetectCgroupLayout();
  Result<ReplicaCgroup> cg =
      ReplicaCgroup::Create(layout, ReplicaCgroupName(cookie_), spec.limits.memory_bytes);
  if (!cg.ok()) {
    cgroup_note_ = "not contained in a cgroup (" + cg.status().message() +
                   "): its processes are found by process tree and environment instead";
    Log(cgroup_note_);
    return;
  }
  cgroup_ = std::move(*cg);
}

bool Supervisor::Claim(int* exit_code) {
  fs::path lock = dir_ / "runner.lock";
  // Root opening a name in a directory the trainer's account owns: no
  // symbolic link (it could make root create a file anywhere), no FIFO.
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st = {};
  if (lock_fd_ >= 0 && (::fstat(lock_fd_, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    errno = EPERM;
  }
  if (lock_fd_ < 0) {
    Log(Errno("cannot open " + lock.string()));
    *exit_code = 1;
    return false;
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      *exit_code = 0;  // another supervisor is alive and owns the replica
    } else {
      Log(Errno("cannot lock " + lock.string()));
      *exit_code = 1;
    }
    return false;
  }
  fs::path claim = dir_ / "claim";
  int fd = ::open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      *exit_code = 0;  // a supervisor already ran for this replica
    } else {
      Log(Errno("cannot create " + claim.string()));
      *exit_code = 1;
    }
    return false;
  }
  // The claim is visible to every process as soon as it exists, which is
  // what stops a second supervisor after a process crash. Making it durable
  // (against a power loss, which kills the trainer too) is done right after
  // the trainer starts, off the start-latency path: SyncClaim(), through
  // this fd (the trainer may have put anything at the name by then).
  claim_fd_ = fd;
  return true;
}

void Supervisor::SyncClaim() {
  bool synced = claim_fd_ >= 0 && ::fsync(claim_fd_) == 0;
  if (claim_fd_ >= 0) ::close(claim_fd_);
  claim_fd_ = -1;
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  synced = synced && dfd >= 0 && ::fsync(dfd) == 0;
  if (dfd >= 0) ::close(dfd);
  if (!synced) Log(Errno("cannot sync " + (dir_ / "claim").string()));
}

Result<LaunchSpec> Supervisor::LoadLaunch() {
  // The executor's file: believed only as this account's own (16 MiB is
  // far above what the API lets a job's command and env reach).
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadOwnFileNoFollow(dir_, "launch.json", 16 << 20));
  STOKER_ASSIGN_OR_RETURN(LaunchSpec spec, ParseLaunchSpec(text));
  if (hooks_.rewrite) {
    STOKER_ASSIGN_OR_RETURN(spec.env, hooks_.rewrite(spec.env));
  }
  // Every process of the replica inherits the cookie, which is how the clean
  // up finds those that left its process tree (replica_processes.h).
  spec.env[std::string(kReplicaCookieVar)] = cookie_;
  if (spec.run_as) {
    // The account's own identity and home, not the daemon's (HOME=/root);
    // an account without a usable home (nobody's is /nonexistent) gets its
    // work directory.
    spec.env["USER"] = spec.env["LOGNAME"] = spec.run_as->user;
    spec.env["HOME"] = (dir_ / "work").string();
    struct stat st = {};
    const std::string& home = spec.run_as->home;
    if (!home.empty() && home[0] == '/' && ::stat(home.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == spec.run_as->uid) {
      spec.env["HOME"] = home;
    }
  }
  return spec;
}

Status Supervisor::CheckDirIsOurs() const {
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st = {};
  bool ok = fd >= 0 && ::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() &&
            (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  if (fd >= 0) ::close(fd);
  if (ok) return OkStatus();
  return FailedPrecondition(
      "the replica directory " + dir_.string() + " must be a directory of stoker-run's account " +
      "(uid " + std::to_string(::geteuid()) + ") that no other account may write " +
      "(the executor makes it so; the trainer writes only in its work/ and hypertune/)");
}

Status Supervisor::MakeTrainerDirs(const LaunchSpec& spec) {
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return Internal(Errno("cannot open " + dir_.string()));
  Status out = OkStatus();
  for (const char* name : {"work", "hypertune"}) {
    fs::path path = dir_ / name;
    if (::mkdirat(dfd, name, 0700) != 0 && errno != EEXIST) {
      out = Internal(Errno("cannot create " + path.string()));
      break;
    }
    int fd = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      out = FailedPrecondition(Errno("cannot open " + path.string() + " (a link or a file?)"));
      break;
    }
    bool given = !spec.run_as || ::fchown(fd, spec.run_as->uid, spec.run_as->gid) == 0;
    given = given && ::fchmod(fd, 0700) == 0;
    ::close(fd);
    if (!given) {
      out = Internal(Errno("cannot hand " + path.string() + " to the trainer's account"));
      break;
    }
  }
  ::close(dfd);
  return out;
}

Result<std::vector<fs::path>> Supervisor::UnpackPackages(const LaunchSpec& spec) {
  std::vector<fs::path> roots;
  if (!spec.packages.empty()) {
    // Root unpacks into DIR/packages, which it makes itself (not writable by
    // the trainer's account): a link planted there by another process of
    // that account would otherwise send the files anywhere.
    fs::path packages = dir_ / "packages";
    struct stat st = {};
    if (::mkdir(packages.c_str(), 0755) != 0 &&
        (errno != EEXIST || ::lstat(packages.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
         st.st_uid != ::geteuid())) {
      return FailedPrecondition("cannot unpack packages into " + packages.string() +
                                ": it must be a directory of stoker-run's own, not a link (" +
                                std::strerror(errno == EEXIST ? EPERM : errno) + ")");
    }
  }
  for (size_t i = 0; i < spec.packages.size(); ++i) {
#if STOKER_RUNNER_HAVE_STORAGE
    fs::path dest = dir_ / "packages" / std::to_string(i);
    Status s = storage::ExtractTarGz(spec.packages[i], dest);
    if (!s.ok()) {
      return Status(s.code(),
                    "cannot unpack package " + spec.packages[i].string() + ": " + s.message());
    }
    for (auto& root : storage::SdistRoots(dest)) roots.push_back(root);
#else
    return FailedPrecondition("cannot unpack package " + spec.packages[i].string() +
                              ": this stoker-run was built without package support");
#endif
  }
  return roots;
}

Status Supervisor::PreparePythonEnv(LaunchSpec& spec, const std::vector<fs::path>& package_roots,
                                    std::vector<fs::path>* python_path) {
  const replica::PythonEnvSpec& p = *spec.python_env;
  std::vector<std::string> requirements = p.requirements;
  std::vector<std::string> sources;
  for (const fs::path& root : package_roots) {
    DeclaredRequirements d = ReadDeclaredRequirements(root);
    std::string rel = root.lexically_relative(dir_ / "packages").string();
    if (!d.note.empty() && log_) {
      Status w = log_->Write("stoker-run: package " + rel + ": " + d.note + "\n");
      if (!w.ok()) Log(w.ToString());
    }
    if (d.requirements.empty()) continue;
    sources.push_back(rel + "/" + d.source);
    // Checked here so that the message names the file.
    if (auto checked = NormaliseRequirements(d.requirements, rel + "/" + d.source + ": ");
        !checked.ok()) {
      return checked.status();
    }
    requirements.insert(requirements.end(), d.requirements.begin(), d.requirements.end());
  }
  if (requirements.empty()) return OkStatus();
  PythonEnvRequest req;
  req.cache_dir = p.cache_dir;
  req.python = p.python;
  if (spec.container) {
    // The image's own Python runs the trainer: pip runs in the image too.
    req.python = "python3";
    req.container = PythonEnvRequest::Image{spec.container->engine, spec.container->image,
                                            ContainerUlimitFlags()};
    if (cgroup_ && fs::path(spec.container->engine).filename() == "podman") {
      req.container->cgroup_parent = cgroup_->ContainerParent();
    }
  }
  req.find_links = p.find_links;
  req.index_url = p.index_url;
  req.requirements = std::move(requirements);
  req.on_slow = [this](const std::string& note) { SetPreparing(note); };
  ScopedFds join{CgroupJoinFds()};
  req.cgroup_fds = join.fds;
  Result<PythonEnv> built = EnsurePythonEnv(req, [this] { return CancelRequested(); });
  ::unlink((dir_ / replica::kPreparingFile).c_str());
  if (!built.ok()) return built.status();
  const PythonEnv& env = *built;
  env_note_ = DescribePythonEnv(env);
  if (log_) {
    Status w = log_->Write("stoker-run: " + env_note_ + "\n");
    if (!w.ok()) Log(w.ToString());
  }
  python_path->insert(python_path->begin(), env.site_dirs.begin(), env.site_dirs.end());
  if (!env.bin_dir.empty()) {
    std::string& path = spec.env["PATH"];
    path = (path.empty() ? "/usr/local/bin:/usr/bin:/bin" : path) + ":" + env.bin_dir.string();
  }
  return OkStatus();
}

bool Supervisor::CancelRequested() {
  signalfd_siginfo si;
  while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    if (si.ssi_signo != SIGCHLD) cancel_seen_ = true;
  }
  return cancel_seen_ || LockFileRemoved();
}

// The daemon sees the replica as preparing, not stuck (no start limit).
void Supervisor::FailLaunch(const Status& s) {
  outcome_.message = s.message();
  outcome_.permanent = s.code() == Code::kInvalidArgument || s.code() == Code::kNotFound ||
                       s.code() == Code::kFailedPrecondition;
}

void Supervisor::SetPreparing(const std::string& note) {
  Status s =
      WriteFileAtomic(dir_ / replica::kPreparingFile,
                      replica::FormatPreparingInfo({note, NowMicros()}), Durability::kNoSync);
  if (!s.ok()) Log(s.ToString());
}

Status Supervisor::PullImage(const replica::ContainerSpec& c) {
  SetPreparing("pulling image " + c.image);
  const int64_t start_ms = MonotonicMs();
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"};
  for (const char* keep : {"HOME", "XDG_RUNTIME_DIR", "http_proxy", "https_proxy", "no_proxy",
                           "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}) {
    if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
  }
  ScopedFds join{CgroupJoinFds()};
  Result<CapturedRun> run = RunCapturing(
      ContainerPullArgv(c), env, dir_, [this] { return CancelRequested(); }, join.fds);
  ::unlink((dir_ / replica::kPreparingFile).c_str());
  if (!run.ok()) return run.status();
  if (log_) {
    Status w = log_->Write("stoker-run: " + c.engine + " pull " + c.image + "\n" + run->output);
    if (!w.ok()) Log(w.ToString());
  }
  if (run->cancelled) return Status(Code::kCancelled, "cancelled while pulling image " + c.image);
  const int st = run->exit_status;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::string how = WIFEXITED(st) ? "exit " + std::to_string(WEXITSTATUS(st))
                                    : "signal " + std::to_string(WTERMSIG(st));
    return FailedPrecondition(
        c.engine + " could not pull image " + c.image + " (" + how +
        "): " + OutputTail(run->output, 3) +
        "\nFix: check the image's name and tag; log the daemon's account in to the registry "
        "(`" +
        fs::path(c.engine).filename().string() +
        " login REGISTRY`); or build it here with `stoker images build -t " + c.image +
        " DIR` or import it with `stoker images import`");
  }
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", (MonotonicMs() - start_ms) / 1000.0);
  pull_note_ = "pulled image " + c.image + " in " + took + " s";
  if (log_) {
    Status w = log_->Write("stoker-run: " + pull_note_ + "\n");
    if (!w.ok()) Log(w.ToString());
  }
  return OkStatus();
}

Result<LaunchSpec> Supervisor::ContainerLaunch(const LaunchSpec& spec,
                                               const std::vector<fs::path>& python_path) {
  const replica::ContainerSpec& c = *spec.container;
  std::map<std::string, std::string> env;
  for (const std::string& kv : BuildTrainerEnv(spec.env, python_path)) {
    size_t eq = kv.find('=');
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // A mount whose source does not exist (no bucket made yet) shows
  // nothing: left out rather than failing the start.
  replica::ContainerSpec kept = c;
  auto missing = [](const fs::path& p) {
    std::error_code ec;
    return !fs::exists(p, ec);
  };
  std::erase_if(kept.mounts, missing);
  std::erase_if(kept.mounts_read_only, missing);
  ContainerRun run;
  run.container = &kept;
  run.run_as = spec.run_as;
  // The image's root is the trainer's account (launch.h): HOME, USER and
  // LOGNAME are then the image's root's (/root), as images written for
  // Vertex expect.
  run.user_namespace = spec.run_as && c.user_namespace && fs::path(c.engine).filename() == "podman";
  if (run.user_namespace) {
    for (const char* k : {"HOME", "USER", "LOGNAME"}) env.erase(k);
    container_note_ = "the image's root is " + spec.run_as->user + " (uid " +
                      std::to_string(spec.run_as->uid) + ") on this host";
  }
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) {
    if (auto gpus = GpuIndexes(it->second); gpus && !gpus->empty()) {
      bool docker = fs::path(c.engine).filename() == "docker";
      run.gpu_passing = docker ? GpuPassing::kDockerGpus
                               : (HaveNvidiaCdi() ? GpuPassing::kCdi : GpuPassing::kNone);
      if (run.gpu_passing == GpuPassing::kNone) {
        return FailedPrecondition(
            "the replica has GPU(s) " + it->second + " but " + c.engine +
            " has no way to pass them: no CDI spec for NVIDIA GPUs in /etc/cdi or /var/run/cdi; "
            "install nvidia-container-toolkit and run `nvidia-ctk cdi generate "
            "--output=/etc/cdi/nvidia.yaml`, or run this image's jobs without a container");
      }
      run.gpus = *gpus;
      // Inside, the container sees only its GPUs, numbered from 0.
      std::string inside;
      for (size_t i = 0; i < gpus->size(); ++i) inside += (i ? "," : "") + std::to_string(i);
      it->second = inside;
    }
  }
  run.ulimits = ContainerUlimitFlags();
  if (cgroup_) {
    // The container's processes under the replica's cgroup (podman with the
    // cgroupfs manager; docker decides in its daemon), held to its memory.
    if (fs::path(c.engine).filename() == "podman") run.cgroup_parent = cgroup_->ContainerParent();
    run.memory_bytes = cgroup_->memory_limit();
  }
  run.conmon_pid_file = dir_ / "container.pid";
  run.env_file = dir_ / "container.env";
  // Made 0600 from the start (the job's variables may be secrets, and the
  // trainer's group may list DIR); DIR is ours alone, so no link is planted.
  const std::string text = ContainerEnvFile(env, &run.env_inline);
  int fd =
      ::open(run.env_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                 ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!written) return Internal(Errno("cannot write " + run.env_file.string()));

  LaunchSpec out = spec;
  out.argv = ContainerRunArgv(run);
  out.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
             {std::string(kReplicaCookieVar), cookie_}};
  for (const char* keep : {"HOME", "XDG_RUNTIME_DIR", "LANG"}) {
    if (const char* v = std::getenv(keep)) out.env[keep] = v;
  }
  out.run_as.reset();
  out.isolation = {};
  if (out.warm.requested) {
    out.warm.cold_reason = "the trainer runs in a container (" + c.image + ")";
  }
  out.container.reset();
  return out;
}

void Supervisor::RemoveContainer() {
  if (!container_) return;
  std::vector<std::string> args = {container_->engine, "rm", "--force", container_->name};
  if (fs::path(container_->engine).filename() == "podman")
    args.insert(args.begin() + 3, "--time=0");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(null_fd_, STDIN_FILENO);
    int dev_null = ::open("/dev/null", O_WRONLY);
    ::dup2(dev_null, STDOUT_FILENO);
    ::dup2(dev_null, STDERR_FILENO);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (pid < 0) return;
  const int64_t give_up = MonotonicMs() + kCleanupLimitMs;
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (MonotonicMs() > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      Log("giving up on `" + container_->engine + " rm` of container " + container_->name);
      return;
    }
    ::usleep(10000);
  }
}

bool Supervisor::DrainSignals() {
  signalfd_siginfo si;
  bool cancel = false;
  while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    if (si.ssi_signo != SIGCHLD) cancel = true;
    if (si.ssi_signo == SIGCHLD) ReapChildren();
  }
  return cancel;
}

void Supervisor::StartTrainer(const LaunchSpec& spec, const std::vector<fs::path>& python_path) {
  // Everything the child needs is prepared here: between fork and exec it
  // only makes system calls.
  std::vector<std::string> env = BuildTrainerEnv(spec.env, python_path);
  auto path_it = spec.env.find("PATH");
  std::vector<std::string> candidates =
      ExecCandidates(spec.argv[0], path_it == spec.env.end() ? "" : path_it->second);
  std::vector<char*> argv_p, env_p;
  for (const auto& a : spec.argv) argv_p.push_back(const_cast<char*>(a.c_str()));
  argv_p.push_back(nullptr);
  for (const auto& e : env) env_p.push_back(const_cast<char*>(e.c_str()));
  env_p.push_back(nullptr);
  const std::string work = (dir_ / "work").string();
  const char* dir = work.c_str();
  const pid_t supervisor = ::getpid();
  const std::optional<RunAs>& run_as = spec.run_as;
  std::vector<gid_t> groups;
  if (run_as) {
    if (::geteuid() != 0 && ::geteuid() != run_as->uid) {
      outcome_.permanent = true;
      outcome_.message = "cannot run the trainer as " + run_as->user + " (uid " +
                         std::to_string(run_as->uid) + "): stoker-run is not root";
      return;
    }
    int n = 64;
    groups.resize(n);
    while (::getgrouplist(run_as->user.c_str(), run_as->gid, groups.data(), &n) < 0) {
      groups.resize(n);
    }
    groups.resize(n);
    for (uint32_t g : run_as->extra_gids) {
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
  }
  const bool shares_buckets = run_as && !run_as->extra_gids.empty();

  // The trainer writes into a pipe that the log pump copies into the
  // rotating output.log; both ends are close-on-exec (dup2 clears it on the
  // trainer's 1 and 2).
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    outcome_.message = Errno("cannot create the trainer's output pipe");
    return;
  }
  ::fcntl(pipe_fds[0], F_SETPIPE_SZ, kPipeBytes);
  Isolation isolation(spec.isolation, run_as ? run_as->uid == 0 : ::geteuid() == 0);

  if (hooks_.before_fork) hooks_.before_fork();
  outcome_.start_time_us = NowMicros();
  bool warm = false;
  if (spec.warm.requested) {
    std::string reason =
        !hooks_.no_warm_reason.empty() ? hooks_.no_warm_reason : spec.warm.cold_reason;
    warm = reason.empty() && StartWarm(spec, env, candidates, groups, shares_buckets ? 002 : 022,
                                       pipe_fds[1], isolation, &reason);
    if (!warm) start_note_ = "cold start: " + reason;
  }
  ScopedFds join{warm ? std::vector<int>{} : CgroupJoinFds()};
  const std::vector<int>& join_fds = join.fds;
  pid_t pid = warm ? warm_.pid : ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != supervisor) ::_exit(127);  // the supervisor died before prctl
    // Into the replica's cgroup before anything else: what it starts stays there.
    if (!ReplicaCgroup::JoinFromChild(join_fds)) {
      dprintf(STDERR_FILENO, "stoker-run: cannot join the replica's cgroup: %s\n",
              std::strerror(errno));
      ::_exit(127);
    }
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Before the account switch, and while stderr is still runner.log for
    // its note (isolation.h).
    const char* isolation_error = isolation.Enter(STDERR_FILENO);
    ::dup2(null_fd_, STDIN_FILENO);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    if (isolation_error) {
      dprintf(STDERR_FILENO, "stoker-run: %s\n", isolation_error);
      ::_exit(127);
    }
    if (run_as) {
      // Groups, then gid, then uid (after setuid the others are no longer
      // ours to set); each checked, and root must be gone for good.
      const char* step = nullptr;
      if (::setgroups(groups.size(), groups.data()) != 0) {
        step = "setgroups";
      } else if (::setgid(run_as->gid) != 0) {
        step = "setgid";
      } else if (::setuid(run_as->uid) != 0) {
        step = "setuid";
      } else if (::getuid() != run_as->uid || ::geteuid() != run_as->uid ||
                 ::getgid() != run_as->gid || ::getegid() != run_as->gid) {
        step = "checking the ids after setuid";
      } else if (run_as->uid != 0 && ::setuid(0) == 0) {
        step = "checking that root cannot be regained";
      }
      if (step) {
        dprintf(STDERR_FILENO, "stoker-run: cannot run the trainer as %s (uid %u gid %u): %s: %s\n",
                run_as->user.c_str(), run_as->uid, run_as->gid, step, std::strerror(errno));
        ::_exit(127);
      }
      // What it makes in a bucket stays writable by the bucket group.
      ::umask(shares_buckets ? 002 : 022);
      // A change of credentials clears the parent-death signal: set it again.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != supervisor) ::_exit(127);
    }
    if (::chdir(dir) != 0) {
      dprintf(STDERR_FILENO, "stoker-run: cannot enter %s: %s%s\n", dir, std::strerror(errno),
              run_as ? " (the trainer runs as another account: every directory above the data "
                       "dir must be searchable by it, e.g. use /var/lib/stoker, not /root/...)"
                     : "");
      ::_exit(127);
    }
    int err = ENOENT;
    bool denied = false;
    for (const auto& c : candidates) {
      ::execve(c.c_str(), argv_p.data(), env_p.data());
      err = errno;
      if (err == EACCES) denied = true;
      if (err != ENOENT && err != ENOTDIR && err != EACCES) break;
    }
    if (denied && (err == ENOENT || err == ENOTDIR)) err = EACCES;
    dprintf(STDERR_FILENO, "stoker-run: cannot execute '%s': %s\n", argv_p[0], std::strerror(err));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  if (pid < 0) {
    outcome_.message = Errno("cannot fork the trainer");
    ::close(pipe_fds[0]);
    return;
  }
  trainer_ = pid;
  RotatingLog* log = log_.get();
  pump_ = std::make_unique<LogPump>(pipe_fds[0],
                                    [log](std::string_view data) { return log->Write(data); });
  // Also here, so that kill(-pid) works from now on (a warm trainer made
  // its own session before it started).
  if (!warm) ::setpgid(pid, pid);

  // The requirement environment's line goes into the job's events too.
  std::string note = start_note_;
  for (const std::string* more : {&pull_note_, &container_note_, &env_note_, &cgroup_note_}) {
    if (!more->empty()) note += (note.empty() ? "" : "; ") + *more;
  }
  Status s = WriteFileAtomic(dir_ / replica::kTrainerFile,
                             replica::FormatTrainerInfo({pid, pid, outcome_.start_time_us, note}));
  if (!s.ok()) Log(s.ToString());
  s = WriteFileAtomic(dir_ / replica::kRunnerFile,
                      replica::FormatRunnerInfo({supervisor, supervisor_start_us_}));
  if (!s.ok()) Log(s.ToString());
}

bool Supervisor::StartWarm(const LaunchSpec& spec, const std::vector<std::string>& env,
                           const std::vector<std::string>& candidates,
                           const std::vector<gid_t>& groups, int umask, int out_fd,
                           Isolation& isolation, std::string* cold_reason) {
  Result<WarmInvocation> inv = ParseWarmInvocation(spec.argv);
  if (!inv.ok()) {
    *cold_reason = inv.status().message();
    return false;
  }
  WarmRequest req;
  req.invocation = *inv;
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    req.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  *cold_reason = WarmEnvProblem(req.env);
  if (cold_reason->empty()) *cold_reason = StartupVarProblem(req.env, spec.warm.defaults);
  if (!cold_reason->empty()) return false;
  ZygoteIdentity& id = req.zygote;
  id.python_path = TrustedInterpreter(candidates, spec.warm.python, cold_reason);
  if (id.python_path.empty()) return false;
  id.preload = spec.warm.preload;
  id.defaults = spec.warm.defaults;
  id.user = spec.warm.user;
  req.cwd = (dir_ / "work").string();
  req.stdin_fd = null_fd_;
  req.out_fd = out_fd;
  req.umask = umask;
  id.uid = ::geteuid();
  id.gid = ::getegid();
  if (spec.run_as) {
    // The zygote runs as the trainer's account, never as root for another's.
    id.uid = spec.run_as->uid;
    id.gid = spec.run_as->gid;
    id.groups.assign(groups.begin(), groups.end());
    req.switch_account = ::geteuid() == 0;  // else it is stoker-run's own (launch.cc checks)
  }
  if (spec.isolation.mode != IsolationMode::kOff) {
    // A zygote of stoker-run's own account joins the view stoker-run makes;
    // one of another account joins only a view that account made itself.
    Result<std::pair<int, int>> view = id.uid == ::geteuid()
                                           ? PrepareIsolatedView(isolation)
                                           : PrepareAccountView(spec.isolation, id);
    if (!view.ok()) {
      *cold_reason = view.status().message();
      return false;
    }
    req.userns_fd = view->first;
    req.mntns_fd = view->second;
  }
  Result<WarmChild> child = ForkWarm(spec.warm, ZygoteKey(id), req);
  for (int fd : {req.userns_fd, req.mntns_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (!child.ok()) {
    *cold_reason = child.status().message();
    return false;
  }
  warm_ = *child;
  // The child runs nothing before its go byte: moved now, nothing it
  // starts can be outside the replica's cgroup.
  if (Status in = cgroup_ ? cgroup_->Add(warm_.pid) : OkStatus(); !in.ok()) {
    ::close(warm_.go);  // the child exits unstarted
    ::close(warm_.conn);
    ::close(warm_.pidfd);
    warm_ = WarmChild{};
    *cold_reason = in.message();
    return false;
  }
  if (Status go = StartWarmChild(&warm_); !go.ok()) {
    // The child never got its go byte: it exits without running anything.
    ::close(warm_.conn);
    ::close(warm_.pidfd);
    warm_ = WarmChild{};
    *cold_reason = go.message();
    return false;
  }
  start_note_ = WarmStartNote(warm_, spec.warm.user);
  return true;
}

void Supervisor::ReadWarm() {
  if (warm_.conn < 0 || trainer_status_) return;
  bool closed = false;
  if (std::optional<int> st = ReadWarmStatus(warm_.conn, &warm_buffer_, &closed)) {
    trainer_status_ = *st;
    return;
  }
  if (!closed) return;
  // The zygote died without a word: its child's parent-death signal
  // (SIGKILL) took the trainer along. Make sure, and wait for its end.
  ::syscall(SYS_pidfd_send_signal, warm_.pidfd, SIGKILL, nullptr, 0);
  ::kill(-trainer_, SIGKILL);
  pollfd pfd = {warm_.pidfd, POLLIN, 0};
  ::poll(&pfd, 1, 10000);
  trainer_status_ = SIGKILL;  // as a wait status: killed by signal 9
  late_log_line_ = "stoker-run: the warm interpreter (pid " + std::to_string(warm_.zygote_pid) +
                   ") died; the trainer was killed with it\n";
}

void Supervisor::BeginStop(EndState reason) {
  if (stop_reason_ || trainer_status_) return;
  stop_reason_ = reason;
  stop_at_ms_ = MonotonicMs();
  stop_signal_ = SIGTERM;
  ::kill(-trainer_, SIGTERM);
  if (grace_seconds_ <= 0) {
    stop_signal_ = SIGKILL;
    ::kill(-trainer_, SIGKILL);
  }
}

void Supervisor::ReapChildren() {
  // A warm trainer is the zygote's child: its status comes from ReadWarm.
  if (trainer_ > 0 && !trainer_status_ && warm_.pid < 0) {
    // Kill the rest of the group while the trainer's zombie still pins the
    // group id, so that the id cannot have been reused.
    siginfo_t info = {};
    if (::waitid(P_PID, trainer_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
      ::kill(-trainer_, SIGKILL);
      int status = 0;
      if (::waitpid(trainer_, &status, 0) == trainer_) trainer_status_ = status;
    }
  }
  int status = 0;
  pid_t p;
  while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (p == trainer_ && !trainer_status_) trainer_status_ = status;
  }
}

bool Supervisor::LockFileRemoved() const {
  struct stat st;
  return lock_fd_ >= 0 && ::fstat(lock_fd_, &st) == 0 && st.st_nlink == 0;
}

void Supervisor::Supervise() {
  const int64_t start_ms = MonotonicMs();
  // Limits past ~300 years are as good as none, and would overflow.
  auto to_ms = [](double seconds) { return static_cast<int64_t>(std::min(seconds, 1e10) * 1000); };
  const int64_t timeout_ms = timeout_seconds_ > 0 ? start_ms + to_ms(timeout_seconds_) : -1;
  const int64_t grace_ms = to_ms(grace_seconds_);
  ReapChildren();
  while (!trainer_status_) {
    int64_t now = MonotonicMs();
    if (timeout_ms >= 0 && now >= timeout_ms) BeginStop(EndState::kTimeout);
    if (stop_signal_ == SIGTERM && now >= stop_at_ms_ + grace_ms) {
      stop_signal_ = SIGKILL;
      ::kill(-trainer_, SIGKILL);
    }
    int64_t next = -1;
    if (timeout_ms >= 0 && !stop_reason_) next = timeout_ms;
    if (stop_signal_ == SIGTERM) next = stop_at_ms_ + grace_ms;
    // Wake at least every kOrphanCheckMs to notice a deleted replica directory.
    int wait_ms = static_cast<int>(
        std::clamp<int64_t>(next < 0 ? kOrphanCheckMs : next - now, 0, kOrphanCheckMs));
    pollfd pfds[2] = {{sfd_, POLLIN, 0}, {warm_.conn, POLLIN, 0}};
    int n = ::poll(pfds, warm_.conn >= 0 ? 2 : 1, wait_ms);
    if (!stop_reason_ && LockFileRemoved()) {
      // Someone deleted the replica directory: no daemon can see, cancel or
      // collect this replica any more, so it must not run on unobserved.
      Log("the replica directory " + dir_.string() + " was deleted; stopping the trainer");
      BeginStop(EndState::kCancelled);
    }
    if (n < 0 && errno != EINTR) {
      Log(Errno("poll"));
      ::kill(-trainer_, SIGKILL);  // cannot supervise: stop rather than lose track
    }
    if (DrainSignals()) BeginStop(EndState::kCancelled);
    ReapChildren();
    ReadWarm();
  }
}

void Supervisor::StartSampler(const LaunchSpec& spec) {
  if (spec.telemetry.interval_seconds <= 0) return;
  std::string visible;
  if (auto it = spec.env.find("CUDA_VISIBLE_DEVICES"); it != spec.env.end()) visible = it->second;
  std::vector<std::string> uuids;
  if (visible.find("GPU-") != std::string::npos) {
    for (const resources::Gpu& g : resources::DiscoverGpus(nullptr)) uuids.push_back(g.uuid);
  }
  sampler_ = std::make_unique<TelemetrySampler>(dir_ / telemetry::kTelemetryFile, spec.telemetry,
                                                VisibleGpuIndices(visible, uuids),
                                                warm_.pid > 0 ? warm_.pid : ::getpid(),
                                                /*include_root=*/warm_.pid > 0);
  if (container_) sampler_->AlsoSampleBelowPidIn(dir_ / "container.pid");
  if (cgroup_) sampler_->UseCgroup(&*cgroup_);
  sampler_->Start();
}

void Supervisor::KillEverythingLeft() {
  const int64_t give_up = MonotonicMs() + kCleanupLimitMs;
  // With a cgroup: every process the replica started, wherever it went and
  // whatever its environment, killed as a unit; the process-tree pass below
  // then only reaps. Without one (no root, no hierarchy): processes that
  // left our tree are found by the cookie they inherited (those that
  // dropped it escape: cgroup_note_ says so in the start note).
  std::optional<ProcessSweep> marked;
  if (cgroup_) {
    if (cgroup_->KillAll(kCleanupLimitMs) < 0) {
      Log("giving up on process(es) in cgroup " + cgroup_->name() + " that would not die");
    }
  } else {
    marked.emplace(cookie_);
  }
  while (true) {
    ReapChildren();
    std::vector<pid_t> left = Descendants(::getpid());
    int outside = marked ? marked->KillPass() : 0;
    if (left.empty() && outside == 0 && (!marked || marked->complete())) {
      // No process below us: nothing to reap either once waitpid says so.
      // Those killed outside our tree are reaped by others: wait for their
      // exits, so that none is alive once status.json says the replica ended.
      if (::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) {
        if (marked && !marked->WaitForExits(std::max<int64_t>(give_up - MonotonicMs(), 0)))
          Log("giving up on process(es) carrying " + cookie_ + " that would not die");
        return;
      }
    }
    if (trainer_ > 0) ::kill(-trainer_, SIGKILL);
    for (pid_t p : left) ::kill(p, SIGKILL);
    if (MonotonicMs() > give_up) {
      Log("giving up on " + std::to_string(left.size() + outside) +
          " process(es) of the replica that would not die");
      return;
    }
    // Wait for the next SIGCHLD (a death, or a reparented orphan dying), with
    // a short bound: a process forked after the scan shows up only there.
    pollfd pfd = {sfd_, POLLIN, 0};
    ::poll(&pfd, 1, 20);
    DrainSignals();
  }
}

int Supervisor::Finish() {
  if (cgroup_) {
    // Whatever a preparation step left (its own clean up ran), then the
    // cgroup itself.
    (void)cgroup_->KillAll(kCleanupLimitMs);
    if (Status r = cgroup_->Remove(); !r.ok()) Log(r.ToString());
  }
  // Every byte the trainer wrote is in output.log before status.json says
  // it ended, so whoever reads the log's tail on that signal sees the end.
  if (pump_) pump_->Finish(kLogDrainMs);
  outcome_.end_time_us = NowMicros();
  // A trainer stopped from outside (a cancel; the job's chief ended; a
  // retry) or by its timeout: its log says so on a line of its own, not
  // after whatever half line it was writing.
  if ((outcome_.state == EndState::kCancelled || outcome_.state == EndState::kTimeout) && log_ &&
      trainer_ >= 0) {
    Status w = log_->Write(std::string(log_->AtLineStart() ? "" : "\n") +
                           "stoker-run: " + DescribeOutcome(outcome_) + "\n");
    if (!w.ok()) Log(w.ToString());
  }
  if (!late_log_line_.empty() && log_) {
    Status w = log_->Write(late_log_line_);
    if (!w.ok()) Log(w.ToString());
  }
  if (outcome_.state == EndState::kLaunchFailed && log_) {
    Status w = log_->Write("stoker-run: " + outcome_.message + "\n");
    if (!w.ok()) Log(w.ToString());
  }
  Status s = WriteFileAtomic(dir_ / "status.json", FormatStatusJson(outcome_));
  if (!s.ok()) {
    Log(s.ToString());
    return 1;
  }
  return 0;
}

int Supervisor::Run() {
  supervisor_start_us_ = NowMicros();
  outcome_.start_time_us = supervisor_start_us_;

  // Signals are read from a signalfd; an inherited SIG_IGN for SIGCHLD would
  // make the kernel reap the trainer for us, so reset the dispositions first.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) {
    ::signal(sig, SIG_DFL);
    sigaddset(&mask, sig);
  }
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  sfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd_ < 0) {
    Log(Errno("signalfd"));
    return 1;
  }
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) Log(Errno("PR_SET_CHILD_SUBREAPER"));

  int exit_code = 0;
  if (!Claim(&exit_code)) return exit_code;
  if (Status s = CheckDirIsOurs(); !s.ok()) {
    // Nothing in DIR is read, nor the trainer started: another account could
    // have put anything there. Only status.json is written (a rename, which
    // replaces whatever is at the name).
    outcome_.message = s.message();
    return Finish();
  }

  // The log limits come from launch.json; a launch.json that cannot be read
  // is reported in a log with the default limits.
  Result<LaunchSpec> spec = LoadLaunch();
  log_ = std::make_unique<RotatingLog>(dir_, spec.ok() ? spec->log_limits : LogLimits{});
  if (Status s = log_->Open(); !s.ok()) {
    log_.reset();
    outcome_.message = s.message();
    return Finish();
  }
  null_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd_ < 0) {
    outcome_.message = Errno("cannot open /dev/null");
    return Finish();
  }
  if (!spec.ok()) {
    // Cancelled: stopped while the rewrite waited (the signal that did it
    // is still queued in sfd_).
    if (spec.status().code() == Code::kCancelled) outcome_.state = EndState::kCancelled;
    outcome_.message = spec.status().message();
    return Finish();
  }
  if (Status s = MakeTrainerDirs(*spec); !s.ok()) {
    outcome_.message = s.message();
    return Finish();
  }
  MakeCgroup(*spec);
  timeout_seconds_ = spec->timeout_seconds;
  grace_seconds_ = spec->grace_seconds;
  outcome_.timeout_seconds = timeout_seconds_;
  outcome_.grace_seconds = grace_seconds_;

  Result<std::vector<fs::path>> python_path = UnpackPackages(*spec);
  if (!python_path.ok()) {
    FailLaunch(python_path.status());
    return Finish();
  }
  if (DrainSignals()) {
    outcome_.state = EndState::kCancelled;
    return Finish();
  }
  if (spec->container) {
    // The daemon chose the engine on its own machine; a Slurm node may
    // have it elsewhere, or only the other one.
    replica::ContainerSpec& c = *spec->container;
    std::string engine = EngineOnThisNode(
        c.engine, [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0; });
    if (engine.empty()) {
      char host[256] = "?";
      ::gethostname(host, sizeof host - 1);
      outcome_.message = std::string("node ") + host + " has no container engine to run image " +
                         c.image + " (" + c.engine +
                         " is missing, and neither podman nor docker is in /usr/local/bin, "
                         "/usr/bin or /bin): install podman (apt-get install podman runc) on "
                         "every node that runs container jobs";
      return Finish();
    }
    if (engine != c.engine && log_) {
      Status w = log_->Write("stoker-run: this node has no " + c.engine +
                             "; the container runs "
                             "with " +
                             engine + "\n");
      if (!w.ok()) Log(w.ToString());
    }
    c.engine = engine;
  }
  // A preparation step that did not succeed ends the replica: cancelled, or
  // launch_failed with its message.
  auto stopped = [this](const Status& s) {
    if (s.code() == Code::kCancelled || cancel_seen_) {
      outcome_.state = EndState::kCancelled;
      return true;
    }
    if (!s.ok()) FailLaunch(s);
    return !s.ok();
  };
  if (spec->container && spec->container->pull && stopped(PullImage(*spec->container))) {
    return Finish();
  }
  if (spec->python_env) {
    std::vector<fs::path> roots = *python_path;
    if (stopped(PreparePythonEnv(*spec, roots, &*python_path))) return Finish();
  }

  if (spec->container) {
    container_ = spec->container;
    Result<LaunchSpec> run = ContainerLaunch(*spec, *python_path);
    if (!run.ok()) {
      FailLaunch(run.status());
      return Finish();
    }
    spec = std::move(run);
    python_path->clear();
  }
  StartTrainer(*spec, *python_path);
  SyncClaim();
  if (trainer_ < 0) return Finish();  // launch_failed, message set
  StartSampler(*spec);
  Supervise();
  if (sampler_) sampler_->Stop();
  KillEverythingLeft();
  RemoveContainer();
  const bool oom_killed = cgroup_ && cgroup_->OomKilled();

  int st = *trainer_status_;
  if (WIFEXITED(st)) {
    outcome_.state = EndState::kExited;
    outcome_.exit_code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    outcome_.state = EndState::kSignaled;
    outcome_.signal = WTERMSIG(st);
  }
  if (stop_reason_) {
    outcome_.state = *stop_reason_;
    outcome_.stop_signal = stop_signal_;
  } else if (oom_killed) {
    // As Slurm's cgroup plugin says it: which limit, and what to do.
    outcome_.oom_killed = true;
    outcome_.message = dir_.filename().string() + " used more than its " +
                       MemoryAmount(cgroup_->memory_limit()) +
                       (limits_.machine_type.empty() ? "" : " (" + limits_.machine_type + ")") +
                       " and the kernel killed it; ask for a larger machine type";
  } else if (container_ && outcome_.exit_code == 125) {
    // The engine's own failure (docker and podman both say 125): nothing of
    // the trainer ran. Its words are in the log just above.
    outcome_.state = EndState::kLaunchFailed;
    outcome_.permanent = true;
    outcome_.message = container_->engine + " could not run image " + container_->image +
                       " (exit 125; its words are in the replica's log). A missing image: "
                       "build it with `stoker images build -t " +
                       container_->image + " DIR` or import it with `stoker images import`";
  } else if (container_ && (outcome_.exit_code == 126 || outcome_.exit_code == 127)) {
    late_log_line_ = "stoker-run: the container's command could not be started (exit " +
                     std::to_string(*outcome_.exit_code) + "): is it installed in image " +
                     container_->image + " and on the image's PATH?\n";
  }
  return Finish();
}

}  // namespace

int RunSupervisor(const std::filesystem::path& dir, SupervisorHooks hooks) {
  Supervisor supervisor(dir, std::move(hooks));
  return supervisor.Run();
}

}  // namespace stoker::runner
