// What every kind of start shares (trainer_start.h): the exec a fork needs,
// the services' helpers, and the choice of the kind.
#include "runner/trainer_start.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stoker::runner {

namespace fs = std::filesystem;

void LogDiagnostic(const std::string& line) {
  std::string l = "stoker-run[" + std::to_string(::getpid()) + "]: " + line + "\n";
  ssize_t n = ::write(STDERR_FILENO, l.data(), l.size());
  (void)n;
}

std::string ErrnoMessage(const std::string& what) { return what + ": " + std::strerror(errno); }

void ReplicaServices::WriteOutput(const std::string& text) const {
  if (!log) return;
  Status w = log->Write(text);
  if (!w.ok()) LogDiagnostic(w.ToString());
}

std::vector<int> ReplicaServices::CgroupJoinFds() const {
  return cgroup ? cgroup->OpenJoinFds() : std::vector<int>{};
}

ScopedFds::~ScopedFds() {
  for (int fd : fds) ::close(fd);
}

void WarmUpGroupLookup() {
  struct passwd pw = {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0 || !found) return;
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  (void)::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n);
}

Result<TrainerExec> PrepareTrainerExec(const LaunchSpec& spec,
                                       const std::vector<fs::path>& python_path,
                                       const fs::path& work_dir) {
  TrainerExec exec;
  exec.argv = spec.argv;
  exec.env = BuildTrainerEnv(spec.env, python_path);
  auto path_it = spec.env.find("PATH");
  exec.candidates = ExecCandidates(spec.argv[0], path_it == spec.env.end() ? "" : path_it->second);
  exec.work_dir = work_dir.string();
  exec.run_as = spec.run_as;
  if (const std::optional<RunAs>& run_as = spec.run_as) {
    if (::geteuid() != 0 && ::geteuid() != run_as->uid) {
      return FailedPrecondition("cannot run the trainer as " + run_as->user + " (uid " +
                                std::to_string(run_as->uid) + "): stoker-run is not root");
    }
    int n = 64;
    exec.groups.resize(n);
    while (::getgrouplist(run_as->user.c_str(), run_as->gid, exec.groups.data(), &n) < 0) {
      exec.groups.resize(n);
    }
    exec.groups.resize(n);
    for (uint32_t g : run_as->extra_gids) {
      if (std::find(exec.groups.begin(), exec.groups.end(), g) == exec.groups.end()) {
        exec.groups.push_back(g);
      }
    }
    // What it makes in a bucket stays writable by the bucket group.
    if (!run_as->extra_gids.empty()) exec.umask = 002;
  }
  exec.isolation = std::make_unique<Isolation>(
      spec.isolation, spec.run_as ? spec.run_as->uid == 0 : ::geteuid() == 0);
  return exec;
}

std::unique_ptr<TrainerStart> MakeTrainerStart(const LaunchSpec& spec,
                                               const ReplicaServices& services,
                                               const std::string& no_warm_reason) {
  if (spec.container) {
    std::string why_cold = !no_warm_reason.empty()
                               ? no_warm_reason
                               : "the trainer runs in a container (" + spec.container->image + ")";
    return MakeContainerStart(services, spec.warm.requested ? "cold start: " + why_cold : "");
  }
  if (!spec.warm.requested) return MakePlainStart(services, "");
  std::string why_cold = !no_warm_reason.empty() ? no_warm_reason : spec.warm.cold_reason;
  if (why_cold.empty()) return MakeWarmStart(services);
  return MakePlainStart(services, "cold start: " + why_cold);
}

}  // namespace stoker::runner
