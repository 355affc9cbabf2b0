// Rule 7 of policy.h: when a shape first fits as running jobs end, and the
// reservation of the first blocked job (policy_backfill.h).
#include "scheduler/policy_backfill.h"

#include <algorithm>

#include "scheduler/policy_place.h"

namespace stoker::scheduler::internal {

const std::vector<Event>& Ends::Sorted() {
  if (sorted_ < events.size()) {
    auto by_end = [](const Event& a, const Event& b) { return a.end_us < b.end_us; };
    const auto mid = events.begin() + static_cast<long>(sorted_);
    std::stable_sort(mid, events.end(), by_end);
    std::inplace_merge(events.begin(), mid, events.end(), by_end);
    sorted_ = events.size();
  }
  return events;
}

std::optional<Earliest> EarliestFit(const Cluster& c, const State& s,
                                    const std::vector<Event>& events, const HoldPool& pool,
                                    const Shape& shape, const PolicyOptions& o, int64_t now_us,
                                    bool after_jobs, State& copy) {
  CopyInto(s, false, copy);
  // A single replica can only start fitting on a node that something left.
  const bool single = shape.replicas == 1;
  std::vector<int> touched;
  std::vector<Hold> holds;
  size_t i = 0;
  int64_t t = now_us;
  bool fits = Place(c, copy, shape, o, holds);
  while (!fits && i < events.size()) {
    t = events[i].end_us;
    touched.clear();
    for (; i < events.size() && events[i].end_us == t; ++i) {
      for (uint32_t k = events[i].first; k < events[i].last; ++k) {
        pool.Book(c, copy, pool[k], -1);
        touched.push_back(pool[k].node);
      }
    }
    if (!MayFit(copy, shape, o)) continue;
    if (single && std::none_of(touched.begin(), touched.end(),
                               [&](int n) { return NodeFits(c, copy, shape.needs[0], n, o); })) {
      continue;
    }
    fits = Place(c, copy, shape, o, holds);
  }
  if (!fits) return std::nullopt;
  Earliest e;
  e.start_us = std::max(t, now_us);
  e.holds = std::move(holds);
  if (after_jobs) {
    std::vector<char> used(s.nodes.size(), 0);
    for (const Hold& h : e.holds) used[h.node] = 1;
    for (size_t j = 0; j < i; ++j) {
      bool shares = false;
      for (uint32_t k = events[j].first; k < events[j].last && !shares; ++k) {
        shares = used[pool[k].node] != 0;
      }
      if (shares) e.after_jobs.push_back(*events[j].job_id);
    }
  }
  return e;
}

Earliest ReservationFor(const Cluster& c, const State& s, Ends& ends, const Shape& shape,
                        const PolicyOptions& o, int64_t now_us, State& scratch, State& replay) {
  if (auto e = EarliestFit(c, s, ends.Sorted(), ends.pool, shape, o, now_us, true, replay)) {
    return std::move(*e);
  }
  // Waits on unbounded jobs: drain the nodes with the most free GPUs.
  Earliest drain;
  std::vector<double> rank(s.nodes.size());
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    rank[n] = -s.nodes[n].free_total -
              (s.nodes[n].cpu_cap - s.nodes[n].cpu_used) / (1 + s.nodes[n].cpu_cap);
  }
  // The shape fits the idle cluster, but the greedy placement with a
  // rank may take other nodes; should it fail, nothing is held.
  if (Place(c, scratch, shape, o, drain.holds, &rank)) {
    for (const Hold& h : drain.holds) Book(c, scratch, h, -1);
  } else {
    drain.holds.clear();
  }
  return drain;
}

}  // namespace stoker::scheduler::internal
