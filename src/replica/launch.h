// The pure part of stoker-run: the trainer's environment and how a replica's
// end is told. launch.json and status.json themselves are parsed and written
// by the replica contract (replica_contract.h), which exec shares. Nothing
// here touches the file system or processes, so every function is
// deterministic and thread-safe; supervisor.h holds the I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "replica/replica_contract.h"

namespace stoker::runner {

// launch.json's types and parser, from the replica contract (one definition
// shared with exec).
using replica::LaunchSpec;
using replica::ParseLaunchSpec;
using replica::RunAs;

// The trainer's environment as "K=V" strings, sorted by key: `env` with
// `python_path_prefix` (package roots) put before any PYTHONPATH it holds.
std::vector<std::string> BuildTrainerEnv(
    const std::map<std::string, std::string>& env,
    const std::vector<std::filesystem::path>& python_path_prefix);

// Where execve should look for `program`: itself when it contains a '/',
// else `dir/program` for every directory of `path_var` (":"-separated, an
// empty entry meaning "."), in order, like execvp. An empty `path_var` means
// the default "/usr/local/bin:/usr/bin:/bin".
std::vector<std::string> ExecCandidates(const std::string& program, const std::string& path_var);

// ---- containers (docs/containers.md) ----

using replica::ContainerSpec;

// How the replica's GPUs reach the container: by CDI names (podman with the
// NVIDIA container toolkit's CDI spec), by docker's --gpus, or not at all.
enum class GpuPassing { kNone, kCdi, kDockerGpus };

struct ContainerRun {
  const ContainerSpec* container = nullptr;
  std::optional<RunAs> run_as;          // unset: the image's own user
  std::string network = "host";         // --network=: "host" (replicas), "none"
  std::filesystem::path env_file;       // KEY=VALUE lines (ContainerEnvFile); "" = none
  std::vector<std::string> env_inline;  // KEY=VALUE pairs the file cannot hold
  std::vector<std::string> ulimits;     // ContainerUlimitFlags()
  // podman only: where it writes its monitor's pid (the container's
  // processes are that monitor's children), for the telemetry sampler.
  std::filesystem::path conmon_pid_file;
  std::vector<int> gpus;  // host indexes (the replica's CUDA_VISIBLE_DEVICES)
  GpuPassing gpu_passing = GpuPassing::kNone;
  // podman's --cgroup-parent: the replica's cgroup (ReplicaCgroup::
  // ContainerParent), so that killing it kills the container; "" = none.
  std::string cgroup_parent;
  uint64_t memory_bytes = 0;  // --memory and --memory-swap; 0 = no limit
  // With run_as (podman): the container's root is run_as's uid and primary
  // gid on the host (which open its replica and job directories), and no
  // other id is mapped (--uidmap=0:UID:1, --gidmap=0:GID:1, --user=0:0).
  // The image's root-owned files (/root) are the trainer's inside; files of
  // other ids read as nobody; run_as's extra groups (the bucket group) are
  // not carried: an id the namespace does not map cannot be held, and
  // podman 4.3 mounts the image for one mapped range only (a second range,
  // 1:SUBUID:65535 or a second group, fails with ENOENT/EPERM on the
  // overlay mount).
  bool user_namespace = false;
};

// `engine run ...` for the replica (in the image's WORKDIR, as Docker runs
// it; HOME is the replica's work/): removed when it ends, named, host
// network (CLUSTER_SPEC and MASTER_ADDR addresses work unchanged), the
// command as PID 1 with SIGTERM forwarded to it (as Kubernetes and so
// Vertex run it: a trainer that ignores SIGTERM is killed after the grace),
// output straight to the supervisor's pipe,
// every mount at its own path, the account's uid:gid and groups (or, with
// user_namespace, the image's root as the account) with no capabilities
// and no new privileges, the GPUs, then the image and the command. Environment values never appear
// here but for env_inline.
std::vector<std::string> ContainerRunArgv(const ContainerRun& run);

// The engine this node runs a container with: `wanted` (the daemon's
// choice, an absolute path) when `executable` says this node can run it;
// else the same engine, then the other one of podman and docker, in
// /usr/local/bin, /usr/bin or /bin (a Slurm node may install it elsewhere
// than the daemon's machine); "" when the node has none. Pure but for
// `executable` (access(X_OK) in stoker-run).
std::string EngineOnThisNode(const std::string& wanted,
                             const std::function<bool(const std::string&)>& executable);

// `engine pull IMAGE` for a container whose image the engine lacks
// (podman: `--tls-verify=false` for an insecure registry; docker decides
// that in its daemon's config). Pure.
std::vector<std::string> ContainerPullArgv(const ContainerSpec& container);

// `--ulimit=nofile=S:H` and `--ulimit=nproc=S:H` from this process's own
// limits (the only part here that reads the process): a runtime may not
// raise a limit above its own, and podman's defaults (over a million files)
// fail where the hard limit is lower. nproc is at most 32768, which podman
// lowers its own process limit to where it cannot raise it.
std::vector<std::string> ContainerUlimitFlags();

// The trainer's environment for `--env-file`: one KEY=VALUE line each,
// sorted. A value the format cannot carry (a newline in it) goes to
// *inline_pairs instead, as KEY=VALUE for `--env`.
std::string ContainerEnvFile(const std::map<std::string, std::string>& env,
                             std::vector<std::string>* inline_pairs);

// How a replica ended, as status.json spells it (the replica contract).
using replica::EndState;
using replica::EndStateName;

struct Outcome {
  EndState state = EndState::kLaunchFailed;
  std::optional<int> exit_code;  // set when the trainer exited normally
  std::optional<int> signal;     // set when a signal killed it
  int64_t start_time_us = 0;     // trainer start (supervisor start if none started)
  int64_t end_time_us = 0;
  // For kTimeout and kCancelled: the signal that ended the trainer's process
  // group (SIGTERM, or SIGKILL after the grace) and the limits in effect.
  int stop_signal = 0;
  double timeout_seconds = 0;
  double grace_seconds = 0;
  std::string message;  // for kLaunchFailed: why the launch failed
  // The kernel killed a process of the replica for exceeding its memory
  // limit; `message` then says which limit ("workerpool0-0 used more than
  // its 15 GB (n1-standard-4) ...").
  bool oom_killed = false;
  // kLaunchFailed that a retry would meet again (replica_contract.h).
  bool permanent = false;
};

// "SIGKILL" for 9; "signal 70" for numbers without a name.
std::string SignalName(int sig);

// The human sentence for status.json's "message": "exited with code 3",
// "killed by signal 9 (SIGKILL)", "timed out after 5s; stopped with SIGTERM",
// "cancelled; stopped with SIGKILL after 10s grace", or the launch failure.
std::string DescribeOutcome(const Outcome& outcome);

// The status.json document (ending with a newline): replica::FormatStatus
// with DescribeOutcome as the message.
std::string FormatStatusJson(const Outcome& outcome);

}  // namespace stoker::runner
