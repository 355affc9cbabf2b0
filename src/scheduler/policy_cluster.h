// Internal to the scheduling policy (policy.h is its only public header):
// the cluster as one Schedule() call sees it. Cluster holds the facts that do
// not change during a call (GPU types, positions); State holds what is booked
// where, with counts and node sets kept in step so that placement
// (policy_place.h) visits only candidate nodes. Book is the one way to change
// a State.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "resources/resources.h"
#include "scheduler/policy.h"

namespace stoker::scheduler::internal {

// Tolerance for booked GPU fractions and CPUs (sums of doubles).
constexpr double kEps = 1e-9;
// Times are microseconds since the epoch; runtime bounds are seconds.
constexpr int64_t kUsPerS = 1000000;

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

  explicit Cluster(const std::vector<resources::Node>& n);

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

  // The types that serve requested type `type`; the same pointer for the
  // same name for the life of the Cluster.
  const Serving* ServingFor(const std::string& type) const;

  // The position on `node` of the GPU with resources::Gpu::index
  // `gpu_index`; -1 when the node has none.
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

// The cluster with nothing booked; CPUs and memory capped at capacity x
// o.cpu_oversubscription (rule 4).
State IdleState(const Cluster& c, const PolicyOptions& o);

// Makes `to` a copy of `s` with an empty log, kept when `logged`. Reuses
// the memory `to` has.
void CopyInto(const State& s, bool logged, State& to);

State Copy(const State& s, bool logged);

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

// Books (sign +1) or releases (-1) `cpus`, `mem` and the GPUs [first, last)
// (position, fraction) on node `node` of `s`, keeping the counts and node
// sets in step.
void Book(const Cluster& c, State& s, int node, double cpus, double mem,
          const GpuList::Entry* first, const GpuList::Entry* last, int sign);

inline void Book(const Cluster& c, State& s, const Hold& h, int sign) {
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
  // Adds a copy of `from`'s hold `i`.
  void AddCopy(const HoldPool& from, size_t i) {
    const Entry& e = from.entries_[i];
    Start(e.node, e.cpus, e.mem);
    for (uint32_t k = e.first; k < e.last; ++k) gpus_.push_back(from.gpus_[k]);
    entries_.back().last = static_cast<uint32_t>(gpus_.size());
  }
  // Drops the holds from `n` on.
  void Truncate(size_t n) {
    gpus_.resize(n < entries_.size() ? entries_[n].first : gpus_.size());
    entries_.resize(n);
  }
  void Book(const Cluster& c, State& s, const Entry& e, int sign) const {
    const GpuList::Entry* g = gpus_.data();
    internal::Book(c, s, e.node, e.cpus, e.mem, g + e.first, g + e.last, sign);
  }

 private:
  std::vector<Entry> entries_;
  std::vector<GpuList::Entry> gpus_;
};

}  // namespace stoker::scheduler::internal
