#include "cost/accounting.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <tuple>

#include "common/time.h"

namespace stoker::cost {
namespace {

using nlohmann::json;

std::string Money(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.2f", usd);
  return buf;
}

std::string Hours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", h);
  return buf;
}

bool Running(spec::JobState s) {
  return s == spec::JobState::kRunning || s == spec::JobState::kCancelling;
}

}  // namespace

std::string BudgetState::Describe() const {
  std::string out = budget.scope + ": ";
  std::vector<std::string> parts;
  if (budget.monthly_usd) {
    if (used_usd) {
      parts.push_back(Money(*used_usd) + " of " + Money(*budget.monthly_usd) + " (" + budget.price +
                      " price)");
    } else {
      parts.push_back("? of " + Money(*budget.monthly_usd) + " (" + budget.price + " price; " +
                      no_price + ")");
    }
  }
  if (budget.monthly_gpu_hours) {
    parts.push_back(Hours(used_gpu_hours) + " of " + Hours(*budget.monthly_gpu_hours) +
                    " GPU-hours");
  }
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " and " : "") + parts[i];
  return out + " used in " + month.name;
}

json ToJson(const BudgetState& s) {
  const store::Budget& b = s.budget;
  return {{"scope", b.scope},
          {"monthlyUsd", b.monthly_usd ? json(*b.monthly_usd) : json()},
          {"monthlyGpuHours", b.monthly_gpu_hours ? json(*b.monthly_gpu_hours) : json()},
          {"price", b.price},
          {"warnAt", b.warn_at},
          {"stopRunning", b.stop_running},
          {"updateTime", FormatRfc3339(b.update_time_us)},
          {"updatedBy", b.updated_by},
          {"month", s.month.name},
          {"usedUsd", s.used_usd ? json(*s.used_usd) : json()},
          {"noPrice", s.no_price},
          {"usedGpuHours", s.used_gpu_hours},
          {"warning", s.warn},
          {"exceeded", s.exceeded},
          {"summary", s.Describe()}};
}

Accountant::Accountant(store::Store& store, Catalog catalog, NodeShape node, const Clock& clock)
    : store_(store), catalog_(std::move(catalog)), node_(node), clock_(clock) {}

std::vector<store::UsageRecord> Accountant::RunningRows(
    const std::vector<store::JobRecord>& jobs, const std::vector<store::UsageRecord>& ledger,
    int64_t now_us) const {
  std::set<std::pair<int64_t, int>> recorded;
  for (const store::UsageRecord& u : ledger) recorded.insert({u.job_id, u.attempt});
  std::vector<store::UsageRecord> out;
  for (const store::JobRecord& j : jobs) {
    if (!Running(j.state) || recorded.count({j.id, j.attempt})) continue;
    for (store::UsageRecord& u : AttemptUsage(j, {}, "running", now_us))
      out.push_back(std::move(u));
  }
  return out;
}

Result<std::vector<store::UsageRecord>> Accountant::JobRows(const store::JobRecord& job) {
  STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> rows, store_.JobUsage(job.id));
  for (store::UsageRecord& u : RunningRows({job}, rows, clock_.NowMicros())) {
    rows.push_back(std::move(u));
  }
  return rows;
}

Result<std::vector<store::UsageRecord>> Accountant::StudyRows(int64_t study_id) {
  STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> rows, store_.StudyUsage(study_id));
  STOKER_ASSIGN_OR_RETURN(std::vector<store::JobRecord> active, store_.RunningJobs());
  std::vector<store::JobRecord> trials;
  for (store::JobRecord& j : active) {
    if (j.study_id == study_id) trials.push_back(std::move(j));
  }
  for (store::UsageRecord& u : RunningRows(trials, rows, clock_.NowMicros())) {
    rows.push_back(std::move(u));
  }
  return rows;
}

Result<std::vector<store::UsageRecord>> Accountant::RowsBetween(int64_t from_us, int64_t to_us) {
  STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> rows,
                          store_.UsageBetween(from_us, to_us));
  STOKER_ASSIGN_OR_RETURN(std::vector<store::JobRecord> active, store_.RunningJobs());
  for (store::UsageRecord& u : RunningRows(active, rows, clock_.NowMicros())) {
    rows.push_back(std::move(u));
  }
  return Clip(std::move(rows), from_us, to_us);
}

Result<std::vector<BudgetState>> Accountant::ComputeStates(int64_t now) {
  std::vector<store::Budget> budgets;
  uint64_t generation;
  {
    std::lock_guard lock(mu_);
    if (!budgets_) {
      STOKER_ASSIGN_OR_RETURN(std::vector<store::Budget> b, store_.Budgets());
      budgets_ = std::move(b);
    }
    budgets = *budgets_;
    generation = generation_;
  }
  std::vector<BudgetState> states;
  if (!budgets.empty()) {
    Month month = MonthOf(now);
    STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> rows,
                            RowsBetween(month.start_us, month.end_us));
    for (const store::Budget& b : budgets) {
      BudgetState s;
      s.budget = b;
      s.month = month;
      std::vector<store::UsageRecord> mine;
      for (const store::UsageRecord& u : rows) {
        if (InScope(b.scope, u.user, u.project, u.labels)) mine.push_back(u);
      }
      Totals t = Total(mine, catalog_, node_);
      s.used_gpu_hours = t.gpu_seconds / 3600;
      PriceKind kind = ParsePriceKind(b.price).value_or(PriceKind::kVertex);
      s.used_usd = t.usd[kind];
      if (!s.used_usd) {
        for (const std::string& why : t.no_price[kind]) {
          s.no_price += (s.no_price.empty() ? "" : "; ") + why;
        }
      }
      auto check = [&](std::optional<double> used, std::optional<double> limit) {
        if (!used || !limit) return;
        if (*used >= *limit) s.exceeded = true;
        if (*used >= *limit * b.warn_at) s.warn = true;
      };
      check(s.used_usd, b.monthly_usd);
      check(s.used_gpu_hours, b.monthly_gpu_hours);
      states.push_back(std::move(s));
    }
  }
  std::lock_guard lock(mu_);
  if (generation == generation_) {
    states_ = states;
    states_us_ = now;
  }
  return states;
}

Result<std::vector<BudgetState>> Accountant::BudgetStates() {
  const int64_t now = clock_.NowMicros();
  {
    std::lock_guard lock(mu_);
    if (states_ &&
        (refresher_running_ || now - states_us_ < int64_t{kRefreshSeconds} * 1'000'000)) {
      return *states_;
    }
  }
  return ComputeStates(now);
}

std::optional<std::vector<BudgetState>> Accountant::LastBudgetStates() {
  {
    std::lock_guard lock(mu_);
    if (refresher_running_) return states_;
  }
  auto states = BudgetStates();
  if (!states.ok()) return std::nullopt;
  return std::move(states).value();
}

void Accountant::StartRefresher() {
  std::lock_guard lock(mu_);
  if (refresher_running_) return;
  refresher_running_ = true;
  refresher_ = std::thread([this] {
    // Linux nices threads one by one: the scan yields to the control loop and the API.
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      (void)ComputeStates(clock_.NowMicros());
      lock.lock();
      cv_.wait_for(lock, std::chrono::seconds(kRefreshSeconds), [this] { return stop_; });
    }
  });
}

void Accountant::StopRefresher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
  std::lock_guard lock(mu_);
  refresher_running_ = false;
}

Accountant::~Accountant() { StopRefresher(); }

Status Accountant::CheckSubmission(const std::string& user, const std::string& project,
                                   const json& labels, std::vector<std::string>* warnings) {
  {
    std::lock_guard lock(mu_);
    if (budgets_ && budgets_->empty()) return OkStatus();  // the common case: no scan
  }
  STOKER_ASSIGN_OR_RETURN(std::vector<BudgetState> states, BudgetStates());
  for (const BudgetState& s : states) {
    if (!InScope(s.budget.scope, user, project, labels)) continue;
    if (s.exceeded) {
      return ResourceExhausted(
          "budget " + s.Describe() + ": new jobs in this scope are refused until " + s.month.name +
          " ends (" + FormatRfc3339(s.month.end_us) +
          "), or until an admin raises the limit (stoker budgets set " + s.budget.scope + " ...)");
    }
    if (s.warn && warnings) {
      warnings->push_back("warning: budget " + s.Describe() + " (warning at " +
                          std::to_string(static_cast<int>(s.budget.warn_at * 100 + 0.5)) + "%)");
    }
  }
  return OkStatus();
}

Status Accountant::PutBudget(const store::Budget& b) {
  STOKER_RETURN_IF_ERROR(ValidateScope(b.scope));
  if (!b.monthly_usd && !b.monthly_gpu_hours) {
    return InvalidArgument("budget " + b.scope +
                           ": give monthlyUsd (--monthly-usd) or monthlyGpuHours "
                           "(--monthly-gpu-hours), or both");
  }
  if (b.monthly_usd && !(*b.monthly_usd >= 0)) {
    return InvalidArgument("monthlyUsd: must be a number >= 0, not " +
                           std::to_string(*b.monthly_usd));
  }
  if (b.monthly_gpu_hours && !(*b.monthly_gpu_hours >= 0)) {
    return InvalidArgument("monthlyGpuHours: must be a number >= 0, not " +
                           std::to_string(*b.monthly_gpu_hours));
  }
  if (!ParsePriceKind(b.price)) {
    return InvalidArgument("price: '" + b.price +
                           "' is not one of vertex, compute-engine, spot, own");
  }
  if (!(b.warn_at > 0 && b.warn_at <= 1)) {
    return InvalidArgument("warnAt: must be a fraction in (0, 1], e.g. 0.8, not " +
                           std::to_string(b.warn_at));
  }
  STOKER_RETURN_IF_ERROR(store_.PutBudget(b));
  std::lock_guard lock(mu_);
  budgets_.reset();
  states_.reset();
  ++generation_;
  return OkStatus();
}

Status Accountant::DeleteBudget(const std::string& scope) {
  STOKER_RETURN_IF_ERROR(store_.DeleteBudget(scope));
  std::lock_guard lock(mu_);
  budgets_.reset();
  states_.reset();
  ++generation_;
  return OkStatus();
}

}  // namespace stoker::cost
