// Internal to the scheduler (see README.md): rule 9 of policy.h, which
// running jobs to preempt so that waiting jobs can start.
#pragma once

#include <vector>

#include "scheduler/policy.h"

namespace stoker::scheduler::internal {

// Rule 9 on top of `decision` (rules 1-8 for `snap`): the victims, in the
// order chosen; empty when preemption is off. Reads decision.start (booked
// before anything is preempted) and decision.wait (the waiting jobs, in queue
// order). Cost when enabled: O(running + starts) bookings, then for each of
// at most max_jobs_considered waiting jobs a placement per victim tried.
std::vector<Preemption> ChoosePreemptions(const Snapshot& snap, const Decision& decision);

}  // namespace stoker::scheduler::internal
