// Which jobs may be preempted (docs/preemption.md), and when a job last saved
// its work. The choice of victims is the scheduler's rule 9
// (scheduler/policy.h); the controller stops and requeues them.
#pragma once

#include <cstdint>
#include <filesystem>

#include "config/config.h"
#include "spec/custom_job.h"

namespace stoker::server {

// Whether `job` may be preempted under `config` (enabled or not): label
// stoker-preemptible "true" or "false" decides when present; otherwise
// scheduling.strategy SPOT, or a priority below config.preemptible_below.
bool IsPreemptible(const spec::CustomJob& job, const config::PreemptionConfig& config);

// The newest modification time (microseconds since the epoch) of the
// entries of `root`/`relative` and of its subdirectories one level down,
// looking at no more than `max_entries` entries; 0 when there is none or the
// directory cannot be read. `root` is trusted (a bucket's directory);
// `relative` and everything below it may be a trainer's, so no symbolic
// link is followed anywhere below `root` (each directory is opened with
// O_NOFOLLOW from its parent, entries are lstat'ed, nothing is read or
// opened but directories), and the bound keeps a directory of many thousand
// files cheap for the control loop.
int64_t NewestChangeUs(const std::filesystem::path& root, const std::filesystem::path& relative,
                       int max_entries = 1000);

}  // namespace stoker::server
