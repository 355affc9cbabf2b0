// Rules 2-5 of policy.h: where a gang goes (policy_place.h).
//
// [[gnu::hot]] marks what runs for every job or every new shape: the linker
// keeps such functions together (.text.hot) across the policy_*.cc files, as
// one file kept them before the split; scattered, they cost instruction-cache
// misses on queues of many shapes (bench/scheduler/RESULTS.md, 2026-11-26).
#include "scheduler/policy_place.h"

#include <string>

namespace stoker::scheduler::internal {
namespace {

// Rule 4: the replica's CPUs and memory fit the node's (oversubscribed)
// capacity.
inline bool FitsCpuMem(const NodeState& ns, const Need& need) {
  if (ns.cpu_used + need.cpus > ns.cpu_cap + kEps) return false;
  return !(ns.mem_used + need.mem > ns.mem_cap + 1);
}

// Scores node `n` for `need` using GPU types `types`; false if it does not fit.
[[gnu::always_inline]] inline bool ScoreNode(const Cluster& c, const State& s, const Need& need,
                                             IdSpan types, int n, bool in_gang, double rank,
                                             Choice* out) {
  const NodeState& ns = s.nodes[n];
  if (!FitsCpuMem(ns, need)) return false;
  Score& sc = out->score;
  sc.gang = in_gang ? 0 : 1;
  sc.rank = rank;
  sc.slack = 0;
  out->node = n;
  out->pos = -1;
  if (need.whole > 0) {
    int avail = 0;
    for (int t : types) avail += s.node_free[ns.type_base + t];
    if (avail < need.whole) return false;
    sc.fit = avail - need.whole;
  } else if (need.frac > 0) {
    double best_frac = -1;
    for (int t : types) {
      for (int p : c.Positions(n, t)) {
        double f = s.frac[ns.gpu_base + p];
        if (f + need.frac <= 1 + kEps && f > best_frac) {
          best_frac = f;
          out->pos = p;
        }
      }
    }
    if (out->pos < 0) return false;
    sc.fit = 1 - best_frac - need.frac;
  } else {
    sc.fit = ns.free_total;
    sc.slack = ns.cpu_cap - ns.cpu_used - need.cpus;
  }
  return true;
}

// Brings `h` up to date with the state's log; false when a full scan is
// needed instead.
[[gnu::hot]] bool RefreshHint(const Cluster& c, const State& s, const Need& need, IdSpan types,
                              PlaceHint::Pass& h) {
  if (!h.valid) return false;
  const size_t end = s.log.size();
  if (end - h.log_pos > s.nodes.size()) return false;  // a scan is cheaper
  Choice best = h.best;
  const int star = best.node;
  for (size_t i = h.log_pos; i < end; ++i) {
    if (s.log[i] != star || star < 0) continue;
    Choice now;
    if (!ScoreNode(c, s, need, types, star, false, 0, &now) || best.score < now.score) {
      return false;  // the old best got worse: the untouched nodes are unknown
    }
    best = now;
    break;
  }
  for (size_t i = h.log_pos; i < end; ++i) {
    const int n = s.log[i];
    if (n == star) continue;
    Choice cand;
    if (ScoreNode(c, s, need, types, n, false, 0, &cand) && best.BeatenBy(cand)) best = cand;
  }
  h.best = best;
  h.log_pos = end;
  return true;
}

// The best node for `need` outside its gang (the caller scores the gang's
// nodes first): the lowest Score, then the lowest index; node -1 when none
// fits. Equal to scoring every node. With a rank (or a share too small to
// rule out fully booked GPUs) it does just that; otherwise it visits only the
// nodes that the state's node sets say may fit, in groups that each score
// better than the next, and stops once no node left can beat the best:
//  - whole GPUs of one type: the nodes with k of them free, for k = count,
//    count + 1, ...: all score k - count, so the first that fits wins;
//  - whole GPUs of several types: the nodes with a free GPU of one of them,
//    stopping at a node that fits exactly (fit 0 cannot be beaten);
//  - a GPU share: the nodes with a partly booked GPU of the types, then the
//    first other node with a free one (those all score 1 - share);
//  - no GPU: the nodes with k free GPUs, for k = 0, 1, ...: fit is k, so the
//    first group with a node that fits holds the best, the one with the
//    least CPU left over (ScoreNode's slack).
[[gnu::hot]] Choice BestNode(const Cluster& c, const State& s, const Need& need, IdSpan types,
                             const std::vector<double>* rank) {
  Choice best, sc;
  // Scores n; keeps it when it beats the best. Nodes come in index order, so
  // on equal scores the earlier one stays. Returns whether n fits.
  auto consider = [&](int n) {
    if (!ScoreNode(c, s, need, types, n, false, rank ? (*rank)[n] : 0, &sc)) return false;
    if (best.BeatenBy(sc)) best = sc;
    return true;
  };
  const size_t words = s.by_free.words();
  // The w-th word of the union of sets[t] over the allowed types t.
  auto any_type = [&](const NodeSets& sets) {
    return [&sets, types](size_t w) {
      uint64_t bits = 0;
      for (int t : types) bits |= sets.Word(static_cast<size_t>(t), w);
      return bits;
    };
  };
  // A share of kEps or less fits even a fully booked GPU, which no set holds.
  const bool tiny_share = need.whole == 0 && need.frac > 0 && need.frac <= kEps;
  if (rank != nullptr || tiny_share) {
    for (int n = 0; n < static_cast<int>(s.nodes.size()); ++n) consider(n);
  } else if (need.whole > 0 && types.last - types.first == 1) {
    const int t = *types.begin();
    for (int k = need.whole; k <= c.max_per_type; ++k) {
      const size_t set = c.FreeSet(t, k);
      auto word = [&](size_t w) { return s.by_free.Word(set, w); };
      if (ForEachNode(words, word, consider)) break;
    }
  } else if (need.whole > 0) {
    ForEachNode(words, any_type(s.with_free),
                [&](int n) { return consider(n) && best.score.fit == 0; });
  } else if (need.frac > 0) {
    auto partial = any_type(s.with_partial);
    ForEachNode(words, partial, [&](int n) {
      consider(n);
      return false;
    });
    ForEachNode(words, any_type(s.with_free), [&](int n) {
      const bool scored = (partial(static_cast<size_t>(n) / 64) >> (n % 64)) & 1;
      return !scored && consider(n);
    });
  } else {
    // Within a group only the slack differs: compare it alone, in a loop
    // that runs over many nodes, then score the winner in full.
    for (int k = 0; k <= c.max_per_node && best.node < 0; ++k) {
      int best_n = -1;
      double best_slack = 0;
      auto word = [&](size_t w) { return s.by_total.Word(static_cast<size_t>(k), w); };
      ForEachNode(words, word, [&](int n) {
        const NodeState& ns = s.nodes[n];
        if (!FitsCpuMem(ns, need)) return false;
        const double slack = ns.cpu_cap - ns.cpu_used - need.cpus;
        if (best_n < 0 || slack < best_slack) best_n = n, best_slack = slack;
        return false;
      });
      if (best_n >= 0) consider(best_n);
    }
  }
  return best;
}

}  // namespace

[[gnu::hot]] bool Place(const Cluster& c, State& s, const Shape& shape, const PolicyOptions& o,
                        std::vector<Hold>& holds, const std::vector<double>* rank, Hints* hints) {
  if (!MayFit(s, shape, o)) return false;
  holds.resize(shape.replicas);
  size_t placed = 0;  // shape.needs[0, placed) are booked
  for (const Need& need : shape.needs) {
    bool gpu = need.whole > 0 || need.frac > 0;
    int passes = gpu && o.accelerator_substitution && !need.serving->subs.empty() ? 2 : 1;
    Choice best;
    int best_pass = 0;
    PlaceHint* hint = hints != nullptr && s.logged && rank == nullptr && need.ask >= 0
                          ? hints->For(need.ask)
                          : nullptr;
    for (int pass = gpu && need.serving->exact < 0 ? 1 : 0; pass < passes && best.node < 0;
         ++pass) {
      const IdSpan types = gpu ? Allowed(need, pass) : IdSpan();
      best_pass = pass;
      // A node the gang already uses beats every other (rule 2's packing), so
      // when one of those fits, only they need a score.
      Choice sc;
      for (size_t i = 0; i < placed; ++i) {
        const int n = holds[shape.needs[i].replica].node;
        if (ScoreNode(c, s, need, types, n, true, rank ? (*rank)[n] : 0, &sc) &&
            best.BeatenBy(sc)) {
          best = sc;
        }
      }
      if (best.node >= 0) continue;
      if (hint != nullptr && RefreshHint(c, s, need, types, hint->pass[pass])) {
        best = hint->pass[pass].best;
        continue;
      }
      best = BestNode(c, s, need, types, rank);
      if (hint != nullptr) hint->pass[pass] = {true, s.log.size(), best};
    }
    if (best.node < 0) {
      for (size_t i = 0; i < placed; ++i) Book(c, s, holds[shape.needs[i].replica], -1);
      return false;
    }
    const int n = best.node;
    Hold& h = holds[need.replica];
    h.node = n;
    h.cpus = need.cpus;
    h.mem = need.mem;
    h.gpus.clear();
    if (need.whole > 0) {
      const NodeState& ns = s.nodes[n];
      for (int t : Allowed(need, best_pass)) {
        for (int p : c.Positions(n, t)) {
          if (static_cast<int>(h.gpus.size()) == need.whole) break;
          if (s.frac[ns.gpu_base + p] <= kEps) h.gpus.emplace_back(p, 1.0);
        }
      }
    } else if (need.frac > 0) {
      h.gpus.emplace_back(best.pos, need.frac);
    }
    Book(c, s, h, +1);
    ++placed;
  }
  return true;
}

std::vector<PlacedReplica> ToPlaced(const Cluster& c, const std::vector<Hold>& holds,
                                    const std::vector<ReplicaAsk>& asks) {
  std::vector<PlacedReplica> out;
  out.reserve(holds.size());
  for (size_t i = 0; i < holds.size(); ++i) {
    const Hold& h = holds[i];
    const resources::Node& node = (*c.nodes)[h.node];
    PlacedReplica p;
    p.node = h.node;
    p.cpus = h.cpus;
    p.memory_bytes = asks[i].memory_bytes;
    p.gpus.reserve(h.gpus.size());  // one allocation, not one per doubling
    for (auto [pos, f] : h.gpus) {
      const resources::Gpu& g = node.gpus[pos];
      p.gpus.push_back(
          {g.index, f, static_cast<uint64_t>(f * static_cast<double>(g.memory_bytes))});
      if (g.type != asks[i].gpu_type) {
        // "NVIDIA_L4 served by GPU 3 (NVIDIA_H100_80GB)", in one buffer.
        std::string& note = p.substitutions.emplace_back();
        note.reserve(asks[i].gpu_type.size() + g.type.size() + 32);
        note += asks[i].gpu_type;
        note += " served by GPU ";
        note += std::to_string(g.index);
        note += " (";
        note += g.type;
        note += ')';
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

[[gnu::hot]] bool NodeFits(const Cluster& c, const State& s, const Need& need, int n,
                           const PolicyOptions& o) {
  const NodeState& ns = s.nodes[n];
  if (!FitsCpuMem(ns, need)) return false;
  int pass = o.accelerator_substitution ? 1 : 0;
  if (need.whole > 0) {
    int avail = 0;
    for (int t : Allowed(need, pass)) avail += s.node_free[ns.type_base + t];
    return avail >= need.whole;
  }
  if (need.frac > 0) {
    bool any = false;
    for (int t : Allowed(need, pass)) {
      for (int p : c.Positions(n, t)) any |= s.frac[ns.gpu_base + p] + need.frac <= 1 + kEps;
    }
    return any;
  }
  return true;
}

[[gnu::hot]] bool FitsIdle(const Cluster& c, const State& idle, State& scratch, const Shape& shape,
                           const PolicyOptions& o, std::vector<Hold>& holds) {
  if (shape.replicas == 1) {
    for (int n = 0; n < static_cast<int>(idle.nodes.size()); ++n) {
      if (NodeFits(c, idle, shape.needs[0], n, o)) return true;
    }
    return false;
  }
  if (!Place(c, scratch, shape, o, holds)) return false;
  for (const Hold& h : holds) Book(c, scratch, h, -1);
  return true;
}

}  // namespace stoker::scheduler::internal
