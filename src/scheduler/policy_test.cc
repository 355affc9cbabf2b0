#include "scheduler/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

namespace stoker::scheduler {
namespace {

constexpr int64_t kS = 1000000;
constexpr int64_t kNow = 1795000000LL * kS;  // 2026-11-18T11:06:40Z
constexpr uint64_t kGB = 1ull << 30;
const char kH100[] = "NVIDIA_H100_80GB";
const char kL4[] = "NVIDIA_L4";
const char kT4[] = "NVIDIA_TESLA_T4";

resources::Node GpuNode(const std::string& name, int gpus, const std::string& type = kH100,
                        double cpus = 64, uint64_t memory = 512 * kGB) {
  resources::Node n{name, cpus, memory, {}};
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back({i, type, resources::AcceleratorMemoryBytes(type), ""});
  }
  return n;
}

ReplicaAsk Ask(double gpus, const std::string& type = kH100, double cpus = 4) {
  return {cpus, 16 * kGB, gpus, gpus > 0 ? type : ""};
}

QueuedJob Job(const std::string& id, std::vector<ReplicaAsk> replicas, int priority = 0,
              int64_t bound_s = 3600, const std::string& user = "alice", int64_t submit = kNow) {
  return {id, user, priority, submit, std::move(replicas), bound_s};
}

// A running job holding whole GPUs `gpus` on `node`, ending at kNow + ends_in_s.
RunningJob Running(const std::string& id, int node, std::vector<int> gpus, int64_t ends_in_s,
                   const std::string& user = "zed", double fraction = 1.0) {
  RunningJob r;
  r.id = id;
  r.user = user;
  PlacedReplica p;
  p.node = node;
  p.cpus = 4;
  p.memory_bytes = 16 * kGB;
  for (int g : gpus) p.gpus.push_back({g, fraction, 0});
  r.replicas.push_back(p);
  r.start_us = kNow - 10 * kS;
  r.runtime_bound_s = ends_in_s == 0 ? 0 : ends_in_s + 10;
  return r;
}

Snapshot Snap(std::vector<resources::Node> nodes) {
  Snapshot s;
  s.nodes = std::move(nodes);
  s.now_us = kNow;
  return s;
}

const StartJob* Started(const Decision& d, const std::string& id) {
  for (const StartJob& s : d.start) {
    if (s.job_id == id) return &s;
  }
  return nullptr;
}

const WaitingJob* Waiting(const Decision& d, const std::string& id) {
  for (const WaitingJob& w : d.wait) {
    if (w.job_id == id) return &w;
  }
  return nullptr;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(PolicyTest, OrdersByPriorityThenFairShareThenSubmission) {
  Snapshot s = Snap({GpuNode("n", 1)});
  s.queued = {Job("old-low", {Ask(1)}, 0, 3600, "alice", kNow - 2),
              Job("heavy-user", {Ask(1)}, 5, 3600, "bob", kNow - 3),
              Job("light-user", {Ask(1)}, 5, 3600, "carol", kNow - 1),
              Job("light-user-earlier", {Ask(1)}, 5, 3600, "carol", kNow - 4)};
  s.usage_gpu_seconds = {{"bob", 1000}, {"carol", 10}};
  std::vector<size_t> order = QueueOrder(s);
  EXPECT_EQ(order, (std::vector<size_t>{3, 2, 1, 0}));
  Decision d = Schedule(s);
  ASSERT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.start[0].job_id, "light-user-earlier");
}

TEST(PolicyTest, MemoryHeldOutsideJobsIsBookedBeforeThePlacing) {
  // A node with 64 GB; a job asking for 48 GB fits, unless a user's warm
  // interpreters hold 20 GB of it.
  Snapshot s = Snap({GpuNode("n", 0, kH100, 8, 64 * kGB)});
  s.queued = {Job("big", {{2, 48 * kGB, 0, ""}})};
  EXPECT_NE(Started(Schedule(s), "big"), nullptr);
  s.held = {{"alice", "warm interpreter", 0, 12 * kGB}, {"bob", "warm interpreter", 0, 8 * kGB}};
  Decision d = Schedule(s);
  EXPECT_EQ(Started(d, "big"), nullptr);
  ASSERT_NE(Waiting(d, "big"), nullptr);
  EXPECT_TRUE(Contains(Waiting(d, "big")->Reason(), "memory")) << Waiting(d, "big")->Reason();
  EXPECT_TRUE(d.rejected.empty());  // held memory comes back: never "can never be placed"
  s.held.pop_back();                // bob's ended: 52 GB free
  EXPECT_NE(Started(Schedule(s), "big"), nullptr);
}

TEST(PolicyTest, RaisesThePriorityOfAJobThatWaitedPastTheAgingThreshold) {
  Snapshot s = Snap({GpuNode("n", 1)});
  s.options.aging_threshold_us = 3600 * kS;
  QueuedJob old = Job("old", {Ask(1)}, 0, 3600, "alice", kNow - 9000 * kS);  // 2.5 h
  QueuedJob urgent = Job("urgent", {Ask(1)}, 2, 3600, "bob", kNow);
  EXPECT_EQ(EffectivePriority(old, kNow, s.options), 2);
  s.queued = {old, urgent};
  EXPECT_EQ(Schedule(s).start.at(0).job_id, "old");
  s.options.aging_threshold_us = 0;  // aging off: priority wins
  EXPECT_EQ(Schedule(s).start.at(0).job_id, "urgent");
}

TEST(PolicyTest, StartsAllReplicasOfAGangOrNone) {
  Snapshot s = Snap({GpuNode("a", 2), GpuNode("b", 2)});
  s.running = {Running("r", 0, {0, 1}, 100)};
  s.queued = {Job("three", {Ask(1), Ask(1), Ask(1)})};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.start.empty());
  EXPECT_TRUE(Contains(Waiting(d, "three")->Reason(), "needs 3x NVIDIA_H100_80GB"))
      << d.wait[0].Reason();
  s.queued = {Job("two", {Ask(1), Ask(1)})};
  d = Schedule(s);
  ASSERT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.start[0].replicas.size(), 2u);
}

TEST(PolicyTest, SpreadsReplicasAcrossNodesButNeverSplitsAReplica) {
  Snapshot s = Snap({GpuNode("a", 4), GpuNode("b", 4)});
  s.running = {Running("r1", 0, {0, 1}, 100), Running("r2", 1, {0, 1}, 100)};
  s.queued = {Job("one-big", {Ask(4)}, 1), Job("two-halves", {Ask(2), Ask(2)}, 0, 50)};
  Decision d = Schedule(s);
  EXPECT_TRUE(
      Contains(Waiting(d, "one-big")->Reason(), "4x NVIDIA_H100_80GB on one node, at most 2"))
      << Waiting(d, "one-big")->Reason();
  const StartJob* halves = Started(d, "two-halves");
  ASSERT_NE(halves, nullptr);
  EXPECT_NE(halves->replicas[0].node, halves->replicas[1].node);
}

TEST(PolicyTest, PacksGpuJobsOntoTheFewestNodes) {
  Snapshot s = Snap({GpuNode("a", 8), GpuNode("b", 8), GpuNode("c", 8)});
  s.running = {Running("r", 1, {0, 1, 2, 3, 4, 5}, 100)};
  s.queued = {Job("gang", {Ask(4), Ask(4)}), Job("pair", {Ask(2)})};
  Decision d = Schedule(s);
  const StartJob* gang = Started(d, "gang");
  ASSERT_NE(gang, nullptr);
  EXPECT_EQ(gang->replicas[0].node, gang->replicas[1].node);
  const StartJob* pair = Started(d, "pair");
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->replicas[0].node, 1) << "best fit: the node with exactly 2 free";
}

TEST(PolicyTest, PacksFractionalRequestsOntoAPartlyBookedGpu) {
  Snapshot s = Snap({GpuNode("n", 2)});
  s.running = {Running("half", 0, {1}, 100, "zed", 0.5)};
  s.queued = {Job("quarter", {Ask(0.25)})};
  Decision d = Schedule(s);
  ASSERT_EQ(d.start.size(), 1u);
  const GpuShare& g = d.start[0].replicas[0].gpus.at(0);
  EXPECT_EQ(g.gpu, 1);
  EXPECT_DOUBLE_EQ(g.fraction, 0.25);
  EXPECT_EQ(g.memory_bytes, resources::AcceleratorMemoryBytes(kH100) / 4);
}

TEST(PolicyTest, NeverOvercommitsAGpuThatHoldsFractions) {
  Snapshot s = Snap({GpuNode("n", 1)});
  s.running = {Running("half", 0, {0}, 100, "zed", 0.5)};
  for (double want : {1.0, 0.75}) {
    s.queued = {Job("j", {Ask(want)})};
    Decision d = Schedule(s);
    EXPECT_TRUE(d.start.empty()) << want;
  }
  s.queued = {Job("j", {Ask(0.5)})};
  EXPECT_EQ(Schedule(s).start.size(), 1u);
}

TEST(PolicyTest, RejectsAGpuCountAboveOneThatIsNotWholeNamingTheJob) {
  Snapshot s = Snap({GpuNode("n", 4)});
  s.queued = {Job("job-7", {Ask(1.5)}), Job("fine", {Ask(1)})};
  Decision d = Schedule(s);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Contains(d.rejected[0].status.message(), "job job-7: replicas[0].gpus is 1.5"))
      << d.rejected[0].status.message();
  EXPECT_NE(Started(d, "fine"), nullptr);
  EXPECT_FALSE(ValidateJob(s.queued[0], s.nodes, s.options).ok());
  EXPECT_TRUE(ValidateJob(s.queued[1], s.nodes, s.options).ok());
}

TEST(PolicyTest, RejectsAJobThatCanNeverRunOnTheCluster) {
  Snapshot s = Snap({GpuNode("a", 8), GpuNode("b", 8)});
  s.queued = {Job("huge", {Ask(16)})};
  Decision d = Schedule(s);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_TRUE(Contains(d.rejected[0].status.message(), "can never run"))
      << d.rejected[0].status.message();
}

TEST(PolicyTest, OversubscribesCpusOnlyUpToTheFactor) {
  Snapshot s = Snap({GpuNode("n", 0, kH100, 4, 64 * kGB)});
  s.queued = {Job("a", {Ask(0, "", 3)}), Job("b", {Ask(0, "", 3)}), Job("c", {Ask(0, "", 3)})};
  EXPECT_EQ(Schedule(s).start.size(), 1u);
  s.options.cpu_oversubscription = 2;
  Decision d = Schedule(s);
  EXPECT_EQ(d.start.size(), 2u);
  EXPECT_TRUE(Contains(Waiting(d, "c")->Reason(), "needs 3 CPUs on one node, at most 2 free"))
      << Waiting(d, "c")->Reason();
}

TEST(PolicyTest, PrefersTheExactAcceleratorThenSubstitutesAndRecordsIt) {
  resources::Node n = GpuNode("n", 0);
  n.gpus = {{0, kH100, resources::AcceleratorMemoryBytes(kH100), ""},
            {1, kL4, resources::AcceleratorMemoryBytes(kL4), ""},
            {2, kT4, resources::AcceleratorMemoryBytes(kT4), ""}};
  Snapshot s = Snap({n});
  s.queued = {Job("l4", {Ask(1, kL4)})};
  Decision d = Schedule(s);
  EXPECT_EQ(d.start.at(0).replicas[0].gpus[0].gpu, 1);
  EXPECT_TRUE(d.start[0].replicas[0].substitutions.empty());
  s.running = {Running("r", 0, {1}, 100)};
  d = Schedule(s);
  ASSERT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.start[0].replicas[0].gpus[0].gpu, 0) << "the H100 serves; the smaller T4 cannot";
  EXPECT_EQ(d.start[0].replicas[0].substitutions,
            std::vector<std::string>{"NVIDIA_L4 served by GPU 0 (NVIDIA_H100_80GB)"});
}

TEST(PolicyTest, DoesNotSubstituteWhenTheOptionsForbidIt) {
  Snapshot s = Snap({GpuNode("n", 2, kH100)});
  s.options.accelerator_substitution = false;
  s.queued = {Job("l4", {Ask(1, kL4)}), Job("h100", {Ask(1)})};
  Decision d = Schedule(s);
  EXPECT_EQ(d.rejected.size(), 1u);
  EXPECT_NE(Started(d, "h100"), nullptr);
}

TEST(PolicyTest, SkipsAUserOverTheRunningJobQuotaWithoutBlockingOthers) {
  Snapshot s = Snap({GpuNode("n", 8)});
  s.running = {Running("r", 0, {0}, 100, "alice")};
  s.quotas["alice"].max_running_jobs = 1;
  s.queued = {Job("a2", {Ask(1)}, 9, 3600, "alice"), Job("b1", {Ask(1)}, 0, 3600, "bob")};
  Decision d = Schedule(s);
  EXPECT_EQ(Waiting(d, "a2")->Reason(), "quota: user alice already runs 1 of 1 allowed jobs");
  ASSERT_NE(Started(d, "b1"), nullptr);
  EXPECT_FALSE(Started(d, "b1")->backfilled);
  EXPECT_FALSE(d.reservation);
}

TEST(PolicyTest, SkipsAUserOverTheGpuQuota) {
  Snapshot s = Snap({GpuNode("n", 8)});
  s.running = {Running("r", 0, {0, 1, 2}, 100, "alice")};
  s.quotas["alice"].max_gpus = 4;
  s.queued = {Job("a2", {Ask(2)}), Job("a3", {Ask(1)})};
  Decision d = Schedule(s);
  EXPECT_EQ(Waiting(d, "a2")->Reason(),
            "quota: user alice uses 3 of 4 allowed GPUs; this job needs 2");
  EXPECT_NE(Started(d, "a3"), nullptr);
}

TEST(PolicyTest, ReservesTheEarliestStartForTheFirstBlockedJob) {
  Snapshot s = Snap({GpuNode("n", 4)});
  s.running = {Running("r1", 0, {0, 1}, 100), Running("r2", 0, {2}, 300)};
  s.queued = {Job("big", {Ask(4)}), Job("next", {Ask(4)})};
  Decision d = Schedule(s);
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->job_id, "big");
  EXPECT_EQ(d.reservation->start_us, kNow + 300 * kS);
  EXPECT_EQ(d.reservation->after_jobs, (std::vector<std::string>{"r1", "r2"}));
  const WaitingJob* big = Waiting(d, "big");
  EXPECT_EQ(big->estimated_start_us, kNow + 300 * kS);
  EXPECT_EQ(big->Reason(),
            "needs 4x NVIDIA_H100_80GB, 1 free; reserved: starts at 2026-11-18T11:11:40Z after "
            "jobs r1, r2 end");
  const WaitingJob* next = Waiting(d, "next");
  EXPECT_TRUE(Contains(next->Reason(), "1 job ahead in the queue")) << next->Reason();
  EXPECT_GE(next->estimated_start_us, kNow + 300 * kS);
}

TEST(PolicyTest, BackfillsAShortJobThatEndsBeforeTheReservation) {
  Snapshot s = Snap({GpuNode("n", 4)});
  s.running = {Running("r1", 0, {0, 1}, 100), Running("r2", 0, {2}, 1000)};
  s.queued = {Job("head", {Ask(3)}), Job("long", {Ask(1)}, 0, 500), Job("short", {Ask(1)}, 0, 50)};
  Decision d = Schedule(s);
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->start_us, kNow + 100 * kS);
  ASSERT_NE(Started(d, "short"), nullptr);
  EXPECT_TRUE(Started(d, "short")->backfilled);
  const WaitingJob* long_job = Waiting(d, "long");
  ASSERT_NE(long_job, nullptr);
  EXPECT_TRUE(Contains(long_job->Reason(), "reserved for job head: starts at"));
  EXPECT_TRUE(Contains(long_job->Reason(), "backfill would delay it")) << long_job->Reason();
}

TEST(PolicyTest, BackfillsALongJobThatUsesOtherResources) {
  Snapshot s = Snap({GpuNode("a", 4), GpuNode("b", 2, kL4)});
  s.options.accelerator_substitution = false;
  s.running = {Running("r", 0, {0, 1}, 100)};
  s.queued = {Job("head", {Ask(4)}), Job("l4-forever", {Ask(1, kL4)}, 0, 0)};
  Decision d = Schedule(s);
  ASSERT_TRUE(d.reservation);
  ASSERT_NE(Started(d, "l4-forever"), nullptr);
  EXPECT_TRUE(Started(d, "l4-forever")->backfilled);
}

TEST(PolicyTest, TreatsAJobWithNoRuntimeBoundAsRunningForever) {
  Snapshot s = Snap({GpuNode("n", 4)});
  s.running = {Running("forever", 0, {0, 1}, 0)};
  s.queued = {Job("head", {Ask(4)}), Job("short", {Ask(1)}, 0, 10)};
  Decision d = Schedule(s);
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->start_us, 0);
  EXPECT_EQ(Waiting(d, "head")->estimated_start_us, 0);
  EXPECT_TRUE(Contains(Waiting(d, "head")->Reason(), "no runtime bound"))
      << Waiting(d, "head")->Reason();
  // The reservation holds the free GPUs: nothing may take them.
  EXPECT_EQ(Started(d, "short"), nullptr);
}

TEST(PolicyTest, KeepsStrictOrderWhenBackfillIsOff) {
  Snapshot s = Snap({GpuNode("n", 4)});
  s.options.backfill = false;
  s.running = {Running("r1", 0, {0, 1}, 100)};
  s.queued = {Job("head", {Ask(4)}), Job("short", {Ask(1)}, 0, 10)};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.start.empty());
  EXPECT_TRUE(Contains(Waiting(d, "short")->Reason(), "backfill is off"))
      << Waiting(d, "short")->Reason();
  EXPECT_EQ(Waiting(d, "short")->estimated_start_us, kNow + 100 * kS);
}

TEST(PolicyTest, ExplainsAWaitWithTheFreeCountAndTheJobsAhead) {
  Snapshot s = Snap({GpuNode("n", 4)});
  s.running = {Running("r", 0, {0, 1, 2}, 100)};
  s.queued = {Job("head", {Ask(4)}), Job("second", {Ask(2)}, 0, 500)};
  Decision d = Schedule(s);
  const WaitingJob* w = Waiting(d, "second");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->Reason(), "needs 2x NVIDIA_H100_80GB, 1 free; 1 job ahead in the queue");
}

TEST(PolicyTest, IsAPureFunctionOfTheSnapshot) {
  Snapshot s = Snap({GpuNode("a", 8), GpuNode("b", 8, kL4)});
  s.running = {Running("r", 0, {0, 1, 2}, 100)};
  for (int i = 0; i < 30; ++i) {
    std::string id = "j";
    id += std::to_string(i);
    s.queued.push_back(Job(id, {Ask(i % 3 + 0.5 * (i % 2 == 0 ? 0 : 0))}, i % 4, 100 * (i + 1),
                           i % 2 ? "alice" : "bob", kNow - i * kS));
  }
  Decision a = Schedule(s), b = Schedule(s);
  ASSERT_EQ(a.start.size(), b.start.size());
  for (size_t i = 0; i < a.start.size(); ++i) EXPECT_EQ(a.start[i].job_id, b.start[i].job_id);
  ASSERT_EQ(a.wait.size(), b.wait.size());
  for (size_t i = 0; i < a.wait.size(); ++i) {
    EXPECT_EQ(a.wait[i].Reason(), b.wait[i].Reason());
    EXPECT_EQ(a.wait[i].estimated_start_us, b.wait[i].estimated_start_us);
  }
}

// ---------------------------------------------------------------------------
// Property test: a seeded simulation of a few hundred jobs over simulated
// time, checking the invariants after every decision.

struct SimJob {
  QueuedJob job;
  int64_t actual_runtime_us = 0;
  bool started = false;
  bool done = false;
  int64_t start_us = 0;
  std::vector<PlacedReplica> placed;
};

class Simulation {
 public:
  explicit Simulation(uint32_t seed) : rng_(seed) {
    nodes_ = {GpuNode("h0", 8, kH100, 64, 512 * kGB), GpuNode("h1", 8, kH100, 64, 512 * kGB),
              GpuNode("l0", 4, kL4, 32, 128 * kGB), GpuNode("cpu", 0, kH100, 16, 64 * kGB)};
    options_.cpu_oversubscription = 1.5;
    options_.backfill = seed % 3 != 0;
    options_.accelerator_substitution = seed % 2 == 0;
    options_.aging_threshold_us = 1800 * kS;
    quotas_["dave"].max_running_jobs = 2;
    quotas_["carol"].max_gpus = 4;
    const std::vector<std::string> users = {"alice", "bob", "carol", "dave"};
    const std::vector<double> gpu_choices = {0, 0, 0.25, 0.5, 1, 1, 2, 4, 8};
    std::uniform_int_distribution<int64_t> submit(0, 4 * 3600);
    while (jobs_.size() < 300) {
      SimJob s;
      QueuedJob& j = s.job;
      j.id = "job" + std::to_string(jobs_.size());
      j.user = users[Pick(users.size())];
      j.priority = static_cast<int>(Pick(4));
      j.submit_us = kNow + submit(rng_) * kS;
      size_t replicas = Pick(10) < 7 ? 1 : 1 + Pick(3);
      double gpus = gpu_choices[Pick(gpu_choices.size())];
      std::string type = Pick(3) == 0 ? kL4 : kH100;
      double cpus = 1 + static_cast<double>(Pick(8));
      for (size_t r = 0; r < replicas; ++r) {
        j.replicas.push_back({cpus, (1 + Pick(32)) * kGB, gpus, gpus > 0 ? type : ""});
      }
      bool unbounded = Pick(10) == 0;
      j.runtime_bound_s = unbounded ? 0 : 60 + static_cast<int64_t>(Pick(3600));
      int64_t bound_us =
          (unbounded ? 60 + static_cast<int64_t>(Pick(3600)) : j.runtime_bound_s) * kS;
      s.actual_runtime_us = bound_us * (3 + static_cast<int64_t>(Pick(8))) / 10;
      if (j.user == "carol" && gpus * static_cast<double>(replicas) > 4) continue;  // quota
      if (!ValidateJob(j, nodes_, options_).ok()) continue;
      jobs_.push_back(std::move(s));
    }
    std::sort(jobs_.begin(), jobs_.end(),
              [](const SimJob& a, const SimJob& b) { return a.job.submit_us < b.job.submit_us; });
  }

  void Run() {
    int64_t now = kNow;
    std::map<std::string, double> usage;
    int64_t last = now;
    for (int step = 0; step < 100000; ++step) {
      // End what finished and decay usage.
      double decay = std::pow(0.5, static_cast<double>(now - last) / (3600.0 * kS));
      for (auto& [u, v] : usage) v *= decay;
      for (SimJob& s : jobs_) {
        if (!s.started || s.done) continue;
        double gpus = 0;
        for (const ReplicaAsk& r : s.job.replicas) gpus += r.gpus;
        usage[s.job.user] += gpus * static_cast<double>(now - std::max(last, s.start_us)) / kS;
        if (s.start_us + s.actual_runtime_us <= now) s.done = true;
      }
      last = now;

      Snapshot snap;
      snap.nodes = nodes_;
      snap.options = options_;
      snap.quotas = quotas_;
      snap.usage_gpu_seconds = usage;
      snap.now_us = now;
      std::vector<SimJob*> by_id;
      for (SimJob& s : jobs_) {
        if (s.started && !s.done) {
          snap.running.push_back(
              {s.job.id, s.job.user, s.job.priority, s.placed, s.start_us, s.job.runtime_bound_s});
        } else if (!s.started && s.job.submit_us <= now) {
          snap.queued.push_back(s.job);
        }
      }
      Decision d = Schedule(snap);
      Check(snap, d);
      if (::testing::Test::HasFatalFailure()) return;
      for (const StartJob& st : d.start) {
        SimJob& s = Find(st.job_id);
        s.started = true;
        s.start_us = now;
        s.placed = st.replicas;
      }
      CheckCapacity(now);
      if (::testing::Test::HasFatalFailure()) return;

      int64_t next = INT64_MAX;
      bool pending = false;
      for (const SimJob& s : jobs_) {
        if (!s.started) {
          pending = true;
          if (s.job.submit_us > now) next = std::min(next, s.job.submit_us);
        } else if (!s.done) {
          next = std::min(next, s.start_us + s.actual_runtime_us);
        }
      }
      if (!pending && next == INT64_MAX) return;  // all ran
      ASSERT_NE(next, INT64_MAX) << "jobs wait with nothing running and nothing to come: "
                                 << (d.wait.empty() ? "" : d.wait[0].Reason());
      ++decisions_;
      now = next;
    }
    FAIL() << "the simulation did not finish";
  }

  int decisions() const { return decisions_; }
  int backfilled() const { return backfilled_; }
  bool AllStarted() const {
    return std::all_of(jobs_.begin(), jobs_.end(), [](const SimJob& s) { return s.started; });
  }

 private:
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  SimJob& Find(const std::string& id) {
    for (SimJob& s : jobs_) {
      if (s.job.id == id) return s;
    }
    ADD_FAILURE() << "unknown job " << id;
    return jobs_[0];
  }

  // Books `replicas` into per-GPU fractions and per-node CPUs.
  void Add(const std::vector<PlacedReplica>& replicas, std::map<std::pair<int, int>, double>& gpu,
           std::map<int, double>& cpu) {
    for (const PlacedReplica& p : replicas) {
      cpu[p.node] += p.cpus;
      for (const GpuShare& g : p.gpus) gpu[{p.node, g.gpu}] += g.fraction;
    }
  }

  void ExpectWithinCapacity(const std::map<std::pair<int, int>, double>& gpu,
                            const std::map<int, double>& cpu, const std::string& when) {
    for (const auto& [k, f] : gpu) {
      EXPECT_LE(f, 1 + 1e-9) << when << ": GPU " << k.second << " of node " << k.first;
    }
    for (const auto& [n, c] : cpu) {
      EXPECT_LE(c, nodes_[n].cpus * options_.cpu_oversubscription + 1e-9) << when << ": node " << n;
    }
  }

  void CheckCapacity(int64_t now) {
    std::map<std::pair<int, int>, double> gpu;
    std::map<int, double> cpu;
    std::map<std::string, int> jobs;
    std::map<std::string, double> gpus;
    for (const SimJob& s : jobs_) {
      if (!s.started || s.done) continue;
      Add(s.placed, gpu, cpu);
      ++jobs[s.job.user];
      for (const ReplicaAsk& r : s.job.replicas) gpus[s.job.user] += r.gpus;
    }
    ExpectWithinCapacity(gpu, cpu, "at " + std::to_string(now));
    EXPECT_LE(jobs["dave"], 2);
    EXPECT_LE(gpus["carol"], 4 + 1e-9);
  }

  void Check(const Snapshot& snap, const Decision& d) {
    ASSERT_TRUE(d.rejected.empty()) << d.rejected[0].status.ToString();
    std::vector<size_t> order = QueueOrder(snap);
    std::map<std::string, size_t> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[snap.queued[order[i]].id] = i;
    size_t head = d.reservation ? pos.at(d.reservation->job_id) : order.size();
    std::map<std::string, const WaitingJob*> waits;
    for (const WaitingJob& w : d.wait) waits[w.job_id] = &w;
    EXPECT_EQ(d.start.size() + d.wait.size(), snap.queued.size());

    for (const StartJob& st : d.start) {
      const QueuedJob& j = Find(st.job_id).job;
      // Gangs start together, one node per replica, with what they asked.
      ASSERT_EQ(st.replicas.size(), j.replicas.size()) << j.id;
      for (size_t r = 0; r < st.replicas.size(); ++r) {
        const PlacedReplica& p = st.replicas[r];
        const ReplicaAsk& a = j.replicas[r];
        ASSERT_GE(p.node, 0);
        ASSERT_LT(p.node, static_cast<int>(nodes_.size()));
        double got = 0;
        std::set<int> distinct;
        for (const GpuShare& g : p.gpus) {
          got += g.fraction;
          distinct.insert(g.gpu);
          const resources::Gpu& gpu = nodes_[p.node].gpus.at(g.gpu);
          if (gpu.type != a.gpu_type) {
            EXPECT_TRUE(options_.accelerator_substitution) << j.id;
            EXPECT_GE(gpu.memory_bytes, resources::AcceleratorMemoryBytes(a.gpu_type)) << j.id;
          }
        }
        EXPECT_NEAR(got, a.gpus, 1e-9) << j.id;
        EXPECT_EQ(distinct.size(), p.gpus.size()) << j.id;
        if (a.gpus < 1 && a.gpus > 0) {
          EXPECT_EQ(p.gpus.size(), 1u) << j.id;
        }
      }
      // Strict order up to the first blocked job; after it only backfill.
      if (st.backfilled) {
        ++backfilled_;
        EXPECT_TRUE(options_.backfill) << j.id;
        EXPECT_GT(pos.at(st.job_id), head) << j.id;
      } else {
        EXPECT_LT(pos.at(st.job_id), head) << j.id << " overtook " << d.reservation->job_id;
      }
    }
    // Everything ahead of the blocked job started or is held by its quota.
    for (size_t i = 0; i < head; ++i) {
      const std::string& id = snap.queued[order[i]].id;
      if (waits.count(id)) {
        EXPECT_EQ(waits[id]->Reason().rfind("quota:", 0), 0u) << id << ": " << waits[id]->Reason();
      }
    }
    if (!d.reservation) return;
    // Backfill never delays the reservation: at its start time, what still
    // runs (by runtime bounds) plus the reservation fits.
    const Reservation& r = *d.reservation;
    EXPECT_TRUE(r.start_us == 0 || r.start_us >= snap.now_us);
    std::map<std::pair<int, int>, double> gpu;
    std::map<int, double> cpu;
    Add(r.replicas, gpu, cpu);
    if (r.start_us > 0) {
      for (const RunningJob& run : snap.running) {
        if (run.runtime_bound_s == 0 || run.start_us + run.runtime_bound_s * kS > r.start_us) {
          Add(run.replicas, gpu, cpu);
        }
      }
    }
    for (const StartJob& st : d.start) {
      const QueuedJob& j = Find(st.job_id).job;
      if (r.start_us == 0 && !st.backfilled) continue;  // started before the reservation was made
      if (j.runtime_bound_s == 0 || snap.now_us + j.runtime_bound_s * kS > r.start_us ||
          r.start_us == 0) {
        Add(st.replicas, gpu, cpu);
      }
    }
    ExpectWithinCapacity(gpu, cpu, "reservation of " + r.job_id);
  }

  std::mt19937 rng_;
  std::vector<resources::Node> nodes_;
  PolicyOptions options_;
  std::map<std::string, Quota> quotas_;
  std::vector<SimJob> jobs_;
  int decisions_ = 0;
  int backfilled_ = 0;
};

TEST(PolicyTest, RandomSimulationKeepsEveryInvariantAndStartsEveryJob) {
  int backfilled = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation sim(seed);
    sim.Run();
    if (HasFatalFailure()) return;
    EXPECT_TRUE(sim.AllStarted());
    EXPECT_GT(sim.decisions(), 100);
    backfilled += sim.backfilled();
  }
  EXPECT_GT(backfilled, 0) << "the simulation should exercise backfill";
}

// ---------------------------------------------------------------------------
// No starvation: a job that needs a whole node against an unending stream of
// small jobs that, on their own, keep every GPU busy.

// Seconds a job needing all 8 GPUs of the only node waits after its
// submission while 1-GPU jobs of priority `stream_priority` arrive every 75 s
// and run 600 s each, for ever (8 GPUs x 600 s / 75 s: the stream alone keeps
// every GPU busy, and no GPU is ever idle long enough by chance). -1 if it has
// not started `horizon_s` after its submission. Time advances in 5 s steps;
// every job runs exactly its runtime bound.
int64_t BigJobWaitUnderStream(int stream_priority, int64_t aging_threshold_s, int64_t horizon_s) {
  constexpr int64_t kStep = 5, kEvery = 75, kRun = 600, kBigAt = 290;
  struct SimJob {
    QueuedJob job;
    int64_t start_s = -1;
    std::vector<PlacedReplica> placed;
  };
  std::vector<SimJob> jobs;
  jobs.push_back({Job("big", {Ask(8, kH100, 8)}, 0, 3600, "big", kNow + kBigAt * kS)});
  for (int64_t t = 0; t <= kBigAt + horizon_s; t += kStep) {
    if (t % kEvery == 0) {
      jobs.push_back({Job("s" + std::to_string(t / kEvery), {Ask(1)}, stream_priority, kRun,
                          "stream", kNow + t * kS)});
    }
    Snapshot s = Snap({GpuNode("n", 8)});
    s.options.aging_threshold_us = aging_threshold_s * kS;
    s.now_us = kNow + t * kS;
    for (const SimJob& j : jobs) {
      if (j.start_s < 0) {
        if (j.job.submit_us <= s.now_us) s.queued.push_back(j.job);
      } else if (t < j.start_s + j.job.runtime_bound_s) {
        s.running.push_back({j.job.id, j.job.user, j.job.priority, j.placed, kNow + j.start_s * kS,
                             j.job.runtime_bound_s});
      }
    }
    Decision d = Schedule(s);
    for (const StartJob& st : d.start) {
      for (SimJob& j : jobs) {
        if (j.job.id == st.job_id) j.start_s = t, j.placed = st.replicas;
      }
    }
    if (jobs[0].start_s >= 0) return jobs[0].start_s - kBigAt;
  }
  return -1;
}

TEST(PolicyTest, StartsAWholeNodeJobWithinOneRuntimeDespiteAStreamOfEqualPriorityJobs) {
  // Aging off: the reservation alone protects it. The stream's later jobs
  // may not backfill (they would end after the reserved start), so the node
  // drains within one runtime bound of the jobs already running.
  int64_t wait = BigJobWaitUnderStream(/*stream_priority=*/0, /*aging_threshold_s=*/0, 36000);
  EXPECT_GT(wait, 0) << "the stream should hold the node when the big job arrives";
  EXPECT_LE(wait, 600);
}

TEST(PolicyTest, AgingLetsAWholeNodeJobPassAStreamOfHigherPriorityJobs) {
  // Priority 2 jobs go first while the big job's effective priority is
  // below 2; it reaches 2 after two aging thresholds (and goes first on
  // equal priority, being older), then its reservation drains the node
  // within one runtime. Without aging the stream starves it.
  const int64_t threshold = 1800;
  int64_t wait = BigJobWaitUnderStream(2, threshold, 20 * threshold);
  EXPECT_GE(wait, threshold) << "the higher-priority stream should go first at first";
  EXPECT_LE(wait, 2 * threshold + 600 + 5);
  EXPECT_EQ(BigJobWaitUnderStream(2, 0, 20 * threshold), -1)
      << "without aging a higher-priority stream should starve it: the test would prove nothing";
}

// ---------------------------------------------------------------------------
// Issue #4: the speed-ups must not change a single decision.

// ---------------------------------------------------------------------------
// Regression fingerprint: every field of the decision (starts with their
// placements, waits with reasons and estimates, rejections, the reservation)
// and QueueOrder, on seeded random snapshots that mix GPU types, fractions,
// gangs, quotas, unbounded jobs, invalid asks, backfill on and off, huge
// priority spreads and 2,000-job queues. The expected value was produced by
// the implementation before the issue #4 speed-up (detailed reasons for
// every job), so any change of behaviour shows here.

std::string Fingerprint(uint32_t cases) {
  std::string out;
  char buf[256];
  auto put = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  const char* types[] = {"NVIDIA_H100_80GB", "NVIDIA_L4", "NVIDIA_TESLA_T4", "NVIDIA_A100_80GB",
                         "NVIDIA_H200_141GB"};
  for (uint32_t c = 0; c < cases; ++c) {
    std::mt19937 rng(c);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    Snapshot s;
    s.now_us = kNow;
    int ntypes = 1 + pick(4);
    int nodes = 1 + pick(c % 5 == 0 ? 60 : 8);
    for (int n = 0; n < nodes; ++n) {
      resources::Node node{"n" + std::to_string(n),
                           double(8 + pick(64)),
                           static_cast<uint64_t>(64 + pick(512)) * kGB,
                           {}};
      int g = pick(3) == 0 ? 0 : 1 + pick(c % 7 == 0 ? 16 : 8);
      int t0 = pick(ntypes);
      for (int i = 0; i < g; ++i) {
        const char* t = types[pick(4) == 0 ? pick(ntypes) : t0];
        node.gpus.push_back({c % 11 == 0 ? 7 - i : i, t, resources::AcceleratorMemoryBytes(t), ""});
      }
      s.nodes.push_back(node);
    }
    s.options.cpu_oversubscription = pick(2) ? 1.0 : 1.5;
    s.options.accelerator_substitution = pick(2) != 0;
    s.options.backfill = pick(4) != 0;
    s.options.aging_threshold_us = pick(4) == 0 ? 0 : (pick(2) ? 600 : 3600) * kS;
    s.options.max_estimated_shapes = pick(3) == 0 ? 2 : 16;
    s.options.detailed_reasons = -1;
    int users = 1 + pick(6);
    for (int u = 0; u < users; ++u) {
      if (pick(3)) s.usage_gpu_seconds["u" + std::to_string(u)] = pick(3) * 100.0;
    }
    if (pick(2)) s.quotas["u0"].max_running_jobs = pick(3);
    if (pick(2)) s.quotas["u1"].max_gpus = pick(5) * 0.5;
    std::vector<std::vector<double>> booked(nodes);
    for (int n = 0; n < nodes; ++n) booked[n].assign(s.nodes[n].gpus.size(), 0);
    int running = pick(3 * nodes + 1);
    for (int r = 0; r < running; ++r) {
      int n = pick(nodes);
      RunningJob j;
      j.id = "r" + std::to_string(r);
      j.user = "u" + std::to_string(pick(users));
      PlacedReplica p;
      p.node = n;
      p.cpus = 1 + pick(4);
      p.memory_bytes = static_cast<uint64_t>(1 + pick(16)) * kGB;
      int want = pick(3);
      for (size_t g = 0; g < booked[n].size() && want > 0; ++g) {
        if (booked[n][g] == 0) {
          double f = pick(3) == 0 ? 0.5 : 1.0;
          booked[n][g] = f;
          p.gpus.push_back({s.nodes[n].gpus[g].index, f, 0});
          --want;
        }
      }
      j.replicas.push_back(p);
      j.start_us = kNow - pick(3600) * kS;
      j.runtime_bound_s = pick(5) == 0 ? 0 : 600 + pick(7200);
      s.running.push_back(j);
    }
    int queued = c % 13 == 0 ? 2000 : 1 + pick(120);
    int shapes_mode = pick(3);
    for (int i = 0; i < queued; ++i) {
      QueuedJob j;
      j.id = "j" + std::to_string(i);
      j.user = "u" + std::to_string(pick(users));
      j.priority = pick(3) == 0 ? pick(1000) - 500 : pick(4);
      if (c % 17 == 0) j.priority = pick(2000000000) - 1000000000;
      j.submit_us = kNow - pick(20000) * kS + (pick(10) == 0 ? 5000 * kS : 0);
      static const double kG[] = {0, 0.25, 0.5, 1, 1, 2, 4, 8, 3, 0.3};
      double gpus = kG[pick(pick(50) == 0 ? 10 : 8)];
      if (pick(200) == 0) gpus = 1.5;  // invalid
      const char* t = types[pick(ntypes + 1)];
      int reps = pick(10) < 7 ? 1 : 2 + pick(3);
      double cpus = shapes_mode == 0 ? 1 + pick(24) : (gpus >= 1 ? 4 * gpus : 2);
      uint64_t mem = shapes_mode == 0 ? static_cast<uint64_t>(1 + pick(200)) * kGB : 16 * kGB;
      for (int r = 0; r < reps; ++r) j.replicas.push_back({cpus, mem, gpus, gpus > 0 ? t : ""});
      if (pick(100) == 0) j.replicas.clear();
      j.runtime_bound_s = pick(8) == 0 ? 0 : 60 + pick(20000);
      s.queued.push_back(j);
    }
    Decision d = Schedule(s);
    put("=== case %u\n", c);
    for (const StartJob& st : d.start) {
      put("S %s bf=%d\n", st.job_id.c_str(), st.backfilled ? 1 : 0);
      for (const PlacedReplica& r : st.replicas) {
        put("  n=%d c=%g m=%llu", r.node, r.cpus, static_cast<unsigned long long>(r.memory_bytes));
        for (const GpuShare& g : r.gpus) {
          put(" g%d:%g:%llu", g.gpu, g.fraction, static_cast<unsigned long long>(g.memory_bytes));
        }
        for (const std::string& x : r.substitutions) put(" [%s]", x.c_str());
        put("\n");
      }
    }
    for (const WaitingJob& w : d.wait) {
      put("W %s %lld ", w.job_id.c_str(), static_cast<long long>(w.estimated_start_us));
      out += w.Reason() + "\n";
    }
    for (const RejectedJob& r : d.rejected) {
      put("R %s ", r.job_id.c_str());
      out += r.status.message() + "\n";
    }
    if (d.reservation) {
      put("RES %s %lld", d.reservation->job_id.c_str(),
          static_cast<long long>(d.reservation->start_us));
      for (const std::string& a : d.reservation->after_jobs) put(" %s", a.c_str());
      put("\n");
      for (const PlacedReplica& r : d.reservation->replicas) {
        put("  n=%d", r.node);
        for (const GpuShare& g : r.gpus) put(" g%d:%g", g.gpu, g.fraction);
        put("\n");
      }
    }
    put("O");
    for (size_t i : QueueOrder(s)) put(" %zu", i);
    put("\n");
  }
  return out;
}

// FNV-1a, 64 bits.
uint64_t Fnv(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

TEST(PolicyTest, DecidesExactlyAsTheReferenceImplementationOnSeededSnapshots) {
  std::string text = Fingerprint(200);
  EXPECT_EQ(text.size(), 5655784u);
  EXPECT_EQ(Fnv(text), 0xe1336b12939c7749ull)
      << "Schedule() or QueueOrder() decided differently from the reference on the seeded "
         "snapshots; if the policy was changed on purpose, update the expected values";
}

// Rule 1 by brute force: a stable sort on the documented key.
std::vector<size_t> ReferenceOrder(const Snapshot& s) {
  std::vector<size_t> order(s.queued.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto usage = [&](const QueuedJob& j) {
    auto it = s.usage_gpu_seconds.find(j.user);
    return it == s.usage_gpu_seconds.end() ? 0.0 : it->second;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const QueuedJob& x = s.queued[a];
    const QueuedJob& y = s.queued[b];
    int64_t px = EffectivePriority(x, s.now_us, s.options);
    int64_t py = EffectivePriority(y, s.now_us, s.options);
    if (px != py) return px > py;
    if (usage(x) != usage(y)) return usage(x) < usage(y);
    return x.submit_us < y.submit_us;
  });
  return order;
}

TEST(PolicyTest, OrdersTheQueueAsTheDocumentedKeyWithFewOrManyPriorityClasses) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Snapshot s = Snap({});
    // Even rounds: a few priorities (counting sort); odd: a wide spread
    // (comparison sort). Submit times go backwards within classes.
    const int spread = round % 2 == 0 ? 4 : 2000000000;
    for (int u = 0; u < 7; ++u) s.usage_gpu_seconds["u" + std::to_string(u)] = (u % 3) * 50.0;
    s.options.aging_threshold_us = round % 3 == 0 ? 0 : 600 * kS;
    for (int i = 0; i < 500; ++i) {
      QueuedJob j = Job("j" + std::to_string(i), {Ask(0)});
      j.user = "u" + std::to_string(rng() % 9);  // u7, u8 have no usage entry
      j.priority = static_cast<int>(rng() % static_cast<uint32_t>(spread)) - spread / 2;
      j.submit_us = kNow - static_cast<int64_t>(rng() % 5000) * kS;
      s.queued.push_back(j);
    }
    EXPECT_EQ(QueueOrder(s), ReferenceOrder(s));
  }
}

// Two H100s, both busy until kNow + 1 h; five 1-GPU jobs wait.
Snapshot FiveWaiting(int detailed) {
  Snapshot s = Snap({GpuNode("a", 2)});
  s.running = {Running("r", 0, {0, 1}, 3600)};
  for (int i = 0; i < 5; ++i) {
    s.queued.push_back(Job("w" + std::to_string(i), {Ask(1)}, 0, 600, "alice", kNow + i));
  }
  s.options.detailed_reasons = detailed;
  return s;
}

TEST(PolicyTest, ExplainsOnlyTheFirstWaitingJobsInDetailAndTheRestByPlaceInLine) {
  Decision d = Schedule(FiveWaiting(2));
  ASSERT_EQ(d.wait.size(), 5u);
  // The reservation holder, then the first two others, in detail.
  EXPECT_TRUE(Contains(d.wait[0].Reason(), "reserved: starts at")) << d.wait[0].Reason();
  EXPECT_EQ(d.wait[1].Reason(), "needs 1x NVIDIA_H100_80GB, 0 free; 1 job ahead in the queue");
  EXPECT_EQ(d.wait[2].Reason(), "needs 1x NVIDIA_H100_80GB, 0 free; 2 jobs ahead in the queue");
  // Past them, only the place in line: a number, spelled by Reason().
  EXPECT_EQ(d.wait[3].Reason(), "3 jobs ahead in the queue");
  EXPECT_EQ(d.wait[4].Reason(), "4 jobs ahead in the queue");
  EXPECT_TRUE(d.wait[3].detail.empty());
  EXPECT_EQ(d.wait[3].jobs_ahead, 3);
  EXPECT_EQ(d.wait[2].jobs_ahead, 2);  // detailed ones carry it too
}

TEST(PolicyTest, LimitsOnlyTheReasonTextNotTheDecisionOrTheEstimates) {
  Decision brief = Schedule(FiveWaiting(0));
  Decision full = Schedule(FiveWaiting(-1));
  ASSERT_EQ(brief.wait.size(), full.wait.size());
  EXPECT_EQ(brief.start.size(), full.start.size());
  ASSERT_TRUE(brief.reservation && full.reservation);
  EXPECT_EQ(brief.reservation->start_us, full.reservation->start_us);
  // The reservation holder is always explained in full.
  EXPECT_EQ(brief.wait[0].Reason(), full.wait[0].Reason());
  EXPECT_EQ(brief.wait[1].Reason(), "1 job ahead in the queue");
  for (size_t i = 0; i < full.wait.size(); ++i) {
    EXPECT_EQ(brief.wait[i].job_id, full.wait[i].job_id);
    EXPECT_EQ(brief.wait[i].estimated_start_us, full.wait[i].estimated_start_us);
    EXPECT_GT(full.wait[i].estimated_start_us, 0);
    if (i > 0) {
      EXPECT_TRUE(Contains(full.wait[i].Reason(), "needs 1x")) << full.wait[i].Reason();
    }
  }
}

TEST(PolicyTest, KeepsQuotaReasonsInFullPastTheDetailLimit) {
  Snapshot s = FiveWaiting(0);
  s.quotas["bob"].max_running_jobs = 0;
  s.queued.push_back(Job("b", {Ask(0)}, 0, 600, "bob", kNow + 10));
  Decision d = Schedule(s);
  EXPECT_EQ(Waiting(d, "b")->Reason(), "quota: user bob already runs 0 of 0 allowed jobs");
}

// Node sets are bitsets of 64-node words: a cluster past 64 nodes whose only
// room is on a node of the second or third word must still be found, for
// every kind of request, and counted in the reasons.
Snapshot FullClusterButOne(int nodes, int target, const std::string& target_type) {
  std::vector<resources::Node> all;
  for (int n = 0; n < nodes; ++n) {
    all.push_back(GpuNode("n" + std::to_string(n), n == target ? 2 : 8,
                          n == target ? target_type : kH100, 8, 64 * kGB));
  }
  Snapshot s = Snap(std::move(all));
  for (int n = 0; n < nodes; ++n) {
    if (n == target) continue;
    RunningJob r = Running("busy" + std::to_string(n), n, {0, 1, 2, 3, 4, 5, 6, 7}, 3600);
    r.replicas[0].cpus = 8;  // and every CPU
    s.running.push_back(r);
  }
  return s;
}

TEST(PolicyTest, FindsTheOnlyRoomOnANodePastTheFirst64) {
  for (int target : {63, 64, 100, 129}) {
    SCOPED_TRACE("room only on node " + std::to_string(target));
    struct Case {
      const char* name;
      ReplicaAsk ask;
      std::string target_type;
    };
    for (const Case& c :
         {Case{"whole", Ask(1), kH100}, Case{"two", Ask(2), kH100}, Case{"share", Ask(0.25), kH100},
          Case{"cpu-only", Ask(0), kH100}, Case{"substituted", Ask(2, kT4), kL4}}) {
      SCOPED_TRACE(c.name);
      Snapshot s = FullClusterButOne(130, target, c.target_type);
      s.queued.push_back(Job(c.name, {c.ask}));
      Decision d = Schedule(s);
      const StartJob* started = Started(d, c.name);
      ASSERT_NE(started, nullptr) << (d.wait.empty() ? "" : d.wait[0].Reason());
      EXPECT_EQ(started->replicas[0].node, target);
    }
    Snapshot s = FullClusterButOne(130, target, kH100);
    s.queued.push_back(Job("three", {Ask(3)}));
    Decision d = Schedule(s);
    ASSERT_NE(Waiting(d, "three"), nullptr);
    EXPECT_TRUE(Contains(Waiting(d, "three")->Reason(), "needs 3x NVIDIA_H100_80GB, 2 free"))
        << Waiting(d, "three")->Reason();
  }
}

TEST(PolicyTest, WritesAWaitEventWhenTheKindChangesAndRepeatsOnlyDetailedOnes) {
  constexpr int64_t kRepeat = 600 * kS;
  WaitingJob needs{"j", "needs 2x NVIDIA_L4, 1 free; 3 jobs ahead in the queue", 3, 0};
  WaitingJob fewer{"j", "needs 2x NVIDIA_L4, 0 free; 1 job ahead in the queue", 1, 0};
  WaitingJob place{"j", "", 40, 0};
  WaitingJob closer{"j", "", 1, 0};
  EXPECT_EQ(WaitKind(needs), "needs x NVIDIA_L,  free");
  EXPECT_EQ(WaitKind(needs), WaitKind(fewer));  // numbers aside
  EXPECT_EQ(WaitKind(place), "place in line");
  EXPECT_EQ(WaitKind(place), WaitKind(closer));  // "40 jobs" and "1 job" alike
  // The first event, and a new kind, always.
  EXPECT_TRUE(WaitEventDue(needs, "", 0, kNow, kRepeat));
  EXPECT_TRUE(WaitEventDue(place, WaitKind(needs), kNow, kNow + kS, kRepeat));
  // The same detailed kind: not within the repeat time, again after it.
  EXPECT_FALSE(WaitEventDue(fewer, WaitKind(needs), kNow, kNow + kRepeat - 1, kRepeat));
  EXPECT_TRUE(WaitEventDue(fewer, WaitKind(needs), kNow, kNow + kRepeat, kRepeat));
  // The place in line alone: never again, however long it waits.
  EXPECT_FALSE(WaitEventDue(closer, WaitKind(place), kNow, kNow + 100 * kRepeat, kRepeat));
}

TEST(PolicyTest, EstimatesStartsFromExpectedRunTimesNotFromTimeouts) {
  Snapshot s = Snap({GpuNode("n", 1)});
  RunningJob r = Running("r", 0, {0}, 7 * 86400);  // a 7-day timeout, started 10 s ago
  r.expected_runtime_s = 30;                       // similar runs took 30 s
  s.running = {r};
  QueuedJob a = Job("a", {Ask(1)}, 0, 7 * 86400);
  a.expected_runtime_s = 40;
  QueuedJob b = Job("b", {Ask(1, kH100, 2)}, 0, 7 * 86400);
  b.expected_runtime_s = 0;  // never ran: unknown
  s.queued = {a, b};
  Decision d = Schedule(s);
  EXPECT_EQ(Waiting(d, "a")->estimated_start_us, kNow + 20 * kS);
  EXPECT_EQ(Waiting(d, "b")->estimated_start_us, kNow + 20 * kS);  // not before a's
  // The reservation (and so backfill) still keeps to the bounds.
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->start_us, kNow + 7 * 86400 * kS);
  // Its reason says the same start as the estimate, and the bound as such
  // (it once said "starts at" the 7-day bound beside an estimate of 20 s).
  EXPECT_TRUE(Contains(Waiting(d, "a")->Reason(),
                       "reserved: expected to start at 2026-11-18T11:07:00Z after job r ends; "
                       "at the latest at 2026-11-25T11:06:40Z, their time limits"))
      << Waiting(d, "a")->Reason();
}

TEST(PolicyTest, EstimatesNothingBehindAJobWhoseRunTimeIsUnknown) {
  Snapshot s = Snap({GpuNode("n", 1)});
  RunningJob r = Running("r", 0, {0}, 7 * 86400);
  r.expected_runtime_s = 0;  // a bound, but no history: not a run time
  s.running = {r};
  QueuedJob a = Job("a", {Ask(1)}, 0, 60);
  a.expected_runtime_s = 60;
  s.queued = {a};
  Decision d = Schedule(s);
  EXPECT_EQ(Waiting(d, "a")->estimated_start_us, 0);
}

TEST(PolicyTest, CapsAnExpectedRunTimeByTheBound) {
  Snapshot s = Snap({GpuNode("n", 1)});
  RunningJob r = Running("r", 0, {0}, 100);  // ends by kNow + 100 s at the latest
  r.expected_runtime_s = 100000;
  s.running = {r};
  QueuedJob a = Job("a", {Ask(1)});
  a.expected_runtime_s = 0;
  s.queued = {a};
  Decision d = Schedule(s);
  EXPECT_EQ(Waiting(d, "a")->estimated_start_us, kNow + 100 * kS);
}

TEST(PolicyTest, EstimatesBehindJobsStartedInTheSameCallByTheirExpectedRunTimes) {
  Snapshot s = Snap({GpuNode("n", 1)});
  QueuedJob first = Job("first", {Ask(1)}, 0, 7 * 86400);
  first.expected_runtime_s = 90;
  QueuedJob second = Job("second", {Ask(1)}, 0, 7 * 86400);
  second.expected_runtime_s = 0;
  s.queued = {first, second};
  Decision d = Schedule(s);
  ASSERT_NE(Started(d, "first"), nullptr);
  EXPECT_EQ(Waiting(d, "second")->estimated_start_us, kNow + 90 * kS);
}

}  // namespace
}  // namespace stoker::scheduler

// Rule 9: preemption.
namespace stoker::scheduler {
namespace {

RunningJob Spot(const std::string& id, int node, std::vector<int> gpus, int priority, int64_t ran_s,
                int64_t unsaved_s = -1) {
  RunningJob r = Running(id, node, std::move(gpus), 0);
  r.priority = priority;
  r.preemptible = true;
  r.start_us = kNow - ran_s * kS;
  r.progress_us = unsaved_s < 0 ? 0 : kNow - unsaved_s * kS;
  return r;
}

Snapshot PreemptSnap(int gpus) {
  Snapshot s = Snap({GpuNode("n0", gpus)});
  s.options.preemption.enabled = true;
  s.options.preemption.priority_margin = 10;
  return s;
}

std::vector<std::string> Victims(const Decision& d) {
  std::vector<std::string> v;
  for (const Preemption& p : d.preempt) v.push_back(p.job_id);
  return v;
}

TEST(PolicyPreemptionTest, OffByDefault) {
  Snapshot s = PreemptSnap(2);
  s.options.preemption = {};
  s.running = {Spot("low", 0, {0, 1}, 0, 100)};
  s.queued = {Job("high", {Ask(2)}, 50)};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.preempt.empty());
  ASSERT_NE(Waiting(d, "high"), nullptr);
}

TEST(PolicyPreemptionTest, HigherPriorityByTheMarginPreemptsTheWholeGang) {
  Snapshot s = PreemptSnap(2);
  s.running = {Spot("low", 0, {0, 1}, 0, 100)};
  s.queued = {Job("high", {Ask(2)}, 10)};
  Decision d = Schedule(s);
  ASSERT_EQ(Victims(d), std::vector<std::string>{"low"});
  EXPECT_EQ(d.preempt[0].for_job_id, "high");
  EXPECT_NEAR(d.preempt[0].lost_gpu_seconds, 200, 1e-6);  // 2 GPUs x 100 s since start
  EXPECT_EQ(Started(d, "high"), nullptr);                 // it starts once the victim is gone
}

TEST(PolicyPreemptionTest, NeverBelowTheMarginNorNonPreemptibleNorTooYoung) {
  Snapshot s = PreemptSnap(3);
  s.options.preemption.min_run_us = 60 * kS;
  RunningJob close = Spot("close", 0, {0}, 5, 100);  // 10 - 5 < margin
  RunningJob pinned = Spot("pinned", 0, {1}, 0, 100);
  pinned.preemptible = false;
  RunningJob young = Spot("young", 0, {2}, 0, 30);  // ran 30 s < 60 s
  s.running = {close, pinned, young};
  s.queued = {Job("high", {Ask(1)}, 10)};
  EXPECT_TRUE(Schedule(s).preempt.empty());
  s.options.preemption.min_run_us = 0;
  EXPECT_EQ(Victims(Schedule(s)), std::vector<std::string>{"young"});
}

TEST(PolicyPreemptionTest, FewestGpuSecondsLostAndOnlyWhatIsNeeded) {
  Snapshot s = PreemptSnap(4);
  // Two GPUs needed: the cheapest set is b (1 GPU x 20 s unsaved) + c (1 x 50 s),
  // not a (2 GPUs x 400 s), and never d (saved a checkpoint 5 s ago but
  // not needed once b and c are gone).
  s.running = {Spot("a", 0, {0, 1}, 0, 400), Spot("b", 0, {2}, 0, 1000, 20),
               Spot("c", 0, {3}, 0, 50)};
  s.queued = {Job("high", {Ask(2)}, 100)};
  Decision d = Schedule(s);
  std::vector<std::string> v = Victims(d);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<std::string>{"b", "c"}));
}

TEST(PolicyPreemptionTest, DropsVictimsTheGangFitsWithout) {
  Snapshot s = PreemptSnap(3);
  // The cheapest first is "tiny" (0.5 GPU, 10 s), then "big" (2 GPUs):
  // with big gone the job fits on big's GPUs alone, so tiny is spared.
  s.running = {Spot("tiny", 0, {0}, 0, 10), Spot("big", 0, {1, 2}, 0, 20)};
  s.running[0].replicas[0].gpus[0].fraction = 0.5;
  s.queued = {Job("high", {Ask(2)}, 100)};
  EXPECT_EQ(Victims(Schedule(s)), std::vector<std::string>{"big"});
}

TEST(PolicyPreemptionTest, NothingWhenEvenAllVictimsDoNotMakeRoom) {
  Snapshot s = PreemptSnap(2);
  RunningJob pinned = Running("pinned", 0, {0}, 0);
  s.running = {pinned, Spot("low", 0, {1}, 0, 100)};
  s.queued = {Job("high", {Ask(2)}, 100)};
  EXPECT_TRUE(Schedule(s).preempt.empty());
}

TEST(PolicyPreemptionTest, WaitsForStoppingJobsInsteadOfPreemptingMore) {
  Snapshot s = PreemptSnap(2);
  RunningJob stopping = Spot("stopping", 0, {0, 1}, 0, 100);
  stopping.stopping = true;
  s.running = {stopping, Spot("other", 0, {}, 0, 100)};
  s.queued = {Job("high", {Ask(2)}, 100)};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.preempt.empty());
  ASSERT_NE(Waiting(d, "high"), nullptr);
}

TEST(PolicyPreemptionTest, EachVictimServesOneWaitingJobAndLaterJobsGetTheRest) {
  Snapshot s = PreemptSnap(2);
  s.running = {Spot("v1", 0, {0}, 0, 100), Spot("v2", 0, {1}, 0, 200)};
  s.queued = {Job("first", {Ask(1)}, 100, 3600, "alice", kNow - 5 * kS),
              Job("second", {Ask(1)}, 100, 3600, "bob", kNow)};
  Decision d = Schedule(s);
  ASSERT_EQ(d.preempt.size(), 2u);
  EXPECT_EQ(d.preempt[0].job_id, "v1");
  EXPECT_EQ(d.preempt[0].for_job_id, "first");
  EXPECT_EQ(d.preempt[1].job_id, "v2");
  EXPECT_EQ(d.preempt[1].for_job_id, "second");
}

TEST(PolicyPreemptionTest, QuotaHoldsNeverPreempt) {
  Snapshot s = PreemptSnap(1);
  s.running = {Spot("low", 0, {0}, 0, 100)};
  s.quotas["alice"] = {0.0, std::nullopt};
  s.queued = {Job("high", {Ask(1)}, 100)};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.preempt.empty());
  ASSERT_NE(Waiting(d, "high"), nullptr);
  EXPECT_TRUE(Waiting(d, "high")->quota_hold);
}

TEST(PolicyPreemptionTest, AVictimCannotPreemptBack) {
  // After the swap: the preempted job waits with the lower priority and the
  // preemptor runs without being preemptible: nothing more happens.
  Snapshot s = PreemptSnap(1);
  RunningJob high = Running("high", 0, {0}, 0);
  high.priority = 100;
  s.running = {high};
  s.queued = {Job("low", {Ask(1)}, 0)};
  EXPECT_TRUE(Schedule(s).preempt.empty());
  s.running[0].preemptible = true;  // even a preemptible one: priority 0 is below it
  EXPECT_TRUE(Schedule(s).preempt.empty());
}

}  // namespace
}  // namespace stoker::scheduler
