// The replica directory contract, typed: the one definition of the files
// through which an executor (stokerd, src/exec) and the replica supervisor
// (stoker-run, src/runner) talk (src/runner/README.md has the table).
//
// Every format is parsed and written here and nowhere else: exec writes
// launch.json with FormatLaunchSpec and reads status.json, trainer.json and
// runner.json with the Parse functions; stoker-run reads launch.json with
// ParseLaunchSpec and writes the others with the Format functions.
//
// Pure: nothing here touches the file system (reading a control file safely
// is the caller's: ReadOwnFileNoFollow, docs/security.md "Trust boundary"),
// so every function is deterministic and thread-safe. Parsers never throw:
// any input, however hostile, gives a value or InvalidArgument naming the
// field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "replica/cluster_env.h"

namespace stoker::replica {

// ---- file names in a replica directory ----
inline constexpr char kLaunchFile[] = "launch.json";    // executor -> supervisor
inline constexpr char kStatusFile[] = "status.json";    // supervisor, once, at the end
inline constexpr char kTrainerFile[] = "trainer.json";  // supervisor, after the fork
inline constexpr char kRunnerFile[] = "runner.json";    // supervisor, after the fork
inline constexpr char kClaimFile[] = "claim";           // whoever claimed the replica
inline constexpr char kLockFile[] = "runner.lock";      // flock'ed by a live supervisor
inline constexpr char kLogFile[] = "output.log";        // the trainer's output
inline constexpr char kRunnerLog[] = "runner.log";      // stoker-run --detach's own output
inline constexpr char kTrainerMetrics[] = "hypertune/output.metrics";  // CLOUD_ML_HP_METRIC_FILE
inline constexpr char kPushedMetrics[] = "pushed.metrics";  // stokerd: pushed measurements
// supervisor, while it installs the packages' requirements (PreparingInfo)
inline constexpr char kPreparingFile[] = "preparing.json";
// Control files are small: status.json's message is the longest field.
inline constexpr size_t kControlFileMax = 64 * 1024;

// ---- launch.json ----

// "run_as": the account the trainer runs as.
struct RunAs {
  std::string user;  // for its supplementary groups (initgroups)
  uint32_t uid = 0;
  uint32_t gid = 0;
  // "extra_gids": groups added to the account's own (the bucket writers'
  // group); with any, the trainer's umask is 002 so that what it makes in
  // a shared bucket stays writable by the group.
  std::vector<uint32_t> extra_gids;
  // "home": the account's home directory, from the daemon's passwd lookup
  // (none in the supervisor, off the start path); "" = none.
  std::string home;
};

// "isolation"."mode" (config key job_isolation).
enum class IsolationMode {
  kOff,       // everything the account may read
  kAuto,      // isolate when the kernel allows it; otherwise run, and say so
  kRequired,  // isolate, or the trainer does not start
};
// "off", "auto", "required".
std::string_view IsolationModeName(IsolationMode mode);
// The inverse; InvalidArgument "must be off, auto or required" otherwise.
Result<IsolationMode> ParseIsolationMode(std::string_view name);

// "isolation": {"mode", "hide": [PATH...], "keep": [PATH...],
// "keep_read_only": [PATH...]} (runner/isolation.h applies it). Absolute paths.
// A directory shown at a second path too (a bucket at /gcs/BUCKET, as
// Vertex's Cloud Storage FUSE mounts it).
struct BindSpec {
  std::filesystem::path source, target;
  bool operator==(const BindSpec&) const = default;
};

struct IsolationSpec {
  IsolationMode mode = IsolationMode::kOff;
  std::vector<std::filesystem::path> hide;
  std::vector<std::filesystem::path> keep;            // read-write
  std::vector<std::filesystem::path> keep_read_only;  // read-only
  // Read-write, at `target` in the isolated view; a target that does not
  // exist on the host is skipped (nothing is created outside the view).
  std::vector<BindSpec> bind;
};
// Parses the "isolation" value (null = off).
Result<IsolationSpec> ParseIsolationSpec(const nlohmann::json& value);

// "log_max_bytes", "log_max_files": output.log rotation.
struct LogLimits {
  uint64_t max_bytes = 64ull << 20;  // per file; 0 = never rotate
  int max_files = 3;                 // rotated files kept (1..1000)
};

// "container": run the trainer in an OCI image through a container engine
// (docs/containers.md) instead of exec'ing `argv` on the host. Absent: a
// local process. Docker's rules for the command: `entrypoint` set replaces
// the image's ENTRYPOINT and drops its CMD; `args` non-empty replaces CMD;
// neither: the image's own ENTRYPOINT and CMD run.
struct ContainerSpec {
  std::string engine;  // absolute path of podman or docker
  std::string image;   // as the engine names it
  std::string name;    // the container's name, unique per replica attempt
  std::optional<std::vector<std::string>> entrypoint;
  std::vector<std::string> args;
  // Bind-mounted at the same path inside (so gs:// paths, the job's
  // directory and outputs resolve as on the host).
  std::vector<std::filesystem::path> mounts;  // read-write
  std::vector<std::filesystem::path> mounts_read_only;
  std::vector<BindSpec> binds;  // read-write, at another path inside
  // The engine lacks the image: the supervisor pulls it before anything
  // else (TLS unverified only for a registry the config calls insecure).
  bool pull = false;
  // `run --pull=missing` instead of never: an image removed from the store
  // since the daemon saw it there is pulled by the engine.
  bool pull_if_missing = false;
  bool tls_verify = true;
  // A trainer account's container (podman, stoker-run as root) runs in a
  // user namespace whose root is that account on the host: images that
  // expect root (code in /root, `pip install --user`) work, the host sees
  // no root (replica/launch.h ContainerRun::user_namespace).
  bool user_namespace = true;
};
// Parses the "container" value (absent or null: nullopt).
Result<std::optional<ContainerSpec>> ParseContainerSpec(const nlohmann::json& value);

// The whole of launch.json.
// The replica's resource sampler (runner/telemetry_sampler.h,
// docs/telemetry.md): off when interval_seconds is 0. `cpus` and
// `memory_bytes` are what the replica booked, for utilisation as a share.
struct TelemetrySpec {
  double interval_seconds = 0;
  double cpus = 0;
  uint64_t memory_bytes = 0;
};

// "limits": what the replica's cgroup holds it to (replica/replica_cgroup.h):
// its machine type's memory clamped to the node (what the scheduler booked;
// 0 = no limit), and the machine type's name for the message when it is
// exceeded. Written only when memory_bytes > 0.
struct LimitsSpec {
  uint64_t memory_bytes = 0;
  std::string machine_type;
};

// "warm": start the trainer from a warm interpreter (docs/warm-starts.md,
// runner/warm_start.h). Absent: a cold start, and nothing said about it.
// Present with a `cold_reason`: the daemon wanted a warm start but cannot
// have one; the supervisor starts cold and says why in its start note.
struct WarmSpec {
  bool requested = false;            // "warm" present in launch.json
  std::string cold_reason;           // "" = try warm
  std::vector<std::string> preload;  // modules the warm interpreter imports ("torch", "numpy")
  std::filesystem::path dir;     // where zygote sockets live: the daemon's, hidden from trainers
  std::filesystem::path zygote;  // the zygote program (stoker_zygote.py)
  std::string python;            // the environment's interpreter (absolute)
  double idle_seconds = 600;     // a zygote with nothing to do exits after this long
  // Who submitted the job (the store's user; "" = the local user of a store
  // made before users existed): zygotes are per submitting user, and counted
  // against `max_per_user`.
  std::string user;
  // The node's values of the start-up variables (IsWarmStartupVar) that the
  // daemon gives every trainer (its LANG, LC_ALL): the zygote runs with
  // exactly these; a trainer whose start-up variables differ starts cold.
  std::map<std::string, std::string> defaults;
  int max_per_user = 2;  // live zygotes per submitting user on this node
  int max_total = 8;     // live zygotes on this node
};
// A variable read once, when the interpreter or a preloaded library (OpenMP,
// MKL, OpenBLAS) starts, which a forked child cannot change for itself:
// LANG, LC_ALL, LC_CTYPE, PYTHONHASHSEED and OMP_*, GOMP_*, KMP_*, MKL_*,
// OPENBLAS_*.
bool IsWarmStartupVar(std::string_view name);

// "python_env": install the packages' requirements into a cached
// environment before the trainer starts (runner/python_env.h,
// docs/python-packages.md). Absent: nothing is installed. The requirements
// are `requirements` plus those stoker-run reads from the unpacked packages.
struct PythonEnvSpec {
  std::filesystem::path cache_dir;  // the shared cache (<data_dir>/envs/pip)
  // The interpreter that installs and runs: absolute; "python3" in a container.
  std::string python;
  std::vector<std::filesystem::path> find_links;  // wheelhouse directories
  std::string index_url;                          // "" = offline: --no-index
  std::vector<std::string> requirements;          // given by the daemon
};
// Parses the "python_env" value (absent or null: nullopt).
Result<std::optional<PythonEnvSpec>> ParsePythonEnvSpec(const nlohmann::json& value);

struct LaunchSpec {
  std::vector<std::string> argv;                // non-empty; argv[0] looked up in env's PATH
  std::map<std::string, std::string> env;       // the complete trainer environment
  std::vector<std::filesystem::path> packages;  // absolute paths of sdist .tar.gz files
  double timeout_seconds = 0;                   // 0 = no timeout; counted from trainer start
  double grace_seconds = 10;                    // SIGTERM -> SIGKILL grace
  LogLimits log_limits;
  // Set: the supervisor drops to this account before exec; unset: the
  // trainer runs as the supervisor does.
  std::optional<RunAs> run_as;
  IsolationSpec isolation;  // written only when the mode is not off
  TelemetrySpec telemetry;  // written only when on
  LimitsSpec limits;        // written only when memory_bytes > 0
  WarmSpec warm;            // written only when requested
  std::optional<ContainerSpec> container;
  std::optional<PythonEnvSpec> python_env;
  // The replica's place in its job (cluster_env.h; local_rank and
  // local_world_size are not written: they are the node's): env holds the
  // variables built from it, and a replica placed by Slurm builds them again
  // from it with the addresses Slurm chose (slurm_task.h).
  std::optional<ClusterTask> cluster;
  // The host GPUs the replica was given (NVML indexes, PCI bus order; empty:
  // none), which env's CUDA_VISIBLE_DEVICES names for the trainer: read as
  // such by the supervisor (telemetry, a container's devices), never parsed
  // back from the environment.
  std::vector<int> gpu_indexes;
};

// InvalidArgument naming the offending field ("launch.json: argv[0]: ...").
// Unknown fields are ignored, so that newer executors can add some.
Result<LaunchSpec> ParseLaunchSpec(std::string_view json);
// The document ParseLaunchSpec reads back as `spec`.
std::string FormatLaunchSpec(const LaunchSpec& spec);

// ---- status.json ----

// How a replica ended.
enum class EndState {
  kExited,        // exit_code set
  kSignaled,      // signal set
  kTimeout,       // stopped at timeout_seconds
  kCancelled,     // stopped by a cancel (or claimed before it started)
  kLaunchFailed,  // no trainer ran (bad launch.json, packages, fork)
};
// "exited", "signaled", "timeout", "cancelled", "launch_failed": the
// status.json spelling.
std::string_view EndStateName(EndState state);
// The inverse; nullopt for any other string.
std::optional<EndState> ParseEndState(std::string_view name);

struct FinalStatus {
  EndState state = EndState::kLaunchFailed;
  std::optional<int> exit_code;
  std::optional<int> signal;
  int64_t start_time_us = 0;  // trainer start (supervisor start if none started)
  int64_t end_time_us = 0;
  std::string message;  // "exited with code 3", "launch failed: ..."
  // The kernel killed a process of the replica for exceeding its memory
  // limit (the message then says the limit and the machine type).
  bool oom_killed = false;
  // launch_failed for a reason that a new attempt would meet again (the
  // image or the packages are wrong, the machine lacks what the job
  // needs): the daemon fails the job instead of retrying it.
  bool permanent = false;
};
std::string FormatStatus(const FinalStatus& status);
// InvalidArgument for anything but an object with a known "state" (missing
// numbers read as 0, a missing message as "").
Result<FinalStatus> ParseStatus(std::string_view json);

// ---- trainer.json, runner.json ----

struct TrainerInfo {
  int64_t pid = 0;
  int64_t pgid = 0;  // the trainer's own process group
  int64_t start_time_us = 0;
  // How the trainer was started, for the job's events ("warm start: ...",
  // "cold start: <why>"); "" = nothing to say (launch.json asked no warm start).
  std::string start_note;
};
std::string FormatTrainerInfo(const TrainerInfo& info);
// Fields that are missing or not integers read as 0; InvalidArgument when
// not a JSON object.
Result<TrainerInfo> ParseTrainerInfo(std::string_view json);

struct RunnerInfo {
  int64_t pid = 0;  // the supervisor's
  int64_t start_time_us = 0;
};
std::string FormatRunnerInfo(const RunnerInfo& info);
Result<RunnerInfo> ParseRunnerInfo(std::string_view json);

// ---- preparing.json ----

// Written by the supervisor when the trainer's start waits on a long
// preparation (installing the packages' requirements): the replica is
// claimed and progressing, not stuck, so no start limit applies to it, and
// `note` says what it waits for ("installing requirements [a, b]").
struct PreparingInfo {
  std::string note;
  int64_t since_us = 0;
};
std::string FormatPreparingInfo(const PreparingInfo& info);
Result<PreparingInfo> ParsePreparingInfo(std::string_view json);

}  // namespace stoker::replica
