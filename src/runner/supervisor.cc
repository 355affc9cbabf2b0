#include "runner/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
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
#include <utility>
#include <vector>

#include "common/files.h"
#include "common/time.h"
#include "replica/launch.h"
#include "replica/replica_cgroup.h"
#include "replica/replica_processes.h"
#include "runner/log_rotation.h"
#include "runner/replica_python_env.h"
#include "runner/telemetry_sampler.h"
#include "runner/trainer_start.h"

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
    // A cgroup made ahead that the replica did not take (claimed by another
    // supervisor, or ended before its cgroup): nothing ever ran in it.
    if (hooks_.cgroup_ahead) (void)hooks_.cgroup_ahead->Remove();
    pump_.reset();  // before the log it writes to
    for (int fd : {sfd_, lock_fd_, claim_fd_, null_fd_}) {
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
  // Runs the preparation steps (the start's, then the requirement
  // environment's) and returns the spec of the process to supervise; unset
  // when the replica ended (outcome_ set: cancelled or launch_failed).
  std::optional<LaunchSpec> Prepare(LaunchSpec spec, std::vector<fs::path>* python_path);
  // Starts the supervised process through start_; trainer_ stays -1 when
  // the launch failed (outcome_ says why).
  void StartTrainer(const LaunchSpec& spec, const std::vector<fs::path>& python_path);
  // Reads a trainer's end that does not come from waitpid (start_->ReadEnd).
  void ReadEnd();
  // outcome_ from the trainer's wait status, how it was stopped, and what
  // the start or the cgroup tell of its end.
  void RecordEnd();
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
  // How the trainer starts, chosen once launch.json is read.
  std::unique_ptr<TrainerStart> start_;
  // False for a trainer that is not our child (a zygote's): its end comes
  // from start_->ReadEnd, never from waitpid.
  bool trainer_own_child_ = true;
  std::string late_log_line_;  // written to output.log after the trainer's last byte
  // A cancel read from sfd_ outside DrainSignals (while pip ran).
  bool cancel_seen_ = false;
  // DescribePythonEnv of the requirement environment, for the start note.
  std::string env_note_;
  // The replica's cgroup (replica_cgroup.h), made before anything of the
  // replica runs; unset where none can be made (cgroup_note_ says why, and
  // the clean up falls back to the process tree and the cookie).
  std::optional<ReplicaCgroup> cgroup_;
  std::string cgroup_note_;
  replica::LimitsSpec limits_;
  // Makes cgroup_ for the replica (its memory limit from launch.json).
  void MakeCgroup(const LaunchSpec& spec);
  // What the starts and preparation steps borrow (trainer_start.h).
  ReplicaServices Services();
};

void Supervisor::MakeCgroup(const LaunchSpec& spec) {
  limits_ = spec.limits;
  const std::string name = ReplicaCgroupName(cookie_);
  if (hooks_.cgroup_ahead) {
    std::optional<ReplicaCgroup> ahead = std::exchange(hooks_.cgroup_ahead, std::nullopt);
    Status renamed = ahead->Rename(name, spec.limits.memory_bytes);
    if (renamed.ok()) {
      cgroup_ = std::move(ahead);
      return;
    }
    LogDiagnostic(renamed.message() + "; making the replica's cgroup instead");
    (void)ahead->Remove();
  }
  Result<ReplicaCgroup> cg =
      ReplicaCgroup::Create(ThisProcessCgroupLayout(), name, spec.limits.memory_bytes);
  if (!cg.ok()) {
    cgroup_note_ = "not contained in a cgroup (" + cg.status().message() +
                   "): its processes are found by process tree and environment instead";
    LogDiagnostic(cgroup_note_);
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
    LogDiagnostic(ErrnoMessage("cannot open " + lock.string()));
    *exit_code = 1;
    return false;
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      *exit_code = 0;  // another supervisor is alive and owns the replica
    } else {
      LogDiagnostic(ErrnoMessage("cannot lock " + lock.string()));
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
      LogDiagnostic(ErrnoMessage("cannot create " + claim.string()));
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
  if (!synced) LogDiagnostic(ErrnoMessage("cannot sync " + (dir_ / "claim").string()));
}

Result<LaunchSpec> Supervisor::LoadLaunch() {
  // The executor's file: believed only as this account's own (16 MiB is
  // far above what the API lets a job's command and env reach).
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadOwnFileNoFollow(dir_, "launch.json", 16 << 20));
  STOKER_ASSIGN_OR_RETURN(LaunchSpec spec, ParseLaunchSpec(text));
  if (hooks_.rewrite) {
    STOKER_RETURN_IF_ERROR(hooks_.rewrite(spec));
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
  if (dfd < 0) return Internal(ErrnoMessage("cannot open " + dir_.string()));
  Status out = OkStatus();
  for (const char* name : {"work", "hypertune"}) {
    fs::path path = dir_ / name;
    if (::mkdirat(dfd, name, 0700) != 0 && errno != EEXIST) {
      out = Internal(ErrnoMessage("cannot create " + path.string()));
      break;
    }
    int fd = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      out =
          FailedPrecondition(ErrnoMessage("cannot open " + path.string() + " (a link or a file?)"));
      break;
    }
    bool given = !spec.run_as || ::fchown(fd, spec.run_as->uid, spec.run_as->gid) == 0;
    given = given && ::fchmod(fd, 0700) == 0;
    ::close(fd);
    if (!given) {
      out = Internal(ErrnoMessage("cannot hand " + path.string() + " to the trainer's account"));
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

bool Supervisor::CancelRequested() {
  signalfd_siginfo si;
  while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    if (si.ssi_signo != SIGCHLD) cancel_seen_ = true;
  }
  return cancel_seen_ || LockFileRemoved();
}

void Supervisor::FailLaunch(const Status& s) {
  outcome_.message = s.message();
  outcome_.permanent = s.code() == Code::kInvalidArgument || s.code() == Code::kNotFound ||
                       s.code() == Code::kFailedPrecondition;
}

// The daemon sees the replica as preparing, not stuck (no start limit).
void Supervisor::SetPreparing(const std::string& note) {
  Status s =
      WriteFileAtomic(dir_ / replica::kPreparingFile,
                      replica::FormatPreparingInfo({note, NowMicros()}), Durability::kNoSync);
  if (!s.ok()) LogDiagnostic(s.ToString());
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
  // A warm trainer is the zygote's child: its status comes from ReadEnd.
  if (trainer_ > 0 && !trainer_status_ && trainer_own_child_) {
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
    const int end_fd = start_->EndFd();
    pollfd pfds[2] = {{sfd_, POLLIN, 0}, {end_fd, POLLIN, 0}};
    int n = ::poll(pfds, end_fd >= 0 ? 2 : 1, wait_ms);
    if (!stop_reason_ && LockFileRemoved()) {
      // Someone deleted the replica directory: no daemon can see, cancel or
      // collect this replica any more, so it must not run on unobserved.
      LogDiagnostic("the replica directory " + dir_.string() +
                    " was deleted; stopping the trainer");
      BeginStop(EndState::kCancelled);
    }
    if (n < 0 && errno != EINTR) {
      LogDiagnostic(ErrnoMessage("poll"));
      ::kill(-trainer_, SIGKILL);  // cannot supervise: stop rather than lose track
    }
    if (DrainSignals()) BeginStop(EndState::kCancelled);
    ReapChildren();
    ReadEnd();
  }
}

void Supervisor::StartSampler(const LaunchSpec& spec) {
  if (spec.telemetry.interval_seconds <= 0) return;
  sampler_ = std::make_unique<TelemetrySampler>(dir_ / telemetry::kTelemetryFile, spec.telemetry,
                                                spec.gpu_indexes,
                                                trainer_own_child_ ? ::getpid() : trainer_,
                                                /*include_root=*/!trainer_own_child_);
  start_->AddToSampler(*sampler_);
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
      LogDiagnostic("giving up on process(es) in cgroup " + cgroup_->name() +
                    " that would not die");
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
          LogDiagnostic("giving up on process(es) carrying " + cookie_ + " that would not die");
        return;
      }
    }
    if (trainer_ > 0) ::kill(-trainer_, SIGKILL);
    for (pid_t p : left) ::kill(p, SIGKILL);
    if (MonotonicMs() > give_up) {
      LogDiagnostic("giving up on " + std::to_string(left.size() + outside) +
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
    if (Status r = cgroup_->Remove(); !r.ok()) LogDiagnostic(r.ToString());
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
    if (!w.ok()) LogDiagnostic(w.ToString());
  }
  if (!late_log_line_.empty() && log_) {
    Status w = log_->Write(late_log_line_);
    if (!w.ok()) LogDiagnostic(w.ToString());
  }
  if (outcome_.state == EndState::kLaunchFailed && log_) {
    Status w = log_->Write("stoker-run: " + outcome_.message + "\n");
    if (!w.ok()) LogDiagnostic(w.ToString());
  }
  Status s = WriteFileAtomic(dir_ / "status.json", FormatStatusJson(outcome_));
  if (!s.ok()) {
    LogDiagnostic(s.ToString());
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
    LogDiagnostic(ErrnoMessage("signalfd"));
    return 1;
  }
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    LogDiagnostic(ErrnoMessage("PR_SET_CHILD_SUBREAPER"));

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
    outcome_.message = ErrnoMessage("cannot open /dev/null");
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
  start_ = MakeTrainerStart(*spec, Services(), hooks_.no_warm_reason);
  std::optional<LaunchSpec> supervised = Prepare(std::move(*spec), &*python_path);
  if (!supervised) return Finish();
  StartTrainer(*supervised, *python_path);
  SyncClaim();
  if (trainer_ < 0) return Finish();  // launch_failed, message set
  StartSampler(*supervised);
  Supervise();
  if (sampler_) sampler_->Stop();
  KillEverythingLeft();
  start_->CleanUp();
  RecordEnd();
  return Finish();
}

ReplicaServices Supervisor::Services() {
  ReplicaServices services;
  services.dir = dir_;
  services.cookie = cookie_;
  services.null_fd = null_fd_;
  services.log = log_.get();
  services.cgroup = cgroup_ ? &*cgroup_ : nullptr;
  services.cancel_requested = [this] { return CancelRequested(); };
  services.set_preparing = [this](const std::string& note) { SetPreparing(note); };
  return services;
}

std::optional<LaunchSpec> Supervisor::Prepare(LaunchSpec spec, std::vector<fs::path>* python_path) {
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
  if (stopped(start_->Prepare(spec))) return std::nullopt;
  if (spec.python_env) {
    std::vector<fs::path> roots = *python_path;
    if (stopped(PrepareReplicaPythonEnv(Services(), spec, roots, python_path, &env_note_))) {
      return std::nullopt;
    }
  }
  Result<LaunchSpec> supervised = start_->SupervisedSpec(std::move(spec), python_path);
  if (!supervised.ok()) {
    FailLaunch(supervised.status());
    return std::nullopt;
  }
  return std::move(*supervised);
}

void Supervisor::StartTrainer(const LaunchSpec& spec, const std::vector<fs::path>& python_path) {
  // Everything the child needs is prepared here: between fork and exec it
  // only makes system calls.
  Result<TrainerExec> exec = PrepareTrainerExec(spec, python_path, dir_ / "work");
  if (!exec.ok()) return FailLaunch(exec.status());
  // The trainer writes into a pipe that the log pump copies into the
  // rotating output.log; both ends are close-on-exec (dup2 clears it on the
  // trainer's 1 and 2).
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    outcome_.message = ErrnoMessage("cannot create the trainer's output pipe");
    return;
  }
  ::fcntl(pipe_fds[0], F_SETPIPE_SZ, kPipeBytes);
  exec->out_fd = pipe_fds[1];

  if (hooks_.before_fork) hooks_.before_fork();
  outcome_.start_time_us = NowMicros();
  Result<StartedTrainer> started = start_->Start(spec, *exec);
  ::close(pipe_fds[1]);
  if (!started.ok()) {
    outcome_.message = started.status().message();
    ::close(pipe_fds[0]);
    return;
  }
  const pid_t pid = started->pid;
  trainer_ = pid;
  trainer_own_child_ = started->own_child;
  RotatingLog* log = log_.get();
  pump_ = std::make_unique<LogPump>(pipe_fds[0],
                                    [log](std::string_view data) { return log->Write(data); });
  // Also here, so that kill(-pid) works from now on (a warm trainer made
  // its own session before it started).
  if (trainer_own_child_) ::setpgid(pid, pid);

  // The requirement environment's line goes into the job's events too.
  std::string note = started->note;
  for (const std::string* more : {&env_note_, &cgroup_note_}) {
    if (!more->empty()) note += (note.empty() ? "" : "; ") + *more;
  }
  Status s = WriteFileAtomic(dir_ / replica::kTrainerFile,
                             replica::FormatTrainerInfo({pid, pid, outcome_.start_time_us, note}));
  if (!s.ok()) LogDiagnostic(s.ToString());
  s = WriteFileAtomic(dir_ / replica::kRunnerFile,
                      replica::FormatRunnerInfo({::getpid(), supervisor_start_us_}));
  if (!s.ok()) LogDiagnostic(s.ToString());
}

void Supervisor::ReadEnd() {
  if (trainer_status_) return;
  if (std::optional<int> st = start_->ReadEnd(&late_log_line_)) trainer_status_ = *st;
}

void Supervisor::RecordEnd() {
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
  } else {
    start_->ExplainEnd(&outcome_, &late_log_line_);
  }
}

}  // namespace

int RunSupervisor(const std::filesystem::path& dir, SupervisorHooks hooks) {
  Supervisor supervisor(dir, std::move(hooks));
  return supervisor.Run();
}

}  // namespace stoker::runner
