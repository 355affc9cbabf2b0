// The plain start (trainer_start.h): fork here, exec the trainer.
#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "runner/trainer_start.h"

namespace stoker::runner {
namespace {

// What the forked child reads: prepared before the fork, so that the child
// only makes system calls.
struct ChildArgs {
  const TrainerExec* exec;
  std::vector<char*> argv;  // null-terminated
  std::vector<char*> env;   // null-terminated
  std::vector<int> join_fds;
  pid_t supervisor;
  int null_fd;
};

// In the child: becomes run_as (groups, then gid, then uid: after setuid
// the others are no longer ours to set), each step checked, root gone for
// good. Returns the step that failed, null when all went well.
const char* SwitchAccount(const RunAs& run_as, const std::vector<gid_t>& groups) {
  if (::setgroups(groups.size(), groups.data()) != 0) return "setgroups";
  if (::setgid(run_as.gid) != 0) return "setgid";
  if (::setuid(run_as.uid) != 0) return "setuid";
  if (::getuid() != run_as.uid || ::geteuid() != run_as.uid || ::getgid() != run_as.gid ||
      ::getegid() != run_as.gid) {
    return "checking the ids after setuid";
  }
  if (run_as.uid != 0 && ::setuid(0) == 0) return "checking that root cannot be regained";
  return nullptr;
}

// The child between fork and exec; never returns (exit 127 with a line on
// its output when a step fails).
[[noreturn]] void RunChild(const ChildArgs& a) {
  const TrainerExec& exec = *a.exec;
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != a.supervisor) ::_exit(127);  // the supervisor died before prctl
  // Into the replica's cgroup before anything else: what it starts stays there.
  if (!ReplicaCgroup::JoinFromChild(a.join_fds)) {
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
  const char* isolation_error = exec.isolation->Enter(STDERR_FILENO);
  ::dup2(a.null_fd, STDIN_FILENO);
  ::dup2(exec.out_fd, STDOUT_FILENO);
  ::dup2(exec.out_fd, STDERR_FILENO);
  if (isolation_error) {
    dprintf(STDERR_FILENO, "stoker-run: %s\n", isolation_error);
    ::_exit(127);
  }
  if (const std::optional<RunAs>& run_as = exec.run_as) {
    if (const char* step = SwitchAccount(*run_as, exec.groups)) {
      dprintf(STDERR_FILENO, "stoker-run: cannot run the trainer as %s (uid %u gid %u): %s: %s\n",
              run_as->user.c_str(), run_as->uid, run_as->gid, step, std::strerror(errno));
      ::_exit(127);
    }
    ::umask(exec.umask);
    // A change of credentials clears the parent-death signal: set it again.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != a.supervisor) ::_exit(127);
  }
  const char* dir = exec.work_dir.c_str();
  if (::chdir(dir) != 0) {
    dprintf(STDERR_FILENO, "stoker-run: cannot enter %s: %s%s\n", dir, std::strerror(errno),
            exec.run_as ? " (the trainer runs as another account: every directory above the data "
                          "dir must be searchable by it, e.g. use /var/lib/stoker, not /root/...)"
                        : "");
    ::_exit(127);
  }
  int err = ENOENT;
  bool denied = false;
  for (const auto& c : exec.candidates) {
    ::execve(c.c_str(), a.argv.data(), a.env.data());
    err = errno;
    if (err == EACCES) denied = true;
    if (err != ENOENT && err != ENOTDIR && err != EACCES) break;
  }
  if (denied && (err == ENOENT || err == ENOTDIR)) err = EACCES;
  dprintf(STDERR_FILENO, "stoker-run: cannot execute '%s': %s\n", a.argv[0], std::strerror(err));
  ::_exit(127);
}

class PlainStart : public TrainerStart {
 public:
  PlainStart(const ReplicaServices& services, std::string note)
      : services_(services), note_(std::move(note)) {}

  Result<StartedTrainer> Start(const LaunchSpec& /*spec*/, const TrainerExec& exec) override {
    STOKER_ASSIGN_OR_RETURN(pid_t pid, ForkTrainer(services_, exec));
    return StartedTrainer{pid, /*own_child=*/true, note_};
  }

 private:
  ReplicaServices services_;
  std::string note_;
};

}  // namespace

Result<pid_t> ForkTrainer(const ReplicaServices& services, const TrainerExec& exec) {
  ChildArgs a{&exec, {}, {}, {}, ::getpid(), services.null_fd};
  for (const auto& s : exec.argv) a.argv.push_back(const_cast<char*>(s.c_str()));
  a.argv.push_back(nullptr);
  for (const auto& e : exec.env) a.env.push_back(const_cast<char*>(e.c_str()));
  a.env.push_back(nullptr);
  ScopedFds join{services.CgroupJoinFds()};
  a.join_fds = join.fds;
  pid_t pid = ::fork();
  if (pid == 0) RunChild(a);
  if (pid < 0) return Internal(ErrnoMessage("cannot fork the trainer"));
  return pid;
}

std::unique_ptr<TrainerStart> MakePlainStart(const ReplicaServices& services,
                                             std::string cold_note) {
  return std::make_unique<PlainStart>(services, std::move(cold_note));
}

}  // namespace stoker::runner
