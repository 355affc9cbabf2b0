// SupervisorPool: replica supervisors started before their replicas exist
// (issue #29, decision 0041).
//
// Starting `stoker-run` costs an exec and the loading of its libraries,
// about 7 ms on a 2-vCPU machine, and that used to sit between a job's
// launch.json and its trainer. A pool keeps `size` supervisors waiting as
// `stoker-run --standby`: each blocks reading its stdin, a pipe whose only
// writer is this object. Start(DIR) writes DIR (one absolute path, then
// end of file) into one waiting supervisor's pipe, which then does exactly
// what `stoker-run --replica-dir DIR` does (its output into DIR/runner.log).
// A standby whose pipe ends without a path (the pool was destroyed, or
// stokerd died) exits 0, so none outlives the daemon that made it.
//
// Thread-safe. Every process is started in a session of its own with no
// signal blocked, as the daemon's child (stokerd is the subreaper and reaper
// of its supervisors, local_executor.h).
#pragma once

#include <cstddef>
#include <filesystem>
#include <mutex>
#include <vector>

#include "common/status.h"

namespace stoker::exec {

class SupervisorPool {
 public:
  // `size` standbys are started by Refill; 0 starts every supervisor when
  // its replica is launched, as `stoker-run --replica-dir DIR`.
  SupervisorPool(std::filesystem::path runner, size_t size);
  ~SupervisorPool();  // closes the pipes: the standbys exit
  SupervisorPool(const SupervisorPool&) = delete;
  SupervisorPool& operator=(const SupervisorPool&) = delete;

  // Starts the supervisor of the replica directory `dir` (absolute): a
  // standby's when one waits, else a new process. Internal when neither
  // can start.
  Status Start(const std::filesystem::path& dir);

  // Starts standbys until `size` wait; meant for after a launch, off its
  // path. A standby that cannot start is logged and left out (Start then
  // starts supervisors the slow way).
  void Refill();

  // Standbys waiting now.
  size_t Waiting() const;

 private:
  const std::filesystem::path runner_;
  const size_t size_;
  mutable std::mutex mu_;
  std::vector<int> standbys_;  // the write ends of their stdin pipes
};

}  // namespace stoker::exec
