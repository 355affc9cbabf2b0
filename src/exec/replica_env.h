// The environment and command line of one replica (DESIGN.md §5,
// reference/vertex.md §3). Pure: a function of the job, the replica's place
// in it and paths chosen by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "replica/cluster_env.h"
#include "spec/custom_job.h"

namespace stoker::exec {

struct ReplicaPlace {
  int pool = 0;
  int index = 0;
  std::vector<int> gpus;  // indexes for CUDA_VISIBLE_DEVICES
};

// "workerpool<pool>-<index>", the replica's name in logs and CLUSTER_SPEC.
using replica::ReplicaName;

struct ReplicaEnvInput {
  std::string job_id;
  std::string trial_id;  // "" outside hyperparameter tuning
  std::string project;
  std::string location;
  const spec::CustomJobSpec* spec = nullptr;
  ReplicaPlace place;
  // host:port of every replica, by pool then index (for CLUSTER_SPEC).
  std::vector<std::vector<std::string>> addresses;
  std::string output_dir;   // local directory of the job's base output ("" = none)
  std::string metric_file;  // CLOUD_ML_HP_METRIC_FILE
  // The environment the image rule gives (PATH, PYTHONPATH, HOME, ...).
  std::map<std::string, std::string> base_env;
  std::string python;  // interpreter for pythonPackageSpec
  // Maps gs:// URIs inside args and env values to local paths.
  std::function<std::string(const std::string&)> rewrite_uris;
};

struct ReplicaCommand {
  std::vector<std::string> argv;
  // How many of argv's first strings are the command (containerSpec.command,
  // or python -m MODULE); the rest are the args.
  size_t command_size = 0;
  std::map<std::string, std::string> env;
  // The replica's place in the cluster, as its distributed variables were
  // built from it (launch.json's "cluster"; Slurm builds them again).
  replica::ClusterTask cluster;
};

// Builds the replica's argv and environment: service variables first
// (AIP_*, CLOUD_ML_*, CLUSTER_SPEC, TF_CONFIG, MASTER_*, RANK, ...), then the
// spec's env in order with $(VAR) expansion against what is defined so far,
// then args and command expanded against the whole environment.
//
// Distributed variables: replica::ClusterEnv (replica/cluster_env.h), with
// LOCAL_RANK=0 and LOCAL_WORLD_SIZE=1 (each replica is one process, its own
// "node": a trainer that wants one process per GPU runs torchrun inside its
// replica), and
//   CUDA_VISIBLE_DEVICES  only the GPUs allocated to this replica; "" for none
// Requires `in.addresses` to hold one entry per pool of the spec, with the
// chief at addresses[0][0].
// InvalidArgument naming the field when a string passes kMaxExpandedBytes
// after expansion, or all of them together kMaxCommandBytes.
Result<ReplicaCommand> BuildReplicaCommand(const ReplicaEnvInput& in);

// Bounds on the expanded command line (the kernel's: MAX_ARG_STRLEN for one
// string, and what one execve may take), checked while expanding, so that a
// chain of references cannot make the daemon build gigabytes.
inline constexpr size_t kMaxExpandedBytes = 131071;
inline constexpr size_t kMaxCommandBytes = 2 << 20;

// Kubernetes/Vertex-style expansion: $(VAR) becomes the value of VAR when it
// is defined, stays as written when it is not; $$(VAR) yields $(VAR).
// nullopt as soon as the result would pass `max_bytes`.
std::optional<std::string> ExpandVars(const std::string& text,
                                      const std::map<std::string, std::string>& vars,
                                      size_t max_bytes = SIZE_MAX);

}  // namespace stoker::exec
