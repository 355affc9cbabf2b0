#include "exec/executor_registry.h"

#include <spdlog/spdlog.h>

#include "exec/local_executor.h"

namespace stoker::exec {

namespace fs = std::filesystem;

ExecutorRegistry ExecutorRegistry::WithBuiltins() {
  ExecutorRegistry r;
  r.Register("local", MakeLocalExecutor);
  r.Register("slurm", MakeSlurmExecutor);
  return r;
}

void ExecutorRegistry::Register(const std::string& kind, ExecutorFactory factory) {
  factories_[kind] = std::move(factory);
}

std::vector<std::string> ExecutorRegistry::Kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, f] : factories_) out.push_back(kind);
  return out;
}

Result<std::unique_ptr<Executor>> ExecutorRegistry::Create(const ExecutorConfig& config) const {
  auto it = factories_.find(config.kind);
  if (it == factories_.end()) {
    std::string known;
    for (const std::string& k : Kinds()) known += (known.empty() ? "" : ", ") + k;
    return InvalidArgument("executor: unknown kind '" + config.kind + "'; known kinds: " + known);
  }
  return it->second(config);
}

Result<std::unique_ptr<Executor>> MakeLocalExecutor(const ExecutorConfig& config) {
  // Two supervisors wait for launches: a job's replica, or the next trial
  // of a study, starts without an exec (supervisor_pool.h); a job with more
  // replicas starts the rest the slow way while the pool refills.
  constexpr size_t kStandbySupervisors = 2;
  auto local = std::make_unique<LocalExecutor>(LocalOptions{config.data_dir, config.runner,
                                                            config.trainer_accounts,
                                                            config.isolation, kStandbySupervisors});
  IsolationMode mode = config.isolation.mode;
  if (mode != IsolationMode::kOff) {
    // Probed once, so that the log says what trainers get.
    Status probe = local->ProbeIsolation();
    if (probe.ok()) {
      spdlog::info(
          "job_isolation: {}: each trainer sees, of {}, only its own job's directory, the "
          "buckets and the interpreter links",
          replica::IsolationModeName(mode), config.data_dir.string());
    } else if (mode == IsolationMode::kAuto) {
      spdlog::warn(
          "job_isolation: auto, but stoker-run cannot isolate trainers on this machine, so they "
          "run without it and can read what their account can in {}: {}",
          config.data_dir.string(), probe.message());
    } else {
      spdlog::error(
          "job_isolation: required, but stoker-run cannot isolate trainers on this machine, so "
          "every replica will fail to start: {}",
          probe.message());
    }
  }
  return std::unique_ptr<Executor>(std::move(local));
}

Result<std::unique_ptr<Executor>> MakeSlurmExecutor(const ExecutorConfig& config) {
  SlurmOptions so = config.slurm;
  if (so.instance.empty()) {
    STOKER_ASSIGN_OR_RETURN(so.instance, LoadOrCreateSlurmInstance(config.data_dir));
  }
  if (so.shared_dir.empty()) so.shared_dir = config.data_dir;
  so.data_dir = config.data_dir;
  so.runner = config.runner;
  so.trainer_accounts = config.trainer_accounts;
  so.isolation = config.isolation;
  if (fs::path shared = fs::absolute(so.shared_dir);
      so.isolation.mode != IsolationMode::kOff && shared != config.data_dir) {
    so.isolation.hide.push_back(shared);
  }
  spdlog::info("executor: slurm (jobs under {}, stoker-run {}, instance {})",
               (so.shared_dir / "jobs").string(), so.runner.string(), so.instance);
  if (so.isolation.mode != IsolationMode::kOff) {
    spdlog::info("job_isolation: {}: stoker-run applies it on the node of each task{}",
                 replica::IsolationModeName(so.isolation.mode),
                 so.isolation.mode == IsolationMode::kAuto
                     ? " where that node allows it (else it says so in the replica's runner.log)"
                     : "; a node that cannot fails the replica");
  }
  return std::unique_ptr<Executor>(std::make_unique<SlurmExecutor>(std::move(so)));
}

}  // namespace stoker::exec
