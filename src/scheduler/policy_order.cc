// Rule 1 of policy.h: the order in which the queue is considered.
#include "scheduler/policy_order.h"

#include <algorithm>
#include <cmath>

#include "scheduler/policy.h"

namespace stoker::scheduler {
namespace internal {

std::vector<double> UsageByUser(const Snapshot& snap, const Users& users) {
  std::vector<double> usage(users.names.size(), 0.0);
  for (uint32_t u = 0; u < usage.size(); ++u) {
    auto it = snap.usage_gpu_seconds.find(users.names[u]);
    if (it != snap.usage_gpu_seconds.end()) usage[u] = it->second;
  }
  return usage;
}

std::vector<uint32_t> OrderQueue(const QueueKeys& k, const std::vector<double>& usage) {
  const size_t q = k.prio.size();
  std::vector<uint32_t> order(q);
  if (q == 0) return order;
  // Usage rank per user: equal usages share a rank. NaN counts as 0 (a NaN
  // usage had no consistent order before either).
  std::vector<uint32_t> by_usage(usage.size());
  for (uint32_t u = 0; u < by_usage.size(); ++u) by_usage[u] = u;
  auto use = [&](uint32_t u) { return std::isnan(usage[u]) ? 0.0 : usage[u]; };
  std::sort(by_usage.begin(), by_usage.end(),
            [&](uint32_t a, uint32_t b) { return use(a) < use(b); });
  std::vector<uint32_t> rank(usage.size(), 0);
  for (size_t i = 1; i < by_usage.size(); ++i) {
    rank[by_usage[i]] = rank[by_usage[i - 1]] + (use(by_usage[i - 1]) < use(by_usage[i]) ? 1 : 0);
  }
  const uint64_t ranks = by_usage.empty() ? 1 : rank[by_usage.back()] + 1;

  const auto [lo_it, hi_it] = std::minmax_element(k.prio.begin(), k.prio.end());
  const int64_t hi = *hi_it;
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(*lo_it);  // exact
  const uint64_t max_classes = 4 * q + 1024;
  if (span >= max_classes || (span + 1) * ranks > max_classes) {
    for (size_t i = 0; i < q; ++i) order[i] = static_cast<uint32_t>(i);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (k.prio[a] != k.prio[b]) return k.prio[a] > k.prio[b];
      if (rank[k.user[a]] != rank[k.user[b]]) return rank[k.user[a]] < rank[k.user[b]];
      if (k.submit[a] != k.submit[b]) return k.submit[a] < k.submit[b];
      return a < b;
    });
    return order;
  }
  // Class c = (hi - prio) x ranks + usage rank: smaller c comes first.
  std::vector<uint32_t> cls(q);
  std::vector<uint32_t> start((span + 1) * ranks + 1, 0);
  for (size_t i = 0; i < q; ++i) {
    cls[i] = static_cast<uint32_t>(static_cast<uint64_t>(hi - k.prio[i]) * ranks + rank[k.user[i]]);
    ++start[cls[i] + 1];
  }
  for (size_t c = 1; c < start.size(); ++c) start[c] += start[c - 1];
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < q; ++i) order[fill[cls[i]]++] = static_cast<uint32_t>(i);  // stable
  auto by_submit = [&](uint32_t a, uint32_t b) { return k.submit[a] < k.submit[b]; };
  for (size_t c = 0; c + 1 < start.size(); ++c) {
    auto first = order.begin() + start[c], last = order.begin() + start[c + 1];
    if (!std::is_sorted(first, last, by_submit)) std::stable_sort(first, last, by_submit);
  }
  return order;
}

}  // namespace internal

int64_t EffectivePriority(const QueuedJob& job, int64_t now_us, const PolicyOptions& options) {
  return internal::AgedPriority(job, now_us, options);
}

std::vector<size_t> QueueOrder(const Snapshot& snap) {
  internal::Users users;
  internal::QueueKeys keys =
      internal::GatherKeys(snap, users, [](size_t, const QueuedJob&, uint32_t) {});
  const std::vector<uint32_t> order =
      internal::OrderQueue(keys, internal::UsageByUser(snap, users));
  return std::vector<size_t>(order.begin(), order.end());
}

}  // namespace stoker::scheduler
