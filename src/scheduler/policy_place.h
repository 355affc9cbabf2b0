// Internal to the scheduling policy (policy.h is its only public header):
// rules 2-5, where a gang goes. Place books every replica of a shape on a
// State or none, choosing for each replica the best node by Score, visiting
// only the nodes the state's node sets say may fit, and remembering per ask
// where the search ended (Hints) so that the next job of the same ask rescores
// only the nodes booked since.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <tuple>
#include <vector>

#include "scheduler/policy.h"
#include "scheduler/policy_cluster.h"
#include "scheduler/policy_shape.h"

namespace stoker::scheduler::internal {

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
  Hints() = default;
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

// Places every replica or none. On success books the holds on `s`, leaves
// them in `holds` in replica order (one per replica) and returns true; on
// failure books nothing and leaves `holds` unspecified. `holds` is the
// caller's buffer, reused across calls. `rank` (lower first) breaks ties
// between otherwise equal nodes. `hints`, when given, must be the caller's
// memo of this very state (and `rank` must be null).
bool Place(const Cluster& c, State& s, const Shape& shape, const PolicyOptions& o,
           std::vector<Hold>& holds, const std::vector<double>* rank = nullptr,
           Hints* hints = nullptr);

// Whether one replica fits on node `n` as it stands (any allowed GPU type).
bool NodeFits(const Cluster& c, const State& s, const Need& need, int n, const PolicyOptions& o);

// Whether `shape` fits the idle cluster `idle`, exactly as Place would
// answer there. A single replica fits iff some node fits it, so the first
// such node settles it (usually the first node); a gang takes the greedy
// placement on `scratch`, an idle state, which it leaves idle.
bool FitsIdle(const Cluster& c, const State& idle, State& scratch, const Shape& shape,
              const PolicyOptions& o, std::vector<Hold>& holds);

// The holds (one per replica, in replica order) as the Decision reports them:
// GPU indexes, memory limits, substitutions.
std::vector<PlacedReplica> ToPlaced(const Cluster& c, const std::vector<Hold>& holds,
                                    const std::vector<ReplicaAsk>& asks);

}  // namespace stoker::scheduler::internal
