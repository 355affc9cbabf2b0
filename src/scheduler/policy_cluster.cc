// The cluster and its bookings for one Schedule() call (policy_cluster.h).
//
// [[gnu::hot]] marks what runs for every job or every new shape: the linker
// keeps such functions together (.text.hot) across the policy_*.cc files, as
// one file kept them before the split; scattered, they cost instruction-cache
// misses on queues of many shapes (bench/scheduler/RESULTS.md, 2026-11-26).
#include "scheduler/policy_cluster.h"

#include <algorithm>

namespace stoker::scheduler::internal {

Cluster::Cluster(const std::vector<resources::Node>& n) : nodes(&n) {
  // Types are few and neighbouring GPUs usually share one, so the previous
  // GPU's type, then a scan of the known types, beats hashing every name.
  type_of.resize(n.size());
  int last = -1;
  for (size_t i = 0; i < n.size(); ++i) {
    type_of[i].reserve(n[i].gpus.size());
    for (const resources::Gpu& g : n[i].gpus) {
      if (last < 0 || type_names[last] != g.type) {
        auto it = std::find(type_names.begin(), type_names.end(), g.type);
        last = static_cast<int>(it - type_names.begin());
        if (it == type_names.end()) {
          type_names.push_back(g.type);
          type_memory.push_back(g.memory_bytes);
        }
      }
      type_memory[last] = std::min(type_memory[last], g.memory_bytes);
      type_of[i].push_back(last);
    }
  }
  const size_t types = type_names.size();
  pos_off.reserve(n.size() * types + 1);
  for (size_t i = 0; i < n.size(); ++i) {
    max_per_node = std::max(max_per_node, static_cast<int>(type_of[i].size()));
    for (size_t t = 0; t < types; ++t) {
      const size_t first = pos_flat.size();
      pos_off.push_back(static_cast<int>(first));
      for (size_t p = 0; p < type_of[i].size(); ++p) {
        if (type_of[i][p] == static_cast<int>(t)) pos_flat.push_back(static_cast<int>(p));
      }
      max_per_type = std::max(max_per_type, static_cast<int>(pos_flat.size() - first));
    }
  }
  pos_off.push_back(static_cast<int>(pos_flat.size()));
}

const Serving* Cluster::ServingFor(const std::string& type) const {
  for (const auto& sv : serving) {
    if (sv->type == type) return sv.get();
  }
  Serving s;
  s.type = type;
  uint64_t want = resources::AcceleratorMemoryBytes(type);
  for (int t = 0; t < Types(); ++t) {
    if (type_names[t] == type) {
      s.exact = t;
    } else if (want > 0 && type_memory[t] >= want) {
      s.subs.push_back(t);
    }
  }
  std::stable_sort(s.subs.begin(), s.subs.end(),
                   [&](int a, int b) { return type_memory[a] < type_memory[b]; });
  if (s.exact >= 0) s.allowed.push_back(s.exact);
  s.allowed.insert(s.allowed.end(), s.subs.begin(), s.subs.end());
  serving.push_back(std::make_unique<Serving>(std::move(s)));
  return serving.back().get();
}

State IdleState(const Cluster& c, const PolicyOptions& o) {
  State s;
  const size_t nodes = c.nodes->size(), types = static_cast<size_t>(c.Types());
  s.free_whole.assign(types, 0);
  s.by_free = NodeSets(c.FreeSet(c.Types(), 0), nodes);
  s.with_free = NodeSets(types, nodes);
  s.with_partial = NodeSets(types, nodes);
  s.by_total = NodeSets(static_cast<size_t>(c.max_per_node) + 1, nodes);
  for (size_t i = 0; i < c.nodes->size(); ++i) {
    const resources::Node& n = (*c.nodes)[i];
    NodeState ns;
    ns.cpu_cap = n.cpus * o.cpu_oversubscription;
    ns.mem_cap = static_cast<double>(n.memory_bytes) * o.cpu_oversubscription;
    ns.gpu_base = static_cast<int>(s.frac.size());
    ns.type_base = static_cast<int>(s.node_free.size());
    s.frac.resize(s.frac.size() + n.gpus.size(), 0.0);
    s.node_free.resize(s.node_free.size() + c.Types(), 0);
    for (int t : c.type_of[i]) {
      ++s.node_free[ns.type_base + t];
      ++s.free_whole[t];
    }
    ns.free_total = static_cast<int>(n.gpus.size());
    const int node = static_cast<int>(i);
    for (int t = 0; t < c.Types(); ++t) {
      const int free = s.node_free[ns.type_base + t];
      s.by_free.Insert(c.FreeSet(t, free), node);
      if (free > 0) s.with_free.Insert(t, node);
    }
    s.by_total.Insert(ns.free_total, node);
    s.nodes.push_back(std::move(ns));
  }
  s.node_partial.assign(s.node_free.size(), 0);
  return s;
}

void CopyInto(const State& s, bool logged, State& to) {
  to.nodes = s.nodes;
  to.frac = s.frac;
  to.node_free = s.node_free;
  to.node_partial = s.node_partial;
  to.free_whole = s.free_whole;
  to.by_free = s.by_free;
  to.with_free = s.with_free;
  to.with_partial = s.with_partial;
  to.by_total = s.by_total;
  to.logged = logged;
  to.log.clear();
}

State Copy(const State& s, bool logged) {
  State copy;
  CopyInto(s, logged, copy);
  return copy;
}

[[gnu::hot]] void Book(const Cluster& c, State& s, int node, double cpus, double mem,
                       const GpuList::Entry* first, const GpuList::Entry* last, int sign) {
  if (s.logged) s.log.push_back(node);
  NodeState& ns = s.nodes[node];
  ns.cpu_used += sign * cpus;
  ns.mem_used += sign * mem;
  for (const GpuList::Entry* g = first; g != last; ++g) {
    const auto [pos, f] = *g;
    const int t = c.type_of[node][pos];
    double& frac = s.frac[ns.gpu_base + pos];
    const bool was_free = frac <= kEps, was_partial = IsPartial(frac);
    frac += sign * f;
    if (frac <= kEps) frac = 0;
    const bool is_free = frac <= kEps;
    if (is_free != was_free) {
      const int delta = is_free ? 1 : -1;
      int& free = s.node_free[ns.type_base + t];
      s.by_free.Move(c.FreeSet(t, free), c.FreeSet(t, free + delta), node);
      if (free == 0 || free + delta == 0) s.with_free.Flip(t, node);
      s.by_total.Move(ns.free_total, ns.free_total + delta, node);
      free += delta;
      ns.free_total += delta;
      s.free_whole[t] += delta;
    }
    if (IsPartial(frac) != was_partial) {
      const int delta = was_partial ? -1 : 1;
      int& partial = s.node_partial[ns.type_base + t];
      if (partial == 0 || partial + delta == 0) s.with_partial.Flip(t, node);
      partial += delta;
    }
  }
}

}  // namespace stoker::scheduler::internal
