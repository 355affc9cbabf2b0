// Internal to the scheduling policy (policy.h is its only public header):
// rule 7, time. Replays the ends of the jobs that hold resources (running
// jobs with a runtime bound, and those the call starts with one) to find when
// a shape first fits: the reservation of the first blocked job, and the
// estimated start of the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/policy_cluster.h"
#include "scheduler/policy_shape.h"

namespace stoker::scheduler::internal {

// A job that holds resources and may end: running before the call or
// started by it. Its holds are [first, last) of the call's pool of holds
// (one allocation for all jobs instead of one per job).
struct Event {
  int64_t end_us = 0;
  const std::string* job_id = nullptr;
  uint32_t first = 0, last = 0;
};

// The jobs of one call that may end, with their holds.
struct Ends {
  std::vector<Event> events;  // as added; Sorted() orders them in place
  HoldPool pool;              // the holds of `events`

  // Adds the job `*job_id` (which must outlive this), ending at `end_us`,
  // whose holds are pool[first, pool.size()).
  void Add(int64_t end_us, const std::string* job_id, size_t first) {
    events.push_back(
        {end_us, job_id, static_cast<uint32_t>(first), static_cast<uint32_t>(pool.size())});
  }

  // `events` sorted by end, stably (equal ends keep the order they were
  // added in). Jobs started by the call are added between calls; the sorted
  // prefix is kept and only the added tail is sorted and merged in.
  const std::vector<Event>& Sorted();

 private:
  size_t sorted_ = 0;
};

struct Earliest {
  int64_t start_us = 0;
  std::vector<Hold> holds;
  std::vector<std::string> after_jobs;
};

// Replays the ends of `events` (sorted by end; holds in `pool`) on `copy`, a
// copy of `s` made here (the caller's buffer, reused), until `shape` fits.
// nullopt when it never does. With `after_jobs`, also names the ended jobs
// that shared a node with the placement.
std::optional<Earliest> EarliestFit(const Cluster& c, const State& s,
                                    const std::vector<Event>& events, const HoldPool& pool,
                                    const Shape& shape, const PolicyOptions& o, int64_t now_us,
                                    bool after_jobs, State& copy);

// Rule 7's reservation for the first blocked job, of `shape`, which does not
// fit on `s` now: its EarliestFit as `ends` end, naming the jobs it waits
// for. When there is none (it waits on jobs without a bound): start 0 and the
// holds it would take on the emptied cluster, preferring the nodes with the
// most free GPUs (then CPUs) on `s` now, so that those drain for it; no holds
// when even that greedy placement fails (the shape fits the idle cluster, but
// a placement with a rank may take other nodes). `scratch` is an idle state
// and is left idle; `replay` is EarliestFit's buffer.
Earliest ReservationFor(const Cluster& c, const State& s, Ends& ends, const Shape& shape,
                        const PolicyOptions& o, int64_t now_us, State& scratch, State& replay);

}  // namespace stoker::scheduler::internal
