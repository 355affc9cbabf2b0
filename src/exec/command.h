// Running a short-lived helper command (sbatch, squeue, scancel,
// `stoker-run --probe-isolation`) and collecting what it wrote, with a time
// limit so that a hung helper cannot block its caller for ever.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::exec {

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal or by the timeout
  bool timed_out = false;
  std::string out;
  std::string err;  // ends with "(killed after Ns)" when timed_out
};

// Runs args[0] (looked up in PATH unless it holds a '/') with stdin from
// /dev/null and returns its stdout and stderr; SIGKILLs it after
// `timeout_seconds`. Blocks until it has exited. Errors only when it cannot
// be started: FailedPrecondition "cannot run NAME: WHY" followed by
// `start_hint` (say what to check, e.g. " (is the Slurm client installed?)").
// Thread-compatible: no shared state.
Result<CommandResult> RunCommand(const std::vector<std::string>& args, double timeout_seconds,
                                 const std::string& start_hint = "");

}  // namespace stoker::exec
