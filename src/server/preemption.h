// Which jobs may be preempted (docs/preemption.md), and when a job last saved
// its work. The choice of victims is the scheduler's rule 9
// (scheduler/policy.h); the controller stops and requeues them.
#pragma once

#include <cstdint>
#include <filesystem>

#include "server/config.h"
#include "spec/custom_job.h"

namespace stoker::server {

// Whether `job` may be preempted under `config` (enabled or not): label
// stoker-preemptible "true" or "false" decides when present; otherwise
// scheduling.strategy SPOT, or a priority below config.preemptible_below.
bool IsPreemptible(const spec::CustomJob& job, const PreemptionConfig& config);

// The newest modification time (microseconds since the epoch) of the files
// and directories in `dir` and one level below it, looking at no more than
// `max_entries` entries and never following links; 0 when there is none or
// `dir` cannot be read. Bounded so that a trainer's directory of many
// thousand files costs the control loop little.
int64_t NewestChangeUs(const std::filesystem::path& dir, int max_entries = 1000);

}  // namespace stoker::server
