// ExecutorRegistry: executors chosen by a config string (the config key
// `executor`), each built by a factory that gets everything it needs at
// construction, like Slurm's plugins. The daemon fills one ExecutorConfig and
// asks the registry for the kind the config names; nothing is set on an
// executor after it is built.
//
// Built-in kinds: "local" (LocalExecutor) and "slurm" (SlurmExecutor).
// A factory may do the start-up work its executor needs (the local one
// probes whether stoker-run can isolate trainers, the Slurm one loads this
// daemon's instance id) and logs what trainers will get.
//
// Not thread-safe; used once at start-up.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/slurm_executor.h"
#include "exec/trainer_account.h"

namespace stoker::exec {

// What the daemon gives every executor factory.
struct ExecutorConfig {
  std::string kind = "local";        // config key `executor`
  std::filesystem::path data_dir;    // stokerd's data dir (absolute)
  std::filesystem::path runner;      // the stoker-run binary (absolute)
  TrainerAccounts trainer_accounts;  // which account runs a job's trainers; empty: the daemon's
  // job_isolation: the mode and the paths hidden and kept for every trainer
  // (the data dir hidden, the buckets kept, ...). A factory adds what its
  // executor needs (Slurm: its shared dir is hidden too).
  IsolationPlan isolation;
  // For "slurm": the `slurm` config section (partition, account, qos,
  // preemptible_partition, preemptible_qos, shared_dir (empty: data_dir),
  // sbatch_extra_args, grace_seconds). Its
  // data_dir, runner, trainer_accounts and isolation are taken from above;
  // an empty instance is loaded or made in <data_dir>/slurm-instance.
  SlurmOptions slurm;
};

using ExecutorFactory =
    std::function<Result<std::unique_ptr<Executor>>(const ExecutorConfig& config)>;

class ExecutorRegistry {
 public:
  // A registry with the built-in kinds, "local" and "slurm".
  static ExecutorRegistry WithBuiltins();

  // Adds (or replaces) the factory for `kind`.
  void Register(const std::string& kind, ExecutorFactory factory);

  // The executor config.kind names. InvalidArgument naming the known kinds
  // for an unknown one; else whatever its factory returns.
  Result<std::unique_ptr<Executor>> Create(const ExecutorConfig& config) const;

  std::vector<std::string> Kinds() const;

 private:
  std::map<std::string, ExecutorFactory> factories_;
};

// The built-in factories (WithBuiltins registers them).
Result<std::unique_ptr<Executor>> MakeLocalExecutor(const ExecutorConfig& config);
Result<std::unique_ptr<Executor>> MakeSlurmExecutor(const ExecutorConfig& config);

}  // namespace stoker::exec
