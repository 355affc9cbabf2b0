// Warm starts (docs/warm-starts.md, docs/decisions/0026-warm-starts.md):
// a trainer forked from a warm Python interpreter (a "zygote",
// src/python/stoker_zygote.py) that has already imported the heavy modules,
// instead of exec'ing a fresh interpreter.
//
// The supervisor asks for one only when launch.json carries "warm" (the
// daemon's choice: study trials and jobs that opt in). The pure part below
// says whether the trainer's argv and environment can run warm and which
// zygote serves it; WarmStarter does the I/O: it finds or starts the zygote,
// asks it for a child, and tells the child to go.
//
// The one guarantee the rest relies on: the child runs nothing of the
// trainer's before the supervisor writes the go byte, and Fork() returns an
// error (a reason to start cold) only when no go byte was or can ever be
// written. So a replica never starts twice.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "runner/replica_contract.h"

namespace stoker::runner {

// A Python invocation the zygote can run: `PYTHON [-u] -m MODULE ARGS...` or
// `PYTHON [-u] SCRIPT ARGS...`.
struct WarmInvocation {
  std::string python;  // argv[0] as given
  bool flag_u = false;
  bool module = false;  // -m MODULE
  std::string target;   // the module name or the script path
  std::vector<std::string> args;
};

// FailedPrecondition naming what keeps `argv` from running warm ("argv[0]
// 'bash' is not a Python interpreter", "interpreter option '-X' ...").
Result<WarmInvocation> ParseWarmInvocation(const std::vector<std::string>& argv);

// "" when `env` can run in a zygote; else why not (a variable the
// interpreter or the dynamic loader reads at start-up, which the zygote
// cannot give: "PYTHONHOME is set (read at interpreter start-up)").
std::string WarmEnvProblem(const std::map<std::string, std::string>& env);

// Variables read at start-up that the zygote can give by being started with
// them: they are part of its key, and it gets them from the trainer's env.
const std::vector<std::string>& ZygoteKeyVars();

// Which zygote serves a trainer: the interpreter as exec'd (`python_path`:
// the resolved argv[0], not its realpath, so a virtual environment stays
// one), the preload list, the trainer's uid/gid and ZygoteKeyVars' values.
// 16 hex digits, stable across processes and versions of this binary.
std::string ZygoteKey(const std::string& python_path, const std::vector<std::string>& preload,
                      uint32_t uid, uint32_t gid, const std::map<std::string, std::string>& env);

// The zygote's whole environment: ZygoteKeyVars from `env`, a fixed PATH and
// HOME=`home` (no user site-packages, nothing of the daemon's).
std::vector<std::string> ZygoteEnv(const std::map<std::string, std::string>& env,
                                   const std::string& home);

// The start note for the job's events: what the zygote preloaded and, from
// `skipped` ("module: why"), what it could not.
std::string WarmStartNote(const std::vector<std::string>& preloaded,
                          const std::vector<std::string>& skipped, int64_t fork_ms);

// What the child gets, beyond the invocation.
struct WarmRequest {
  WarmInvocation invocation;
  std::string python_path;  // the interpreter to run the zygote with (resolved argv[0])
  std::map<std::string, std::string> env;  // the complete trainer environment
  std::string cwd;
  bool switch_account = false;  // the fields below apply
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;
  int umask = 022;
  int stdin_fd = -1, out_fd = -1;     // the trainer's fd 0 and fds 1/2
  int userns_fd = -1, mntns_fd = -1;  // the isolated view to join; -1 = none
};

// A forked, not yet started child.
struct WarmChild {
  pid_t pid = -1;
  pid_t zygote_pid = -1;
  int conn = -1;   // to the zygote: its {"status": N} line arrives here
  int go = -1;     // write "g" to start the child; closing it ends the child unstarted
  int pidfd = -1;  // the child's pidfd (polls readable once it exits)
  std::vector<std::string> preloaded;
  std::vector<std::string> skipped;  // "module: why it could not be imported"
  int64_t fork_ms = 0;               // from the request to the child's pid
};

// Finds the zygote for `key` in `spec.dir` (starting one when none answers,
// under a lock so that concurrent supervisors start one), and has it fork a
// child for `request`. The calling process must be single-threaded (it may
// fork) and a child subreaper whose status this restores.
// Error: why the trainer must start cold; no child of this request will run
// anything (it was never forked, or it exits once `go` closes, which this
// does before returning).
Result<WarmChild> ForkWarm(const replica::WarmSpec& spec, const std::string& key,
                           const WarmRequest& request);

// Starts the child (closes `child->go`). InternalError when the write
// failed, in which case the child never starts and exits on its own.
Status StartWarmChild(WarmChild* child);

// Reads what the zygote sent on `conn` (non-blocking) into `*buffer`;
// returns the wait status once a {"status": N} line is complete; nullopt
// otherwise. `*closed` is set once the connection is at its end.
std::optional<int> ReadWarmStatus(int conn, std::string* buffer, bool* closed);

}  // namespace stoker::runner
