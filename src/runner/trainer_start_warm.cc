// The warm start (trainer_start.h, warm_start.h): the trainer forked by a
// zygote, or forked here (plain) when it cannot be, with the reason.
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>

#include "runner/trainer_start.h"
#include "runner/warm_start.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// The isolated view the trainer must join, made by the same
// Isolation::Enter a cold trainer runs, in a helper process forked here; its
// user and mount namespaces are returned as fds (-1, -1 when Enter left the
// view as it is: mode off, or auto where it is impossible).
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

class WarmStart : public TrainerStart {
 public:
  explicit WarmStart(const ReplicaServices& services) : services_(services) {}
  ~WarmStart() override {
    for (int fd : {warm_.conn, warm_.pidfd, warm_.go}) {
      if (fd >= 0) ::close(fd);
    }
  }

  Result<StartedTrainer> Start(const LaunchSpec& spec, const TrainerExec& exec) override {
    std::string why_cold;
    if (StartWarm(spec, exec, &why_cold)) {
      return StartedTrainer{warm_.pid, /*own_child=*/false, WarmStartNote(warm_, spec.warm.user)};
    }
    STOKER_ASSIGN_OR_RETURN(pid_t pid, ForkTrainer(services_, exec));
    return StartedTrainer{pid, /*own_child=*/true, "cold start: " + why_cold};
  }

  int EndFd() const override { return warm_.conn; }

  // The zygote's connection: the child's wait status, or its end with the
  // zygote's.
  std::optional<int> ReadEnd(std::string* late_log_line) override {
    if (warm_.conn < 0) return std::nullopt;
    bool closed = false;
    if (std::optional<int> st = ReadWarmStatus(warm_.conn, &buffer_, &closed)) return st;
    if (!closed) return std::nullopt;
    // The zygote died without a word: its child's parent-death signal
    // (SIGKILL) took the trainer along. Make sure, and wait for its end.
    ::syscall(SYS_pidfd_send_signal, warm_.pidfd, SIGKILL, nullptr, 0);
    ::kill(-warm_.pid, SIGKILL);
    pollfd pfd = {warm_.pidfd, POLLIN, 0};
    ::poll(&pfd, 1, 10000);
    *late_log_line = "stoker-run: the warm interpreter (pid " + std::to_string(warm_.zygote_pid) +
                     ") died; the trainer was killed with it\n";
    return SIGKILL;  // as a wait status: killed by signal 9
  }

 private:
  // True once the zygote's child runs (warm_ set); false with *why_cold
  // when the trainer must start cold instead (nothing of it ran).
  bool StartWarm(const LaunchSpec& spec, const TrainerExec& exec, std::string* why_cold);
  // Fills the zygote's identity and the request's account and view; false
  // with *why_cold when it cannot run this trainer.
  bool PrepareRequest(const LaunchSpec& spec, const TrainerExec& exec, WarmRequest* req,
                      std::string* why_cold);
  // Lets go of a zygote's child that never got its go byte (it then exits
  // without running anything).
  void AbandonChild() {
    ::close(warm_.conn);
    ::close(warm_.pidfd);
    warm_ = WarmChild{};
  }

  ReplicaServices services_;
  WarmChild warm_;      // the zygote's child once it runs (pid -1 until then)
  std::string buffer_;  // what ReadWarmStatus has read of the connection
};

bool WarmStart::PrepareRequest(const LaunchSpec& spec, const TrainerExec& exec, WarmRequest* req,
                               std::string* why_cold) {
  Result<WarmInvocation> inv = ParseWarmInvocation(spec.argv);
  if (!inv.ok()) {
    *why_cold = inv.status().message();
    return false;
  }
  req->invocation = *inv;
  for (const std::string& kv : exec.env) {
    size_t eq = kv.find('=');
    req->env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  *why_cold = WarmEnvProblem(req->env);
  if (why_cold->empty()) *why_cold = StartupVarProblem(req->env, spec.warm.defaults);
  if (!why_cold->empty()) return false;
  ZygoteIdentity& id = req->zygote;
  id.python_path = TrustedInterpreter(exec.candidates, spec.warm.python, why_cold);
  if (id.python_path.empty()) return false;
  id.preload = spec.warm.preload;
  id.defaults = spec.warm.defaults;
  id.user = spec.warm.user;
  req->cwd = exec.work_dir;
  req->stdin_fd = services_.null_fd;
  req->out_fd = exec.out_fd;
  req->umask = exec.umask;
  id.uid = ::geteuid();
  id.gid = ::getegid();
  if (spec.run_as) {
    // The zygote runs as the trainer's account, never as root for another's.
    id.uid = spec.run_as->uid;
    id.gid = spec.run_as->gid;
    id.groups.assign(exec.groups.begin(), exec.groups.end());
    req->switch_account = ::geteuid() == 0;  // else it is stoker-run's own (launch.cc checks)
  }
  if (spec.isolation.mode != IsolationMode::kOff) {
    // A zygote of stoker-run's own account joins the view stoker-run makes;
    // one of another account joins only a view that account made itself.
    Result<std::pair<int, int>> view = id.uid == ::geteuid()
                                           ? PrepareIsolatedView(*exec.isolation)
                                           : PrepareAccountView(spec.isolation, id);
    if (!view.ok()) {
      *why_cold = view.status().message();
      return false;
    }
    req->userns_fd = view->first;
    req->mntns_fd = view->second;
  }
  return true;
}

bool WarmStart::StartWarm(const LaunchSpec& spec, const TrainerExec& exec, std::string* why_cold) {
  WarmRequest req;
  if (!PrepareRequest(spec, exec, &req, why_cold)) return false;
  Result<WarmChild> child = ForkWarm(spec.warm, ZygoteKey(req.zygote), req);
  for (int fd : {req.userns_fd, req.mntns_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (!child.ok()) {
    *why_cold = child.status().message();
    return false;
  }
  warm_ = *child;
  // The child runs nothing before its go byte: moved now, nothing it
  // starts can be outside the replica's cgroup.
  const ReplicaCgroup* cgroup = services_.cgroup;
  if (Status in = cgroup ? cgroup->Add(warm_.pid) : OkStatus(); !in.ok()) {
    ::close(warm_.go);  // the child exits unstarted
    AbandonChild();
    *why_cold = in.message();
    return false;
  }
  if (Status go = StartWarmChild(&warm_); !go.ok()) {
    // The child never got its go byte: it exits without running anything.
    AbandonChild();
    *why_cold = go.message();
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<TrainerStart> MakeWarmStart(const ReplicaServices& services) {
  return std::make_unique<WarmStart>(services);
}

}  // namespace stoker::runner
