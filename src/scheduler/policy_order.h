// Internal to the scheduling policy (policy.h is its only public header):
// rule 1, the queue order. Users are interned once per call and the ordering
// keys gathered in one pass over the queue; OrderQueue sorts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/policy_hash.h"

namespace stoker::scheduler::internal {

// Users of one snapshot, interned: per-user facts live in vectors indexed by
// the id, so the hot loop hashes each job's user once.
// The names are copies, side by side: comparing with a name in the first job
// of each user, scattered over the queue, would miss the cache.
struct Users {
  HashIndex index;
  std::vector<std::string> names;

  [[gnu::always_inline]] uint32_t Id(std::string_view user) {
    bool added = false;
    uint32_t id = index.FindOrAdd(
        StringHash(user), [&](uint32_t i) { return SameText(names[i], user); }, &added);
    if (added) names.emplace_back(user);
    return id;
  }
};

// Rule 1's aging formula (EffectivePriority in policy.h); inline because
// GatherKeys runs it for every queued job.
inline int64_t AgedPriority(const QueuedJob& job, int64_t now_us, const PolicyOptions& options) {
  if (options.aging_threshold_us <= 0 || now_us <= job.submit_us) return job.priority;
  return job.priority + (now_us - job.submit_us) / options.aging_threshold_us;
}

// The per-job facts that ordering needs, gathered in one pass over the queue
// in index (memory) order: walking 10,000 jobs in priority order would miss
// the cache on every job.
struct QueueKeys {
  std::vector<uint32_t> user;   // interned user
  std::vector<int64_t> prio;    // effective priority at now
  std::vector<int64_t> submit;  // submit_us
};

// Also calls per_job(index, job, interned user) for each job, in the same
// pass.
template <typename PerJob>
QueueKeys GatherKeys(const Snapshot& snap, Users& users, PerJob&& per_job) {
  QueueKeys k;
  const size_t q = snap.queued.size();
  k.user.resize(q);
  k.prio.resize(q);
  k.submit.resize(q);
  for (size_t i = 0; i < q; ++i) {
    // Each job's replicas are a heap block of their own, which per_job reads
    // first thing: ask for it a few jobs ahead so that the miss overlaps.
    if (i + 8 < q) __builtin_prefetch(snap.queued[i + 8].replicas.data());
    const QueuedJob& j = snap.queued[i];
    k.user[i] = users.Id(j.user);
    k.prio[i] = AgedPriority(j, snap.now_us, snap.options);
    k.submit[i] = j.submit_us;
    per_job(i, j, k.user[i]);
  }
  return k;
}

// Each interned user's decayed GPU-seconds from the snapshot, by user id
// (0 for a user the snapshot has no usage for).
std::vector<double> UsageByUser(const Snapshot& snap, const Users& users);

// Rule 1's order (indices into the queue), given each user's decayed usage.
// The key is (effective priority desc, usage asc, submission asc, index asc).
// Usage only matters through its rank among the users, so when the
// (priority, usage rank) classes are few compared with the queue (the common
// case: a handful of priorities, tens of users), a stable counting sort into
// classes does the work in O(Q), and a class needs sorting only if submit
// times go backwards in it; otherwise a comparison sort. Same order either way.
std::vector<uint32_t> OrderQueue(const QueueKeys& k, const std::vector<double>& usage);

}  // namespace stoker::scheduler::internal
