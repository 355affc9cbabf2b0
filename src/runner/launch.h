// The pure part of stoker-run: the replica directory's file formats.
//
// launch.json (written by the executor) says what to run; status.json
// (written once by stoker-run) says how it ended. Nothing here touches the
// file system or processes, so every function is deterministic and
// thread-safe; supervisor.h holds the I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runner/isolation.h"
#include "runner/log_rotation.h"

namespace stoker::runner {

// "run_as" of launch.json: the account the trainer runs as.
struct RunAs {
  std::string user;  // for its supplementary groups (initgroups)
  uint32_t uid = 0;
  uint32_t gid = 0;
  // "extra_gids": groups added to the account's own (the bucket writers'
  // group); with any, the trainer's umask is 002 so that what it makes in
  // a shared bucket stays writable by the group.
  std::vector<uint32_t> extra_gids;
  // "home": the account's home directory, from the daemon's passwd lookup
  // (none here, off the start path); "" = none.
  std::string home;
};

// The parsed DIR/launch.json.
struct LaunchSpec {
  std::vector<std::string> argv;                // non-empty; argv[0] looked up in env's PATH
  std::map<std::string, std::string> env;       // the complete trainer environment
  std::vector<std::filesystem::path> packages;  // absolute paths of sdist .tar.gz files
  double timeout_seconds = 0;                   // 0 = no timeout; counted from trainer start
  double grace_seconds = 10;                    // SIGTERM -> SIGKILL grace
  LogLimits log_limits;  // "log_max_bytes" (0 = no rotation), "log_max_files" (>= 1)
  // Set: the supervisor drops to this account (groups, gid, uid, in that
  // order, each checked) before exec; unset: the trainer runs as it does.
  std::optional<RunAs> run_as;
  // "isolation": what the trainer's view of the file system hides and keeps
  // (isolation.h); absent = off.
  IsolationSpec isolation;
};

// Parses launch.json. InvalidArgument naming the offending field otherwise
// (unknown fields are ignored so that newer executors can add some).
Result<LaunchSpec> ParseLaunchSpec(std::string_view json);

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

// How a replica ended.
enum class EndState { kExited, kSignaled, kTimeout, kCancelled, kLaunchFailed };

// "exited", "signaled", "timeout", "cancelled", "launch_failed".
std::string_view EndStateName(EndState state);

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
};

// "SIGKILL" for 9; "signal 70" for numbers without a name.
std::string SignalName(int sig);

// The human sentence for status.json's "message": "exited with code 3",
// "killed by signal 9 (SIGKILL)", "timed out after 5s; stopped with SIGTERM",
// "cancelled; stopped with SIGKILL after 10s grace", or the launch failure.
std::string DescribeOutcome(const Outcome& outcome);

// The status.json document (ending with a newline).
std::string FormatStatusJson(const Outcome& outcome);

}  // namespace stoker::runner
