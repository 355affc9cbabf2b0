#include "server/usage_meter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/time.h"
#include "server/fair_share.h"

namespace stoker::server {

using nlohmann::json;
using spec::JobState;

UsageMeter::UsageMeter(UsageMeterDeps deps, JobTable& table)
    : config_(*deps.config),
      node_(*deps.node),
      store_(*deps.store),
      clock_(*deps.clock),
      accountant_(deps.accountant),
      sample_gpus_(std::move(deps.sample_gpus)),
      metrics_(deps.metrics),
      table_(table) {}

void UsageMeter::Accrue(int64_t now_us) {
  double dt = usage_us_ ? (now_us - usage_us_) / 1e6 : 0;
  usage_us_ = now_us;
  if (dt <= 0) return;
  double decay = std::exp2(-dt / (config_.fair_share_half_life_hours * 3600));
  for (auto& [user, v] : usage_) v *= decay;
  auto add = [&](const std::string& user, const std::vector<scheduler::PlacedReplica>& placed) {
    usage_[user] += HeldGpus(placed) * dt;
  };
  for (const auto& [key, d] : table_.draining) add(d.user, d.placed);
  for (const auto& [id, a] : table_.active) add(a.rec.user, a.placed);
}

void UsageMeter::Rebuild(int64_t now_us) {
  const double half_life_s = config_.fair_share_half_life_hours * 3600;
  // Use older than ten half-lives weighs under 0.1%: not worth reading
  // (a half-life longer than the clock's past reads everything).
  const double lookback_us = 10 * half_life_s * 1e6;
  const int64_t since_us =
      lookback_us >= static_cast<double>(now_us) ? 0 : now_us - static_cast<int64_t>(lookback_us);
  auto ended = store_.EndedJobsSince(since_us);
  std::vector<GpuInterval> intervals;
  if (ended.ok()) {
    for (const store::JobRecord& rec : *ended) {
      if (rec.start_time_us == 0) continue;  // never ran
      if (!rec.allocation.is_object()) continue;
      intervals.push_back({rec.user, HeldGpus(PlacedFromAllocation(rec.allocation, node_)),
                           rec.start_time_us, rec.end_time_us});
    }
  } else {
    spdlog::warn("fair share starts from zero: {}", ended.status().ToString());
  }
  for (const auto& [id, a] : table_.active) {
    if (a.rec.start_time_us == 0 || spec::IsTerminal(a.rec.state)) continue;
    intervals.push_back({a.rec.user, HeldGpus(a.placed), a.rec.start_time_us, now_us});
  }
  usage_ = UsageFromHistory(intervals, now_us, half_life_s);
  usage_us_ = now_us;
}

void UsageMeter::RecordAttempt(ActiveJob& a, const std::vector<exec::ReplicaStatus>& st,
                               const std::string& end) {
  std::map<std::string, cost::ReplicaTimes> times;
  for (const exec::ReplicaStatus& r : st) times[r.name] = {r.start_us, r.end_us};
  std::vector<store::UsageRecord> rows = cost::AttemptUsage(a.rec, times, end, clock_.NowMicros());
  for (store::UsageRecord& u : rows) {
    auto t = a.telemetry.find(u.replica);
    if (t == a.telemetry.end()) continue;
    // Sampling periods may run past the trainer's exit (the loop sees it a
    // little later): scale to the run, keeping the busy and energy rates.
    const double scale = t->second.sampled_s > u.seconds() ? u.seconds() / t->second.sampled_s : 1;
    u.sampled_seconds = t->second.sampled_s * scale;
    u.busy_gpu_seconds = t->second.busy_gpu_s * scale;
    if (t->second.energy_known) u.energy_joules = t->second.energy_j * scale;
  }
  Status s = store_.RecordUsage(rows);
  if (!s.ok()) spdlog::error("job {}: cannot record usage: {}", a.rec.id, s.ToString());
  a.recorded_usage = std::move(rows);
}

void UsageMeter::RecordDrained(int64_t job_id, DrainingAttempt& d,
                               const std::vector<exec::ReplicaStatus>& st) {
  bool later = false;
  for (store::UsageRecord& u : d.usage) {
    for (const exec::ReplicaStatus& r : st) {
      if (r.name == u.replica && r.end_us > u.end_us) {
        u.end_us = r.end_us;
        later = true;
      }
    }
  }
  if (!later) return;
  Status s = store_.RecordUsage(d.usage);
  if (!s.ok()) spdlog::warn("job {}: usage: {}", job_id, s.ToString());
}

void UsageMeter::SampleGpus() {
  if (!sample_gpus_ || config_.gpu_telemetry_seconds <= 0) return;
  const int64_t now = clock_.NowMicros();
  const auto interval_us = static_cast<int64_t>(config_.gpu_telemetry_seconds * 1e6);
  if (gpu_sample_us_ != 0 && now - gpu_sample_us_ < interval_us) return;
  const int64_t previous = gpu_sample_us_;
  gpu_sample_us_ = now;
  std::map<int, resources::GpuUsage> gpus;
  std::vector<resources::GpuUsage> sampled = sample_gpus_();
  if (metrics_) metrics_->SetGpuSample(sampled);
  for (resources::GpuUsage& g : sampled) gpus[g.index] = g;
  // Joules each GPU used since the last sample (absent: no counter, or no last sample).
  std::map<int, double> energy_j;
  for (const auto& [index, g] : gpus) {
    auto last = gpu_energy_mj_.find(index);
    if (g.energy_mj && last != gpu_energy_mj_.end() && *g.energy_mj >= last->second) {
      energy_j[index] = (*g.energy_mj - last->second) / 1000.0;
    }
    if (g.energy_mj) {
      gpu_energy_mj_[index] = *g.energy_mj;
    } else {
      gpu_energy_mj_.erase(index);
    }
  }
  if (previous == 0) return;  // the first sample only sets the counters
  for (auto& [id, a] : table_.active) {
    if (a.rec.state != JobState::kRunning || a.rec.start_time_us == 0) continue;
    // The attempt ran for only part of the period when it started within it.
    const double dt = (now - std::max(previous, a.rec.start_time_us)) / 1e6;
    if (dt <= 0) continue;
    double job_busy = 0, job_fraction = 0;  // the job's GPUs' use, weighted by its shares
    for (size_t i = 0; i < a.placed.size() && i < a.replicas.size(); ++i) {
      if (a.placed[i].gpus.empty()) continue;
      ActiveJob::Telemetry& t = a.telemetry[a.replicas[i]];
      bool seen = false;
      for (const scheduler::GpuShare& share : a.placed[i].gpus) {
        auto g = gpus.find(share.gpu);
        if (g == gpus.end()) continue;
        seen = true;
        job_busy += share.fraction * g->second.utilization_percent;
        job_fraction += share.fraction;
        t.busy_gpu_s += share.fraction * g->second.utilization_percent / 100 * dt;
        auto e = energy_j.find(share.gpu);
        if (e != energy_j.end()) {
          t.energy_j += share.fraction * e->second * dt / ((now - previous) / 1e6);
        } else {
          t.energy_known = false;
        }
      }
      if (seen) t.sampled_s += dt;
    }
    if (job_fraction > 0) {
      CheckGpuIdle(a, job_busy / job_fraction, std::max(previous, a.rec.start_time_us), now);
    }
  }
}

void UsageMeter::CheckGpuIdle(ActiveJob& a, double busy_percent, int64_t since_us, int64_t now_us) {
  constexpr double kIdlePercent = 15;  // as telemetry's waste flag (src/telemetry)
  if (busy_percent >= kIdlePercent) {
    a.gpu_idle_since_us = 0;
    a.gpu_idle_told.clear();
    return;
  }
  if (a.gpu_idle_since_us == 0) a.gpu_idle_since_us = since_us;
  const double idle_minutes = (now_us - a.gpu_idle_since_us) / 60e6;
  std::vector<config::Webhook> due;
  for (size_t h = 0; h < config_.webhooks.size(); ++h) {
    const config::Webhook& hook = config_.webhooks[h];
    if (!hook.events.count("job.gpu_idle") || a.gpu_idle_told.count(h) ||
        idle_minutes < hook.gpu_idle_minutes) {
      continue;
    }
    a.gpu_idle_told.insert(h);
    due.push_back(hook);
  }
  if (due.empty()) return;
  char busy[32];
  std::snprintf(busy, sizeof busy, "%.1f", busy_percent);
  (void)store_.AddEvent(a.rec.id, "warning: the job's GPUs have been under 15% busy for " +
                                      FormatDuration(idle_minutes * 60) + " (now " + busy + "%)");
  json body = {{"job", WebhookJob(a.rec, a.rec.attempt)},
               {"idleSeconds", idle_minutes * 60},
               {"gpuBusyPercent", busy_percent}};
  Status s = store_.Enqueue(WebhookMessages(due, "job.gpu_idle", body, now_us));
  if (!s.ok())
    spdlog::warn("job {}: cannot enqueue the job.gpu_idle webhook: {}", a.rec.id, s.ToString());
}

std::vector<int64_t> UsageMeter::EnforceBudgets() {
  std::vector<int64_t> cancelled_studies;
  if (accountant_ == nullptr) return cancelled_studies;
  int64_t now = clock_.NowMicros();
  if (now - budget_check_us_ < 10'000'000) return cancelled_studies;
  budget_check_us_ = now;
  std::optional<std::vector<cost::BudgetState>> states = accountant_->LastBudgetStates();
  if (!states) return cancelled_studies;  // none computed yet
  for (const cost::BudgetState& b : *states) {
    if (!b.warn) continue;
    bool stop = b.exceeded && b.budget.stop_running;
    std::string warned_key = b.budget.scope + " " + b.month.name + (stop ? " stop" : "");
    bool first = budget_warned_.insert(warned_key).second;
    // Webhooks: once per budget, month and kind (and daemon run).
    const char* event = b.exceeded ? "budget.exceeded" : "budget.warning";
    if (budget_warned_.insert(b.budget.scope + " " + b.month.name + " " + event).second) {
      Status s = store_.Enqueue(
          WebhookMessages(config_.webhooks, event, {{"budget", cost::ToJson(b)}}, now));
      if (!s.ok()) spdlog::warn("budgets: cannot enqueue the {} webhook: {}", event, s.ToString());
    }
    for (auto& [id, a] : table_.active) {
      if (spec::IsTerminal(a.rec.state) || a.rec.cancel_requested) continue;
      json labels(a.job.labels);
      if (!cost::InScope(b.budget.scope, a.rec.user, a.rec.project, labels)) continue;
      if (stop) {
        (void)store_.AddEvent(
            id, "budget " + b.Describe() + ": its hard limit stops the scope's jobs (stopRunning)");
        if (store_.RequestCancel(id).ok()) a.rec.cancel_requested = true;
        if (a.rec.study_id != 0 && store_.RequestStudyCancel(a.rec.study_id).ok()) {
          cancelled_studies.push_back(a.rec.study_id);
        }
      } else if (first && a.rec.state == JobState::kRunning) {
        (void)store_.AddEvent(id, "warning: budget " + b.Describe());
      }
    }
  }
  return cancelled_studies;
}

}  // namespace stoker::server
