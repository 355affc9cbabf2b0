// What the executor is told to run for one attempt of a placed job: a pure
// function of the job, its stored allocation and what the controller
// resolved beforehand (the output directory, each pool's environment and
// package files, each replica's metric file). No I/O, no clock: the
// controller does the file-system work (making the output directory,
// nfsMounts links, checking staged packages) and then calls BuildJobLaunch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "exec/environments.h"
#include "exec/executor.h"
#include "scheduler/placement.h"
#include "server/preemption.h"
#include "spec/custom_job.h"
#include "store/store.h"

namespace stoker::server {

// Daemon settings every replica of every job gets.
struct LaunchSettings {
  double grace_seconds = 10;  // SIGTERM -> SIGKILL on cancel
  uint64_t log_max_bytes = 64ull << 20;
  int log_max_files = 3;
  // Where trainers reach the API ("" = nowhere), and the secret behind
  // trial push keys: a trial's replicas get STOKER_METRICS_URL.
  std::string api_url;
  std::string push_secret;
  double telemetry_seconds = 5;  // the replica's resource sampler (0 = off)
  // Warm starts (docs/warm-starts.md): off unless `enabled`.
  struct Warm {
    bool enabled = false;
    std::vector<std::string> preload;
    double idle_seconds = 600;
    std::string dir;       // zygote sockets: under the data dir, hidden from trainers
    std::string zygote;    // stoker_zygote.py among the Python helpers
    int max_per_user = 2;  // live warm interpreters per submitting user on a node
    int max_total = 8;     // ... and in all
  } warm;
  // The `preemption:` section, for IsPreemptible: JobLaunch::preemptible
  // tells executors whose own scheduler preempts (Slurm) where to put the
  // job. Left default, the label and SPOT still count; the
  // preemptible_below band does not.
  config::PreemptionConfig preemption;
  // Bind-mounted into every container at the same path (docs/containers.md):
  // the buckets read-write; the environments and Python helpers read only.
  std::vector<std::string> container_mounts;
  std::vector<std::string> container_mounts_read_only;
  // Bind-mounted at another path: the buckets at /gcs (gcs_mounts.h).
  std::vector<replica::BindSpec> container_binds;
  // containers.user_namespace: a trainer account's container runs with the
  // image's root mapped to that account (replica::ContainerSpec).
  bool container_user_namespace = true;
  // Requirement environments (docs/python-packages.md): a replica with
  // packages gets launch.json's "python_env" with these; empty cache_dir:
  // none (its packages' requirements are not installed).
  struct PythonPackages {
    std::string cache_dir;  // <data_dir>/envs/pip
    std::vector<std::string> wheelhouse;
    std::string index_url;
  } python_packages;
  // This daemon's tag: the first 8 hex digits of the FNV-1a hash of its
  // absolute data directory (InstanceTag). Names that live outside the data
  // directory (containers) end in it, so that two daemons on one machine
  // never name, and so never remove, each other's.
  std::string instance;
};

// InstanceTag(data_dir): see LaunchSettings::instance.
std::string InstanceTag(const std::string& absolute_data_dir);

// The label by which a job opts in ("true") or a trial out ("false").
inline constexpr char kWarmStartLabel[] = "stoker-warm-start";

struct LaunchInputs {
  const store::JobRecord* rec = nullptr;  // id, attempt, project, location, trial, allocation
  const spec::CustomJob* job = nullptr;
  // What each replica asks for (by name), for executors that place replicas.
  const std::vector<scheduler::ReplicaRequest>* requests = nullptr;
  std::string output_dir;                           // the job's base output directory, made
  std::vector<exec::Environment> environments;      // by pool index
  std::vector<std::vector<std::string>> packages;   // by pool index: local .tar.gz paths
  std::map<std::string, std::string> metric_files;  // by replica name: CLOUD_ML_HP_METRIC_FILE
  std::function<std::string(const std::string&)> rewrite_uris;  // gs:// -> local paths
  LaunchSettings settings;
};

// One ReplicaLaunch per replica of `rec->allocation["replicas"]` (each
// {name, pool, index, port, gpus[, gpu_shares]}), in that order, with its
// command and environment (exec::BuildReplicaCommand), CLUSTER_SPEC
// addresses from the allocation's ports, a fractional GPU's share and memory
// limit as STOKER_GPU_FRACTION / STOKER_GPU_MEMORY_LIMIT_BYTES /
// XLA_PYTHON_CLIENT_MEM_FRACTION, STOKER_ATTEMPT (rec->attempt + 1) and, on
// a restart, STOKER_RESTART_REASON (rec->restart_reason), STOKER_METRICS_URL
// for trials, packages (with "python_env" when settings.python_packages
// has a cache_dir: the interpreter's, or "python3" in a container, which
// stoker-run refuses when the packages declare requirements), timeout,
// grace, log limits, the replica's resource ask, and "warm" for study trials and jobs labelled
// stoker-warm-start: "true" (not for a trial labelled "false") when settings.warm is enabled; the
// job's labels and priority, and whether it is preemptible (IsPreemptible under
// settings.preemption, enabled or not). InvalidArgument from BuildReplicaCommand (an expansion over
// its bounds).
Result<exec::JobLaunch> BuildJobLaunch(const LaunchInputs& in);

}  // namespace stoker::server
