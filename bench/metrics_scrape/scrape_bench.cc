// metrics-scrape-bench: the cost of one GET /metrics with 1,000 running
// replicas (issue #15), through the real API handler, store, accountant and
// DaemonMetrics, without an HTTP socket or replica processes (bench/RESULTS.md
// says why: 1,000 real supervisors saturate a 2-vCPU machine for minutes).
//
//   metrics-scrape-bench [--jobs 500] [--finished 20000] [--scrapes 50]
//
// The store holds --jobs RUNNING jobs of two one-GPU replicas each (the
// allocation JSON the controller writes), --finished SUCCEEDED jobs and a few
// queued ones; the nodes view lists 2 x --jobs GPUs with their holders; the
// GPU sample covers every GPU, so every family is rendered (per-GPU and
// per-replica utilisation included). Prints p50/p99/max of the scrapes next
// to GET /healthz through the same handler, the body size and sample count.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "api/api.h"
#include "api/control_plane.h"
#include "metrics/daemon_metrics.h"

using namespace stoker;
using nlohmann::json;

namespace {

class ViewControlPlane final : public api::ControlPlane {
 public:
  void Submitted(const store::JobRecord&) override {}
  void SubmitFailed(int64_t) override {}
  void CancelRequested(int64_t) override {}
  void StudySubmitted(int64_t) override {}
  void StudyCancelRequested(int64_t) override {}
  std::vector<QueueEntry> Queue() const override { return {}; }
  json Nodes() const override { return nodes; }
  json nodes;
};

json Job() {
  json pool = {{"machineSpec",
                {{"machineType", "n1-standard-1"},
                 {"acceleratorType", "NVIDIA_TESLA_T4"},
                 {"acceleratorCount", 1}}},
               {"replicaCount", "1"},
               {"containerSpec", {{"imageUri", "local/sh"}, {"command", {"sleep", "3600"}}}}};
  return {{"displayName", "scrape-bench"}, {"jobSpec", {{"workerPoolSpecs", {pool, pool}}}}};
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// This thread's CPU time in ms: less sensitive than wall time to other
// processes on a shared machine.
double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void Report(const char* what, std::vector<double> t, std::vector<double> cpu) {
  std::sort(cpu.begin(), cpu.end());
  std::sort(t.begin(), t.end());
  auto pct = [&](double p) {
    return t[std::min(t.size() - 1, size_t(p / 100 * (t.size() - 1) + 0.5))];
  };
  std::printf("| %s | %zu | %.2f | %.2f | %.2f | %.2f |\n", what, t.size(), pct(50), pct(99),
              t.back(), cpu[cpu.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 500, finished = 20000, scrapes = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--jobs")) jobs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--finished")) finished = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--scrapes")) scrapes = std::atoi(argv[i + 1]);
  }
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("metrics_scrape_bench_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto store = std::move(store::Store::Open(dir)).value();
  auto auth = std::move(auth::AuthStore::Open(dir / "stoker.db")).value();
  (void)auth->AddUser({"prom", auth::Role::kViewer, "", 0});
  std::string token = auth->IssueToken("prom")->token;

  const int64_t now = SystemClock().NowMicros();
  json spec = Job();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < finished; ++i) {
    int64_t id = store->CreateJob({"p", "l", "done", spec, {}, 0, "", "", json(), "u"})->id;
    (void)store->Transition(id, spec::JobState::kQueued, spec::JobState::kSucceeded, "bench");
  }
  json holders_by_gpu = json::array();
  ViewControlPlane control;
  json gpus = json::array();
  for (int i = 0; i < jobs; ++i) {
    std::string user = "user" + std::to_string(i % 20);
    int64_t id = store->CreateJob({"p", "l", "run", spec, {}, 0, "", "", json(), user})->id;
    json replicas = json::array();
    for (int r = 0; r < 2; ++r) {
      int gpu = 2 * i + r;
      std::string name = "workerpool" + std::to_string(r) + "-0";
      replicas.push_back(
          {{"name", name},
           {"pool", r},
           {"index", 0},
           {"node", 0},
           {"cpus", 1.0},
           {"memory_bytes", 3840ull << 20},
           {"gpus", {gpu}},
           {"gpu_shares", {{{"gpu", gpu}, {"fraction", 1.0}, {"memory_bytes", 16ull << 30}}}},
           {"gpu_type", "NVIDIA_TESLA_T4"},
           {"port", 20000 + gpu}});
      gpus.push_back({{"index", gpu},
                      {"type", "NVIDIA_TESLA_T4"},
                      {"memory_bytes", 16ull << 30},
                      {"uuid", "GPU-" + std::to_string(gpu)},
                      {"holders",
                       {{{"job", std::to_string(id)},
                         {"replica", name},
                         {"user", user},
                         {"fraction", 1.0}}}}});
    }
    json allocation = {{"node", "bench"}, {"replicas", replicas}};
    (void)store->Transition(id, spec::JobState::kQueued, spec::JobState::kPending, "placed",
                            {.allocation = allocation});
    (void)store->Transition(id, spec::JobState::kPending, spec::JobState::kRunning, "ran",
                            {.start_time_us = now - 600'000'000});
  }
  for (int i = 0; i < 10; ++i)
    (void)store->CreateJob({"p", "l", "wait", spec, {}, 0, "", "", json(), "u"});
  control.nodes = {{"nodes", {{{"name", "bench"}, {"gpus", gpus}}}}};
  std::fprintf(stderr, "store filled in %.1f s\n",
               Ms(std::chrono::steady_clock::now() - t0) / 1000);

  metrics::DaemonMetrics metrics;
  std::vector<resources::GpuUsage> sample;
  for (int g = 0; g < 2 * jobs; ++g) {
    sample.push_back({.index = g,
                      .utilization_percent = double(g % 100),
                      .memory_used_bytes = 1ull << 30,
                      .memory_total_bytes = 16ull << 30});
  }
  metrics.SetGpuSample(sample);
  for (int i = 0; i < 1000; ++i) metrics.JobStarted(i * 0.01), metrics.SchedulingPassTook(i * 1e-5);
  metrics.ControlLoopPassed();

  resources::Node node;
  cost::NodeShape shape{.cpus = 64,
                        .gpu_types = std::vector<std::string>(2 * jobs, "NVIDIA_TESLA_T4")};
  cost::Accountant accountant(*store, cost::Catalog::BuiltIn(), shape, SystemClock());
  storage::Buckets buckets(dir, {});

  api::ApiDeps deps{store.get(), &buckets,   nullptr, nullptr,
                    &control,    auth.get(), "s",     &accountant};
  deps.daemon_metrics = &metrics;
  api::ApiDeps no_cost = deps;
  no_cost.accountant = nullptr;
  http::Handler with_cost = api::MakeHandler(deps), without_cost = api::MakeHandler(no_cost);

  auto run = [&](http::Handler& h, const std::string& path, std::string* body,
                 std::vector<double>* cpu) {
    std::vector<double> t;
    for (int i = 0; i < scrapes + 3; ++i) {
      http::Request r;
      r.method = "GET";
      r.path = r.target = path;
      r.headers["authorization"] = "Bearer " + token;
      auto s = std::chrono::steady_clock::now();
      double c = CpuMs();
      http::Response resp = h(r);
      double ms = Ms(std::chrono::steady_clock::now() - s);
      if (i >= 3) cpu->push_back(CpuMs() - c);
      if (resp.status != 200) {
        std::fprintf(stderr, "%s: %d %s\n", path.c_str(), resp.status, resp.body.c_str());
        std::exit(1);
      }
      if (i >= 3) t.push_back(ms);  // 3 warm-up calls
      if (body) *body = resp.body;
    }
    return t;
  };
  std::string body, body_no_cost;
  std::vector<double> full_cpu, lean_cpu, health_cpu;
  std::vector<double> full = run(with_cost, "/metrics", &body, &full_cpu);
  std::vector<double> lean = run(without_cost, "/metrics", &body_no_cost, &lean_cpu);
  std::vector<double> health = run(with_cost, "/v1/whoami", nullptr, &health_cpu);
  size_t samples = 0, replica_series = 0;
  for (size_t p = 0; p < body.size();) {
    size_t e = body.find('\n', p);
    if (body[p] != '#') ++samples;
    if (body.compare(p, 37, "stoker_replica_gpu_utilization_ratio{") == 0) ++replica_series;
    p = e == std::string::npos ? body.size() : e + 1;
  }
  std::printf("%d running jobs (%d replicas, %d GPUs), %d finished, 10 queued\n", jobs, 2 * jobs,
              2 * jobs, finished);
  std::printf(
      "| request (in-process handler) | n | p50 ms | p99 ms | max ms | CPU p50 ms "
      "|\n|---|---|---|---|---|---|\n");
  Report("GET /metrics", full, full_cpu);
  Report("GET /metrics without the cost families", lean, lean_cpu);
  Report("GET /v1/whoami (token check only)", health, health_cpu);
  std::printf("body %zu bytes, %zu samples, %zu per-replica utilisation series\n", body.size(),
              samples, replica_series);
  fs::remove_all(dir);
}
