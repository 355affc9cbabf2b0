// GET /metrics: Prometheus' text format (docs/metrics.md lists every family),
// for viewers and admins (a scrape job sends a viewer's bearer token). Label
// cardinality stays bounded: per state, user, budget, GPU, and per running
// job and replica only (nothing per finished job). A scrape reads the
// store's counts by state (a few rows), the running jobs, the scheduler's
// nodes view and the daemon's own measurements, never every job ever.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "api/metrics_text.h"
#include "api/routes.h"
#include "common/time.h"
#include "cost/accounting.h"

namespace stoker::api {
namespace {

using cost::PriceKind;

using nlohmann::json;
using spec::JobState;

constexpr JobState kStates[] = {JobState::kQueued,    JobState::kPending, JobState::kRunning,
                                JobState::kSucceeded, JobState::kFailed,  JobState::kCancelling,
                                JobState::kCancelled};

double Seconds(int64_t us) { return us / 1e6; }

void AddHistogram(MetricsText& m, const std::string& name, const std::string& help,
                  const metrics::Histogram::Snapshot& h) {
  m.Family(name, "histogram", help);
  m.Histogram({}, h.upper_bounds, h.cumulative, h.sum, h.count);
}

// The daemon itself: build, start, the control loop's heartbeat and timings, HTTP responses.
void AddDaemonMetrics(const metrics::DaemonMetrics& dm, int64_t now_us, MetricsText& m) {
  m.Family("stoker_build_info", "gauge", "Always 1; labels: how this stokerd was built.");
  m.Sample({{"build_type", metrics::DaemonMetrics::BuildType()},
            {"compiler", metrics::DaemonMetrics::Compiler()}},
           1);
  m.Family("stoker_start_time_seconds", "gauge", "When stokerd started, in Unix seconds.");
  m.Sample({}, Seconds(dm.start_time_us()));
  m.Family("stoker_control_loop_passes_total", "counter",
           "Passes of the control loop (each polls replicas, judges attempts and schedules).");
  m.Sample({}, static_cast<double>(dm.passes()));
  if (dm.last_pass_us() != 0) {
    m.Family("stoker_control_loop_last_pass_age_seconds", "gauge",
             "Seconds since the control loop last finished a pass (a stuck loop grows it).");
    m.Sample({}, std::max<double>(0, Seconds(now_us - dm.last_pass_us())));
  }
  AddHistogram(m, "stoker_scheduling_pass_duration_seconds",
               "Wall time of each scheduling decision: the snapshot, the policy, launching the "
               "jobs it starts and recording why the others wait.",
               dm.scheduling_pass_seconds());
  AddHistogram(m, "stoker_job_submit_to_start_seconds",
               "Seconds from a job's submission to its first replica's start (first attempt).",
               dm.submit_to_start_seconds());
  m.Family("stoker_http_requests_total", "counter",
           "HTTP requests stokerd answered, by status class (2xx, 4xx, ...).");
  std::array<uint64_t, 6> responses = dm.responses();
  for (int c = 1; c <= 5; ++c) {
    m.Sample({{"code", std::to_string(c) + "xx"}}, static_cast<double>(responses[c]));
  }
}

// Jobs and studies by state and the queue, from the store's counts (a few
// rows); stoker_store_up says whether the store answered.
void AddStoreMetrics(const ApiDeps& d, int64_t now_us, MetricsText& m) {
  Result<store::StateCounts> counts = d.store->CountByState();
  m.Family("stoker_store_up", "gauge", "1 when stokerd could read its store for this scrape.");
  m.Sample({}, counts.ok() ? 1 : 0);
  if (!counts.ok()) {
    spdlog::warn("GET /metrics: the store did not answer: {}", counts.status().ToString());
    return;
  }
  auto count = [](const std::map<JobState, int64_t>& by, JobState s) {
    auto it = by.find(s);
    return it == by.end() ? 0.0 : static_cast<double>(it->second);
  };
  m.Family("stoker_jobs", "gauge", "Custom jobs (trials included) in each state.");
  for (JobState s : kStates)
    m.Sample({{"state", std::string(spec::JobStateName(s))}}, count(counts->jobs, s));
  m.Family("stoker_studies", "gauge", "Hyperparameter tuning jobs in each state.");
  for (JobState s : kStates) {
    m.Sample({{"state", std::string(spec::JobStateName(s))}}, count(counts->studies, s));
  }
  m.Family("stoker_queue_length", "gauge", "Jobs waiting in the queue (JOB_STATE_QUEUED).");
  m.Sample({}, count(counts->jobs, JobState::kQueued));
  m.Family("stoker_queue_oldest_wait_seconds", "gauge",
           "Seconds since the oldest queued job was submitted; 0 when none waits.");
  m.Sample({}, counts->oldest_queued_create_us == 0
                   ? 0
                   : std::max<double>(0, Seconds(now_us - counts->oldest_queued_create_us)));
}

// A GPU as the scheduler's nodes view shows it: its node, type and booked fraction.
struct GpuView {
  std::string node;
  std::string type;
  double allocated = 0;
};

// GPUs booked (the scheduler's view, as `stoker nodes` shows it) and busy
// (the control loop's last NVML sample), per GPU and in total.
void AddGpuMetrics(const ApiDeps& d, const metrics::DaemonMetrics::GpuSample& sample,
                   int64_t now_us, MetricsText& m) {
  if (d.control_plane == nullptr) return;
  json nodes = d.control_plane->Nodes();
  std::map<int, GpuView> gpus;  // by index (one local node)
  for (const json& n : nodes.value("nodes", json::array())) {
    for (const json& g : n.value("gpus", json::array())) {
      GpuView v{n.value("name", ""), g.value("type", ""), 0};
      for (const json& h : g.value("holders", json::array()))
        v.allocated += h.value("fraction", 0.0);
      gpus[g.value("index", 0)] = v;
    }
  }
  if (gpus.empty()) return;
  std::map<int, const resources::GpuUsage*> sampled;
  for (const resources::GpuUsage& u : sample.gpus) sampled[u.index] = &u;
  auto labels = [&](int index) {
    const GpuView& v = gpus[index];
    return MetricsText::Labels{{"node", v.node}, {"gpu", std::to_string(index)}, {"type", v.type}};
  };

  double allocated = 0, busy = 0;
  for (const auto& [index, v] : gpus) allocated += std::min(1.0, v.allocated);
  m.Family("stoker_gpus", "gauge", "GPUs stokerd schedules.");
  m.Sample({}, static_cast<double>(gpus.size()));
  m.Family("stoker_gpus_allocated", "gauge",
           "GPUs booked by jobs (running, starting or stopping), in GPU-equivalents (shared "
           "GPUs count their booked fractions).");
  m.Sample({}, allocated);
  m.Family("stoker_gpu_allocated_ratio", "gauge", "Booked fraction of each GPU (0..1).");
  for (const auto& [index, v] : gpus) m.Sample(labels(index), std::min(1.0, v.allocated));
  if (sample.time_us == 0) return;  // no NVML telemetry (declared GPUs, or none yet)

  for (const auto& [index, u] : sampled) {
    if (gpus.count(index)) busy += u->utilization_percent / 100;
  }
  m.Family("stoker_gpus_busy", "gauge",
           "GPUs busy by the last NVML sample, in GPU-equivalents (the sum of utilisation "
           "ratios): compare with stoker_gpus_allocated.");
  m.Sample({}, busy);
  m.Family("stoker_gpu_sample_age_seconds", "gauge",
           "Seconds since the control loop last read the GPUs (gpu_telemetry_seconds apart).");
  m.Sample({}, std::max<double>(0, Seconds(now_us - sample.time_us)));
  m.Family("stoker_gpu_utilization_ratio", "gauge",
           "Each GPU's utilisation (kernel time, 0..1) at the last sample.");
  for (const auto& [index, u] : sampled) {
    if (gpus.count(index)) m.Sample(labels(index), u->utilization_percent / 100);
  }
  m.Family("stoker_gpu_memory_used_bytes", "gauge", "Each GPU's memory in use at the last sample.");
  for (const auto& [index, u] : sampled) {
    if (gpus.count(index)) m.Sample(labels(index), static_cast<double>(u->memory_used_bytes));
  }
  m.Family("stoker_gpu_memory_total_bytes", "gauge", "Each GPU's memory.");
  for (const auto& [index, u] : sampled) {
    if (gpus.count(index)) m.Sample(labels(index), static_cast<double>(u->memory_total_bytes));
  }
}

// Each running replica's GPUs: device-level numbers of the last sample for
// the GPUs its allocation holds (a shared GPU shows the whole device's use).
void AddReplicaGpuMetrics(const std::vector<store::JobRecord>& running,
                          const metrics::DaemonMetrics::GpuSample& sample, MetricsText& m) {
  struct Row {
    MetricsText::Labels labels;
    double fraction;
    const resources::GpuUsage* usage;
  };
  std::map<int, const resources::GpuUsage*> sampled;
  for (const resources::GpuUsage& u : sample.gpus) sampled[u.index] = &u;
  std::vector<Row> rows;
  for (const store::JobRecord& j : running) {
    if (j.state != JobState::kRunning || !j.allocation.is_object()) continue;
    for (const json& r : j.allocation.value("replicas", json::array())) {
      if (!r.is_object()) continue;
      for (const json& g : r.value("gpu_shares", json::array())) {
        int index = g.value("gpu", -1);
        auto u = sampled.find(index);
        rows.push_back({{{"job_id", std::to_string(j.id)},
                         {"user", j.user},
                         {"pool", std::to_string(r.value("pool", 0))},
                         {"replica", r.value("name", "")},
                         {"gpu", std::to_string(index)}},
                        g.value("fraction", 1.0),
                        u == sampled.end() ? nullptr : u->second});
      }
    }
  }
  if (rows.empty()) return;
  m.Family("stoker_replica_gpu_allocated_ratio", "gauge",
           "Fraction of each GPU a running replica books (0..1).");
  for (const Row& r : rows) m.Sample(r.labels, r.fraction);
  if (sample.time_us == 0) return;
  m.Family("stoker_replica_gpu_utilization_ratio", "gauge",
           "Utilisation (0..1) at the last sample of each GPU a running replica holds (the "
           "device's, shared or not).");
  for (const Row& r : rows) {
    if (r.usage) m.Sample(r.labels, r.usage->utilization_percent / 100);
  }
  m.Family("stoker_replica_gpu_memory_used_bytes", "gauge",
           "Memory in use at the last sample of each GPU a running replica holds (the "
           "device's, shared or not).");
  for (const Row& r : rows) {
    if (r.usage) m.Sample(r.labels, static_cast<double>(r.usage->memory_used_bytes));
  }
}

// This month's usage and cost by user, budgets, and the cost of each running job.
Status AddCostMetrics(const ApiDeps& d, const std::vector<store::JobRecord>& active,
                      MetricsText& m) {
  if (d.accountant == nullptr) return OkStatus();
  cost::Accountant& acct = *d.accountant;
  const int64_t now = NowMicros();
  const cost::Month month = cost::MonthOf(now);
  // One ledger read and one pass over the running attempts serve both the
  // month's totals and each running job's cost (Accountant::RowsBetween and
  // JobRows would read the running jobs again and the ledger once per job):
  // every attempt of a running job overlaps [its submission, now), so the
  // ledger from the oldest running job's submission holds all of them.
  int64_t from = month.start_us;
  for (const store::JobRecord& j : active) from = std::min(from, j.create_time_us);
  const int64_t to = std::max(month.end_us, now + 1);
  STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> all, d.store->UsageBetween(from, to));
  std::set<std::pair<int64_t, int>> recorded;  // attempts the ledger already holds
  for (const store::UsageRecord& u : all) recorded.insert({u.job_id, u.attempt});
  for (const store::JobRecord& j : active) {  // RUNNING or CANCELLING
    if (recorded.count({j.id, j.attempt})) continue;
    for (store::UsageRecord& u : cost::AttemptUsage(j, {}, "running", now))
      all.push_back(std::move(u));
  }
  std::map<int64_t, std::vector<store::UsageRecord>> by_running_job;
  for (const store::JobRecord& j : active) by_running_job[j.id];
  for (const store::UsageRecord& u : all) {
    auto it = by_running_job.find(u.job_id);
    if (it != by_running_job.end()) it->second.push_back(u);
  }
  std::vector<store::UsageRecord> rows = cost::Clip(std::move(all), month.start_us, month.end_us);
  std::map<std::string, std::vector<store::UsageRecord>> by_user;
  for (const store::UsageRecord& u : rows) by_user[u.user].push_back(u);
  std::map<std::string, cost::Totals> totals;
  for (const auto& [user, r] : by_user) totals[user] = acct.Price(r);

  m.Family("stoker_usage_month_gpu_seconds", "gauge",
           "GPU-seconds booked this calendar month (UTC), by user and GPU type.");
  for (const auto& [user, t] : totals) {
    for (const auto& [type, s] : t.gpu_seconds_by_type)
      m.Sample({{"user", user}, {"gpu_type", type}}, s);
  }
  m.Family("stoker_usage_month_busy_gpu_seconds", "gauge",
           "GPU-seconds busy this month by GPU telemetry (sampled part of runs), by user.");
  for (const auto& [user, t] : totals) {
    if (t.sampled_gpu_seconds > 0) m.Sample({{"user", user}}, t.busy_gpu_seconds);
  }
  m.Family("stoker_usage_month_cost_usd", "gauge",
           "Cost of this month's usage in US dollars, by user and price (vertex, compute-engine, "
           "spot, own); absent where it cannot be priced.");
  for (auto& [user, t] : totals) {
    for (const auto& [kind, usd] : t.usd) {
      if (usd) m.Sample({{"user", user}, {"price", cost::PriceKindName(kind)}}, *usd);
    }
  }

  STOKER_ASSIGN_OR_RETURN(std::vector<cost::BudgetState> budgets, acct.BudgetStates());
  m.Family("stoker_budget_limit", "gauge",
           "Monthly budget limits, by scope and unit (usd, gpu_seconds).");
  for (const cost::BudgetState& b : budgets) {
    if (b.budget.monthly_usd)
      m.Sample({{"scope", b.budget.scope}, {"unit", "usd"}}, *b.budget.monthly_usd);
    if (b.budget.monthly_gpu_hours) {
      m.Sample({{"scope", b.budget.scope}, {"unit", "gpu_seconds"}},
               *b.budget.monthly_gpu_hours * 3600);
    }
  }
  m.Family("stoker_budget_used", "gauge", "What each budget's scope used this month, by unit.");
  for (const cost::BudgetState& b : budgets) {
    if (b.used_usd) m.Sample({{"scope", b.budget.scope}, {"unit", "usd"}}, *b.used_usd);
    m.Sample({{"scope", b.budget.scope}, {"unit", "gpu_seconds"}}, b.used_gpu_hours * 3600);
  }
  m.Family("stoker_budget_exceeded", "gauge",
           "1 when a budget's hard limit is reached this month.");
  for (const cost::BudgetState& b : budgets)
    m.Sample({{"scope", b.budget.scope}}, b.exceeded ? 1 : 0);

  m.Family("stoker_running_job_cost_usd", "gauge",
           "Cost so far of each running job (all its attempts), by price.");
  for (const store::JobRecord& j : active) {
    if (j.state != spec::JobState::kRunning) continue;
    cost::Totals t = acct.Price(by_running_job[j.id]);
    for (const auto& [kind, usd] : t.usd) {
      if (!usd) continue;
      m.Sample({{"job_id", std::to_string(j.id)},
                {"user", j.user},
                {"price", cost::PriceKindName(kind)}},
               *usd);
    }
  }
  return OkStatus();
}

}  // namespace

std::optional<http::Response> HandleMetricsRoutes(const ApiDeps& d, const http::Request& req,
                                                  const auth::Principal& caller) {
  if (req.path != "/metrics") return std::nullopt;
  if (req.method != "GET") return Error(InvalidArgument("only GET is supported on /metrics"));
  if (caller.role == auth::Role::kUser) {
    return Error(PermissionDenied(
        "/metrics shows every user's usage: scrape it with a viewer's token (stoker admin users "
        "add prometheus --role viewer; stoker admin users token prometheus)"));
  }
  // One clock for every age in the scrape: the daemon's own (a fake one in tests).
  const int64_t now_us = d.daemon_metrics ? d.daemon_metrics->clock().NowMicros() : NowMicros();
  MetricsText m;
  metrics::DaemonMetrics::GpuSample sample;
  if (d.daemon_metrics) {
    AddDaemonMetrics(*d.daemon_metrics, now_us, m);
    sample = d.daemon_metrics->gpu_sample();
  }
  AddStoreMetrics(d, now_us, m);
  AddGpuMetrics(d, sample, now_us, m);
  // A family that cannot be read is left out of this scrape (and logged), so
  // that the others still arrive; stoker_store_up tells a store outage.
  Result<std::vector<store::JobRecord>> running = d.store->RunningJobs();
  if (!running.ok()) {
    spdlog::warn("GET /metrics: running jobs: {}", running.status().ToString());
  } else {
    AddReplicaGpuMetrics(*running, sample, m);
    if (Status s = AddCostMetrics(d, *running, m); !s.ok())
      spdlog::warn("GET /metrics: cost families left out: {}", s.ToString());
  }
  http::Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = m.text();
  return r;
}

}  // namespace stoker::api
