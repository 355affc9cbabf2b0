#include "scheduler/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace stoker::scheduler {
namespace {

constexpr double kEps = 1e-9;
constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr int64_t kUsPerS = 1000000;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Gb(double bytes) { return Num(std::round(bytes / kGiB * 100) / 100) + " GB"; }

// RFC 3339 UTC, second precision: "2026-11-22T10:00:00Z".
std::string FormatTime(int64_t us) {
  std::time_t s = static_cast<std::time_t>(us / kUsPerS);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The GPU types that can serve one requested type: exact first, then
// substitutes by ascending memory (least waste).
struct Serving {
  std::string type;
  int exact = -1;         // type id, -1 when the cluster has none
  std::vector<int> subs;  // type ids, never including exact
};

// Immutable facts about the cluster, built once per call.
struct Cluster {
  const std::vector<resources::Node>* nodes = nullptr;
  std::vector<std::string> type_names;
  std::vector<uint64_t> type_memory;                    // smallest GPU memory of the type
  std::vector<std::vector<int>> type_of;                // [node][pos] -> type id
  std::vector<std::vector<std::vector<int>>> type_pos;  // [node][type] -> positions
  mutable std::unordered_map<std::string, Serving> serving;

  explicit Cluster(const std::vector<resources::Node>& n) : nodes(&n) {
    std::unordered_map<std::string, int> ids;
    for (const resources::Node& node : n) {
      for (const resources::Gpu& g : node.gpus) {
        auto [it, fresh] = ids.emplace(g.type, static_cast<int>(type_names.size()));
        if (fresh) {
          type_names.push_back(g.type);
          type_memory.push_back(g.memory_bytes);
        }
        type_memory[it->second] = std::min(type_memory[it->second], g.memory_bytes);
      }
    }
    type_of.resize(n.size());
    type_pos.assign(n.size(), std::vector<std::vector<int>>(type_names.size()));
    for (size_t i = 0; i < n.size(); ++i) {
      for (size_t p = 0; p < n[i].gpus.size(); ++p) {
        int t = ids[n[i].gpus[p].type];
        type_of[i].push_back(t);
        type_pos[i][t].push_back(static_cast<int>(p));
      }
    }
  }

  int Types() const { return static_cast<int>(type_names.size()); }

  const Serving* ServingFor(const std::string& type) const {
    auto it = serving.find(type);
    if (it != serving.end()) return &it->second;
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
    return &serving.emplace(type, std::move(s)).first->second;
  }

  int PosOf(int node, int gpu_index) const {
    const auto& gpus = (*nodes)[node].gpus;
    for (size_t p = 0; p < gpus.size(); ++p) {
      if (gpus[p].index == gpu_index) return static_cast<int>(p);
    }
    return -1;
  }
};

struct NodeState {
  double cpu_cap = 0, mem_cap = 0;
  double cpu_used = 0, mem_used = 0;
  int gpu_base = 0;   // this node's first entry in State::frac
  int type_base = 0;  // this node's first entry in State::node_free
  int free_total = 0;
};

// What is booked where. Bookings only grow during a call, except on copies
// used to replay running jobs' ends.
// Flat arrays, so that a copy costs a handful of allocations.
struct State {
  std::vector<NodeState> nodes;
  std::vector<double> frac;     // booked fraction per GPU (gpu_base + position)
  std::vector<int> node_free;   // per node and type (type_base + type): unbooked GPUs
  std::vector<int> free_whole;  // per type, cluster-wide
};

// One replica's hold, in internal coordinates (GPU positions, not indexes).
struct Hold {
  int node = 0;
  double cpus = 0;
  double mem = 0;
  std::vector<std::pair<int, double>> gpus;  // position, fraction
};

State IdleState(const Cluster& c, const PolicyOptions& o) {
  State s;
  s.free_whole.assign(c.Types(), 0);
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
    s.nodes.push_back(std::move(ns));
  }
  return s;
}

void Book(const Cluster& c, State& s, const Hold& h, int sign) {
  NodeState& ns = s.nodes[h.node];
  ns.cpu_used += sign * h.cpus;
  ns.mem_used += sign * h.mem;
  for (auto [pos, f] : h.gpus) {
    int t = c.type_of[h.node][pos];
    double& frac = s.frac[ns.gpu_base + pos];
    bool was_free = frac <= kEps;
    frac += sign * f;
    if (frac <= kEps) frac = 0;
    bool is_free = frac <= kEps;
    int delta = static_cast<int>(is_free) - static_cast<int>(was_free);
    s.node_free[ns.type_base + t] += delta;
    ns.free_total += delta;
    s.free_whole[t] += delta;
  }
}

// A replica ask, compiled against the cluster.
struct Need {
  int replica = 0;  // index in the job's replicas
  double cpus = 0, mem = 0;
  int whole = 0;    // whole GPUs
  double frac = 0;  // share of one GPU, when whole == 0
  const Serving* serving = nullptr;
};

struct Shape {
  std::vector<Need> needs;  // largest first
  std::vector<std::pair<const Serving*, int>> whole_by_type;
  double total_gpus = 0;
  size_t replicas = 0;
};

std::string ShapeProblem(const std::vector<ReplicaAsk>& replicas) {
  if (replicas.empty()) return "has no replicas";
  for (size_t i = 0; i < replicas.size(); ++i) {
    const ReplicaAsk& r = replicas[i];
    std::string at = "replicas[" + std::to_string(i) + "]";
    if (!(r.gpus >= 0) || !std::isfinite(r.gpus)) {
      return at + ".gpus is " + Num(r.gpus) + "; use 0 or more";
    }
    if (r.gpus > 1 && r.gpus != std::floor(r.gpus)) {
      return at + ".gpus is " + Num(r.gpus) + "; counts above 1 must be whole numbers (ask for " +
             Num(std::floor(r.gpus)) + " or " + Num(std::ceil(r.gpus)) +
             ", or a fraction below 1 to share one GPU)";
    }
    if (r.gpus > 0 && r.gpu_type.empty()) return at + ".gpu_type is empty; name the GPU type";
    if (!(r.cpus >= 0) || !std::isfinite(r.cpus)) {
      return at + ".cpus is " + Num(r.cpus) + "; use 0 or more";
    }
  }
  return "";
}

Shape Compile(const Cluster& c, const std::vector<ReplicaAsk>& replicas) {
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

// Identical asks hash alike, without allocating (word-wise multiply-xorshift).
uint64_t ShapeHash(const std::vector<ReplicaAsk>& replicas) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  };
  for (const ReplicaAsk& r : replicas) {
    uint64_t bits;
    std::memcpy(&bits, &r.cpus, sizeof bits);
    mix(bits);
    mix(r.memory_bytes);
    std::memcpy(&bits, &r.gpus, sizeof bits);
    mix(bits);
    mix(std::hash<std::string_view>()(r.gpu_type));
  }
  return h;
}

bool SameAsks(const std::vector<ReplicaAsk>& a, const std::vector<ReplicaAsk>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const ReplicaAsk& x, const ReplicaAsk& y) {
                      return x.cpus == y.cpus && x.memory_bytes == y.memory_bytes &&
                             x.gpus == y.gpus && x.gpu_type == y.gpu_type;
                    });
}

// Types a need may use in a pass: 0 = exact only, 1 = exact then substitutes.
template <typename F>
void ForAllowed(const Need& n, int pass, F&& f) {
  if (n.serving->exact >= 0) f(n.serving->exact);
  if (pass == 1) {
    for (int t : n.serving->subs) f(t);
  }
}

int FreeServing(const Cluster& c, const State& s, const Serving& sv, bool subs) {
  (void)c;
  int n = sv.exact >= 0 ? s.free_whole[sv.exact] : 0;
  if (subs) {
    for (int t : sv.subs) n += s.free_whole[t];
  }
  return n;
}

// Cheap necessary condition: enough free whole GPUs of serving types overall.
bool MayFit(const Cluster& c, const State& s, const Shape& shape, const PolicyOptions& o) {
  for (const auto& [sv, count] : shape.whole_by_type) {
    if (FreeServing(c, s, *sv, o.accelerator_substitution) < count) return false;
  }
  return true;
}

using Score = std::tuple<int, double, double, double, int>;

// Places every replica or none. On success books the holds on `s` and
// returns them in replica order; `rank` (lower first) breaks ties between
// otherwise equal nodes.
std::optional<std::vector<Hold>> Place(const Cluster& c, State& s, const Shape& shape,
                                       const PolicyOptions& o,
                                       const std::vector<double>* rank = nullptr) {
  if (!MayFit(c, s, shape, o)) return std::nullopt;
  const int nodes = static_cast<int>(s.nodes.size());
  std::vector<Hold> holds(shape.replicas);
  std::vector<char> in_gang(nodes, 0);
  std::vector<int> booked;  // replica indexes booked so far, for rollback
  for (const Need& need : shape.needs) {
    bool gpu = need.whole > 0 || need.frac > 0;
    int passes = gpu && o.accelerator_substitution && !need.serving->subs.empty() ? 2 : 1;
    std::optional<Score> best;
    int best_pass = 0, best_pos = -1;
    for (int pass = gpu && need.serving->exact < 0 ? 1 : 0; pass < passes && !best; ++pass) {
      for (int n = 0; n < nodes; ++n) {
        const NodeState& ns = s.nodes[n];
        if (ns.cpu_used + need.cpus > ns.cpu_cap + kEps) continue;
        if (ns.mem_used + need.mem > ns.mem_cap + 1) continue;
        double r = rank ? (*rank)[n] : 0;
        Score sc;
        int pos = -1;
        if (need.whole > 0) {
          int avail = 0;
          ForAllowed(need, pass, [&](int t) { avail += s.node_free[ns.type_base + t]; });
          if (avail < need.whole) continue;
          sc = {in_gang[n] ? 0 : 1, avail - need.whole, 0, r, n};
        } else if (need.frac > 0) {
          double best_frac = -1;
          ForAllowed(need, pass, [&](int t) {
            for (int p : c.type_pos[n][t]) {
              if (s.frac[ns.gpu_base + p] + need.frac <= 1 + kEps &&
                  s.frac[ns.gpu_base + p] > best_frac) {
                best_frac = s.frac[ns.gpu_base + p];
                pos = p;
              }
            }
          });
          if (pos < 0) continue;
          sc = {in_gang[n] ? 0 : 1, 1 - best_frac - need.frac, 0, r, n};
        } else {
          sc = {in_gang[n] ? 0 : 1, ns.free_total, ns.cpu_cap - ns.cpu_used - need.cpus, r, n};
        }
        if (!best || sc < *best) {
          best = sc;
          best_pass = pass;
          best_pos = pos;
        }
      }
      if (best) break;
    }
    if (!best) {
      for (int i : booked) Book(c, s, holds[i], -1);
      return std::nullopt;
    }
    int n = std::get<4>(*best);
    Hold& h = holds[need.replica];
    h.node = n;
    h.cpus = need.cpus;
    h.mem = need.mem;
    if (need.whole > 0) {
      const NodeState& ns = s.nodes[n];
      ForAllowed(need, best_pass, [&](int t) {
        for (int p : c.type_pos[n][t]) {
          if (static_cast<int>(h.gpus.size()) == need.whole) return;
          if (s.frac[ns.gpu_base + p] <= kEps) h.gpus.emplace_back(p, 1.0);
        }
      });
    } else if (need.frac > 0) {
      h.gpus.emplace_back(best_pos, need.frac);
    }
    Book(c, s, h, +1);
    booked.push_back(need.replica);
    in_gang[n] = 1;
  }
  return holds;
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
    for (auto [pos, f] : h.gpus) {
      const resources::Gpu& g = node.gpus[pos];
      p.gpus.push_back(
          {g.index, f, static_cast<uint64_t>(f * static_cast<double>(g.memory_bytes))});
      if (g.type != asks[i].gpu_type) {
        p.substitutions.push_back(asks[i].gpu_type + " served by GPU " + std::to_string(g.index) +
                                  " (" + g.type + ")");
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Aggregates of one state that explanations need: the most free on any one
// node. Valid for one state version; Diagnose fills it lazily.
struct Summary {
  bool cpu_done = false;
  double most_cpu = 0, most_mem = 0;
  // Per serving set: most free whole GPUs on one node, most room on one GPU.
  std::unordered_map<const Serving*, std::pair<int, double>> gpus;
};

// Why `shape` does not fit on `s`, in numbers.
std::string Diagnose(const Cluster& c, const State& s, const Shape& shape, const PolicyOptions& o,
                     Summary& sum) {
  const bool subs = o.accelerator_substitution;
  for (const auto& [sv, count] : shape.whole_by_type) {
    int free = FreeServing(c, s, *sv, subs);
    if (free < count) {
      std::string r = "needs " + std::to_string(count) + "x " + sv->type;
      if (shape.replicas > 1) {
        int per = 0, reps = 0;
        for (const Need& n : shape.needs) {
          if (n.serving == sv && n.whole > 0) per = n.whole, ++reps;
        }
        if (reps > 1 && per * reps == count) {
          r += " (" + std::to_string(reps) + " replicas x " + std::to_string(per) + ")";
        }
      }
      r += ", " + std::to_string(free) + " free";
      if (subs && !sv->subs.empty()) r += " counting substitutes";
      return r;
    }
  }
  for (const Need& n : shape.needs) {
    if (n.whole == 0 && n.frac == 0) continue;
    auto [it, fresh] = sum.gpus.try_emplace(n.serving);
    if (fresh) {
      int most = 0;
      double room = 0;
      for (size_t i = 0; i < s.nodes.size(); ++i) {
        int a = 0;
        ForAllowed(n, subs ? 1 : 0, [&](int t) {
          a += s.node_free[s.nodes[i].type_base + t];
          for (int p : c.type_pos[i][t]) room = std::max(room, 1 - s.frac[s.nodes[i].gpu_base + p]);
        });
        most = std::max(most, a);
      }
      it->second = {most, room};
    }
    auto [most, room] = it->second;
    if (n.whole > most) {
      return "needs " + std::to_string(n.whole) + "x " + n.serving->type +
             " on one node, at most " + std::to_string(most) + " free on any node";
    }
    if (n.frac > 0 && n.frac > room + kEps) {
      return "needs " + Num(n.frac) + " of a " + n.serving->type + ", no such GPU has " +
             Num(n.frac) + " free";
    }
  }
  if (!sum.cpu_done) {
    sum.cpu_done = true;
    for (const NodeState& ns : s.nodes) {
      sum.most_cpu = std::max(sum.most_cpu, ns.cpu_cap - ns.cpu_used);
      sum.most_mem = std::max(sum.most_mem, ns.mem_cap - ns.mem_used);
    }
  }
  for (const Need& n : shape.needs) {
    if (n.cpus > sum.most_cpu + kEps) {
      return "needs " + Num(n.cpus) + " CPUs on one node, at most " +
             Num(std::max(0.0, sum.most_cpu)) + " free on any node";
    }
    if (n.mem > sum.most_mem + 1) {
      return "needs " + Gb(n.mem) + " memory on one node, at most " +
             Gb(std::max(0.0, sum.most_mem)) + " free on any node";
    }
  }
  return "needs " + std::to_string(shape.replicas) +
         " replicas placed together; free GPUs, CPUs and memory are not on the same nodes";
}

std::string Diagnose(const Cluster& c, const State& s, const Shape& shape, const PolicyOptions& o) {
  Summary sum;
  return Diagnose(c, s, shape, o, sum);
}

// A job that holds resources and may end: running before the call or
// started by it.
struct Event {
  int64_t end_us = 0;
  const std::string* job_id = nullptr;
  std::vector<Hold> holds;
};

struct Earliest {
  int64_t start_us = 0;
  std::vector<Hold> holds;
  std::vector<std::string> after_jobs;
};

// Whether one replica fits on node `n` as it stands (any allowed GPU type).
bool NodeFits(const Cluster& c, const State& s, const Need& need, int n, const PolicyOptions& o) {
  const NodeState& ns = s.nodes[n];
  if (ns.cpu_used + need.cpus > ns.cpu_cap + kEps) return false;
  if (ns.mem_used + need.mem > ns.mem_cap + 1) return false;
  int pass = o.accelerator_substitution ? 1 : 0;
  if (need.whole > 0) {
    int avail = 0;
    ForAllowed(need, pass, [&](int t) { avail += s.node_free[ns.type_base + t]; });
    return avail >= need.whole;
  }
  if (need.frac > 0) {
    bool any = false;
    ForAllowed(need, pass, [&](int t) {
      for (int p : c.type_pos[n][t]) any |= s.frac[ns.gpu_base + p] + need.frac <= 1 + kEps;
    });
    return any;
  }
  return true;
}

// Replays the ends of `events` (sorted by end) on a copy of `s` until `shape`
// fits. nullopt when it never does. With `after_jobs`, also names the ended
// jobs that shared a node with the placement.
std::optional<Earliest> EarliestFit(const Cluster& c, const State& s,
                                    const std::vector<Event>& events, const Shape& shape,
                                    const PolicyOptions& o, int64_t now_us, bool after_jobs) {
  State copy = s;
  // A single replica can only start fitting on a node that something left.
  const bool single = shape.replicas == 1;
  std::vector<int> touched;
  size_t i = 0;
  int64_t t = now_us;
  auto holds = Place(c, copy, shape, o);
  while (!holds && i < events.size()) {
    t = events[i].end_us;
    touched.clear();
    for (; i < events.size() && events[i].end_us == t; ++i) {
      for (const Hold& h : events[i].holds) {
        Book(c, copy, h, -1);
        touched.push_back(h.node);
      }
    }
    if (!MayFit(c, copy, shape, o)) continue;
    if (single && std::none_of(touched.begin(), touched.end(),
                               [&](int n) { return NodeFits(c, copy, shape.needs[0], n, o); })) {
      continue;
    }
    holds = Place(c, copy, shape, o);
  }
  if (!holds) return std::nullopt;
  Earliest e;
  e.start_us = std::max(t, now_us);
  e.holds = std::move(*holds);
  if (after_jobs) {
    std::vector<char> used(s.nodes.size(), 0);
    for (const Hold& h : e.holds) used[h.node] = 1;
    for (size_t j = 0; j < i; ++j) {
      bool shares = std::any_of(events[j].holds.begin(), events[j].holds.end(),
                                [&](const Hold& h) { return used[h.node] != 0; });
      if (shares) e.after_jobs.push_back(*events[j].job_id);
    }
  }
  return e;
}

std::string JobList(const std::vector<std::string>& ids) {
  std::string r;
  size_t shown = std::min<size_t>(ids.size(), 5);
  for (size_t i = 0; i < shown; ++i) r += (i ? ", " : "") + ids[i];
  if (ids.size() > shown) r += " and " + std::to_string(ids.size() - shown) + " more";
  return r;
}

// "starts at 2026-11-22T10:00:00Z after jobs 12, 15 end".
std::string ReservationText(const Reservation& r) {
  if (r.start_us == 0) return "start unknown: it waits on running jobs with no runtime bound";
  std::string s = "starts at " + FormatTime(r.start_us);
  if (!r.after_jobs.empty()) {
    s += " after job" + std::string(r.after_jobs.size() > 1 ? "s " : " ") + JobList(r.after_jobs) +
         (r.after_jobs.size() > 1 ? " end" : " ends");
  }
  return s;
}

// Per-call memo of one job shape. Free resources only shrink during a call,
// so "does not fit" stays true once seen.
struct ShapeMemo {
  const std::vector<ReplicaAsk>* asks = nullptr;  // the first job's, for equality
  std::string problem;  // ShapeProblem or "can never run" text; "" = valid
  Shape shape;
  bool fails_now = false;
  bool fails_held = false;  // does not fit beside the reservation
  std::string diagnosis;    // Diagnose() as of diagnosis_version
  int diagnosis_version = -1;
  bool estimated = false;
  int64_t estimate_us = 0;
};

}  // namespace

int64_t EffectivePriority(const QueuedJob& job, int64_t now_us, const PolicyOptions& options) {
  if (options.aging_threshold_us <= 0 || now_us <= job.submit_us) return job.priority;
  return job.priority + (now_us - job.submit_us) / options.aging_threshold_us;
}

std::vector<size_t> QueueOrder(const Snapshot& snap) {
  struct Key {
    int64_t prio;
    double usage;
    int64_t submit;
    size_t index;
  };
  std::vector<Key> keys;
  keys.reserve(snap.queued.size());
  for (size_t i = 0; i < snap.queued.size(); ++i) {
    const QueuedJob& j = snap.queued[i];
    auto u = snap.usage_gpu_seconds.find(j.user);
    keys.push_back({EffectivePriority(j, snap.now_us, snap.options),
                    u == snap.usage_gpu_seconds.end() ? 0.0 : u->second, j.submit_us, i});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.prio != b.prio) return a.prio > b.prio;
    if (a.usage != b.usage) return a.usage < b.usage;
    if (a.submit != b.submit) return a.submit < b.submit;
    return a.index < b.index;
  });
  std::vector<size_t> order;
  order.reserve(keys.size());
  for (const Key& k : keys) order.push_back(k.index);
  return order;
}

Status ValidateJob(const QueuedJob& job, const std::vector<resources::Node>& nodes,
                   const PolicyOptions& options) {
  std::string problem = ShapeProblem(job.replicas);
  if (problem.empty()) {
    Cluster c(nodes);
    State idle = IdleState(c, options);
    Shape shape = Compile(c, job.replicas);
    if (!Place(c, idle, shape, options)) {
      problem = "can never run on this cluster even when idle: " +
                Diagnose(c, IdleState(c, options), shape, options) +
                " (ask for less, allow accelerator substitution, or add nodes)";
    }
  }
  if (problem.empty()) return OkStatus();
  return InvalidArgument("job " + job.id + ": " + problem);
}

Decision Schedule(const Snapshot& snap) {
  const PolicyOptions& o = snap.options;
  Decision d;
  d.wait.reserve(snap.queued.size());
  Cluster c(snap.nodes);
  const State idle = IdleState(c, o);
  State st = idle;

  // Book the running jobs; remember when each may end.
  std::vector<Event> events;
  std::unordered_map<std::string, int> user_jobs;
  std::unordered_map<std::string, double> user_gpus;
  for (const RunningJob& r : snap.running) {
    Event e;
    e.job_id = &r.id;
    for (const PlacedReplica& p : r.replicas) {
      if (p.node < 0 || p.node >= static_cast<int>(snap.nodes.size())) continue;
      Hold h{p.node, p.cpus, static_cast<double>(p.memory_bytes), {}};
      for (const GpuShare& g : p.gpus) {
        int pos = c.PosOf(p.node, g.gpu);
        if (pos < 0) continue;
        h.gpus.emplace_back(pos, g.fraction);
        user_gpus[r.user] += g.fraction;
      }
      Book(c, st, h, +1);
      e.holds.push_back(std::move(h));
    }
    ++user_jobs[r.user];
    if (r.runtime_bound_s > 0) {
      e.end_us = std::max(r.start_us + r.runtime_bound_s * kUsPerS, snap.now_us);
      events.push_back(std::move(e));
    }
  }
  // Started jobs are appended; the events are sorted only when replayed.
  bool events_sorted = false;
  auto sorted_events = [&]() -> const std::vector<Event>& {
    if (!events_sorted) {
      std::stable_sort(events.begin(), events.end(),
                       [](const Event& a, const Event& b) { return a.end_us < b.end_us; });
      events_sorted = true;
    }
    return events;
  };

  std::deque<ShapeMemo> memos;                   // stable addresses
  std::unordered_map<uint64_t, size_t> by_hash;  // open addressing on collisions
  State scratch = idle;                          // stays idle between feasibility probes
  std::optional<State> held;                     // st plus the reservation's holds
  int64_t reserved_us = 0;                       // reservation start, 0 = unknown
  std::string reserved_text;
  int waiting_ahead = 0;
  int version = 0;  // bumped on every start: invalidates cached diagnoses
  int estimates_left = o.max_estimated_shapes;

  auto estimate = [&](ShapeMemo& m) -> int64_t {
    if (d.reservation && reserved_us == 0) return 0;
    if (!m.estimated && estimates_left > 0) {
      --estimates_left;
      m.estimated = true;
      auto e = EarliestFit(c, st, sorted_events(), m.shape, o, snap.now_us, false);
      m.estimate_us = e ? e->start_us : 0;
    }
    if (m.estimate_us == 0) return 0;
    return std::max(m.estimate_us, reserved_us);
  };
  Summary summary;  // of st at summary_version
  int summary_version = 0;
  auto diagnosis = [&](ShapeMemo& m) -> const std::string& {
    if (m.diagnosis_version != version) {
      if (summary_version != version) {
        summary = Summary();
        summary_version = version;
      }
      m.diagnosis = Diagnose(c, st, m.shape, o, summary);
      m.diagnosis_version = version;
    }
    return m.diagnosis;
  };

  for (size_t qi : QueueOrder(snap)) {
    const QueuedJob& job = snap.queued[qi];
    bool fresh = false;
    size_t slot = 0;
    for (uint64_t h = ShapeHash(job.replicas);; ++h) {
      auto [it, added] = by_hash.try_emplace(h, memos.size());
      if (added) {
        memos.emplace_back().asks = &job.replicas;
        fresh = true;
      } else if (!SameAsks(*memos[it->second].asks, job.replicas)) {
        continue;
      }
      slot = it->second;
      break;
    }
    ShapeMemo& m = memos[slot];
    if (fresh) {
      m.problem = ShapeProblem(job.replicas);
      if (m.problem.empty()) {
        m.shape = Compile(c, job.replicas);
        if (auto probe = Place(c, scratch, m.shape, o)) {
          for (const Hold& h : *probe) Book(c, scratch, h, -1);
        } else {
          m.problem =
              "can never run on this cluster even when idle: " + Diagnose(c, idle, m.shape, o) +
              " (ask for less, allow accelerator substitution, or add nodes)";
        }
      }
    }
    if (!m.problem.empty()) {
      d.rejected.push_back({job.id, InvalidArgument("job " + job.id + ": " + m.problem)});
      continue;
    }

    // Rule 6: quotas skip a job without letting it block the others.
    auto q = snap.quotas.find(job.user);
    if (q != snap.quotas.end()) {
      int jobs = user_jobs[job.user];
      double gpus = user_gpus[job.user];
      if (q->second.max_running_jobs && jobs >= *q->second.max_running_jobs) {
        d.wait.push_back({job.id,
                          "quota: user " + job.user + " already runs " + std::to_string(jobs) +
                              " of " + std::to_string(*q->second.max_running_jobs) +
                              " allowed jobs",
                          0});
        continue;
      }
      if (q->second.max_gpus && gpus + m.shape.total_gpus > *q->second.max_gpus + kEps) {
        d.wait.push_back({job.id,
                          "quota: user " + job.user + " uses " + Num(gpus) + " of " +
                              Num(*q->second.max_gpus) + " allowed GPUs; this job needs " +
                              Num(m.shape.total_gpus),
                          0});
        continue;
      }
    }

    // Records a start whose holds are already booked on st (and on held).
    auto start = [&](std::vector<Hold> holds, bool backfilled) {
      ++version;
      ++user_jobs[job.user];
      user_gpus[job.user] += m.shape.total_gpus;
      d.start.push_back({job.id, ToPlaced(c, holds, job.replicas), backfilled});
      if (job.runtime_bound_s > 0) {
        events.push_back({snap.now_us + job.runtime_bound_s * kUsPerS, &job.id, std::move(holds)});
        events_sorted = false;
      }
    };
    auto wait_for_resources = [&](int64_t estimated) {
      std::string why = diagnosis(m);
      if (waiting_ahead > 0) {
        why += "; " + std::to_string(waiting_ahead) + (waiting_ahead == 1 ? " job" : " jobs") +
               " ahead in the queue";
      }
      d.wait.push_back({job.id, std::move(why), estimated});
      ++waiting_ahead;
    };

    if (!d.reservation) {
      std::optional<std::vector<Hold>> holds;
      if (!m.fails_now) holds = Place(c, st, m.shape, o);
      if (holds) {
        start(std::move(*holds), false);
        continue;
      }
      m.fails_now = true;
      // Rule 7: the first blocked job gets a reservation.
      Reservation r;
      r.job_id = job.id;
      std::vector<Hold> rholds;
      if (auto e = EarliestFit(c, st, sorted_events(), m.shape, o, snap.now_us, true)) {
        r.start_us = e->start_us;
        r.after_jobs = std::move(e->after_jobs);
        rholds = std::move(e->holds);
      } else {
        // Waits on unbounded jobs: drain the nodes with the most free GPUs.
        std::vector<double> rank(st.nodes.size());
        for (size_t n = 0; n < st.nodes.size(); ++n) {
          rank[n] = -st.nodes[n].free_total -
                    (st.nodes[n].cpu_cap - st.nodes[n].cpu_used) / (1 + st.nodes[n].cpu_cap);
        }
        rholds = *Place(c, scratch, m.shape, o, &rank);
        for (const Hold& h : rholds) Book(c, scratch, h, -1);
      }
      r.replicas = ToPlaced(c, rholds, job.replicas);
      held = st;
      for (const Hold& h : rholds) Book(c, *held, h, +1);
      reserved_us = r.start_us;
      reserved_text = ReservationText(r);
      d.wait.push_back({job.id, diagnosis(m) + "; reserved: " + reserved_text, r.start_us});
      d.reservation = std::move(r);
      ++waiting_ahead;
      continue;
    }

    if (!o.backfill) {
      d.wait.push_back({job.id,
                        "waits for job " + d.reservation->job_id + " (first in line" +
                            (waiting_ahead > 1
                                 ? "; " + std::to_string(waiting_ahead) + " jobs ahead in the queue"
                                 : "") +
                            "); backfill is off",
                        estimate(m)});
      ++waiting_ahead;
      continue;
    }
    // Rule 7: backfill when it fits now and cannot delay the reservation.
    if (m.fails_now) {
      wait_for_resources(estimate(m));
      continue;
    }
    bool ends_first = reserved_us > 0 && job.runtime_bound_s > 0 &&
                      snap.now_us + job.runtime_bound_s * kUsPerS <= reserved_us;
    if (ends_first) {
      if (auto holds = Place(c, st, m.shape, o)) {
        for (const Hold& h : *holds) Book(c, *held, h, +1);
        start(std::move(*holds), true);
      } else {
        m.fails_now = true;
        wait_for_resources(estimate(m));
      }
      continue;
    }
    // Runs past the reservation: it must fit beside the reserved resources
    // (held = st + reservation, so what fits there fits now too).
    if (!m.fails_held) {
      if (auto holds = Place(c, *held, m.shape, o)) {
        for (const Hold& h : *holds) Book(c, st, h, +1);
        start(std::move(*holds), true);
        continue;
      }
      m.fails_held = true;
      if (auto now = Place(c, st, m.shape, o)) {
        for (const Hold& h : *now) Book(c, st, h, -1);
      } else {
        m.fails_now = true;
      }
    }
    if (m.fails_now) {
      wait_for_resources(estimate(m));
      continue;
    }
    d.wait.push_back({job.id,
                      "reserved for job " + d.reservation->job_id + ": " + reserved_text +
                          "; backfill would delay it",
                      reserved_us});
    ++waiting_ahead;
  }
  return d;
}

}  // namespace stoker::scheduler
