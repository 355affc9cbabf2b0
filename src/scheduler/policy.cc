// Schedule() and ValidateJob() of policy.h: the rules in the order they
// apply. The mechanics of each rule live in the policy_*.cc files beside this
// one (see README.md), behind internal headers that only they include.
#include "scheduler/policy.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "scheduler/policy_backfill.h"
#include "scheduler/policy_cluster.h"
#include "scheduler/policy_hash.h"
#include "scheduler/policy_order.h"
#include "scheduler/policy_place.h"
#include "scheduler/policy_preempt.h"
#include "scheduler/policy_reasons.h"
#include "scheduler/policy_shape.h"

namespace stoker::scheduler {
namespace internal {
namespace {

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

// What the main loop needs of each job besides its id, in one record: it
// visits the jobs in queue order, and one cache miss per job beats three.
struct JobFacts {
  uint32_t user = 0;
  uint32_t shape = 0;  // index into the call's shape memos
  int64_t runtime_bound_s = 0;
};

// One queued job as the rules see it.
struct Job {
  const QueuedJob& queued;
  const JobFacts& facts;
  ShapeMemo& memo;
};

// One Schedule() call: the snapshot, read once; what is booked so far; and
// the decision being built. Set up by ReadQueue, ReadUsers and
// BookRunningJobs, in that order; then each rule is a method that Schedule
// applies to the jobs in queue order. Lives for one call.
class Call {
 public:
  explicit Call(const Snapshot& snap)
      : snap_(snap),
        o_(snap.options),
        c_(snap.nodes),
        idle_(IdleState(c_, o_)),
        st_(idle_),
        scratch_(Copy(idle_, false)),
        detailed_(o_.detailed_reasons < 0 ? INT32_MAX : o_.detailed_reasons),
        estimates_left_(o_.max_estimated_shapes) {
    d_.wait.reserve(snap.queued.size());
    for (const RunningJob& r : snap.running) {
      if (r.expected_runtime_s != kRuntimeFromBound) expected_mode_ = true;
    }
    for (const QueuedJob& q : snap.queued) {
      if (q.expected_runtime_s != kRuntimeFromBound) expected_mode_ = true;
    }
  }

  // One pass over the queue in index (memory) order: the ordering keys, and
  // each job's shape memo. Whether a shape is valid and fits the idle
  // cluster does not depend on the order.
  void ReadQueue() {
    facts_.resize(snap_.queued.size());
    keys_ = GatherKeys(snap_, users_, [&](size_t qi, const QueuedJob& job, uint32_t u) {
      bool fresh = false;
      const uint32_t slot = by_shape_.FindOrAdd(
          ShapeHash(job.replicas),
          [&](uint32_t i) { return SameAsks(shape_asks_[i], job.replicas); }, &fresh);
      facts_[qi] = {u, slot, job.runtime_bound_s};
      if (fresh) AddShape(job);
    });
    hints_now_ = Hints(asks_.size());
    hints_held_ = Hints(asks_.size());
  }

  // Per-user facts by interned id: usage, quota, and (counted by
  // BookRunningJobs) running jobs and GPUs.
  void ReadUsers() {
    running_user_.reserve(snap_.running.size());
    for (const RunningJob& r : snap_.running) running_user_.push_back(users_.Id(r.user));
    const size_t user_count = users_.names.size();
    user_jobs_.assign(user_count, 0);
    user_gpus_.assign(user_count, 0.0);
    usage_ = UsageByUser(snap_, users_);
    quota_.assign(user_count, nullptr);
    for (uint32_t u = 0; u < user_count; ++u) {
      auto q = snap_.quotas.find(users_.names[u]);
      if (q != snap_.quotas.end()) quota_[u] = &q->second;
    }
  }

  // Books the running jobs; remembers when each may end.
  void BookRunningJobs() {
    HoldPool& pool = ends_.pool;
    ends_.events.reserve(snap_.running.size());
    pool.reserve(snap_.running.size());
    for (size_t ri = 0; ri < snap_.running.size(); ++ri) {
      const RunningJob& r = snap_.running[ri];
      const uint32_t u = running_user_[ri];
      const size_t first = pool.size();
      for (const PlacedReplica& p : r.replicas) {
        if (p.node < 0 || p.node >= static_cast<int>(snap_.nodes.size())) continue;
        pool.Start(p.node, p.cpus, static_cast<double>(p.memory_bytes));
        for (const GpuShare& g : p.gpus) {
          int pos = c_.PosOf(p.node, g.gpu);
          if (pos < 0) continue;
          pool.AddGpu(pos, g.fraction);
          user_gpus_[u] += g.fraction;
        }
        pool.Book(c_, st_, pool[pool.size() - 1], +1);
      }
      ++user_jobs_[u];
      if (expected_mode_) {
        if (int64_t run_s = RunTimeS(r.expected_runtime_s, r.runtime_bound_s); run_s > 0) {
          const size_t efirst = expected_.pool.size();
          for (size_t i = first; i < pool.size(); ++i) expected_.pool.AddCopy(pool, i);
          expected_.Add(std::max(r.start_us + run_s * kUsPerS, snap_.now_us), &r.id, efirst);
        }
      }
      if (r.runtime_bound_s > 0) {
        ends_.Add(std::max(r.start_us + r.runtime_bound_s * kUsPerS, snap_.now_us), &r.id, first);
      } else {
        pool.Truncate(first);  // never ends: no replay needs its holds
      }
    }
    // Memory held outside jobs: booked, and never ends within this call.
    for (const Held& h : snap_.held) {
      if (h.node < 0 || h.node >= static_cast<int>(snap_.nodes.size())) continue;
      internal::Book(c_, st_, h.node, 0.0, static_cast<double>(h.memory_bytes), nullptr, nullptr,
                     +1);
    }
  }

  // Rule 1: indices into the queue, in the order the rules consider them.
  std::vector<uint32_t> Order() const { return OrderQueue(keys_, usage_); }

  // The job's record and its facts are the random accesses left per job:
  // the caller asks for them a few jobs ahead.
  void Prefetch(uint32_t qi) const {
    __builtin_prefetch(&snap_.queued[qi]);
    __builtin_prefetch(&facts_[qi]);
  }

  Job JobAt(uint32_t qi) {
    const JobFacts& f = facts_[qi];
    return {snap_.queued[qi], f, memos_[f.shape]};
  }

  // A job that can never run as asked goes to `rejected`.
  bool RejectIfNeverRuns(const Job& j) {
    if (j.memo.problem.empty()) return false;
    const std::string& id = j.queued.id;
    d_.rejected.push_back({id, InvalidArgument("job " + id + ": " + j.memo.problem)});
    return true;
  }

  // Rule 6: quotas skip a job without letting it block the others.
  bool HoldForQuota(const Job& j) {
    const uint32_t user = j.facts.user;
    const Quota* q = quota_[user];
    if (q == nullptr) return false;
    const int jobs = user_jobs_[user];
    const double gpus = user_gpus_[user];
    const double needs = j.memo.shape.total_gpus;
    if (q->max_running_jobs && jobs >= *q->max_running_jobs) {
      AddWait(j.queued.id, QuotaJobsReason(j.queued.user, jobs, *q->max_running_jobs), 0);
      d_.wait.back().quota_hold = true;
      return true;
    }
    if (q->max_gpus && gpus + needs > *q->max_gpus + kEps) {
      AddWait(j.queued.id, QuotaGpusReason(j.queued.user, gpus, *q->max_gpus, needs), 0);
      d_.wait.back().quota_hold = true;
      return true;
    }
    return false;
  }

  bool Reserved() const { return d_.reservation.has_value(); }

  // Rules 2-5, before any job is blocked: starts the job if its gang fits
  // now.
  bool StartIfFits(const Job& j) {
    ShapeMemo& m = j.memo;
    if (!m.fails_now && Place(c_, st_, m.shape, o_, holds_, nullptr, &hints_now_)) {
      Start(j, false);
      return true;
    }
    m.fails_now = true;
    return false;
  }

  // Rule 7: the first blocked job gets a reservation (ReservationFor), held
  // on `held_` from now on.
  void Reserve(const Job& j) {
    ShapeMemo& m = j.memo;
    Earliest e = ReservationFor(c_, st_, ends_, m.shape, o_, snap_.now_us, scratch_, replay_);
    Reservation r;
    r.job_id = j.queued.id;
    r.start_us = e.start_us;
    r.after_jobs = std::move(e.after_jobs);
    r.replicas = ToPlaced(c_, e.holds, *m.asks);
    held_ = Copy(st_, true);
    for (const Hold& h : e.holds) Book(c_, *held_, h, +1);
    reserved_us_ = r.start_us;
    // The reservation holder is always explained in full, with the same
    // estimate as its start column (the expected run times, when known).
    int64_t estimate = r.start_us;
    std::optional<int64_t> expected;
    if (expected_mode_) {
      auto e2 = EarliestFit(c_, st_, expected_.Sorted(), expected_.pool, m.shape, o_, snap_.now_us,
                            false, replay_);
      reserved_expected_us_ = e2 ? e2->start_us : 0;
      estimate = reserved_expected_us_;
      expected = estimate;
    }
    reserved_text_ = ReservationText(r, expected);
    AddWait(j.queued.id, ReservedReason(Diagnosis(m), reserved_text_), estimate);
    d_.reservation = std::move(r);
    ++waiting_ahead_;
  }

  // Rule 7 with backfill off: nothing after the first blocked job starts.
  void WaitBehindReservation(const Job& j) {
    Wait(j.queued.id, Estimate(j.memo),
         [&] { return BackfillOffReason(d_.reservation->job_id, waiting_ahead_); });
  }

  // Rule 7: backfill when it fits now and cannot delay the reservation.
  void Backfill(const Job& j) {
    ShapeMemo& m = j.memo;
    if (m.fails_now) return WaitForResources(j);
    if (EndsBeforeReservation(j)) {
      if (Place(c_, st_, m.shape, o_, holds_, nullptr, &hints_now_)) {
        for (const Hold& h : holds_) Book(c_, *held_, h, +1);
        return Start(j, true);
      }
      m.fails_now = true;
      return WaitForResources(j);
    }
    // Runs past the reservation: it must fit beside the reserved resources
    // (held = st + reservation, so what fits there fits now too).
    if (!m.fails_held) {
      if (Place(c_, *held_, m.shape, o_, holds_, nullptr, &hints_held_)) {
        for (const Hold& h : holds_) Book(c_, st_, h, +1);
        return Start(j, true);
      }
      m.fails_held = true;
      if (Place(c_, st_, m.shape, o_, holds_, nullptr, &hints_now_)) {
        for (const Hold& h : holds_) Book(c_, st_, h, -1);
      } else {
        m.fails_now = true;
      }
    }
    if (m.fails_now) return WaitForResources(j);
    Wait(j.queued.id, expected_mode_ ? Estimate(m) : reserved_us_,
         [&] { return WouldDelayReason(d_.reservation->job_id, reserved_text_); });
  }

  Decision TakeDecision() { return std::move(d_); }

 private:
  // Registers the shape of `job`, the first job that asks exactly this.
  void AddShape(const QueuedJob& job) {
    shape_asks_.emplace_back(job.replicas);
    ShapeMemo& m = memos_.emplace_back();
    m.asks = &job.replicas;
    m.problem = ShapeProblem(job.replicas);
    if (!m.problem.empty()) return;
    m.shape = Compile(c_, job.replicas);
    for (Need& n : m.shape.needs) asks_.Intern(n);
    if (!FitsIdle(c_, idle_, scratch_, m.shape, o_, holds_)) {
      m.problem = NeverFitsProblem(c_, idle_, m.shape, o_);
    }
  }

  // Records the start of `j` whose holds (in `holds_`) are already booked on
  // st_ (and on held_).
  void Start(const Job& j, bool backfilled) {
    const QueuedJob& job = j.queued;
    const ShapeMemo& m = j.memo;
    ++version_;
    ++user_jobs_[j.facts.user];
    user_gpus_[j.facts.user] += m.shape.total_gpus;
    // The shape's first job asks exactly the same (SameAsks), and its asks
    // are in cache where this job's may not be.
    d_.start.push_back({job.id, ToPlaced(c_, holds_, *m.asks), backfilled});
    if (job.runtime_bound_s > 0) {
      const size_t first = ends_.pool.size();
      for (const Hold& h : holds_) ends_.pool.Add(h);
      ends_.Add(snap_.now_us + job.runtime_bound_s * kUsPerS, &job.id, first);
    }
    if (expected_mode_) {
      if (int64_t run_s = RunTimeS(job.expected_runtime_s, job.runtime_bound_s); run_s > 0) {
        const size_t first = expected_.pool.size();
        for (const Hold& h : holds_) expected_.pool.Add(h);
        expected_.Add(snap_.now_us + run_s * kUsPerS, &job.id, first);
      }
    }
  }

  // The run time rule 8 assumes: the expected one capped by the bound, or
  // the bound for kRuntimeFromBound; 0 = unknown (never ends).
  static int64_t RunTimeS(int64_t expected_s, int64_t bound_s) {
    if (expected_s == kRuntimeFromBound) return bound_s;
    if (expected_s <= 0) return 0;
    return bound_s > 0 ? std::min(expected_s, bound_s) : expected_s;
  }

  // Whether `j` ends (now + its bound) by the reservation's start.
  bool EndsBeforeReservation(const Job& j) const {
    const int64_t bound_s = j.facts.runtime_bound_s;
    return reserved_us_ > 0 && bound_s > 0 && snap_.now_us + bound_s * kUsPerS <= reserved_us_;
  }

  // Rule 8's estimated start: when the shape first fits as jobs end, not
  // before the reservation; 0 when unknown, or past the first
  // max_estimated_shapes shapes.
  int64_t Estimate(ShapeMemo& m) {
    const int64_t floor_us = expected_mode_ ? reserved_expected_us_ : reserved_us_;
    if (d_.reservation && floor_us == 0) return 0;
    if (!m.estimated && estimates_left_ > 0) {
      --estimates_left_;
      m.estimated = true;
      Ends& ends = expected_mode_ ? expected_ : ends_;
      auto e =
          EarliestFit(c_, st_, ends.Sorted(), ends.pool, m.shape, o_, snap_.now_us, false, replay_);
      m.estimate_us = e ? e->start_us : 0;
    }
    if (m.estimate_us == 0) return 0;
    return std::max(m.estimate_us, floor_us);
  }

  // Diagnose's text for the shape on st_ as it stands, cached per version.
  const std::string& Diagnosis(ShapeMemo& m) {
    if (m.diagnosis_version != version_) {
      if (summary_version_ != version_) {
        summary_ = Summary();
        summary_version_ = version_;
      }
      m.diagnosis = Diagnose(c_, st_, m.shape, o_, summary_);
      m.diagnosis_version = version_;
    }
    return m.diagnosis;
  }

  void WaitForResources(const Job& j) {
    Wait(j.queued.id, Estimate(j.memo),
         [&] { return ResourcesReason(Diagnosis(j.memo), waiting_ahead_); });
  }

  // Records a wait that is not a quota hold. Past the detailed ones, the
  // detail stays empty (WaitingJob::Reason() gives the place in line) and
  // `detail` is never called: this runs for nearly every job of a long queue.
  template <typename Detail>
  void Wait(const std::string& job_id, int64_t estimated, Detail&& detail) {
    // waiting_ahead_ counts the reservation holder
    AddWait(job_id, waiting_ahead_ > detailed_ ? std::string() : detail(), estimated);
    ++waiting_ahead_;
  }

  void AddWait(const std::string& job_id, std::string detail, int64_t estimated) {
    d_.wait.emplace_back(job_id, std::move(detail), waiting_ahead_, estimated);  // in place
  }

  const Snapshot& snap_;
  const PolicyOptions& o_;
  Decision d_;
  const Cluster c_;
  const State idle_;
  State st_;                   // what is booked now
  State scratch_;              // stays idle between feasibility probes
  std::optional<State> held_;  // st_ plus the reservation's holds
  State replay_;               // EarliestFit's copy, reused
  std::vector<Hold> holds_;    // Place's output, reused for every attempt

  // Read from the queue (ReadQueue).
  Users users_;
  Asks asks_;
  // Index = HashIndex id. A deque: thousands of memos (a queue of distinct
  // shapes) are never moved, nor held in one large block.
  std::deque<ShapeMemo> memos_;
  HashIndex by_shape_;
  // Each shape's asks (its first job's), side by side for the comparisons
  // that every job makes: reaching them through memos and the first job's
  // record would be two more cache misses.
  std::vector<std::span<const ReplicaAsk>> shape_asks_;
  std::vector<JobFacts> facts_;  // by queue index
  QueueKeys keys_;
  // Placement hints per ask, on st_ and on held_ (see PlaceHint).
  Hints hints_now_, hints_held_;

  // Per user (ReadUsers, BookRunningJobs, Start).
  std::vector<uint32_t> running_user_;  // by index into snapshot.running
  std::vector<int> user_jobs_;
  std::vector<double> user_gpus_;
  std::vector<double> usage_;
  std::vector<const Quota*> quota_;

  Ends ends_;  // running jobs and those started here, with their ends
  // Rule 8 with expected run times: whether any job has one set, the ends
  // they give (only jobs whose run time is known), and the reservation
  // holder's estimate by them (0 = unknown).
  bool expected_mode_ = false;
  Ends expected_;
  int64_t reserved_expected_us_ = 0;

  int64_t reserved_us_ = 0;  // reservation start, 0 = unknown
  std::string reserved_text_;
  int waiting_ahead_ = 0;
  int version_ = 0;  // bumped on every start: invalidates cached diagnoses
  Summary summary_;  // of st_ at summary_version_
  int summary_version_ = 0;
  // Rule 8: waiting jobs from this many ahead on get only their place.
  const int detailed_;
  int estimates_left_;
};

}  // namespace
}  // namespace internal

Decision Schedule(const Snapshot& snap) {
  internal::Call call(snap);
  call.ReadQueue();        // each job's user, ordering keys and shape, in one pass
  call.ReadUsers();        // usage and quota per user
  call.BookRunningJobs();  // what running jobs hold, and when each may end
  const std::vector<uint32_t> order = call.Order();  // rule 1
  for (size_t k = 0; k < order.size(); ++k) {
    if (k + 8 < order.size()) call.Prefetch(order[k + 8]);
    const internal::Job job = call.JobAt(order[k]);
    if (call.RejectIfNeverRuns(job) || call.HoldForQuota(job)) continue;  // rule 6
    if (!call.Reserved()) {
      if (!call.StartIfFits(job)) call.Reserve(job);  // rules 2-5, else 7
    } else if (!snap.options.backfill) {
      call.WaitBehindReservation(job);  // rule 7, backfill off
    } else {
      call.Backfill(job);  // rule 7
    }
  }
  Decision d = call.TakeDecision();
  d.preempt = internal::ChoosePreemptions(snap, d);  // rule 9
  return d;
}

Status ValidateJob(const QueuedJob& job, const std::vector<resources::Node>& nodes,
                   const PolicyOptions& options) {
  using namespace internal;
  std::string problem = ShapeProblem(job.replicas);
  if (problem.empty()) {
    Cluster c(nodes);
    State idle = IdleState(c, options);
    Shape shape = Compile(c, job.replicas);
    std::vector<Hold> holds;
    if (!Place(c, idle, shape, options, holds)) {
      problem = NeverFitsProblem(c, IdleState(c, options), shape, options);
    }
  }
  if (problem.empty()) return OkStatus();
  return InvalidArgument("job " + job.id + ": " + problem);
}

}  // namespace stoker::scheduler
