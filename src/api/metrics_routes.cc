// GET /metrics: Prometheus' text format (docs/cost.md, "Prometheus"), for
// viewers and admins (a scrape job sends a viewer's bearer token). Label
// cardinality stays bounded: per user, per budget, per GPU type, and per
// running job only (nothing per finished job).
#include <map>

#include "api/metrics_text.h"
#include "api/routes.h"
#include "common/time.h"
#include "cost/accounting.h"

namespace stoker::api {
namespace {

using cost::PriceKind;

// This month's usage and cost by user, budgets, and the cost of each running job.
Status AddCostMetrics(const ApiDeps& d, MetricsText& m) {
  if (d.accountant == nullptr) return OkStatus();
  cost::Accountant& acct = *d.accountant;
  const cost::Month month = cost::MonthOf(NowMicros());
  STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> rows,
                          acct.RowsBetween(month.start_us, month.end_us));
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

  STOKER_ASSIGN_OR_RETURN(std::vector<store::JobRecord> active, d.store->RunningJobs());
  m.Family("stoker_running_job_cost_usd", "gauge",
           "Cost so far of each running job (all its attempts), by price.");
  for (const store::JobRecord& j : active) {
    if (j.state != spec::JobState::kRunning) continue;
    STOKER_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> job_rows, acct.JobRows(j));
    cost::Totals t = acct.Price(job_rows);
    for (const auto& [kind, usd] : t.usd) {
      if (!usd) continue;
      m.Sample(
          {{"job", std::to_string(j.id)}, {"user", j.user}, {"price", cost::PriceKindName(kind)}},
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
  MetricsText m;
  if (Status s = AddCostMetrics(d, m); !s.ok()) return Error(s);
  http::Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = m.text();
  return r;
}

}  // namespace stoker::api
