// Retention of finished jobs' replica directories (<data>/jobs/<id>/...):
// logs, status files and unpacked packages. Outputs in buckets are never
// touched. Config key (config.h):
//
//   retention:
//     replica_dirs_days: 7               # remove this long after the job ended (0 = at once)
//     max_finished_replica_dirs: 10000   # and keep at most this many (oldest go first)
//     scan_interval_seconds: 60          # how often the store is looked at (sooner past the count
//     limit)
//
// A negative value turns its rule off. The rule (JobsToRemove) is pure;
// ApplyRetention is the shell the control loop calls every tick.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "config/config.h"

namespace stoker::exec {
class Executor;
}
namespace stoker::store {
class Store;
}

namespace stoker::server {

struct FinishedJob {
  int64_t job_id = 0;
  int64_t end_time_us = 0;
};

// The jobs whose replica directories go, oldest end first (ties by id):
// every job that ended at least `replica_dirs_days` before `now_us`, then
// the oldest of the rest until at most `max_finished_replica_dirs` remain.
// Pure and deterministic.
std::vector<int64_t> JobsToRemove(std::vector<FinishedJob> finished, int64_t now_us,
                                  const config::RetentionPolicy& policy);

// What ApplyRetention remembers between calls: an incremental index of
// finished jobs whose directories exist. Its size stays within
// max_finished_replica_dirs (plus the jobs within the age window when the
// count rule is off) and the number of jobs not yet finished.
struct RetentionState {
  struct Entry {
    int64_t end_time_us = 0;
    int64_t study_id = 0;  // trials wait until their study ended (it reads their metrics)
  };
  int64_t cursor = 0;                 // every job id <= cursor has been looked at
  std::set<int64_t> unfinished;       // ids <= cursor not terminal when last looked at
  std::map<int64_t, Entry> finished;  // terminal, directory still there
  int64_t next_scan_us = 0;
  int64_t last_scan_us = 0;
  int64_t ended_since_scan = 0;  // the caller adds each job it sees end; a scan resets it
  int64_t removed_total = 0;     // directories removed since start (for logs and tests)
};

// Removes the files of the finished jobs the policy says are due, through
// the executor (Executor::RemoveJobFiles). Cheap to call
// on every control-loop tick: it returns at once until the scan interval
// has passed or, when the jobs the caller saw end (`ended_since_scan`) would
// take the count over its limit, until 2 s after the last scan (so a burst
// of short jobs overshoots the limit by a few seconds of jobs). A scan reads
// at most a few thousand new jobs from the store and removes at most 250
// directories, and comes back on the next call while work is left.
// A job a supervisor of which is still alive (a replica still stopping) is
// left for a later scan. Errors are logged, never fatal. Call
// from one thread (the control loop).
void ApplyRetention(RetentionState& state, const config::RetentionPolicy& policy,
                    store::Store& store, exec::Executor& executor, int64_t now_us);

}  // namespace stoker::server
