// Rule 9 of policy.h: preemption.
#include "scheduler/policy_preempt.h"

#include <algorithm>
#include <climits>
#include <string_view>
#include <unordered_map>

#include "scheduler/policy_cluster.h"
#include "scheduler/policy_place.h"
#include "scheduler/policy_reasons.h"
#include "scheduler/policy_shape.h"

namespace stoker::scheduler::internal {
namespace {

// A running job that rule 9 may stop, with what it holds.
struct Candidate {
  const RunningJob* job = nullptr;
  std::vector<Hold> holds;
  double lost_gpu_s = 0;  // GPUs x seconds since its progress mark
  double lost_cpu_s = 0;
  bool chosen = false;  // already a victim for an earlier waiting job
};

Hold HoldOf(const Cluster& c, const PlacedReplica& p) {
  Hold h;
  h.node = p.node;
  h.cpus = p.cpus;
  h.mem = static_cast<double>(p.memory_bytes);
  for (const GpuShare& g : p.gpus) {
    const int pos = c.PosOf(p.node, g.gpu);
    if (pos >= 0) h.gpus.emplace_back(pos, g.fraction);
  }
  return h;
}

bool OnCluster(const Snapshot& snap, const PlacedReplica& p) {
  return p.node >= 0 && p.node < static_cast<int>(snap.nodes.size());
}

void BookAll(const Cluster& c, State& st, const std::vector<Hold>& holds, int sign) {
  for (const Hold& h : holds) Book(c, st, h, sign);
}

}  // namespace

std::vector<Preemption> ChoosePreemptions(const Snapshot& snap, const Decision& decision) {
  const PolicyOptions& o = snap.options;
  const PreemptionOptions& p = o.preemption;
  std::vector<Preemption> out;
  if (!p.enabled || decision.wait.empty()) return out;

  // Who may be preempted at all.
  std::vector<Candidate> candidates;
  int lowest = INT_MAX;
  for (const RunningJob& r : snap.running) {
    if (!r.preemptible || r.stopping || snap.now_us - r.start_us < p.min_run_us) continue;
    Candidate& k = candidates.emplace_back();
    k.job = &r;
    const double unsaved_s =
        static_cast<double>(snap.now_us - std::max(r.start_us, r.progress_us)) / 1e6;
    for (const PlacedReplica& pr : r.replicas) {
      double gpus = 0;
      for (const GpuShare& g : pr.gpus) gpus += g.fraction;
      k.lost_gpu_s += gpus * std::max(0.0, unsaved_s);
      k.lost_cpu_s += pr.cpus * std::max(0.0, unsaved_s);
    }
    lowest = std::min(lowest, r.priority);
  }
  if (candidates.empty()) return out;

  // What stays booked: every running job that is not stopping, and the jobs
  // rules 1-8 start now.
  const Cluster c(snap.nodes);
  State st = IdleState(c, o);
  for (const RunningJob& r : snap.running) {
    if (r.stopping) continue;
    for (const PlacedReplica& pr : r.replicas) {
      if (OnCluster(snap, pr)) Book(c, st, HoldOf(c, pr), +1);
    }
  }
  for (Candidate& k : candidates) {
    for (const PlacedReplica& pr : k.job->replicas) {
      if (OnCluster(snap, pr)) k.holds.push_back(HoldOf(c, pr));
    }
  }
  for (const StartJob& s : decision.start) {
    for (const PlacedReplica& pr : s.replicas) {
      if (OnCluster(snap, pr)) Book(c, st, HoldOf(c, pr), +1);
    }
  }

  std::unordered_map<std::string_view, const QueuedJob*> queued;
  queued.reserve(snap.queued.size());
  for (const QueuedJob& q : snap.queued) queued.emplace(q.id, &q);

  std::vector<Hold> holds;
  int considered = 0;
  for (const WaitingJob& w : decision.wait) {
    if (w.quota_hold) continue;
    auto it = queued.find(w.job_id);
    if (it == queued.end()) continue;
    const QueuedJob& job = *it->second;
    if (!ShapeProblem(job.replicas).empty()) continue;
    if (considered++ >= p.max_jobs_considered) break;
    const Shape shape = Compile(c, job.replicas);
    // Fits once the stopping jobs are gone: it claims what they free.
    if (Place(c, st, shape, o, holds)) continue;
    if (static_cast<int64_t>(job.priority) - p.priority_margin < lowest) continue;

    // Victims it may take, least unsaved work first; then lower priority,
    // then the youngest attempt.
    std::vector<Candidate*> order;
    for (Candidate& k : candidates) {
      if (!k.chosen && static_cast<int64_t>(job.priority) - k.job->priority >= p.priority_margin) {
        order.push_back(&k);
      }
    }
    std::sort(order.begin(), order.end(), [](const Candidate* a, const Candidate* b) {
      if (a->lost_gpu_s != b->lost_gpu_s) return a->lost_gpu_s < b->lost_gpu_s;
      if (a->lost_cpu_s != b->lost_cpu_s) return a->lost_cpu_s < b->lost_cpu_s;
      if (a->job->priority != b->job->priority) return a->job->priority < b->job->priority;
      return a->job->start_us > b->job->start_us;
    });
    std::vector<Candidate*> taken;
    bool fits = false;
    for (Candidate* k : order) {
      BookAll(c, st, k->holds, -1);
      taken.push_back(k);
      if (Place(c, st, shape, o, holds)) {
        fits = true;
        break;
      }
    }
    if (!fits) {
      for (Candidate* k : taken) BookAll(c, st, k->holds, +1);
      continue;
    }
    BookAll(c, st, holds, -1);
    // Keep every victim it fits without, trying the costliest first.
    std::sort(taken.begin(), taken.end(),
              [](const Candidate* a, const Candidate* b) { return a->lost_gpu_s > b->lost_gpu_s; });
    std::vector<Candidate*> victims;
    for (Candidate* k : taken) {
      BookAll(c, st, k->holds, +1);
      if (Place(c, st, shape, o, holds)) {
        BookAll(c, st, holds, -1);
      } else {
        BookAll(c, st, k->holds, -1);
        victims.push_back(k);
      }
    }
    if (!Place(c, st, shape, o, holds)) {  // cannot happen: it fit with all of `taken` gone
      for (Candidate* k : victims) BookAll(c, st, k->holds, +1);
      continue;
    }
    for (Candidate* k : victims) {
      k->chosen = true;
      out.push_back({k->job->id, job.id, k->lost_gpu_s});
    }
  }
  return out;
}

}  // namespace stoker::scheduler::internal
