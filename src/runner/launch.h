// The pure part of stoker-run: the trainer's environment and how a replica's
// end is told. launch.json and status.json themselves are parsed and written
// by the replica contract (replica_contract.h), which exec shares. Nothing
// here touches the file system or processes, so every function is
// deterministic and thread-safe; supervisor.h holds the I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runner/replica_contract.h"

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
