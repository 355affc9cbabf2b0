#include "scheduler/policy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <span>
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

// One step of a multiplicative hash (FxHash's): a rotate, an xor and a
// multiply per 8-byte word. Weak on its own, but enough for HashIndex, which
// spreads it over the slots with Fibonacci hashing and compares keys on a
// hash match. This runs several times for each of 10,000 queued jobs.
inline uint64_t Mix(uint64_t h, uint64_t v) {
  return (std::rotl(h, 5) ^ v) * 0x517cc1b727220a95ull;
}

// Every byte of `s`; no allocation, no library call. Short strings (user
// names, GPU types) take two overlapping loads.
[[gnu::always_inline]] inline uint64_t StringHash(std::string_view s,
                                                  uint64_t h = 0x9e3779b97f4a7c15ull) {
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

// a == b, without a library call for the short strings that user names and
// GPU types are (overlapping loads, as in StringHash): one or two compares
// per queued job add up over 10,000 jobs.
inline bool SameText(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n >= 8 && n <= 16) {
    uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a.data(), 8);
    std::memcpy(&a1, a.data() + n - 8, 8);
    std::memcpy(&b0, b.data(), 8);
    std::memcpy(&b1, b.data() + n - 8, 8);
    return a0 == b0 && a1 == b1;
  }
  if (n >= 4 && n < 8) {
    uint32_t a0, a1, b0, b1;
    std::memcpy(&a0, a.data(), 4);
    std::memcpy(&a1, a.data() + n - 4, 4);
    std::memcpy(&b0, b.data(), 4);
    std::memcpy(&b1, b.data() + n - 4, 4);
    return a0 == b0 && a1 == b1;
  }
  return a == b;
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
  [[gnu::always_inline]] uint32_t FindOrAdd(uint64_t h, Same&& same, bool* added) {
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
    k.prio[i] = EffectivePriority(j, snap.now_us, snap.options);
    k.submit[i] = j.submit_us;
    per_job(i, j, k.user[i]);
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
  int max_per_type = 0;  // the most GPUs of one type on any node
  int max_per_node = 0;  // the most GPUs on any node
  // Requested types seen so far; few, so a linear search by name is cheap.
  // Entries never move: Need::serving points at them.
  mutable std::vector<std::unique_ptr<Serving>> serving;

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

  // The set of State::by_free holding the nodes with `count` unbooked GPUs
  // of type `type`.
  size_t FreeSet(int type, int count) const {
    return static_cast<size_t>(type) * static_cast<size_t>(max_per_type + 1) +
           static_cast<size_t>(count);
  }

  IdSpan Positions(int node, int type) const {
    const size_t k = static_cast<size_t>(node) * type_names.size() + static_cast<size_t>(type);
    return {pos_flat.data() + pos_off[k], pos_flat.data() + pos_off[k + 1]};
  }

  int Types() const { return static_cast<int>(type_names.size()); }

  const Serving* ServingFor(const std::string& type) const {
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

// Families of node sets, as bitsets: set s holds node n when bit n of
// words [s x words, (s + 1) x words) is set. They let Place visit only the
// nodes that may suit a replica, in index order, instead of every node.
class NodeSets {
 public:
  NodeSets() = default;
  NodeSets(size_t sets, size_t nodes) : words_((nodes + 63) / 64), bits_(sets * words_, 0) {}

  size_t words() const { return words_; }
  uint64_t Word(size_t set, size_t w) const { return bits_[set * words_ + w]; }
  void Insert(size_t set, int node) { bits_[Index(set, node)] |= Bit(node); }
  void Flip(size_t set, int node) { bits_[Index(set, node)] ^= Bit(node); }
  void Move(size_t from, size_t to, int node) {
    bits_[Index(from, node)] &= ~Bit(node);
    bits_[Index(to, node)] |= Bit(node);
  }

 private:
  size_t Index(size_t set, int node) const { return set * words_ + static_cast<size_t>(node) / 64; }
  static uint64_t Bit(int node) { return uint64_t{1} << (node % 64); }
  size_t words_ = 0;
  std::vector<uint64_t> bits_;
};

// Calls visit(node) for each node of the set whose w-th word is word_of(w),
// in ascending order, until visit returns true; returns whether it did.
template <typename WordOf, typename Visit>
bool ForEachNode(size_t words, WordOf&& word_of, Visit&& visit) {
  for (size_t w = 0; w < words; ++w) {
    for (uint64_t bits = word_of(w); bits != 0; bits &= bits - 1) {
      if (visit(static_cast<int>(w * 64) + std::countr_zero(bits))) return true;
    }
  }
  return false;
}

// A GPU partly booked by shares: more than nothing, less than all of it.
inline bool IsPartial(double frac) { return frac > kEps && frac < 1; }

// What is booked where. Bookings only grow during a call, except on copies
// used to replay running jobs' ends and on the idle scratch state.
// Flat arrays, so that a copy costs a handful of allocations.
struct State {
  std::vector<NodeState> nodes;
  std::vector<double> frac;       // booked fraction per GPU (gpu_base + position)
  std::vector<int> node_free;     // per node and type (type_base + type): unbooked GPUs
  std::vector<int> node_partial;  // per node and type: partly booked GPUs (IsPartial)
  std::vector<int> free_whole;    // per type, cluster-wide
  // The counts above as node sets, kept in step by Book():
  NodeSets by_free;       // set Cluster::FreeSet(t, k): nodes with k unbooked GPUs of type t
  NodeSets with_free;     // set t: nodes with an unbooked GPU of type t
  NodeSets with_partial;  // set t: nodes with a partly booked GPU of type t
  NodeSets by_total;      // set k: nodes with k unbooked GPUs of any type
  // The node of every Book() on this state, in order, when `logged`: a
  // node's fitness for a replica can only have changed if it appears here
  // after a point in time (see PlaceHint). States that no hint refers to
  // (replay copies, the idle scratch state) keep no log.
  bool logged = true;
  std::vector<int> log;
};

// Makes `to` a copy of `s` with an empty log, kept when `logged`. Reuses
// the memory `to` has.
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

// One replica's hold, in internal coordinates (GPU positions, not indexes).
// A replica's GPUs as (position, fraction): up to 8 inline, the rest on the
// heap. Thousands of holds are made per call, mostly of 1 to 8 GPUs, so this
// saves an allocation on each.
class GpuList {
 public:
  using Entry = std::pair<int, double>;
  void clear() {
    spill_.clear();
    size_ = 0;
  }
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

// Books (sign +1) or releases (-1) `cpus`, `mem` and the GPUs [first, last)
// (position, fraction) on node `node` of `s`, keeping the counts and node
// sets in step.
void Book(const Cluster& c, State& s, int node, double cpus, double mem,
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

void Book(const Cluster& c, State& s, const Hold& h, int sign) {
  Book(c, s, h.node, h.cpus, h.mem, h.gpus.begin(), h.gpus.end(), sign);
}

// The holds of the jobs that may end (see Event), compactly: 32 bytes per
// hold plus 16 per GPU, in two arrays, rather than a Hold each. Thousands of
// running jobs' holds are booked and replayed per call.
class HoldPool {
 public:
  struct Entry {
    int node = 0;
    double cpus = 0, mem = 0;
    uint32_t first = 0, last = 0;  // its GPUs: [first, last) of gpus_
  };
  size_t size() const { return entries_.size(); }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  void reserve(size_t holds) { entries_.reserve(holds); }
  // Starts a hold; AddGpu adds to the last one started.
  void Start(int node, double cpus, double mem) {
    const auto at = static_cast<uint32_t>(gpus_.size());
    entries_.push_back({node, cpus, mem, at, at});
  }
  void AddGpu(int pos, double fraction) {
    gpus_.emplace_back(pos, fraction);
    entries_.back().last = static_cast<uint32_t>(gpus_.size());
  }
  void Add(const Hold& h) {
    Start(h.node, h.cpus, h.mem);
    for (auto [pos, f] : h.gpus) AddGpu(pos, f);
  }
  // Drops the holds from `n` on.
  void Truncate(size_t n) {
    gpus_.resize(n < entries_.size() ? entries_[n].first : gpus_.size());
    entries_.resize(n);
  }
  void Book(const Cluster& c, State& s, const Entry& e, int sign) const {
    const GpuList::Entry* g = gpus_.data();
    stoker::scheduler::Book(c, s, e.node, e.cpus, e.mem, g + e.first, g + e.last, sign);
  }

 private:
  std::vector<Entry> entries_;
  std::vector<GpuList::Entry> gpus_;
};

// A replica ask, compiled against the cluster.
struct Need {
  int replica = 0;  // index in the job's replicas
  double cpus = 0, mem = 0;
  int whole = 0;    // whole GPUs
  double frac = 0;  // share of one GPU, when whole == 0
  const Serving* serving = nullptr;
  int ask = -1;  // the call's id of this ask (see Asks), -1 = none
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
    auto at = [i] { return "replicas[" + std::to_string(i) + "]"; };
    if (!(r.gpus >= 0) || !std::isfinite(r.gpus)) {
      return at() + ".gpus is " + Num(r.gpus) + "; use 0 or more";
    }
    if (r.gpus > 1 && r.gpus != std::floor(r.gpus)) {
      return at() + ".gpus is " + Num(r.gpus) + "; counts above 1 must be whole numbers (ask for " +
             Num(std::floor(r.gpus)) + " or " + Num(std::ceil(r.gpus)) +
             ", or a fraction below 1 to share one GPU)";
    }
    if (r.gpus > 0 && r.gpu_type.empty()) return at() + ".gpu_type is empty; name the GPU type";
    if (!(r.cpus >= 0) || !std::isfinite(r.cpus)) {
      return at() + ".cpus is " + Num(r.cpus) + "; use 0 or more";
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

// The distinct replica asks of one call, interned: where a replica goes
// depends only on its ask and the state (see BestNode), so placement hints
// are kept per ask and shared by every shape and replica that asks the same.
class Asks {
 public:
  // Sets need.ask to the id of its ask, registering it if new.
  void Intern(Need& need) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (double v : {need.cpus, need.mem, need.frac}) {
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      h = Mix(h, bits);
    }
    h = Mix(h, static_cast<uint64_t>(need.whole));
    h = Mix(h, reinterpret_cast<uintptr_t>(need.serving));
    bool added = false;
    need.ask = static_cast<int>(index_.FindOrAdd(
        h,
        [&](uint32_t i) {
          const Need& o = first_[i];
          return o.cpus == need.cpus && o.mem == need.mem && o.whole == need.whole &&
                 o.frac == need.frac && o.serving == need.serving;
        },
        &added));
    if (added) first_.push_back(need);
  }
  size_t size() const { return first_.size(); }

 private:
  HashIndex index_;
  std::vector<Need> first_;  // one of each ask, by id
};

// Identical asks hash alike, without allocating. Each replica's fields are
// hashed apart (products by distinct odd constants, and the GPU type) and
// folded once, so that the steps do not wait on each other: this runs for
// every queued job.
uint64_t ShapeHash(const std::vector<ReplicaAsk>& replicas) {
  uint64_t h = replicas.size();
  for (const ReplicaAsk& r : replicas) {
    uint64_t cpus, gpus;
    std::memcpy(&cpus, &r.cpus, sizeof cpus);
    std::memcpy(&gpus, &r.gpus, sizeof gpus);
    h = Mix(h, (cpus * 0x9e3779b97f4a7c15ull) ^ (r.memory_bytes * 0xc2b2ae3d27d4eb4full) ^
                   (gpus * 0x165667b19e3779f9ull) ^ StringHash(r.gpu_type));
  }
  return h;
}

bool SameAsks(std::span<const ReplicaAsk> a, std::span<const ReplicaAsk> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const ReplicaAsk& x, const ReplicaAsk& y) {
                      return x.cpus == y.cpus && x.memory_bytes == y.memory_bytes &&
                             x.gpus == y.gpus && SameText(x.gpu_type, y.gpu_type);
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

// BestNode for one replica ask on one state, per pass, as of a position in
// that state's log. Nodes absent from the log since then score as they did,
// so the best is the old best or a node booked since: Place rescores only
// those. When the old best itself got worse, nothing is known about the
// other nodes and Place asks BestNode again. Kept per ask (Need::ask) and per
// state by the caller; only valid without a rank. BestNode does not depend
// on the gang (Place tries the gang's nodes first, and none of them fits when
// it gets there), so every replica of a gang may use it.
struct PlaceHint {
  struct Pass {
    bool valid = false;
    size_t log_pos = 0;
    Choice best;
  };
  Pass pass[2];
};

// The placement hints of one state, by ask (Need::ask). An ask gets its
// hint when it is placed the second time: in a queue of many distinct shapes
// most asks are placed once, and a table for all of them, zeroed on every
// call, would cost more than the hints save. Hints never move (a deque).
class Hints {
 public:
  explicit Hints(size_t asks) : slot_(asks, kNever) {}
  // The hint of `ask`; null on its first use.
  PlaceHint* For(int ask) {
    int32_t& slot = slot_[static_cast<size_t>(ask)];
    if (slot == kNever) {
      slot = kOnce;
      return nullptr;
    }
    if (slot == kOnce) {
      slot = static_cast<int32_t>(hints_.size());
      hints_.emplace_back();
    }
    return &hints_[static_cast<size_t>(slot)];
  }

 private:
  static constexpr int32_t kNever = -1, kOnce = -2;
  std::vector<int32_t> slot_;  // per ask: kNever, kOnce or an index into hints_
  std::deque<PlaceHint> hints_;
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
Choice BestNode(const Cluster& c, const State& s, const Need& need, IdSpan types,
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

// Places every replica or none. On success books the holds on `s`, leaves
// them in `holds` in replica order (one per replica) and returns true; on
// failure books nothing and leaves `holds` unspecified. `holds` is the
// caller's buffer, reused across calls. `rank` (lower first) breaks ties
// between otherwise equal nodes. `hints`, when given, must be the caller's
// memo of this very state (and `rank` must be null).
bool Place(const Cluster& c, State& s, const Shape& shape, const PolicyOptions& o,
           std::vector<Hold>& holds, const std::vector<double>* rank = nullptr,
           Hints* hints = nullptr) {
  if (!MayFit(c, s, shape, o)) return false;
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

// Aggregates of one state that explanations need: the most free on any one
// node. Valid for one state version; Diagnose fills it lazily.
struct Summary {
  bool cpu_done = false;
  double most_cpu = 0, most_mem = 0;
  // Per serving set: most free whole GPUs on one node, most room on one GPU.
  std::unordered_map<const Serving*, std::pair<int, double>> gpus;
};

// The most unbooked GPUs of `types` on any one node, and the most room
// (1 - booked fraction, at least 0) on any one GPU of `types`. Read from the
// node sets: a free GPU has all the room there is, and only nodes with a
// free or partly booked GPU of the types matter.
std::pair<int, double> MostFree(const Cluster& c, const State& s, IdSpan types) {
  const size_t words = s.with_free.words();
  auto any_type = [&](const NodeSets& sets) {
    return [&sets, types](size_t w) {
      uint64_t bits = 0;
      for (int t : types) bits |= sets.Word(static_cast<size_t>(t), w);
      return bits;
    };
  };
  int most = 0;
  if (types.last - types.first == 1) {
    const int t = *types.begin();
    for (int k = c.max_per_type; k > 0 && most == 0; --k) {
      for (size_t w = 0; w < words && most == 0; ++w) {
        if (s.by_free.Word(c.FreeSet(t, k), w) != 0) most = k;
      }
    }
  } else {
    ForEachNode(words, any_type(s.with_free), [&](int n) {
      int a = 0;
      for (int t : types) a += s.node_free[s.nodes[n].type_base + t];
      most = std::max(most, a);
      return false;
    });
  }
  if (most > 0) return {most, 1.0};
  double room = 0;
  ForEachNode(words, any_type(s.with_partial), [&](int n) {
    for (int t : types) {
      for (int p : c.Positions(n, t)) room = std::max(room, 1 - s.frac[s.nodes[n].gpu_base + p]);
    }
    return false;
  });
  return {0, room};
}

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
    if (fresh) it->second = MostFree(c, s, Allowed(n, subs ? 1 : 0));
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
// started by it. Its holds are [first, last) of the call's pool of holds
// (one allocation for all jobs instead of one per job).
struct Event {
  int64_t end_us = 0;
  const std::string* job_id = nullptr;
  uint32_t first = 0, last = 0;
};

struct Earliest {
  int64_t start_us = 0;
  std::vector<Hold> holds;
  std::vector<std::string> after_jobs;
};

// Whether one replica fits on node `n` as it stands (any allowed GPU type).
bool NodeFits(const Cluster& c, const State& s, const Need& need, int n, const PolicyOptions& o) {
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

// Replays the ends of `events` (sorted by end; holds in `pool`) on `copy`, a
// copy of `s` made here (the caller's buffer, reused), until `shape` fits.
// nullopt when it never does. With `after_jobs`, also names the ended jobs
// that shared a node with the placement.
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
    if (!MayFit(c, copy, shape, o)) continue;
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

// Whether `shape` fits the idle cluster `idle`, exactly as Place would
// answer there. A single replica fits iff some node fits it, so the first
// such node settles it (usually the first node); a gang takes the greedy
// placement on `scratch`, an idle state, which it leaves idle.
bool FitsIdle(const Cluster& c, const State& idle, State& scratch, const Shape& shape,
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

std::string WaitingJob::Reason() const {
  if (!detail.empty()) return detail;
  return std::to_string(jobs_ahead) +
         (jobs_ahead == 1 ? " job ahead in the queue" : " jobs ahead in the queue");
}

std::string WaitKind(const WaitingJob& w) {
  if (w.detail.empty()) return "place in line";
  std::string kind = w.detail.substr(0, w.detail.find("; "));
  std::erase_if(kind, [](char c) { return c >= '0' && c <= '9'; });
  return kind;
}

bool WaitEventDue(const WaitingJob& w, const std::string& last_kind, int64_t last_event_us,
                  int64_t now_us, int64_t repeat_us) {
  std::string kind = WaitKind(w);
  if (kind != last_kind) return true;
  return !w.detail.empty() && now_us - last_event_us >= repeat_us;
}

int64_t EffectivePriority(const QueuedJob& job, int64_t now_us, const PolicyOptions& options) {
  if (options.aging_threshold_us <= 0 || now_us <= job.submit_us) return job.priority;
  return job.priority + (now_us - job.submit_us) / options.aging_threshold_us;
}

std::vector<size_t> QueueOrder(const Snapshot& snap) {
  Users users;
  QueueKeys keys = GatherKeys(snap, users, [](size_t, const QueuedJob&, uint32_t) {});
  std::vector<double> usage(users.names.size(), 0.0);
  for (uint32_t u = 0; u < usage.size(); ++u) {
    auto it = snap.usage_gpu_seconds.find(users.names[u]);
    if (it != snap.usage_gpu_seconds.end()) usage[u] = it->second;
  }
  const std::vector<uint32_t> order = OrderQueue(keys, usage);
  return std::vector<size_t>(order.begin(), order.end());
}

Status ValidateJob(const QueuedJob& job, const std::vector<resources::Node>& nodes,
                   const PolicyOptions& options) {
  std::string problem = ShapeProblem(job.replicas);
  if (problem.empty()) {
    Cluster c(nodes);
    State idle = IdleState(c, options);
    Shape shape = Compile(c, job.replicas);
    std::vector<Hold> holds;
    if (!Place(c, idle, shape, options, holds)) {
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
  State scratch = Copy(idle, false);  // stays idle between feasibility probes
  std::vector<Hold> holds;            // Place's output, reused for every attempt

  // One pass over the queue in index (memory) order: the ordering keys, and
  // each job's shape memo. Whether a shape is valid and fits the idle
  // cluster does not depend on the order.
  Users users;
  Asks asks;
  // Index = HashIndex id. A deque: thousands of memos (a queue of distinct
  // shapes) are never moved, nor held in one large block.
  std::deque<ShapeMemo> memos;
  HashIndex by_shape;
  // Each shape's asks (its first job's), side by side for the comparisons
  // that every job makes: reaching them through memos and the first job's
  // record would be two more cache misses.
  std::vector<std::span<const ReplicaAsk>> shape_asks;
  // What the main loop needs of each job besides its id, in one record: it
  // visits the jobs in queue order, and one cache miss per job beats three.
  struct JobFacts {
    uint32_t user = 0;
    uint32_t shape = 0;  // index into memos
    int64_t runtime_bound_s = 0;
  };
  std::vector<JobFacts> facts(snap.queued.size());
  const QueueKeys keys = GatherKeys(snap, users, [&](size_t qi, const QueuedJob& job, uint32_t u) {
    bool fresh = false;
    const uint32_t slot = by_shape.FindOrAdd(
        ShapeHash(job.replicas), [&](uint32_t i) { return SameAsks(shape_asks[i], job.replicas); },
        &fresh);
    facts[qi] = {u, slot, job.runtime_bound_s};
    if (!fresh) return;
    shape_asks.emplace_back(job.replicas);
    ShapeMemo& m = memos.emplace_back();
    m.asks = &job.replicas;
    m.problem = ShapeProblem(job.replicas);
    if (!m.problem.empty()) return;
    m.shape = Compile(c, job.replicas);
    for (Need& n : m.shape.needs) asks.Intern(n);
    if (!FitsIdle(c, idle, scratch, m.shape, o, holds)) {
      m.problem = "can never run on this cluster even when idle: " + Diagnose(c, idle, m.shape, o) +
                  " (ask for less, allow accelerator substitution, or add nodes)";
    }
  });

  // Per-user facts by interned id: running jobs and GPUs, usage, quota.
  std::vector<uint32_t> running_user;
  running_user.reserve(snap.running.size());
  for (const RunningJob& r : snap.running) running_user.push_back(users.Id(r.user));
  const size_t user_count = users.names.size();
  std::vector<int> user_jobs(user_count, 0);
  std::vector<double> user_gpus(user_count, 0.0);
  std::vector<double> usage(user_count, 0.0);
  std::vector<const Quota*> quota(user_count, nullptr);
  for (uint32_t u = 0; u < user_count; ++u) {
    const std::string& name = users.names[u];
    auto it = snap.usage_gpu_seconds.find(name);
    if (it != snap.usage_gpu_seconds.end()) usage[u] = it->second;
    auto q = snap.quotas.find(name);
    if (q != snap.quotas.end()) quota[u] = &q->second;
  }

  // Book the running jobs; remember when each may end.
  std::vector<Event> events;
  HoldPool pool;  // the holds of `events`
  events.reserve(snap.running.size());
  pool.reserve(snap.running.size());
  for (size_t ri = 0; ri < snap.running.size(); ++ri) {
    const RunningJob& r = snap.running[ri];
    const uint32_t u = running_user[ri];
    const size_t first = pool.size();
    for (const PlacedReplica& p : r.replicas) {
      if (p.node < 0 || p.node >= static_cast<int>(snap.nodes.size())) continue;
      pool.Start(p.node, p.cpus, static_cast<double>(p.memory_bytes));
      for (const GpuShare& g : p.gpus) {
        int pos = c.PosOf(p.node, g.gpu);
        if (pos < 0) continue;
        pool.AddGpu(pos, g.fraction);
        user_gpus[u] += g.fraction;
      }
      pool.Book(c, st, pool[pool.size() - 1], +1);
    }
    ++user_jobs[u];
    if (r.runtime_bound_s > 0) {
      const int64_t end = std::max(r.start_us + r.runtime_bound_s * kUsPerS, snap.now_us);
      events.push_back(
          {end, &r.id, static_cast<uint32_t>(first), static_cast<uint32_t>(pool.size())});
    } else {
      pool.Truncate(first);  // never ends: no replay needs its holds
    }
  }
  // Jobs started by this call are appended to `events`; a replay needs them
  // sorted by end (stably, so equal ends keep their order). The sorted
  // prefix is kept and only the appended tail is sorted and merged in.
  size_t events_sorted = 0;
  auto sorted_events = [&]() -> const std::vector<Event>& {
    if (events_sorted < events.size()) {
      auto by_end = [](const Event& a, const Event& b) { return a.end_us < b.end_us; };
      const auto mid = events.begin() + static_cast<long>(events_sorted);
      std::stable_sort(mid, events.end(), by_end);
      std::inplace_merge(events.begin(), mid, events.end(), by_end);
      events_sorted = events.size();
    }
    return events;
  };

  std::optional<State> held;  // st plus the reservation's holds
  State replay;               // EarliestFit's copy, reused
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
      auto e = EarliestFit(c, st, sorted_events(), pool, m.shape, o, snap.now_us, false, replay);
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
  // detail stays empty (WaitingJob::Reason() gives the place in line) and
  // `detail` is never called: this runs for nearly every job of a long queue.
  auto add_wait = [&](const std::string& job_id, std::string detail, int64_t estimated) {
    d.wait.emplace_back(job_id, std::move(detail), waiting_ahead, estimated);  // in place
  };
  auto wait = [&](const std::string& job_id, int64_t estimated, auto&& detail) {
    // waiting_ahead counts the reservation holder
    add_wait(job_id, waiting_ahead > detailed ? std::string() : detail(), estimated);
    ++waiting_ahead;
  };

  // Placement hints per ask, on st and on held (see PlaceHint).
  Hints hints_now(asks.size()), hints_held(asks.size());

  // Records the start of `job` (shape memo m, user u) whose holds (in
  // `holds`) are already booked on st (and on held).
  auto start = [&](const QueuedJob& job, const ShapeMemo& m, uint32_t u, bool backfilled) {
    ++version;
    ++user_jobs[u];
    user_gpus[u] += m.shape.total_gpus;
    // The shape's first job asks exactly the same (SameAsks), and its asks
    // are in cache where this job's may not be.
    d.start.push_back({job.id, ToPlaced(c, holds, *m.asks), backfilled});
    if (job.runtime_bound_s > 0) {
      const size_t first = pool.size();
      for (const Hold& h : holds) pool.Add(h);
      events.push_back({snap.now_us + job.runtime_bound_s * kUsPerS, &job.id,
                        static_cast<uint32_t>(first), static_cast<uint32_t>(pool.size())});
    }
  };
  auto wait_for_resources = [&](const QueuedJob& job, ShapeMemo& m) {
    wait(job.id, estimate(m), [&] {
      std::string why = diagnosis(m);
      ahead_suffix(why);
      return why;
    });
  };

  const std::vector<uint32_t> order = OrderQueue(keys, usage);
  for (size_t k = 0; k < order.size(); ++k) {
    // The job's record and its facts are the random accesses left per job.
    if (k + 8 < order.size()) {
      __builtin_prefetch(&snap.queued[order[k + 8]]);
      __builtin_prefetch(&facts[order[k + 8]]);
    }
    const size_t qi = order[k];
    const QueuedJob& job = snap.queued[qi];
    const JobFacts& f = facts[qi];
    const uint32_t user = f.user;
    ShapeMemo& m = memos[f.shape];
    if (!m.problem.empty()) {
      d.rejected.push_back({job.id, InvalidArgument("job " + job.id + ": " + m.problem)});
      continue;
    }

    // Rule 6: quotas skip a job without letting it block the others.
    if (const Quota* q = quota[user]) {
      int jobs = user_jobs[user];
      double gpus = user_gpus[user];
      if (q->max_running_jobs && jobs >= *q->max_running_jobs) {
        add_wait(job.id,
                 "quota: user " + job.user + " already runs " + std::to_string(jobs) + " of " +
                     std::to_string(*q->max_running_jobs) + " allowed jobs",
                 0);
        continue;
      }
      if (q->max_gpus && gpus + m.shape.total_gpus > *q->max_gpus + kEps) {
        add_wait(job.id,
                 "quota: user " + job.user + " uses " + Num(gpus) + " of " + Num(*q->max_gpus) +
                     " allowed GPUs; this job needs " + Num(m.shape.total_gpus),
                 0);
        continue;
      }
    }

    if (!d.reservation) {
      if (!m.fails_now && Place(c, st, m.shape, o, holds, nullptr, &hints_now)) {
        start(job, m, user, false);
        continue;
      }
      m.fails_now = true;
      // Rule 7: the first blocked job gets a reservation.
      Reservation r;
      r.job_id = job.id;
      std::vector<Hold> rholds;
      if (auto e =
              EarliestFit(c, st, sorted_events(), pool, m.shape, o, snap.now_us, true, replay)) {
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
        // The shape fits the idle cluster, but the greedy placement with a
        // rank may take other nodes; should it fail, nothing is held.
        if (Place(c, scratch, m.shape, o, rholds, &rank)) {
          for (const Hold& h : rholds) Book(c, scratch, h, -1);
        } else {
          rholds.clear();
        }
      }
      r.replicas = ToPlaced(c, rholds, *m.asks);
      held = Copy(st, true);
      for (const Hold& h : rholds) Book(c, *held, h, +1);
      reserved_us = r.start_us;
      reserved_text = ReservationText(r);
      // The reservation holder is always explained in full.
      std::string why = diagnosis(m);
      why += "; reserved: ";
      why += reserved_text;
      add_wait(job.id, std::move(why), r.start_us);
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
      wait_for_resources(job, m);
      continue;
    }
    bool ends_first = reserved_us > 0 && f.runtime_bound_s > 0 &&
                      snap.now_us + f.runtime_bound_s * kUsPerS <= reserved_us;
    if (ends_first) {
      if (Place(c, st, m.shape, o, holds, nullptr, &hints_now)) {
        for (const Hold& h : holds) Book(c, *held, h, +1);
        start(job, m, user, true);
      } else {
        m.fails_now = true;
        wait_for_resources(job, m);
      }
      continue;
    }
    // Runs past the reservation: it must fit beside the reserved resources
    // (held = st + reservation, so what fits there fits now too).
    if (!m.fails_held) {
      if (Place(c, *held, m.shape, o, holds, nullptr, &hints_held)) {
        for (const Hold& h : holds) Book(c, st, h, +1);
        start(job, m, user, true);
        continue;
      }
      m.fails_held = true;
      if (Place(c, st, m.shape, o, holds, nullptr, &hints_now)) {
        for (const Hold& h : holds) Book(c, st, h, -1);
      } else {
        m.fails_now = true;
      }
    }
    if (m.fails_now) {
      wait_for_resources(job, m);
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
