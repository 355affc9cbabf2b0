// How the supervisor starts a replica's trainer: one TrainerStart per kind,
// chosen once from launch.json by MakeTrainerStart (issue #31):
//
//   plain      fork + exec here (trainer_start_plain.cc): the child joins the
//              replica's cgroup and its own process group, enters its
//              isolated view, becomes the trainer's account and execs.
//   warm       forked by a warm interpreter, a zygote (trainer_start_warm.cc,
//              warm_start.h); starts plain, saying why, when it cannot.
//   container  the engine's client (`engine run ...`) started plain, the
//              trainer inside the image (trainer_start_container.cc).
//
// The supervisor keeps the process model (claim, cgroup, signals, output
// pipe, timeout and cancel, clean-up, status.json); a start prepares and
// starts the supervised process and tells what of its end only it knows.
// Not thread-safe: the supervisor's one thread calls it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "replica/launch.h"
#include "replica/replica_cgroup.h"
#include "runner/isolation.h"
#include "runner/log_rotation.h"
#include "runner/telemetry_sampler.h"

namespace stoker::runner {

// One line of the supervisor's own diagnostics on stderr (runner.log).
void LogDiagnostic(const std::string& line);
// "what: strerror(errno)".
std::string ErrnoMessage(const std::string& what);

// What the supervisor lends a start and the preparation steps. Borrowed:
// everything here outlives them.
struct ReplicaServices {
  std::filesystem::path dir;              // the replica directory
  std::string cookie;                     // ReplicaCookie(dir)
  int null_fd = -1;                       // /dev/null, the trainer's stdin
  RotatingLog* log = nullptr;             // output.log; null when it could not open
  const ReplicaCgroup* cgroup = nullptr;  // null: the replica has none
  // Whether a cancel came or the replica directory went (a preparation step
  // then stops what it runs).
  std::function<bool()> cancel_requested;
  // Writes DIR/preparing.json with this note; the step removes it when done.
  std::function<void(const std::string&)> set_preparing;

  // Appends `text` to output.log (a failure goes to LogDiagnostic).
  void WriteOutput(const std::string& text) const;
  // The cgroup's join fds for a child about to be forked (none without one);
  // the caller closes them.
  std::vector<int> CgroupJoinFds() const;
};

// Closes the fds it holds when it goes.
struct ScopedFds {
  std::vector<int> fds;
  ~ScopedFds();
};

// The supervised process's command, ready for a fork: everything the child
// needs between fork and exec, where it only makes system calls.
struct TrainerExec {
  std::vector<std::string> argv;
  std::vector<std::string> env;         // KEY=VALUE, the complete environment
  std::vector<std::string> candidates;  // where argv[0] may be (ExecCandidates)
  std::optional<RunAs> run_as;          // unset: stoker-run's own account
  std::vector<gid_t> groups;            // run_as's groups and its extra gids
  int umask = 022;                      // 002 when it shares buckets
  std::string work_dir;                 // DIR/work, its working directory
  int out_fd = -1;  // the output pipe's write end (the supervisor's, set before Start)
  std::unique_ptr<Isolation> isolation;  // its view; made once, here
};

// Loads what PrepareTrainerExec's group lookup (getgrouplist) loads on its
// first use in a process, the name service's modules (~0.5 ms): a standby
// supervisor calls it before it waits for its replica, off the start path.
void WarmUpGroupLookup();

// Builds the exec of `spec` with `python_path` before its PYTHONPATH.
// FailedPrecondition when stoker-run cannot switch to run_as (not root).
Result<TrainerExec> PrepareTrainerExec(const LaunchSpec& spec,
                                       const std::vector<std::filesystem::path>& python_path,
                                       const std::filesystem::path& work_dir);

// Forks the child that execs `exec` (the plain start; the container's and a
// warm start's fallback run it too). Returns its pid; Internal when fork
// failed. An exec failure is the child's exit 127 with a line in the log.
Result<pid_t> ForkTrainer(const ReplicaServices& services, const TrainerExec& exec);

struct StartedTrainer {
  pid_t pid = -1;
  // True: forked here, the supervisor's child (reaped with waitpid, its
  // process group made here too). False: another process's child (a
  // zygote's), whose end comes from TrainerStart::ReadEnd.
  bool own_child = true;
  // The start note's first part (trainer.json), "" for none: "cold start:
  // why", "warm start: ...", then what the start prepared ("pulled image X
  // in 2.1 s"), joined with "; ".
  std::string note;
};

class TrainerStart {
 public:
  virtual ~TrainerStart() = default;

  // Before the requirement environment is installed, after the packages
  // are unpacked (a container's engine on this node, its image pulled).
  // Cancelled when a cancel came; another error fails the launch
  // (permanent for invalid argument, not found, failed precondition).
  virtual Status Prepare(LaunchSpec& /*spec*/) { return OkStatus(); }

  // The spec of the process to supervise, from the trainer's; `python_path`
  // (packages and requirements, before PYTHONPATH) is consumed by a start
  // that puts it elsewhere (cleared). An error fails the launch.
  virtual Result<LaunchSpec> SupervisedSpec(LaunchSpec spec,
                                            std::vector<std::filesystem::path>* /*python_path*/) {
    return spec;
  }

  // Starts it: called once, after the supervisor's before-fork hook, with
  // exec.out_fd set. An error fails the launch with nothing of it running.
  virtual Result<StartedTrainer> Start(const LaunchSpec& spec, const TrainerExec& exec) = 0;

  // For a trainer that is not the supervisor's child: an fd that polls
  // readable when ReadEnd has news; -1 otherwise.
  virtual int EndFd() const { return -1; }
  // Its wait status once it ended (or its parent died, taking it along:
  // *late_log_line then says so); nullopt while it runs, and always for the
  // supervisor's own child.
  virtual std::optional<int> ReadEnd(std::string* /*late_log_line*/) { return std::nullopt; }

  // Adds what else the sampler must watch (a container's processes).
  virtual void AddToSampler(TelemetrySampler& /*sampler*/) const {}
  // Once every process of the replica is dead: removes what the start left
  // outside it (a container).
  virtual void CleanUp() {}
  // Tells an end that was neither a stop nor the kernel's OOM kill as only
  // this start can (a container engine's own exit codes): may change
  // *outcome and set *late_log_line.
  virtual void ExplainEnd(Outcome* /*outcome*/, std::string* /*late_log_line*/) const {}
};

// Chooses the start for `spec`: container when it names an image; warm when
// it asks for one and neither `no_warm_reason` (stoker-run --slurm) nor its
// cold_reason rules it out; plain otherwise (its note then says why cold).
std::unique_ptr<TrainerStart> MakeTrainerStart(const LaunchSpec& spec,
                                               const ReplicaServices& services,
                                               const std::string& no_warm_reason);

// The kinds, for MakeTrainerStart. `cold_note`: the plain start's note.
std::unique_ptr<TrainerStart> MakePlainStart(const ReplicaServices& services,
                                             std::string cold_note);
std::unique_ptr<TrainerStart> MakeWarmStart(const ReplicaServices& services);
std::unique_ptr<TrainerStart> MakeContainerStart(const ReplicaServices& services,
                                                 std::string cold_note);

}  // namespace stoker::runner
