// stoker-run: the replica supervisor. See README.md and supervisor.h.
//
//   stoker-run [--detach] --replica-dir DIR
//   stoker-run --slurm --job-dir DIR      (one Slurm task; slurm_task.h)
//   stoker-run --standby                  (waits for DIR on stdin; stokerd's
//                                          exec/supervisor_pool.h)
//
// With --detach the command returns as soon as the supervisor process exists
// (double fork + setsid, supervisor reparented to init in its own session,
// its stdout/stderr appended to DIR/runner.log). Nothing slow happens before
// the forks: the launching daemon waits only for the short-lived middle
// process.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/files.h"
#include "replica/replica_cgroup.h"
#include "resources/nvml.h"
#include "runner/isolation.h"
#include "runner/slurm_task.h"
#include "runner/supervisor.h"
#include "runner/telemetry_sampler.h"
#include "runner/trainer_start.h"

namespace {

constexpr char kUsage[] =
    "usage: stoker-run [--detach] --replica-dir DIR\n"
    "       stoker-run --standby [PADDING]   (DIR on stdin: stokerd's waiting supervisors)\n"
    "       stoker-run --slurm --job-dir DIR   (inside a Slurm step: one task per replica)\n";

void OutputToRunnerLog(const std::string& dir);

// Turns the calling process into the detached supervisor; returns only in
// the grandchild. The original process exits 0 once the grandchild is forked.
void Detach(const std::string& dir) {
  pid_t middle = ::fork();
  if (middle < 0) {
    std::perror("stoker-run: fork");
    std::exit(1);
  }
  if (middle > 0) {
    int status = 0;
    while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  ::setsid();
  pid_t supervisor = ::fork();
  if (supervisor < 0) ::_exit(1);
  if (supervisor > 0) ::_exit(0);
  OutputToRunnerLog(dir);
}

// The supervisor's descriptors: nothing inherited from its starter but
// stdin from /dev/null and stdout/stderr appended to DIR/runner.log. Exits 1
// when they cannot be had.
void OutputToRunnerLog(const std::string& dir) {
  ::close_range(3, ~0U, 0);
  int in = ::open("/dev/null", O_RDONLY);
  std::string log = dir + "/runner.log";
  // Root appending in a directory the trainer's account owns: never through
  // a link (O_NOFOLLOW; a hard link has a second name), never a FIFO.
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644);
  struct stat st = {};
  if (out >= 0 && (::fstat(out, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)) ::_exit(1);
  if (in < 0 || out < 0) ::_exit(1);
  ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  if (in > STDERR_FILENO) ::close(in);
  if (out > STDERR_FILENO) ::close(out);
}

// `stoker-run --standby` (stokerd's SupervisorPool, exec/supervisor_pool.h):
// waits for a replica directory on stdin, a pipe only stokerd writes: one
// absolute path, then end of file. Returns it; or "" with `exit_code` 0 when
// the pipe ends empty (stokerd is gone or needs no more standbys), 2 on
// anything else.
std::string AwaitReplicaDir(int* exit_code) {
  std::string dir;
  char buf[512];
  *exit_code = 2;
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "";
    if (n == 0) break;
    dir.append(buf, static_cast<size_t>(n));
    if (dir.size() > PATH_MAX) return "";
  }
  if (dir.empty()) *exit_code = 0;
  if (dir.empty() || dir[0] != '/' || dir.find('\0') != std::string::npos) return "";
  return dir;
}

// Makes /proc/self/cmdline read `stoker-run --replica-dir DIR`, as a
// supervisor started for DIR does (ps, pgrep -f and the operators who use
// them find a replica's supervisor by its directory): written over the
// arguments after argv[0], which stokerd pads for it with spaces.
void ShowReplicaDirInArgv(int argc, char** argv, const std::string& dir) {
  if (argc < 2) return;
  char* begin = argv[1];
  char* end = argv[argc - 1] + std::strlen(argv[argc - 1]) + 1;
  std::string shown = std::string("--replica-dir") + '\0' + dir + '\0';
  if (shown.size() > static_cast<size_t>(end - begin)) return;
  std::memcpy(begin, shown.data(), shown.size());
  std::memset(begin + shown.size(), 0, static_cast<size_t>(end - begin) - shown.size());
}

// A standby supervisor: what does not depend on the replica is done before
// the wait (the cgroup layout, the group lookup's modules, a cgroup made
// ahead under StandbyCgroupName), then it waits for its replica directory.
int RunStandby(int argc, char** argv) {
  namespace runner = stoker::runner;
  const runner::CgroupLayout& layout = runner::ThisProcessCgroupLayout();
  runner::WarmUpGroupLookup();
  runner::RemoveStaleStandbyCgroups(layout);
  runner::SupervisorHooks hooks;
  if (auto cg = runner::ReplicaCgroup::Create(layout, runner::StandbyCgroupName(::getpid()), 0);
      cg.ok()) {
    hooks.cgroup_ahead = std::move(*cg);
  }
  int exit_code = 0;
  std::string dir = AwaitReplicaDir(&exit_code);
  if (dir.empty()) {
    if (hooks.cgroup_ahead) (void)hooks.cgroup_ahead->Remove();
    return exit_code;
  }
  ShowReplicaDirInArgv(argc, argv, dir);
  OutputToRunnerLog(dir);
  return runner::RunSupervisor(dir, std::move(hooks));
}

std::string Env(const char* name, const char* fallback = nullptr) {
  const char* v = std::getenv(name);
  if ((!v || !*v) && fallback) v = std::getenv(fallback);
  return v ? v : "";
}

int EnvInt(const char* name, const char* fallback = nullptr) {
  return std::atoi(Env(name, fallback).c_str());
}

// A Slurm hostlist ("n[1-3],gpu7") as host names, by `scontrol show hostnames`.
std::vector<std::string> ExpandHostlist(const std::string& list) {
  if (list.find_first_of("[,") == std::string::npos) return {list};
  std::vector<std::string> hosts;
  std::string cmd = "scontrol show hostnames '" + list + "'";
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, p)) {
      std::string h = line;
      while (!h.empty() && std::isspace(static_cast<unsigned char>(h.back()))) h.pop_back();
      if (!h.empty()) hosts.push_back(h);
    }
    ::pclose(p);
  }
  return hosts;
}

// True when a signal that stops the supervisor (SIGTERM, SIGINT, SIGHUP)
// is pending: the supervisor blocks them and reads them later.
bool StopPending() {
  sigset_t pending;
  if (::sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1 ||
         sigismember(&pending, SIGHUP) == 1;
}

// One task of `srun stoker-run --slurm --job-dir DIR`: find this task's
// replica in DIR/slurm.json and supervise it with the Slurm placement.
int RunSlurmTask(const std::string& job_dir) {
  namespace runner = stoker::runner;
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "stoker-run --slurm: %s\n", why.c_str());
    return 1;
  };
  if (Env("SLURM_JOB_ID").empty() || Env("SLURM_PROCID").empty()) {
    return fail("SLURM_JOB_ID/SLURM_PROCID are not set: run this under srun");
  }
  auto text = stoker::ReadFile(std::filesystem::path(job_dir) / "slurm.json");
  if (!text.ok()) return fail(text.status().message());
  auto intent = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (intent.is_discarded() || !intent.contains("replicas") || !intent["replicas"].is_array()) {
    return fail(job_dir + "/slurm.json: no \"replicas\" list");
  }
  std::vector<std::string> replicas = intent["replicas"].get<std::vector<std::string>>();

  runner::SlurmTask task;
  task.job_id = std::atoll(Env("SLURM_JOB_ID").c_str());
  task.procid = EnvInt("SLURM_PROCID");
  task.localid = EnvInt("SLURM_LOCALID");
  task.ntasks = EnvInt("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
  task.hosts = ExpandHostlist(Env("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"));
  auto per_node =
      runner::ParseTasksPerNode(Env("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"));
  if (!per_node.ok()) return fail(per_node.status().message());
  task.tasks_per_node = *per_node;
  // GPUs only when Slurm bound some; a CUDA_VISIBLE_DEVICES merely inherited
  // from the submitting daemon's environment does not count.
  if (!Env("SLURM_STEP_GPUS", "SLURM_JOB_GPUS").empty()) {
    task.gpus = Env("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS");
    // Slurm's list is the one read here: the supervisor gets it typed.
    std::vector<std::string> uuids;
    if (task.gpus.find("GPU-") != std::string::npos) {
      for (const stoker::resources::Gpu& g : stoker::resources::DiscoverGpus(nullptr)) {
        uuids.push_back(g.uuid);
      }
    }
    task.gpu_indexes = runner::VisibleGpuIndices(task.gpus, uuids);
  }
  auto replica = runner::SlurmReplica(task, replicas);
  if (!replica.ok()) return fail(replica.status().message());
  std::fprintf(stderr, "stoker-run --slurm: task %d of Slurm job %lld is %s\n", task.procid,
               static_cast<long long>(task.job_id), replica->c_str());
  std::fflush(stderr);
  ::close_range(3, ~0U, 0);
  // Runs after the claim, with the supervisor's stop signals blocked (they
  // wait in its signalfd): reserve a port, exchange ports with the other
  // tasks, then build the environment. A stop while waiting returns
  // Cancelled, and the supervisor ends the replica as cancelled before any
  // trainer starts. The reservation is held until right before the
  // trainer's fork (after the packages are unpacked), then released for the
  // trainer to bind.
  const std::filesystem::path port_dir = runner::SlurmPortDir(job_dir, task.job_id);
  auto held = std::make_shared<std::optional<runner::PortReservation>>();
  runner::SupervisorHooks hooks;
  hooks.rewrite = [task, replicas, port_dir, held](runner::LaunchSpec& spec) -> stoker::Status {
    STOKER_ASSIGN_OR_RETURN(runner::PortReservation reservation, runner::PortReservation::Bind());
    STOKER_RETURN_IF_ERROR(runner::PublishPort(port_dir, task.procid, reservation.port()));
    *held = std::move(reservation);
    STOKER_ASSIGN_OR_RETURN(
        std::vector<int> ports,
        runner::AwaitPorts(port_dir, task.ntasks, runner::kSlurmPortWaitSeconds, StopPending));
    runner::SlurmTask placed = task;
    placed.ports = std::move(ports);
    STOKER_ASSIGN_OR_RETURN(spec.env,
                            runner::SlurmTaskEnv(spec.env, spec.cluster, replicas, placed));
    spec.gpu_indexes = placed.gpu_indexes;
    return stoker::OkStatus();
  };
  hooks.before_fork = [held] { held->reset(); };
  hooks.no_warm_reason =
      "the Slurm executor starts trainers cold (Slurm kills processes outside its job step)";
  return runner::RunSupervisor(std::filesystem::path(job_dir) / *replica, std::move(hooks));
}

}  // namespace

int main(int argc, char** argv) {
  // stokerd's start-up check (isolation.h): exit 0 when trainers can be
  // isolated here, else 1 and why on stdout.
  if (argc == 3 && std::strcmp(argv[1], "--probe-isolation") == 0) {
    stoker::Status s = stoker::runner::ProbeIsolation(argv[2]);
    if (!s.ok()) std::printf("%s\n", s.message().c_str());
    return s.ok() ? 0 : 1;
  }
  // What this supervisor writes is what stokerd believes, only while no
  // other account may write it: never looser than 022, whatever it was
  // started with (the trainer gets 022, or 002 with the bucket group).
  ::umask(::umask(0) | 022);
  if ((argc == 2 || argc == 3) && std::strcmp(argv[1], "--standby") == 0) {
    return RunStandby(argc, argv);
  }
  bool detach = false, slurm = false;
  std::string dir, job_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--detach") {
      detach = true;
    } else if (a == "--replica-dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a.rfind("--replica-dir=", 0) == 0) {
      dir = a.substr(std::strlen("--replica-dir="));
    } else if (a == "--slurm") {
      slurm = true;
    } else if (a == "--job-dir" && i + 1 < argc) {
      job_dir = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "stoker-run: unexpected argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (slurm) {
    if (job_dir.empty() || detach || !dir.empty()) {
      std::fprintf(stderr, "stoker-run: --slurm takes --job-dir DIR and nothing else\n%s", kUsage);
      return 2;
    }
    return RunSlurmTask(job_dir);
  }
  if (dir.empty()) {
    std::fprintf(stderr, "stoker-run: --replica-dir is required\n%s", kUsage);
    return 2;
  }
  if (detach) {
    Detach(dir);
    // A daemon should not pin the launcher's working directory.
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(dir, ec);
    if (!ec && ::chdir("/") == 0) dir = abs.string();
  } else {
    // Descriptors leaked by whoever started us (stokerd's listening socket,
    // its database) must neither reach the trainer nor be held open by us.
    ::close_range(3, ~0U, 0);
  }
  return stoker::runner::RunSupervisor(dir);
}
