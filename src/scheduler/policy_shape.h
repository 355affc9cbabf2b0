// Internal to the scheduling policy (policy.h is its only public header):
// what a job asks for, compiled against the cluster. A Shape is a job's
// replica asks as placement needs them (GPU types resolved to the types that
// may serve them, largest replica first); jobs that ask exactly the same share
// one Shape per call (ShapeHash, SameAsks), and replicas that ask the same
// share one ask id (Asks) for placement hints.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/policy_cluster.h"
#include "scheduler/policy_hash.h"

namespace stoker::scheduler::internal {

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

// The shape of `replicas`, which ShapeProblem must have passed.
Shape Compile(const Cluster& c, const std::vector<ReplicaAsk>& replicas);

// The distinct replica asks of one call, interned: where a replica goes
// depends only on its ask and the state (see BestNode), so placement hints
// are kept per ask and shared by every shape and replica that asks the same.
class Asks {
 public:
  // Sets need.ask to the id of its ask, registering it if new.
  void Intern(Need& need);
  size_t size() const { return first_.size(); }

 private:
  HashIndex index_;
  std::vector<Need> first_;  // one of each ask, by id
};

// Inline: it runs for every replica of every new shape, inside the one
// pass over the queue.
inline void Asks::Intern(Need& need) {
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

// Identical asks hash alike, without allocating. Each replica's fields are
// hashed apart (products by distinct odd constants, and the GPU type) and
// folded once, so that the steps do not wait on each other: this runs for
// every queued job.
inline uint64_t ShapeHash(const std::vector<ReplicaAsk>& replicas) {
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

// Whether two jobs ask exactly the same, replica by replica. Runs for every
// queued job, hence inline.
inline bool SameAsks(std::span<const ReplicaAsk> a, std::span<const ReplicaAsk> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const ReplicaAsk& x, const ReplicaAsk& y) {
                      return x.cpus == y.cpus && x.memory_bytes == y.memory_bytes &&
                             x.gpus == y.gpus && SameText(x.gpu_type, y.gpu_type);
                    });
}

// Types a need may use in a pass: 0 = exact only, 1 = exact then substitutes.
inline IdSpan Allowed(const Need& n, int pass) {
  const std::vector<int>& a = n.serving->allowed;
  size_t count = pass == 1 ? a.size() : (n.serving->exact >= 0 ? 1 : 0);
  return {a.data(), a.data() + count};
}

// Unbooked whole GPUs on `s` that can serve `sv`, counting substitutes when
// `subs`.
inline int FreeServing(const State& s, const Serving& sv, bool subs) {
  int n = sv.exact >= 0 ? s.free_whole[sv.exact] : 0;
  if (subs) {
    for (int t : sv.subs) n += s.free_whole[t];
  }
  return n;
}

// Cheap necessary condition: enough free whole GPUs of serving types overall.
inline bool MayFit(const State& s, const Shape& shape, const PolicyOptions& o) {
  for (const auto& [sv, count] : shape.whole_by_type) {
    if (FreeServing(s, *sv, o.accelerator_substitution) < count) return false;
  }
  return true;
}

}  // namespace stoker::scheduler::internal
