#include "replica/launch.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/image_reference.h"
#include "common/time.h"

namespace stoker::runner {
std::vector<std::string> BuildTrainerEnv(
    const std::map<std::string, std::string>& env,
    const std::vector<std::filesystem::path>& python_path_prefix) {
  std::map<std::string, std::string> merged = env;
  if (!python_path_prefix.empty()) {
    std::string pp;
    for (const auto& dir : python_path_prefix) {
      if (!pp.empty()) pp += ':';
      pp += dir.string();
    }
    auto it = merged.find("PYTHONPATH");
    if (it != merged.end() && !it->second.empty()) pp += ':' + it->second;
    merged["PYTHONPATH"] = pp;
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> ExecCandidates(const std::string& program, const std::string& path_var) {
  if (program.find('/') != std::string::npos) return {program};
  std::string path = path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var;
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    if (dir.empty()) dir = ".";
    out.push_back(dir + "/" + program);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string EngineOnThisNode(const std::string& wanted,
                             const std::function<bool(const std::string&)>& executable) {
  if (executable(wanted)) return wanted;
  const std::string name = std::filesystem::path(wanted).filename().string();
  for (const std::string& n : {name, std::string(name == "docker" ? "podman" : "docker")}) {
    for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
      std::string candidate = std::string(dir) + "/" + n;
      if (executable(candidate)) return candidate;
    }
  }
  return "";
}

namespace {
// The image as the engine gets it: its parsed form, after "--" so that it
// is never read as an option or a transport (common/image_reference.h).
// launch.json's container is parsed before anything is run
// (ParseContainerSpec), so a name that is no reference here is a broken
// invariant: stoker-run stops rather than hand it to root's engine.
std::string EngineImage(const std::string& image) {
  Result<ImageReference> ref = ParseImageReference(image, "launch.json: container.image");
  if (!ref.ok()) {
    std::fprintf(stderr, "stoker-run: %s\n", ref.status().message().c_str());
    std::abort();
  }
  return ref->ToString();
}
}  // namespace

std::vector<std::string> ContainerPullArgv(const ContainerSpec& c) {
  std::vector<std::string> a = {c.engine, "pull"};
  if (!c.tls_verify && std::filesystem::path(c.engine).filename() == "podman") {
    a.push_back("--tls-verify=false");
  }
  a.insert(a.end(), {"--", EngineImage(c.image)});
  return a;
}

std::vector<std::string> ContainerRunArgv(const ContainerRun& run) {
  const ContainerSpec& c = *run.container;
  std::vector<std::string> a = {c.engine,
                                "run",
                                "--rm",
                                "--name",
                                c.name,
                                "--network=" + run.network,
                                c.pull_if_missing ? "--pull=missing" : "--pull=never"};
  bool podman = std::filesystem::path(c.engine).filename() == "podman";
  if (c.pull_if_missing && !c.tls_verify && podman) a.push_back("--tls-verify=false");
  // Output goes to the supervisor's pipe directly, not through a log file.
  if (podman) a.push_back("--log-driver=passthrough");
  if (podman && !run.conmon_pid_file.empty()) {
    a.push_back("--conmon-pidfile=" + run.conmon_pid_file.string());
  }
  a.insert(a.end(), run.ulimits.begin(), run.ulimits.end());
  if (!run.cgroup_parent.empty()) a.push_back("--cgroup-parent=" + run.cgroup_parent);
  if (run.memory_bytes > 0) {
    a.push_back("--memory=" + std::to_string(run.memory_bytes));
    a.push_back("--memory-swap=" + std::to_string(run.memory_bytes));
  }
  if (!run.env_file.empty()) a.push_back("--env-file=" + run.env_file.string());
  for (const std::string& kv : run.env_inline) a.insert(a.end(), {"--env", kv});
  if (run.run_as && run.user_namespace) {
    a.insert(a.end(), {"--uidmap=0:" + std::to_string(run.run_as->uid) + ":1",
                       "--gidmap=0:" + std::to_string(run.run_as->gid) + ":1", "--user=0:0",
                       "--cap-drop=all", "--security-opt=no-new-privileges"});
  } else if (run.run_as) {
    a.push_back("--user=" + std::to_string(run.run_as->uid) + ":" +
                std::to_string(run.run_as->gid));
    for (uint32_t g : run.run_as->extra_gids) a.push_back("--group-add=" + std::to_string(g));
    a.insert(a.end(), {"--cap-drop=all", "--security-opt=no-new-privileges"});
  }
  for (const auto& m : c.mounts) a.push_back("--volume=" + m.string() + ":" + m.string());
  for (const auto& m : c.mounts_read_only) {
    a.push_back("--volume=" + m.string() + ":" + m.string() + ":ro");
  }
  for (const auto& b : c.binds)
    a.push_back("--volume=" + b.source.string() + ":" + b.target.string());
  if (!run.gpus.empty() && run.gpu_passing == GpuPassing::kCdi) {
    for (int g : run.gpus) a.push_back("--device=nvidia.com/gpu=" + std::to_string(g));
  } else if (!run.gpus.empty() && run.gpu_passing == GpuPassing::kDockerGpus) {
    std::string list;
    for (int g : run.gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
    a.push_back("--gpus=\"device=" + list + "\"");
  }
  if (c.entrypoint) {
    // A JSON array: every element one argv string, as Docker reads it.
    a.push_back("--entrypoint=" + nlohmann::json(*c.entrypoint).dump());
  }
  a.insert(a.end(), {"--", EngineImage(c.image)});
  a.insert(a.end(), c.args.begin(), c.args.end());
  return a;
}

std::vector<std::string> ContainerUlimitFlags() {
  rlimit nofile = {}, nproc = {};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  ::getrlimit(RLIMIT_NPROC, &nproc);
  auto cap = [](rlim_t v, rlim_t most) {
    return std::to_string(v == RLIM_INFINITY || v > most ? most : v);
  };
  return {"--ulimit=nofile=" + cap(nofile.rlim_cur, 1 << 20) + ":" + cap(nofile.rlim_max, 1 << 20),
          "--ulimit=nproc=" + cap(nproc.rlim_cur, 32768) + ":" + cap(nproc.rlim_max, 32768)};
}

std::string ContainerEnvFile(const std::map<std::string, std::string>& env,
                             std::vector<std::string>* inline_pairs) {
  std::string out;
  for (const auto& [k, v] : env) {
    if (v.find('\n') != std::string::npos || v.find('\r') != std::string::npos) {
      inline_pairs->push_back(k + "=" + v);
    } else {
      out += k + "=" + v + "\n";
    }
  }
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

namespace {
std::string DescribeEnd(const Outcome& o);
}  // namespace

std::string DescribeOutcome(const Outcome& o) {
  if (o.oom_killed) return o.message + " (" + DescribeEnd(o) + ")";
  return DescribeEnd(o);
}

namespace {
std::string DescribeEnd(const Outcome& o) {
  auto stopped = [&o]() {
    std::string s = "stopped with " + SignalName(o.stop_signal);
    if (o.stop_signal == SIGKILL) s += " after " + FormatDuration(o.grace_seconds) + " grace";
    return s;
  };
  switch (o.state) {
    case EndState::kExited:
      return "exited with code " + std::to_string(o.exit_code.value_or(-1));
    case EndState::kSignaled: {
      int sig = o.signal.value_or(0);
      return "killed by signal " + std::to_string(sig) + " (" + SignalName(sig) + ")";
    }
    case EndState::kTimeout:
      return "timed out after " + FormatDuration(o.timeout_seconds) + "; " + stopped();
    case EndState::kCancelled:
      if (o.stop_signal == 0) return "cancelled before the trainer started";
      return "cancelled; " + stopped();
    case EndState::kLaunchFailed:
      return "launch failed: " + o.message;
  }
  return o.message;
}
}  // namespace

std::string FormatStatusJson(const Outcome& o) {
  return replica::FormatStatus({o.state, o.exit_code, o.signal, o.start_time_us, o.end_time_us,
                                DescribeOutcome(o), o.oom_killed, o.permanent});
}

}  // namespace stoker::runner
