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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stoker::runner {

// Every process in /proc now (the caller included). Unavailable when /proc
// cannot be listed (out of file descriptors, say): the caller then knows
// nothing, which is not the same as knowing there is nothing.
Result<std::vector<pid_t>> ListPids();

// What /proc/PID/stat says of one process: "pid (comm) S ppid ...".
struct ProcStat {
  char state = 0;  // R, S, D, Z (zombie), X (dead), ...
  pid_t ppid = 0;
  // CPU time in clock ticks (sysconf(_SC_CLK_TCK)): its own (utime + stime)
  // plus that of its children it reaped (cutime + cstime).
  uint64_t cpu_ticks = 0;
  uint64_t rss_pages = 0;  // resident set, in pages
};
// nullopt when the process is gone (or its stat cannot be read).
std::optional<ProcStat> ReadProcStat(pid_t pid);

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
// `*complete` (when given) becomes false when the scan could not look at
// every process: /proc could not be listed, or an environment could not be
// read for another reason than the process being gone or not the caller's
// (EMFILE, say). The list is then partial, and an empty one proves nothing.
std::vector<pid_t> FindReplicaProcesses(std::string_view cookie, bool* complete = nullptr);

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
  // Returns how many were signalled; 0 with complete() means none is left
  // that the caller may signal (refused() says how many refused, e.g.
  // EPERM). A process whose pidfd cannot be opened (ENOSYS, EMFILE, ...) is
  // signalled by pid after its cookie is checked again.
  int KillPass();

  // Waits until every process signalled so far has exited (is a zombie or
  // gone), at most `timeout_ms`. True when all have. Closes the pidfds of
  // those that have.
  bool WaitForExits(int64_t timeout_ms);

  // Processes signalled so far (each counted once).
  int killed() const { return static_cast<int>(victims_.size()); }
  // Processes of the last pass that carried the cookie but refused the signal.
  int refused() const { return refused_; }
  // False when the last pass could not scan every process (see
  // FindReplicaProcesses): its 0 then does not mean none is left.
  bool complete() const { return complete_; }

 private:
  struct Victim {
    pid_t pid;
    int pidfd;    // -1: none (unsupported, out of descriptors, or closed at exit)
    bool exited;  // seen exited; its pidfd is closed
  };
  // Marks the victims whose pidfd polls readable as exited and closes it.
  void ReleaseExited();

  std::string cookie_;
  int refused_ = 0;
  bool complete_ = true;
  std::vector<Victim> victims_;  // one per process signalled
};

// Passes until one finds nothing, then waits for the exits; `timeout_ms`
// bounds the whole. Returns the number of processes killed, or -1 when some
// were still there at the deadline (in uninterruptible sleep, or refusing
// the signal) or the last pass could not scan every process.
int KillReplicaProcesses(std::string_view cookie, int64_t timeout_ms);

}  // namespace stoker::runner
