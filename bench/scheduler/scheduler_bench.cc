// scheduler-bench: the cost of one scheduler::Schedule() call on a large
// snapshot (see bench/scheduler/README.md). One "decision" is one call: order
// the whole queue, start every job that fits (in order, then by backfill),
// reserve for the first job that does not, and explain every other wait.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace stoker::scheduler {
namespace {

constexpr int64_t kS = 1000000;
constexpr int64_t kNow = 1795000000LL * kS;
constexpr uint64_t kGB = 1ull << 30;

// 125 nodes x 8 GPUs = 1,000 GPUs: 100 H100 nodes, 25 L4 nodes.
std::vector<resources::Node> Cluster() {
  std::vector<resources::Node> nodes;
  for (int n = 0; n < 125; ++n) {
    std::string type = n < 100 ? "NVIDIA_H100_80GB" : "NVIDIA_L4";
    resources::Node node{"node" + std::to_string(n), 208, 1872 * kGB, {}};
    for (int g = 0; g < 8; ++g) {
      node.gpus.push_back({g, type, resources::AcceleratorMemoryBytes(type), ""});
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// A catalog-like shape (few distinct shapes, as machine types give) or, with
// `random_shapes`, a shape of its own for almost every job.
std::vector<ReplicaAsk> RandomShape(std::mt19937& rng, bool random_shapes) {
  static const double kGpus[] = {0, 0.25, 0.5, 1, 1, 2, 4, 8, 8};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  double gpus = kGpus[pick(9)];
  std::string type = pick(5) == 0 ? "NVIDIA_L4" : "NVIDIA_H100_80GB";
  int replicas = pick(10) < 7 ? 1 : 2 + pick(3);
  double cpus = gpus >= 1 ? 12 * gpus : 4;
  uint64_t mem = static_cast<uint64_t>(gpus >= 1 ? 85 * gpus : 16) * kGB;
  if (random_shapes) {
    cpus = 1 + pick(24);
    mem = (1 + pick(200)) * kGB;
  }
  return std::vector<ReplicaAsk>(replicas, ReplicaAsk{cpus, mem, gpus, gpus > 0 ? type : ""});
}

// 10,000 queued jobs from 50 users; with `busy`, running jobs hold about 90%
// of the GPUs with runtime bounds of 10 min to 10 h.
Snapshot Build(bool busy, bool random_shapes, int queued = 10000) {
  std::mt19937 rng(42);
  Snapshot s;
  s.nodes = Cluster();
  s.now_us = kNow;
  for (int u = 0; u < 50; ++u) s.usage_gpu_seconds["user" + std::to_string(u)] = 1000.0 * u;
  s.quotas["user7"].max_running_jobs = 3;
  if (busy) {
    int id = 0;
    for (int n = 0; n < 125; ++n) {
      for (int g = 0; g < 8; ++g) {
        if ((n * 8 + g) % 10 == 9) continue;  // 10% free, scattered
        RunningJob r;
        r.id = "run" + std::to_string(id++);
        r.user = "user" + std::to_string(id % 50);
        PlacedReplica p;
        p.node = n;
        p.cpus = 12;
        p.memory_bytes = 85 * kGB;
        p.gpus.push_back({g, 1.0, 0});
        r.replicas.push_back(p);
        r.start_us = kNow - 60 * kS;
        r.runtime_bound_s = 600 + 600 * (id % 60);
        s.running.push_back(std::move(r));
      }
    }
  }
  for (int i = 0; i < queued; ++i) {
    QueuedJob j;
    j.id = "job" + std::to_string(i);
    j.user = "user" + std::to_string(i % 50);
    j.priority = std::uniform_int_distribution<int>(0, 3)(rng);
    j.submit_us = kNow - (queued - i) * kS;
    j.replicas = RandomShape(rng, random_shapes);
    j.runtime_bound_s =
        std::uniform_int_distribution<int>(0, 9)(rng) == 0 ? 0 : 600 + 60 * (i % 600);
    s.queued.push_back(std::move(j));
  }
  return s;
}

void Run(benchmark::State& state, bool busy, bool random_shapes) {
  Snapshot s = Build(busy, random_shapes);
  size_t started = 0, waiting = 0;
  for (auto _ : state) {
    Decision d = Schedule(s);
    started = d.start.size();
    waiting = d.wait.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["queued"] = static_cast<double>(s.queued.size());
  state.counters["gpus"] = 1000;
  state.counters["started"] = static_cast<double>(started);
  state.counters["waiting"] = static_cast<double>(waiting);
  // Placements per second: jobs started per second of Schedule() time.
  state.counters["placements_per_s"] = benchmark::Counter(
      static_cast<double>(started) * state.iterations(), benchmark::Counter::kIsRate);
  // Decisions (Schedule calls) per second.
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The common controller tick: the previous decision has been applied, so
// nothing new fits and every queued job gets its reason and estimate. With
// `all_detailed`, every waiting job gets a detailed reason (the policy's
// default details the first 200 and gives the rest their place in line).
void SteadyState(benchmark::State& state, bool all_detailed) {
  Snapshot s = Build(true, false);
  if (all_detailed) s.options.detailed_reasons = -1;
  Decision first = Schedule(s);
  for (const StartJob& st : first.start) {
    for (size_t i = 0; i < s.queued.size(); ++i) {
      if (s.queued[i].id != st.job_id) continue;
      s.running.push_back({st.job_id, s.queued[i].user, s.queued[i].priority, st.replicas, s.now_us,
                           s.queued[i].runtime_bound_s});
      s.queued.erase(s.queued.begin() + static_cast<long>(i));
      break;
    }
  }
  size_t started = 0;
  for (auto _ : state) {
    Decision d = Schedule(s);
    started = d.start.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["queued"] = static_cast<double>(s.queued.size());
  state.counters["running"] = static_cast<double>(s.running.size());
  state.counters["started"] = static_cast<double>(started);
}

void BM_SteadyState_CatalogShapes(benchmark::State& s) { SteadyState(s, false); }
void BM_SteadyState_AllReasonsDetailed(benchmark::State& s) { SteadyState(s, true); }

// Small queues: the per-call floor and how it grows with the queue.
void BM_BusyCluster_QueueLength(benchmark::State& state) {
  Snapshot s = Build(true, false, static_cast<int>(state.range(0)));
  size_t started = 0;
  for (auto _ : state) {
    Decision d = Schedule(s);
    started = d.start.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["started"] = static_cast<double>(started);
}

void BM_BusyCluster_CatalogShapes(benchmark::State& s) { Run(s, true, false); }
void BM_BusyCluster_RandomShapes(benchmark::State& s) { Run(s, true, true); }
void BM_IdleCluster_CatalogShapes(benchmark::State& s) { Run(s, false, false); }
void BM_IdleCluster_RandomShapes(benchmark::State& s) { Run(s, false, true); }

BENCHMARK(BM_SteadyState_CatalogShapes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SteadyState_AllReasonsDetailed)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BusyCluster_QueueLength)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BusyCluster_CatalogShapes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BusyCluster_RandomShapes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IdleCluster_CatalogShapes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IdleCluster_RandomShapes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stoker::scheduler

BENCHMARK_MAIN();
