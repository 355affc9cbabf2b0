// The live warm interpreters ("zygotes") of a node, and how many may live
// (docs/warm-starts.md "How many", docs/decisions/0035-warm-interpreters-
// per-user.md).
//
// Each zygote has a record, <warm dir>/<key>.json, written by the supervisor
// that starts it: the submitting user it serves, its pid (0 while it is being
// started, by the supervisor `spawner`) and the pid's start time (so that a
// reused pid is never taken for it). Its last use is the record's mtime,
// which every supervisor that forks from it touches. The warm dir is the
// daemon's (mode 0700, hidden from trainers); zygotes themselves cannot
// reach it, so records are stoker-run's alone.
//
// Before a supervisor starts a zygote it takes <warm dir>/zygotes.lock,
// lists the live ones (ListLiveZygotes), asks PlanZygoteSpawn which idle
// ones to end for the new one to fit warm_start_max_per_user and
// warm_start_max_total, ends them (EndZygote), writes the new record with
// pid 0, and lets go of the lock: concurrent starts of other keys count it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stoker::runner {

struct ZygoteRecord {
  std::string key;           // its socket is <key>.sock
  std::string user;          // the submitting user it serves
  pid_t pid = 0;             // 0: being started by `spawner`
  uint64_t start_ticks = 0;  // /proc/PID/stat's starttime of `pid`
  pid_t spawner = 0;         // the supervisor that starts it
  // Filled by ListLiveZygotes, not stored:
  int64_t last_use_us = 0;  // the record's mtime
  bool idle = false;        // alive with no child (no trainer) running
  uint64_t rss_bytes = 0;   // its resident memory
};

// The record's file content, and back (InvalidArgument for anything else).
std::string FormatZygoteRecord(const ZygoteRecord& record);
Result<ZygoteRecord> ParseZygoteRecord(std::string_view text);

// What starting a zygote for `user` takes: the keys of the idle zygotes to
// end first (least recently used first: `user`'s own for max_per_user, then
// anyone's for max_total), or, when not enough of them are idle, a refusal
// saying which limit is full (the trainer then starts cold). `live` holds
// every live zygote but the one to start. Pure.
struct SpawnPlan {
  std::vector<std::string> end;
  std::string refusal;  // "" = go ahead
};
SpawnPlan PlanZygoteSpawn(const std::vector<ZygoteRecord>& live, const std::string& user,
                          int max_per_user, int max_total);

// Takes flock(LOCK_EX) on `path` (created 0600, no link followed) within
// `timeout_ms`: the fd, or -1.
int LockWarmFile(const std::filesystem::path& path, int64_t timeout_ms);

// The start time of process `pid` (/proc/PID/stat field 22); 0 when gone.
uint64_t ProcessStartTicks(pid_t pid);

// The live zygotes recorded in `dir`. kRemove (the caller holds
// zygotes.lock): records whose process is gone, or whose spawner died
// before it wrote the pid, are removed with their socket. kKeep: nothing
// is changed (the daemon's look, without the lock).
enum class DeadRecords { kRemove, kKeep };
std::vector<ZygoteRecord> ListLiveZygotes(const std::filesystem::path& dir,
                                          DeadRecords dead = DeadRecords::kRemove);

// Ends an idle zygote: removes its socket and record, then SIGTERMs it (it
// stops accepting and exits once its children, if one got a request in the
// meantime, have ended: nothing running is ever killed).
void EndZygote(const std::filesystem::path& dir, const ZygoteRecord& record);

// Marks the zygote of `key` used now (the record's mtime).
void TouchZygote(const std::filesystem::path& dir, const std::string& key);

}  // namespace stoker::runner
