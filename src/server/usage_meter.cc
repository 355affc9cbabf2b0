#include "server/usage_meter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/time.h"
#include "server/fair_share.h"
#include "telemetry/telemetry.h"

namespace stoker::server {

using nlohmann::json;
using spec::JobState;

UsageMeter::UsageMeter(UsageMeterDeps deps, JobTable& table)
    : config_(*deps.config),
      node_(*deps.node),
      store_(*deps.store),
      clock_(*deps.clock),
      accountant_(deps.accountant),
      files_(deps.files),
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

namespace {

// Telemetry read for the ledger: the whole file (the sampler keeps it under
// telemetry::kMaxPoints lines, far below this).
constexpr size_t kLedgerTelemetryBytes = 8 << 20;
// Read for the job.gpu_idle check: the latest few points.
constexpr size_t kIdleCheckTelemetryBytes = 8 << 10;

}  // namespace

std::function<double(int)> UsageMeter::SharesOf(const ActiveJob& a, size_t replica) {
  std::vector<scheduler::GpuShare> shares;
  if (replica < a.placed.size()) shares = a.placed[replica].gpus;
  return [shares = std::move(shares)](int gpu) {
    for (const scheduler::GpuShare& s : shares) {
      if (s.gpu == gpu) return s.fraction;
    }
    return 1.0;  // a GPU the executor gave (Slurm's are the task's own)
  };
}

bool UsageMeter::MayUseGpus(const ActiveJob& a, size_t replica) {
  if (replica < a.placed.size()) return !a.placed[replica].gpus.empty();
  // Placed by the executor (Slurm): the job asks for accelerators somewhere.
  for (const spec::WorkerPoolSpec& pool : a.job.job_spec.worker_pool_specs) {
    if (pool.machine_spec.accelerator_count > 0) return true;
  }
  return false;
}

void UsageMeter::RecordAttempt(ActiveJob& a, const std::vector<exec::ReplicaStatus>& st,
                               const std::string& end) {
  std::map<std::string, cost::ReplicaTimes> times;
  for (const exec::ReplicaStatus& r : st) times[r.name] = {r.start_us, r.end_us};
  std::vector<store::UsageRecord> rows = cost::AttemptUsage(a.rec, times, end, clock_.NowMicros());
  for (store::UsageRecord& u : rows) {
    auto it = std::find(a.replicas.begin(), a.replicas.end(), u.replica);
    if (it == a.replicas.end() || files_ == nullptr) continue;
    const auto i = static_cast<size_t>(it - a.replicas.begin());
    if (!MayUseGpus(a, i)) continue;
    telemetry::GpuUse use =
        telemetry::UseOfGpus(telemetry::ParsePoints(files_->ReadTelemetry(
                                 a.rec.id, a.rec.attempt, u.replica, kLedgerTelemetryBytes)),
                             SharesOf(a, i));
    if (use.sampled_s <= 0) continue;
    // The sampler's last period may run past the trainer's exit: scale to
    // the run, keeping the busy and energy rates.
    const double scale = use.sampled_s > u.seconds() ? u.seconds() / use.sampled_s : 1;
    u.sampled_seconds = use.sampled_s * scale;
    u.busy_gpu_seconds = use.busy_gpu_s * scale;
    if (use.energy_j) u.energy_joules = *use.energy_j * scale;
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

void UsageMeter::WatchGpus() {
  if (config_.gpu_telemetry_seconds <= 0) return;
  const int64_t now = clock_.NowMicros();
  const auto interval_us = static_cast<int64_t>(config_.gpu_telemetry_seconds * 1e6);
  if (gpu_check_us_ != 0 && now - gpu_check_us_ < interval_us) return;
  const int64_t previous = gpu_check_us_;
  gpu_check_us_ = now;
  if (sample_gpus_ && metrics_) metrics_->SetGpuSample(sample_gpus_());
  if (files_ == nullptr) return;
  for (auto& [id, a] : table_.active) {
    if (a.rec.state != JobState::kRunning || a.rec.start_time_us == 0) continue;
    const int64_t since = std::max(previous, a.rec.start_time_us);
    // The job's GPUs' use, weighted by its shares, from each replica's
    // latest point taken since the last check.
    double busy = 0, shares = 0;
    for (size_t i = 0; i < a.replicas.size(); ++i) {
      if (!MayUseGpus(a, i)) continue;
      std::vector<telemetry::Point> points = telemetry::ParsePoints(
          files_->ReadTelemetry(a.rec.id, a.rec.attempt, a.replicas[i], kIdleCheckTelemetryBytes));
      if (points.empty() || points.back().t * 1e6 < static_cast<double>(since)) continue;
      const std::function<double(int)> share_of = SharesOf(a, i);
      for (const telemetry::GpuPoint& g : points.back().gpus) {
        busy += telemetry::ReplicaGpuPercent(g, share_of(g.index));
        shares += share_of(g.index);
      }
    }
    if (shares > 0) {
      CheckGpuIdle(a, busy / shares, since, now);
    } else {
      a.gpu_idle_since_us = 0;  // no fresh sample: a gap is not idle time
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
