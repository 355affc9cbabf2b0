#include "scheduler/policy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
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

// Hash mixing step (multiply-xorshift); cheap and good enough for tables
// that compare keys on a hash match.
inline uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 32);
}

// Every byte of `s`; no allocation, no library call. Short strings (user
// names, GPU types) take two overlapping loads.
uint64_t StringHash(std::string_view s, uint64_t h = 0x9e3779b97f4a7c15ull) {
  const char* p = s.data();
  const size_t n = s.size();
  auto load8 = [](const char* q) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    return w;
  };
  h = Mix(h, n);
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) h = Mix(h, load8(p + i));
    return Mix(h, load8(p + n - 8));  // the last 8 bytes, overlapping
  }
  uint64_t w = 0;
  if (n >= 4) {
    uint32_t a, b;  // overlapping
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    w = (static_cast<uint64_t>(a) << 32) | b;
  } else if (n > 0) {
    auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<unsigned char>(p[i])); };
    w = (byte(0) << 16) | (byte(n / 2) << 8) | byte(n - 1);
  }
  return Mix(h, w);
}

// An open-addressing index from 64-bit hashes to dense ids 0, 1, 2, ... The
// caller owns the keys and settles hash collisions through `same(id)`. Lives
// for one call, so it only grows. Cheaper than std::unordered_map here: no
// node allocation, no modulo by a prime.
class HashIndex {
 public:
  // The id of the key hashing to `h` for which same(id) holds; if there is
  // none, registers the key as id size() and sets *added.
  template <typename Same>
  uint32_t FindOrAdd(uint64_t h, Same&& same, bool* added) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(h);; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.id == kEmpty) {
        slot = {h, size_};
        *added = true;
        return size_++;
      }
      if (slot.hash == h && same(slot.id)) {
        *added = false;
        return slot.id;
      }
    }
  }
  uint32_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = kEmpty;
  };
  // Fibonacci hashing: the top bits of h x golden ratio, so that hashes that
  // differ only in high bits still spread.
  size_t Home(uint64_t h) const { return (h * 0x9e3779b97f4a7c15ull) >> shift_; }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot());
    shift_ = 64 - std::countr_zero(slots_.size());
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id == kEmpty) continue;
      size_t i = Home(s.hash);
      while (slots_[i].id != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;  // a power of two long
  int shift_ = 64;
  uint32_t size_ = 0;
};

// Users of one snapshot, interned: per-user facts live in vectors indexed by
// the id, so the hot loop hashes each job's user once.
struct Users {
  HashIndex index;
  std::vector<std::string_view> names;

  uint32_t Id(std::string_view user) {
    bool added = false;
    uint32_t id = index.FindOrAdd(
        StringHash(user), [&](uint32_t i) { return names[i] == user; }, &added);
    if (added) names.push_back(user);
    return id;
  }
};

// The per-job facts that ordering needs, gathered in one pass over the queue
// in index (memory) order: walking 10,000 jobs in priority order would miss
// the cache on every job.
struct QueueKeys {
  std::vector<uint32_t> user;   // interned user
  std::vector<int64_t> prio;    // effective priority at now
  std::vector<int64_t> submit;  // submit_us
};

QueueKeys GatherKeys(const Snapshot& snap, Users& users) {
  QueueKeys k;
  const size_t q = snap.queued.size();
  k.user.reserve(q);
  k.prio.reserve(q);
  k.submit.reserve(q);
  for (const QueuedJob& j : snap.queued) {
    k.user.push_back(users.Id(j.user));
    k.prio.push_back(EffectivePriority(j, snap.now_us, snap.options));
    k.submit.push_back(j.submit_us);
  }
  return k;
}

// Rule 1's order (indices into the queue), given each user's decayed usage.
// The key is (effective priority desc, usage asc, submission asc, index asc).
// Usage only matters through its rank among the users, so when the
// (priority, usage rank) classes are few compared with the queue (the common
// case: a handful of priorities, tens of users), a stable counting sort into
// classes does the work in O(Q), and a class needs sorting only if submit
// times go backwards in it; otherwise a comparison sort. Same order either way.
std::vector<size_t> OrderQueue(const QueueKeys& k, const std::vector<double>& usage) {
  const size_t q = k.prio.size();
  std::vector<size_t> order(q);
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
    for (size_t i = 0; i < q; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
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
  for (size_t i = 0; i < q; ++i) order[fill[cls[i]]++] = i;  // stable: index order
  auto by_submit = [&](size_t a, size_t b) { return k.submit[a] < k.submit[b]; };
  for (size_t c = 0; c + 1 < start.size(); ++c) {
    auto first = order.begin() + start[c], last = order.begin() + start[c + 1];
    if (!std::is_sorted(first, last, by_submit)) std::stable_sort(first, last, by_submit);
  }
  return order;
}

// The GPU types that can serve one requested type: exact first, then
// substitutes by ascending memory (least waste).
struct Serving {
  std::string type;
  int exact = -1;            // type id, -1 when the cluster has none
  std::vector<int> subs;     // type ids, never including exact
  std::vector<int> allowed;  // exact (when the cluster has it), then subs
};

// A run of type ids or GPU positions.
struct IdSpan {
  const int* first = nullptr;
  const int* last = nullptr;
  const int* begin() const { return first; }
  const int* end() const { return last; }
};

// Immutable facts about the cluster, built once per call.
struct Cluster {
  const std::vector<resources::Node>* nodes = nullptr;
  std::vector<std::string> type_names;
  std::vector<uint64_t> type_memory;      // smallest GPU memory of the type
  std::vector<std::vector<int>> type_of;  // [node][pos] -> type id
  // Positions of the GPUs of type t on node n, ascending:
  // pos_flat[pos_off[n * Types() + t] .. pos_off[n * Types() + t + 1]).
  std::vector<int> pos_flat;
  std::vector<int> pos_off;
  mutable std::unordered_map<std::string, Serving> serving;

  explicit Cluster(const std::vector<resources::Node>& n) : nodes(&n) {
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
      for (size_t t = 0; t < types; ++t) {
        pos_off.push_back(static_cast<int>(pos_flat.size()));
        for (size_t p = 0; p < type_of[i].size(); ++p) {
          if (type_of[i][p] == static_cast<int>(t)) pos_flat.push_back(static_cast<int>(p));
        }
      }
    }
    pos_off.push_back(static_cast<int>(pos_flat.size()));
  }

  IdSpan Positions(int node, int type) const {
    const size_t k = static_cast<size_t>(node) * type_names.size() + static_cast<size_t>(type);
    return {pos_flat.data() + pos_off[k], pos_flat.data() + pos_off[k + 1]};
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
    if (s.exact >= 0) s.allowed.push_back(s.exact);
    s.allowed.insert(s.allowed.end(), s.subs.begin(), s.subs.end());
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
  // The node of every Book() on this state, in order: a node's fitness for a
  // replica can only have changed if it appears here after a point in time
  // (see PlaceHint).
  std::vector<int> log;
};

// One replica's hold, in internal coordinates (GPU positions, not indexes).
// A replica's GPUs as (position, fraction): up to 8 inline, the rest on the
// heap. Thousands of holds are made per call, mostly of 1 to 8 GPUs, so this
// saves an allocation on each.
class GpuList {
 public:
  using Entry = std::pair<int, double>;
  void emplace_back(int pos, double fraction) {
    if (size_ < kInline) {
      inline_[size_++] = {pos, fraction};
      return;
    }
    if (size_ == kInline) spill_.assign(inline_.begin(), inline_.end());
    spill_.emplace_back(pos, fraction);
    ++size_;
  }
  size_t size() const { return size_; }
  const Entry* begin() const { return size_ <= kInline ? inline_.data() : spill_.data(); }
  const Entry* end() const { return begin() + size_; }

 private:
  static constexpr size_t kInline = 8;
  std::array<Entry, kInline> inline_;
  std::vector<Entry> spill_;
  size_t size_ = 0;
};

struct Hold {
  int node = 0;
  double cpus = 0;
  double mem = 0;
  GpuList gpus;
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
  s.log.push_back(h.node);
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

// Identical asks hash alike, without allocating.
uint64_t ShapeHash(const std::vector<ReplicaAsk>& replicas) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (const ReplicaAsk& r : replicas) {
    uint64_t bits;
    std::memcpy(&bits, &r.cpus, sizeof bits);
    h = Mix(h, bits);
    h = Mix(h, r.memory_bytes);
    std::memcpy(&bits, &r.gpus, sizeof bits);
    h = Mix(h, bits);
    h = StringHash(r.gpu_type, h);
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
IdSpan Allowed(const Need& n, int pass) {
  const std::vector<int>& a = n.serving->allowed;
  size_t count = pass == 1 ? a.size() : (n.serving->exact >= 0 ? 1 : 0);
  return {a.data(), a.data() + count};
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

// How well a node suits a replica, lower first, compared lexicographically:
// already in the gang, then best fit (GPUs or GPU share left over; for CPU-only
// replicas, free GPUs and then CPUs left), then the caller's rank. Equal
// scores go to the lower node index.
struct Score {
  int gang = 0;  // 0 = a node this gang already uses
  double fit = 0;
  double slack = 0;
  double rank = 0;
  bool operator<(const Score& o) const {
    return std::tie(gang, fit, slack, rank) < std::tie(o.gang, o.fit, o.slack, o.rank);
  }
};

// A candidate node for one replica: node -1 = none fits.
struct Choice {
  int node = -1;
  Score score;
  int pos = -1;  // the GPU position, for a fractional request

  // Whether (score, node) of `o` beats this choice.
  bool BeatenBy(const Choice& o) const {
    if (o.node < 0) return false;
    if (node < 0 || o.score < score) return true;
    return !(score < o.score) && o.node < node;
  }
};

// Scores node `n` for `need` using GPU types `types`; false if it does not fit.
[[gnu::always_inline]] inline bool ScoreNode(const Cluster& c, const State& s, const Need& need,
                                             IdSpan types, int n, bool in_gang, double rank,
                                             Choice* out) {
  const NodeState& ns = s.nodes[n];
  if (ns.cpu_used + need.cpus > ns.cpu_cap + kEps) return false;
  if (ns.mem_used + need.mem > ns.mem_cap + 1) return false;
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

// The best node for a shape's first replica on one state, per pass, as of a
// position in that state's log. Nodes absent from the log since then score as
// they did, so the best is the old best or a node booked since: Place
// rescores only those. When the old best itself got worse, nothing is known
// about the other nodes and Place scans them all. Kept per shape and per
// state by the caller; only valid without a rank (the first replica has no
// gang yet, so its score does not depend on the rest of the gang).
struct PlaceHint {
  struct Pass {
    bool valid = false;
    size_t log_pos = 0;
    Choice best;
  };
  Pass pass[2];
};

// Brings `h` up to date with the state's log; false when a full scan is
// needed instead.
bool RefreshHint(const Cluster& c, const State& s, const Need& need, IdSpan types,
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

// Places every replica or none. On success books the holds on `s` and
// returns them in replica order; `rank` (lower first) breaks ties between
// otherwise equal nodes. `hint`, when given, must be the caller's memo of
// this shape on this very state (and `rank` must be null).
std::optional<std::vector<Hold>> Place(const Cluster& c, State& s, const Shape& shape,
                                       const PolicyOptions& o,
                                       const std::vector<double>* rank = nullptr,
                                       PlaceHint* hint = nullptr) {
  if (!MayFit(c, s, shape, o)) return std::nullopt;
  const int nodes = static_cast<int>(s.nodes.size());
  std::vector<Hold> holds(shape.replicas);
  std::vector<char> in_gang(nodes, 0);
  std::vector<int> booked;  // replica indexes booked so far, for rollback
  for (const Need& need : shape.needs) {
    bool gpu = need.whole > 0 || need.frac > 0;
    int passes = gpu && o.accelerator_substitution && !need.serving->subs.empty() ? 2 : 1;
    Choice best;
    int best_pass = 0;
    // For whole GPUs without a rank, a node that this need leaves with no
    // free allowed GPU and that is in the gang when any node is cannot be
    // beaten (only a lower node index could tie, and nodes are scanned in
    // index order), so the scan stops there.
    const bool can_stop = need.whole > 0 && rank == nullptr;
    const int best_gang = booked.empty() ? 1 : 0;
    const bool hinted = hint != nullptr && rank == nullptr && booked.empty();
    for (int pass = gpu && need.serving->exact < 0 ? 1 : 0; pass < passes && best.node < 0;
         ++pass) {
      const IdSpan types = gpu ? Allowed(need, pass) : IdSpan();
      best_pass = pass;
      if (hinted && RefreshHint(c, s, need, types, hint->pass[pass])) {
        best = hint->pass[pass].best;
        continue;
      }
      Choice sc;
      // A node the gang already uses beats every other (rule 2's packing), so
      // when one of those fits, only they need a score.
      for (int i : booked) {
        const int n = holds[i].node;
        if (ScoreNode(c, s, need, types, n, true, rank ? (*rank)[n] : 0, &sc) &&
            best.BeatenBy(sc)) {
          best = sc;
        }
      }
      if (best.node >= 0) continue;
      for (int n = 0; n < nodes; ++n) {
        if (!ScoreNode(c, s, need, types, n, in_gang[n] != 0, rank ? (*rank)[n] : 0, &sc)) {
          continue;
        }
        if (best.node < 0 || sc.score < best.score) {
          best = sc;
          if (can_stop && sc.score.gang == best_gang && sc.score.fit == 0) break;
        }
      }
      if (hinted) hint->pass[pass] = {true, s.log.size(), best};
    }
    if (best.node < 0) {
      for (int i : booked) Book(c, s, holds[i], -1);
      return std::nullopt;
    }
    const int n = best.node;
    Hold& h = holds[need.replica];
    h.node = n;
    h.cpus = need.cpus;
    h.mem = need.mem;
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
        for (int t : Allowed(n, subs ? 1 : 0)) {
          a += s.node_free[s.nodes[i].type_base + t];
          for (int p : c.Positions(static_cast<int>(i), t)) {
            room = std::max(room, 1 - s.frac[s.nodes[i].gpu_base + p]);
          }
        }
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
  PlaceHint hint_now;   // Place on the booked state (st)
  PlaceHint hint_held;  // Place beside the reservation (held)
};

}  // namespace

int64_t EffectivePriority(const QueuedJob& job, int64_t now_us, const PolicyOptions& options) {
  if (options.aging_threshold_us <= 0 || now_us <= job.submit_us) return job.priority;
  return job.priority + (now_us - job.submit_us) / options.aging_threshold_us;
}

std::vector<size_t> QueueOrder(const Snapshot& snap) {
  Users users;
  QueueKeys keys = GatherKeys(snap, users);
  std::vector<double> usage(users.names.size(), 0.0);
  for (uint32_t u = 0; u < usage.size(); ++u) {
    auto it = snap.usage_gpu_seconds.find(std::string(users.names[u]));
    if (it != snap.usage_gpu_seconds.end()) usage[u] = it->second;
  }
  return OrderQueue(keys, usage);
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

  // Per-user facts by interned id: running jobs and GPUs, usage, quota.
  Users users;
  const QueueKeys keys = GatherKeys(snap, users);
  const std::vector<uint32_t>& user_of = keys.user;  // per queued job
  std::vector<uint32_t> running_user;
  running_user.reserve(snap.running.size());
  for (const RunningJob& r : snap.running) running_user.push_back(users.Id(r.user));
  const size_t user_count = users.names.size();
  std::vector<int> user_jobs(user_count, 0);
  std::vector<double> user_gpus(user_count, 0.0);
  std::vector<double> usage(user_count, 0.0);
  std::vector<const Quota*> quota(user_count, nullptr);
  for (uint32_t u = 0; u < user_count; ++u) {
    const std::string name(users.names[u]);
    auto it = snap.usage_gpu_seconds.find(name);
    if (it != snap.usage_gpu_seconds.end()) usage[u] = it->second;
    auto q = snap.quotas.find(name);
    if (q != snap.quotas.end()) quota[u] = &q->second;
  }

  // Book the running jobs; remember when each may end.
  std::vector<Event> events;
  for (size_t ri = 0; ri < snap.running.size(); ++ri) {
    const RunningJob& r = snap.running[ri];
    const uint32_t u = running_user[ri];
    Event e;
    e.job_id = &r.id;
    for (const PlacedReplica& p : r.replicas) {
      if (p.node < 0 || p.node >= static_cast<int>(snap.nodes.size())) continue;
      Hold h{p.node, p.cpus, static_cast<double>(p.memory_bytes), {}};
      for (const GpuShare& g : p.gpus) {
        int pos = c.PosOf(p.node, g.gpu);
        if (pos < 0) continue;
        h.gpus.emplace_back(pos, g.fraction);
        user_gpus[u] += g.fraction;
      }
      Book(c, st, h, +1);
      e.holds.push_back(std::move(h));
    }
    ++user_jobs[u];
    if (r.runtime_bound_s > 0) {
      e.end_us = std::max(r.start_us + r.runtime_bound_s * kUsPerS, snap.now_us);
      events.push_back(std::move(e));
    }
  }
  // Jobs started by this call are appended to `events`; a replay needs them
  // sorted by end (stably, so equal ends keep their order). The sorted
  // prefix is kept and only the appended tail is sorted and merged in.
  size_t events_sorted = 0;
  auto sorted_events = [&]() -> const std::vector<Event>& {
    if (events_sorted < events.size()) {
      // Sort (end, position) keys, not the events: same order, fewer moves.
      std::vector<std::pair<int64_t, size_t>> keys;
      keys.reserve(events.size() - events_sorted);
      for (size_t i = events_sorted; i < events.size(); ++i) keys.emplace_back(events[i].end_us, i);
      std::sort(keys.begin(), keys.end());
      std::vector<Event> tail;
      tail.reserve(keys.size());
      for (const auto& k : keys) tail.push_back(std::move(events[k.second]));
      std::move(tail.begin(), tail.end(), events.begin() + static_cast<long>(events_sorted));
      auto by_end = [](const Event& a, const Event& b) { return a.end_us < b.end_us; };
      std::inplace_merge(events.begin(), events.begin() + static_cast<long>(events_sorted),
                         events.end(), by_end);
      events_sorted = events.size();
    }
    return events;
  };

  std::vector<ShapeMemo> memos;  // index = HashIndex id; all made before the main loop
  HashIndex by_shape;
  State scratch = idle;       // stays idle between feasibility probes
  std::optional<State> held;  // st plus the reservation's holds
  int64_t reserved_us = 0;    // reservation start, 0 = unknown
  std::string reserved_text;
  int waiting_ahead = 0;
  int version = 0;  // bumped on every start: invalidates cached diagnoses
  int estimates_left = o.max_estimated_shapes;
  // Rule 8: waiting jobs from this many ahead on get only their place.
  const int detailed = o.detailed_reasons < 0 ? INT32_MAX : o.detailed_reasons;

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
  // "; 3 jobs ahead in the queue", or "" when none is.
  auto ahead_suffix = [&](std::string& out) {
    if (waiting_ahead == 0) return;
    out += "; ";
    out += std::to_string(waiting_ahead);
    out += waiting_ahead == 1 ? " job ahead in the queue" : " jobs ahead in the queue";
  };
  // Records a wait that is not a quota hold. Past the detailed ones, the
  // reason is the place in line alone and `detail` is never called.
  auto wait = [&](const std::string& job_id, int64_t estimated, auto&& detail) {
    if (waiting_ahead > detailed) {  // waiting_ahead counts the reservation holder
      // One allocation: this runs for nearly every job of a long queue.
      const std::string_view ahead =
          waiting_ahead == 1 ? " job ahead in the queue" : " jobs ahead in the queue";
      char buf[64];
      char* end = std::to_chars(buf, buf + 24, waiting_ahead).ptr;
      std::memcpy(end, ahead.data(), ahead.size());
      d.wait.push_back({job_id, std::string(buf, end + ahead.size()), estimated});
    } else {
      d.wait.push_back({job_id, detail(), estimated});
    }
    ++waiting_ahead;
  };

  // Each job's shape memo, found in index order (see QueueKeys). Whether a
  // shape is valid and fits the idle cluster does not depend on the order.
  std::vector<uint32_t> shape_of;
  shape_of.reserve(snap.queued.size());
  for (const QueuedJob& job : snap.queued) {
    bool fresh = false;
    const uint32_t slot = by_shape.FindOrAdd(
        ShapeHash(job.replicas), [&](uint32_t i) { return SameAsks(*memos[i].asks, job.replicas); },
        &fresh);
    shape_of.push_back(slot);
    if (!fresh) continue;
    ShapeMemo& m = memos.emplace_back();
    m.asks = &job.replicas;
    m.problem = ShapeProblem(job.replicas);
    if (!m.problem.empty()) continue;
    m.shape = Compile(c, job.replicas);
    if (auto probe = Place(c, scratch, m.shape, o)) {
      for (const Hold& h : *probe) Book(c, scratch, h, -1);
    } else {
      m.problem = "can never run on this cluster even when idle: " + Diagnose(c, idle, m.shape, o) +
                  " (ask for less, allow accelerator substitution, or add nodes)";
    }
  }

  const std::vector<size_t> order = OrderQueue(keys, usage);
  for (size_t k = 0; k < order.size(); ++k) {
    // The job's own record is the one random access left per job.
    if (k + 8 < order.size()) __builtin_prefetch(&snap.queued[order[k + 8]]);
    const size_t qi = order[k];
    const QueuedJob& job = snap.queued[qi];
    const uint32_t user = user_of[qi];
    ShapeMemo& m = memos[shape_of[qi]];
    if (!m.problem.empty()) {
      d.rejected.push_back({job.id, InvalidArgument("job " + job.id + ": " + m.problem)});
      continue;
    }

    // Rule 6: quotas skip a job without letting it block the others.
    if (const Quota* q = quota[user]) {
      int jobs = user_jobs[user];
      double gpus = user_gpus[user];
      if (q->max_running_jobs && jobs >= *q->max_running_jobs) {
        d.wait.push_back({job.id,
                          "quota: user " + job.user + " already runs " + std::to_string(jobs) +
                              " of " + std::to_string(*q->max_running_jobs) + " allowed jobs",
                          0});
        continue;
      }
      if (q->max_gpus && gpus + m.shape.total_gpus > *q->max_gpus + kEps) {
        d.wait.push_back({job.id,
                          "quota: user " + job.user + " uses " + Num(gpus) + " of " +
                              Num(*q->max_gpus) + " allowed GPUs; this job needs " +
                              Num(m.shape.total_gpus),
                          0});
        continue;
      }
    }

    // Records a start whose holds are already booked on st (and on held).
    auto start = [&](std::vector<Hold> holds, bool backfilled) {
      ++version;
      ++user_jobs[user];
      user_gpus[user] += m.shape.total_gpus;
      d.start.push_back({job.id, ToPlaced(c, holds, job.replicas), backfilled});
      if (job.runtime_bound_s > 0) {
        events.push_back({snap.now_us + job.runtime_bound_s * kUsPerS, &job.id, std::move(holds)});
      }
    };
    auto wait_for_resources = [&]() {
      wait(job.id, estimate(m), [&] {
        std::string why = diagnosis(m);
        ahead_suffix(why);
        return why;
      });
    };

    if (!d.reservation) {
      std::optional<std::vector<Hold>> holds;
      if (!m.fails_now) holds = Place(c, st, m.shape, o, nullptr, &m.hint_now);
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
      // The reservation holder is always explained in full.
      std::string why = diagnosis(m);
      why += "; reserved: ";
      why += reserved_text;
      d.wait.push_back({job.id, std::move(why), r.start_us});
      d.reservation = std::move(r);
      ++waiting_ahead;
      continue;
    }

    if (!o.backfill) {
      wait(job.id, estimate(m), [&] {
        std::string why = "waits for job " + d.reservation->job_id + " (first in line";
        if (waiting_ahead > 1) ahead_suffix(why);
        return why + "); backfill is off";
      });
      continue;
    }
    // Rule 7: backfill when it fits now and cannot delay the reservation.
    if (m.fails_now) {
      wait_for_resources();
      continue;
    }
    bool ends_first = reserved_us > 0 && job.runtime_bound_s > 0 &&
                      snap.now_us + job.runtime_bound_s * kUsPerS <= reserved_us;
    if (ends_first) {
      if (auto holds = Place(c, st, m.shape, o, nullptr, &m.hint_now)) {
        for (const Hold& h : *holds) Book(c, *held, h, +1);
        start(std::move(*holds), true);
      } else {
        m.fails_now = true;
        wait_for_resources();
      }
      continue;
    }
    // Runs past the reservation: it must fit beside the reserved resources
    // (held = st + reservation, so what fits there fits now too).
    if (!m.fails_held) {
      if (auto holds = Place(c, *held, m.shape, o, nullptr, &m.hint_held)) {
        for (const Hold& h : *holds) Book(c, st, h, +1);
        start(std::move(*holds), true);
        continue;
      }
      m.fails_held = true;
      if (auto now = Place(c, st, m.shape, o, nullptr, &m.hint_now)) {
        for (const Hold& h : *now) Book(c, st, h, -1);
      } else {
        m.fails_now = true;
      }
    }
    if (m.fails_now) {
      wait_for_resources();
      continue;
    }
    wait(job.id, reserved_us, [&] {
      return "reserved for job " + d.reservation->job_id + ": " + reserved_text +
             "; backfill would delay it";
    });
  }
  return d;
}

}  // namespace stoker::scheduler
