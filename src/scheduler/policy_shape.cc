// Jobs' asks compiled against the cluster (policy_shape.h).
//
// [[gnu::hot]] marks what runs for every job or every new shape: the linker
// keeps such functions together (.text.hot) across the policy_*.cc files, as
// one file kept them before the split; scattered, they cost instruction-cache
// misses on queues of many shapes (bench/scheduler/RESULTS.md, 2026-11-26).
#include "scheduler/policy_shape.h"

#include <algorithm>
#include <tuple>

namespace stoker::scheduler::internal {

[[gnu::hot]] Shape Compile(const Cluster& c, const std::vector<ReplicaAsk>& replicas) {
  Shape s;
  s.replicas = replicas.size();
  for (size_t i = 0; i < replicas.size(); ++i) {
    const ReplicaAsk& r = replicas[i];
    Need n;
    n.replica = static_cast<int>(i);
    n.cpus = r.cpus;
    n.mem = static_cast<double>(r.memory_bytes);
    if (r.gpus >= 1) {
      n.whole = static_cast<int>(r.gpus);
    } else {
      n.frac = r.gpus;
    }
    if (r.gpus > 0) n.serving = c.ServingFor(r.gpu_type);
    s.total_gpus += r.gpus;
    if (n.whole > 0) {
      auto it = std::find_if(s.whole_by_type.begin(), s.whole_by_type.end(),
                             [&](const auto& p) { return p.first == n.serving; });
      if (it == s.whole_by_type.end()) {
        s.whole_by_type.emplace_back(n.serving, n.whole);
      } else {
        it->second += n.whole;
      }
    }
    s.needs.push_back(n);
  }
  std::stable_sort(s.needs.begin(), s.needs.end(), [](const Need& a, const Need& b) {
    return std::tie(b.whole, b.frac, b.cpus, b.mem) < std::tie(a.whole, a.frac, a.cpus, a.mem);
  });
  return s;
}

}  // namespace stoker::scheduler::internal
