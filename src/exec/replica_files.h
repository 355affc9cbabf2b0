// The executor side of the replica directory contract (src/runner/README.md),
// shared by every executor that runs replicas under `stoker-run`: writing
// launch.json, reading how a replica stands from the files its supervisor
// writes, and claiming a replica that has not started so that it never does.
//
// Functions here touch only the replica directory; none blocks on a
// trainer. Not thread-safe for the same directory (the control loop is the
// only caller).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"
#include "exec/executor.h"

namespace stoker::exec {

// The supervisor's control file dir/`name` (runner.json, status.json, ...)
// as a JSON object; nullopt when it is missing, unreadable, not JSON or not
// an object, and also when it is anything but what the supervisor writes: a
// regular file of at most 64 KiB with one link, owned by this process's
// account and writable by no other, reached without following a link
// (ReadOwnFileNoFollow). So a trainer can neither forge it nor point the
// daemon's read elsewhere, nor block it on a FIFO (docs/security.md, "Trust
// boundary").
std::optional<nlohmann::json> ReadJsonObject(const std::filesystem::path& dir,
                                             const std::string& name);

// dir/trainer.json (replica::ParseTrainerInfo: the one reader of it), read
// as ReadJsonObject reads a control file; nullopt when missing, damaged or
// not the supervisor's own.
std::optional<replica::TrainerInfo> ReadTrainerInfo(const std::filesystem::path& dir);

// What launch.json holds for `replica` (the replica contract's LaunchSpec).
replica::LaunchSpec LaunchSpecOf(const ReplicaLaunch& replica);

// Creates `dir` and writes dir/launch.json for `replica` (FormatLaunchSpec).
// Not synced: the store's PENDING commit is the durable record, and a
// relaunch after a crash writes it again.
Status WriteLaunchFile(const std::filesystem::path& dir, const ReplicaLaunch& replica);

// True when dir/claim exists: a supervisor ran (or Cancel claimed it).
bool Claimed(const std::filesystem::path& dir);

// True when a live supervisor holds <dir>/runner.lock (opened without
// following a link, never blocking on a FIFO).
bool SupervisorAlive(const std::filesystem::path& replica_dir);

struct ReadStatusOptions {
  // When the supervisor is found dead without a status, SIGKILL the
  // trainer's process group recorded in trainer.json and every process
  // carrying the replica's STOKER_REPLICA cookie (replica/replica_processes.h),
  // and wait (up to 2 s) until they are gone, so that a job never ends with
  // a process of it alive. Only meaningful when the supervisor ran on this
  // machine.
  bool kill_orphans = true;
};

// The replica's state from its files: kEnded from status.json; kRunning or
// kStarting while a supervisor holds the lock; kLost when the claim exists,
// the lock is free and there is no status; kLost when the directory is gone;
// kStarting (message empty) when nothing has claimed it yet.
ReplicaStatus ReadReplicaStatus(const std::filesystem::path& dir, const std::string& name,
                                const ReadStatusOptions& options = {});

// For a replica that has no supervisor yet: creates dir/claim (O_EXCL) and
// a "cancelled before it started" status.json, so that a supervisor started
// later exits without running the trainer. Returns true when it made the
// claim, false when a supervisor (or an earlier call) already had.
Result<bool> ClaimAsCancelled(const std::filesystem::path& dir);

}  // namespace stoker::exec
