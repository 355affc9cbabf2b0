// The replica supervisor: the process side of stoker-run.
//
// One supervisor runs per replica directory, at most once in the directory's
// life (see README.md for the file contract):
//
//   claim     flock(DIR/runner.lock) for the supervisor's whole life, then
//             create DIR/claim with O_EXCL and fsync it. A held lock or an
//             existing claim means another supervisor owns or owned DIR:
//             RunSupervisor returns 0 without touching anything else, so a
//             trainer never runs twice for one replica.
//   launch    read DIR/launch.json, unpack packages, fork the trainer into
//             its own process group with the exact environment given plus
//             STOKER_REPLICA=<cookie>; its stdout and stderr go through a
//             pipe into the rotating DIR/output.log (log_rotation.h), copied
//             by two pump threads.
//   supervise SIGTERM/SIGINT/SIGHUP (cancel) and the timeout stop the group with
//             SIGTERM, then SIGKILL after the grace.
//   clean up  once the trainer exits, SIGKILL every process left in its group,
//             every other descendant (the supervisor is a child subreaper,
//             so escaped grandchildren come back to it) and every process
//             that carries the replica's STOKER_REPLICA cookie wherever it
//             is (replica_processes.h); reap them, wait for the others' exit.
//   report    write DIR/status.json once, atomically.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"
#include "replica/launch.h"
#include "replica/replica_cgroup.h"

namespace stoker::runner {

// Runs the whole life above in the calling process, which must be
// single-threaded when called (it forks, blocks signals and becomes a
// subreaper; its own pump threads start after the fork).
// Returns the process exit code: 0 once status.json is written and also when
// the claim shows another supervisor; 1 when the directory is unusable
// (no lock, no claim, no status.json could be written), with the reason on
// stderr.
//
// `hooks` are for stoker-run --slurm and --standby; all may be empty.
using SpecRewrite = std::function<Status(LaunchSpec&)>;
struct SupervisorHooks {
  // Completes launch.json after the claim with what depends on the
  // placement (the env's cluster variables, the GPUs). An error ends the replica as
  // launch_failed with its message; Cancelled (a stop signal came while it
  // waited) ends it as cancelled, before any trainer starts.
  SpecRewrite rewrite;
  // Called once, right before the trainer's fork: after the packages are
  // unpacked and everything else is ready, so that what it lets go of (the
  // port the rewrite reserved) is free for the shortest possible time before
  // the trainer takes it. Not called when no trainer is forked.
  std::function<void()> before_fork;
  // Non-empty: launch.json's "warm" is not honoured and the trainer starts
  // cold, with this as the start note's reason (the Slurm executor: Slurm
  // kills whatever runs outside its step).
  std::string no_warm_reason;
  // A cgroup made ahead (a standby supervisor's, StandbyCgroupName): it
  // becomes the replica's by a rename instead of a new cgroup being made,
  // and is removed when the supervisor ends without using it.
  std::optional<ReplicaCgroup> cgroup_ahead;
};
int RunSupervisor(const std::filesystem::path& dir, SupervisorHooks hooks = {});

}  // namespace stoker::runner
