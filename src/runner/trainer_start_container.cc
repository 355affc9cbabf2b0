// The container start (trainer_start.h): the engine's client (`engine run
// ...`) is the supervised process, started plain; the trainer runs in the
// image under the replica's cgroup.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/time.h"
#include "replica/replica_processes.h"
#include "runner/python_env.h"
#include "runner/trainer_start.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// How long `engine rm` may take before the supervisor gives up on it.
constexpr int64_t kRemoveLimitMs = 30000;

// The PATH the engine's client runs with.
constexpr char kEnginePath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

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

bool IsEngine(const std::string& engine, const char* name) {
  return fs::path(engine).filename() == name;
}

class ContainerStart : public TrainerStart {
 public:
  ContainerStart(const ReplicaServices& services, std::string cold_note)
      : services_(services), cold_note_(std::move(cold_note)) {}

  // The engine on this node, then the image pulled when launch.json asks.
  Status Prepare(LaunchSpec& spec) override {
    STOKER_RETURN_IF_ERROR(FindEngine(*spec.container));
    if (!spec.container->pull) return OkStatus();
    return PullImage(*spec.container);
  }

  // For launch.json's "container": writes DIR/container.env and returns the
  // spec that runs `engine run ...` as the supervised process: the engine's
  // client runs as the supervisor with a clean environment of its own (the
  // job's variables reach only the container, never the engine, whose own
  // settings they could otherwise name), and the trainer's account,
  // isolation and GPUs go into the container's flags instead.
  Result<LaunchSpec> SupervisedSpec(LaunchSpec spec, std::vector<fs::path>* python_path) override;

  Result<StartedTrainer> Start(const LaunchSpec& /*spec*/, const TrainerExec& exec) override {
    STOKER_ASSIGN_OR_RETURN(pid_t pid, ForkTrainer(services_, exec));
    std::string note = cold_note_;
    for (const std::string* more : {&pull_note_, &container_note_}) {
      if (!more->empty()) note += (note.empty() ? "" : "; ") + *more;
    }
    return StartedTrainer{pid, /*own_child=*/true, note};
  }

  void AddToSampler(TelemetrySampler& sampler) const override {
    sampler.AlsoSampleBelowPidIn(services_.dir / "container.pid");
  }

  // `engine rm -f` of the replica's container, so that none outlives the
  // supervisor (the client's --rm does it on a normal end; not after a
  // SIGKILL of the client).
  void CleanUp() override;

  void ExplainEnd(Outcome* outcome, std::string* late_log_line) const override;

 private:
  // The daemon chose the engine on its own machine; a Slurm node may have
  // it elsewhere, or only the other one. Sets c.engine to this node's.
  Status FindEngine(replica::ContainerSpec& c) const;
  // `engine pull` (its output into output.log), the replica preparing
  // meanwhile. Cancelled when a cancel came; FailedPrecondition with the
  // engine's words and the fix when the pull fails.
  Status PullImage(const replica::ContainerSpec& c);
  // Writes the job's variables for the container, 0600.
  Status WriteEnvFile(ContainerRun& run, const std::map<std::string, std::string>& env) const;

  ReplicaServices services_;
  std::string cold_note_;
  replica::ContainerSpec container_;  // set by SupervisedSpec
  std::string pull_note_;             // "pulled image X in 2.1 s"
  std::string container_note_;        // "the image's root is nobody (uid 65534) on this host"
};

Status ContainerStart::FindEngine(replica::ContainerSpec& c) const {
  std::string engine = EngineOnThisNode(
      c.engine, [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0; });
  if (engine.empty()) {
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    return Unavailable(std::string("node ") + host + " has no container engine to run image " +
                       c.image + " (" + c.engine +
                       " is missing, and neither podman nor docker is in /usr/local/bin, "
                       "/usr/bin or /bin): install podman (apt-get install podman runc) on "
                       "every node that runs container jobs");
  }
  if (engine != c.engine) {
    services_.WriteOutput("stoker-run: this node has no " + c.engine +
                          "; the container runs with " + engine + "\n");
  }
  c.engine = engine;
  return OkStatus();
}

Status ContainerStart::PullImage(const replica::ContainerSpec& c) {
  services_.set_preparing("pulling image " + c.image);
  const int64_t start_ms = MonotonicMs();
  std::vector<std::string> env = {std::string("PATH=") + kEnginePath, "LANG=C.UTF-8"};
  for (const char* keep : {"HOME", "XDG_RUNTIME_DIR", "http_proxy", "https_proxy", "no_proxy",
                           "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}) {
    if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
  }
  ScopedFds join{services_.CgroupJoinFds()};
  Result<CapturedRun> run =
      RunCapturing(ContainerPullArgv(c), env, services_.dir, services_.cancel_requested, join.fds);
  ::unlink((services_.dir / replica::kPreparingFile).c_str());
  if (!run.ok()) return run.status();
  services_.WriteOutput("stoker-run: " + c.engine + " pull " + c.image + "\n" + run->output);
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
  services_.WriteOutput("stoker-run: " + pull_note_ + "\n");
  return OkStatus();
}

Result<LaunchSpec> ContainerStart::SupervisedSpec(LaunchSpec spec,
                                                  std::vector<fs::path>* python_path) {
  container_ = *spec.container;
  const replica::ContainerSpec& c = container_;
  std::map<std::string, std::string> env;
  for (const std::string& kv : BuildTrainerEnv(spec.env, *python_path)) {
    size_t eq = kv.find('=');
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  python_path->clear();
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
  run.user_namespace = spec.run_as && c.user_namespace && IsEngine(c.engine, "podman");
  if (run.user_namespace) {
    for (const char* k : {"HOME", "USER", "LOGNAME"}) env.erase(k);
    container_note_ = "the image's root is " + spec.run_as->user + " (uid " +
                      std::to_string(spec.run_as->uid) + ") on this host";
  }
  if (const std::vector<int>& gpus = spec.gpu_indexes; !gpus.empty()) {
    std::string host;
    for (size_t i = 0; i < gpus.size(); ++i) host += (i ? "," : "") + std::to_string(gpus[i]);
    run.gpu_passing = IsEngine(c.engine, "docker")
                          ? GpuPassing::kDockerGpus
                          : (HaveNvidiaCdi() ? GpuPassing::kCdi : GpuPassing::kNone);
    if (run.gpu_passing == GpuPassing::kNone) {
      return FailedPrecondition(
          "the replica has GPU(s) " + host + " but " + c.engine +
          " has no way to pass them: no CDI spec for NVIDIA GPUs in /etc/cdi or /var/run/cdi; "
          "install nvidia-container-toolkit and run `nvidia-ctk cdi generate "
          "--output=/etc/cdi/nvidia.yaml`, or run this image's jobs without a container");
    }
    run.gpus = gpus;
    // Inside, the container sees only its GPUs, numbered from 0.
    std::string inside;
    for (size_t i = 0; i < gpus.size(); ++i) inside += (i ? "," : "") + std::to_string(i);
    env["CUDA_VISIBLE_DEVICES"] = inside;
  }
  run.ulimits = ContainerUlimitFlags();
  if (const ReplicaCgroup* cgroup = services_.cgroup) {
    // The container's processes under the replica's cgroup (podman with the
    // cgroupfs manager; docker decides in its daemon), held to its memory.
    if (IsEngine(c.engine, "podman")) run.cgroup_parent = cgroup->ContainerParent();
    run.memory_bytes = cgroup->memory_limit();
  }
  run.conmon_pid_file = services_.dir / "container.pid";
  STOKER_RETURN_IF_ERROR(WriteEnvFile(run, env));

  LaunchSpec out = std::move(spec);
  out.argv = ContainerRunArgv(run);
  out.env = {{"PATH", kEnginePath}, {std::string(kReplicaCookieVar), services_.cookie}};
  for (const char* keep : {"HOME", "XDG_RUNTIME_DIR", "LANG"}) {
    if (const char* v = std::getenv(keep)) out.env[keep] = v;
  }
  out.run_as.reset();
  out.isolation = {};
  out.container.reset();
  return out;
}

Status ContainerStart::WriteEnvFile(ContainerRun& run,
                                    const std::map<std::string, std::string>& env) const {
  run.env_file = services_.dir / "container.env";
  // Made 0600 from the start (the job's variables may be secrets, and the
  // trainer's group may list DIR); DIR is ours alone, so no link is planted.
  const std::string text = ContainerEnvFile(env, &run.env_inline);
  int fd =
      ::open(run.env_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                 ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!written) return Internal(ErrnoMessage("cannot write " + run.env_file.string()));
  return OkStatus();
}

void ContainerStart::CleanUp() {
  std::vector<std::string> args = {container_.engine, "rm", "--force", container_.name};
  if (IsEngine(container_.engine, "podman")) args.insert(args.begin() + 3, "--time=0");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(services_.null_fd, STDIN_FILENO);
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
  const int64_t give_up = MonotonicMs() + kRemoveLimitMs;
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (MonotonicMs() > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      LogDiagnostic("giving up on `" + container_.engine + " rm` of container " + container_.name);
      return;
    }
    ::usleep(10000);
  }
}

void ContainerStart::ExplainEnd(Outcome* outcome, std::string* late_log_line) const {
  if (outcome->exit_code == 125) {
    // The engine's own failure (docker and podman both say 125): nothing of
    // the trainer ran. Its words are in the log just above.
    outcome->state = EndState::kLaunchFailed;
    outcome->permanent = true;
    outcome->message = container_.engine + " could not run image " + container_.image +
                       " (exit 125; its words are in the replica's log). A missing image: "
                       "build it with `stoker images build -t " +
                       container_.image + " DIR` or import it with `stoker images import`";
  } else if (outcome->exit_code == 126 || outcome->exit_code == 127) {
    *late_log_line = "stoker-run: the container's command could not be started (exit " +
                     std::to_string(*outcome->exit_code) + "): is it installed in image " +
                     container_.image + " and on the image's PATH?\n";
  }
}

}  // namespace

std::unique_ptr<TrainerStart> MakeContainerStart(const ReplicaServices& services,
                                                 std::string cold_note) {
  return std::make_unique<ContainerStart>(services, std::move(cold_note));
}

}  // namespace stoker::runner
