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
#include <utility>
#include <vector>

#include "common/status.h"
#include "replica/replica_contract.h"

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

// "" when the trainer's start-up variables (replica::IsWarmStartupVar: read
// once by the interpreter or a preloaded library) are exactly the node's
// `defaults`, the zygote's; else why not ("OMP_NUM_THREADS=3 differs from
// the warm interpreter's 2 (read at interpreter start-up)").
std::string StartupVarProblem(const std::map<std::string, std::string>& env,
                              const std::map<std::string, std::string>& defaults);

// Which zygote serves a trainer: the interpreter as exec'd (`python_path`:
// the resolved argv[0], not its realpath, so a virtual environment stays
// one), the preload list, the node's start-up variables, the submitting
// user and the account it runs as (uid, gid, groups). Nothing a job chooses
// beyond its interpreter. 16 hex digits, stable across processes and
// versions of this binary.
struct ZygoteIdentity {
  std::string python_path;
  std::vector<std::string> preload;
  std::map<std::string, std::string> defaults;
  std::string user;
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;
};
std::string ZygoteKey(const ZygoteIdentity& id);

// The zygote's whole environment: the node's start-up variables, a fixed
// PATH and HOME=`home` (no user site-packages, nothing of the daemon's or
// of any job's).
std::vector<std::string> ZygoteEnv(const std::map<std::string, std::string>& defaults,
                                   const std::string& home);

// The start note for the job's events: what the zygote preloaded and, from
// `skipped` ("module: why"), what it could not; then the zygote's pid,
// account and resident memory, and whom it is counted to.
struct WarmChild;
std::string WarmStartNote(const WarmChild& child, const std::string& user);

// What the child gets, beyond the invocation.
struct WarmRequest {
  WarmInvocation invocation;
  ZygoteIdentity zygote;  // which zygote, and the account it runs as
  // The zygote is started as zygote.uid/gid/groups (stoker-run drops to
  // them before it execs Python); false: as stoker-run's own account.
  bool switch_account = false;
  std::map<std::string, std::string> env;  // the complete trainer environment
  std::string cwd;
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
  uint32_t zygote_uid = 0;
  uint64_t zygote_rss_bytes = 0;  // the zygote's resident memory after the fork
};

// For a zygote that runs as the trainer's account when stoker-run does not
// (root): the trainer's isolated view, made by that account itself in a
// helper process (a user namespace it owns, mapping its own uid and gid, and
// the mounts of runner/isolation.h), so that the zygote's child may join it
// with setns. Returns the namespaces' fds; FailedPrecondition when the view
// cannot be made this way (the trainer then starts cold and isolated).
Result<std::pair<int, int>> PrepareAccountView(const replica::IsolationSpec& spec,
                                               const ZygoteIdentity& account);

// Finds the zygote for `key` in `spec.dir` (starting one when none answers,
// under a lock so that concurrent supervisors start one, within the limits
// of warm_start_registry.h), and has it fork a child for `request`. The calling process must be
// single-threaded (it may fork) and a child subreaper whose status this restores. Error: why the
// trainer must start cold; no child of this request will run anything (it was never forked, or it
// exits once `go` closes, which this does before returning).
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
