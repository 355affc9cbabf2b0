// Finding and stopping every process of one replica, wherever it went.
//
// stoker-run puts STOKER_REPLICA=<cookie> (ReplicaCookie of the replica
// directory) into the trainer's environment. Children inherit it through
// fork and exec, so it survives what process groups, sessions and parent
// links do not: setsid(), double forks, re-parenting to init after the
// supervisor died. Whoever cleans up a replica (the supervisor at its end,
// stokerd's recovery when it finds a supervisor dead) finds the replica's
// processes by scanning /proc/*/environ for the cookie -- the technique of
// Jenkins' ProcessTreeKiller. docs/decisions/0010-replica-processes.md has the
// reasons and the limits (a process that execs with an environment without
// the variable escapes; processes the caller may not signal are skipped).
//
// Thread safety: the free functions are thread-safe; a ProcessSweep is not.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::runner {

// The variable that carries the cookie. Set by stoker-run last, over any
// value launch.json's env gives it.
inline constexpr std::string_view kReplicaCookieVar = "STOKER_REPLICA";

// The cookie of the replica in `replica_dir`: its absolute, normalised path,
// e.g. "/var/lib/stoker/jobs/42/workerpool0-1". Unique on a machine while
// the directory exists; the supervisor and stokerd get the same string
// however they spell the directory (symbolic links resolved as far as the
// path exists).
std::string ReplicaCookie(const std::filesystem::path& replica_dir);

// The live processes (zombies excluded) whose environment holds exactly
// STOKER_REPLICA=<cookie>; the calling process is never listed. Processes
// whose environment the caller may not read are not listed either.
std::vector<pid_t> FindReplicaProcesses(std::string_view cookie);

// Kills the processes carrying one cookie, pass by pass, and waits for them
// to be gone. Each kill goes through a pidfd opened first and the
// environment read again through it, so a pid reused between the scan and
// the kill is never signalled. Not thread-safe; owns the pidfds it opened.
class ProcessSweep {
 public:
  explicit ProcessSweep(std::string cookie);
  ~ProcessSweep();
  ProcessSweep(const ProcessSweep&) = delete;
  ProcessSweep& operator=(const ProcessSweep&) = delete;

  // One pass: SIGKILL to every process FindReplicaProcesses lists now.
  // Returns how many were signalled; 0 means none is left that the caller
  // may signal (refused() says how many refused, e.g. EPERM).
  int KillPass();

  // Waits until every process signalled so far has exited (is a zombie or
  // gone), at most `timeout_ms`. True when all have.
  bool WaitForExits(int64_t timeout_ms);

  // Processes signalled so far (each counted once).
  int killed() const { return static_cast<int>(pids_.size()); }
  // Processes of the last pass that carried the cookie but refused the signal.
  int refused() const { return refused_; }

 private:
  std::string cookie_;
  int refused_ = 0;
  std::vector<pid_t> pids_;  // one per process signalled
  std::vector<int> pidfds_;  // parallel to pids_; -1 where pidfds are unsupported
};

// Passes until one finds nothing, then waits for the exits; `timeout_ms`
// bounds the whole. Returns the number of processes killed, or -1 when some
// were still there at the deadline (in uninterruptible sleep, or refusing
// the signal).
int KillReplicaProcesses(std::string_view cookie, int64_t timeout_ms);

}  // namespace stoker::runner
