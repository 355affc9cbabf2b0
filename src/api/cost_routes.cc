// Usage, prices and budgets (docs/cost.md):
//   GET    /v1/usage?groupBy=user|project|month|job|label:KEY&startTime=&endTime=&days=N
//          {"startTime", "endTime", "groupBy", "groups": [{"key", "jobs", ...totals}],
//           "total": {...totals}, "catalog": {"region", "priceDate", "regions"}}
//          each row priced in its job's region; "regions" lists those of the rows
//   GET    /v1/usage:breakEven?days=N        buy vs rent from the last N days (default 30)
//   POST   /v1/cost:estimate?region=R        body: a CustomJob or a bare CustomJobSpec
//          {"pools": [...], "usdPerHour": {...}, "timeoutHours", "usdAtTimeout": {...}}
//          priced in R (Catalog::RegionFor; default: the config's cost.region)
//   GET    /v1/budgets                       {"budgets": [BudgetState]}
//   PUT    /v1/budgets/{scope}               admin: {"monthlyUsd", "monthlyGpuHours",
//                                            "price", "warnAt", "stopRunning"}
//   DELETE /v1/budgets/{scope}               admin
// A job's and a study's own usage and cost ride in their GET as stoker.usage,
// priced in the region of their location (Catalog::RegionFor).
// Callers with the user role see only their own usage.
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "api/routes.h"
#include "common/time.h"
#include "cost/break_even.h"

namespace stoker::api {
namespace {

using nlohmann::json;

constexpr int64_t kDayUs = 86'400'000'000;

Status NoAccounting() {
  return FailedPrecondition("this daemon keeps no usage ledger (it was started without one)");
}

// startTime/endTime (RFC 3339) or days=N back from now; default: this month.
struct Window {
  int64_t from_us = 0;
  int64_t to_us = 0;
};
Result<Window> ParseWindow(const http::Request& req, int64_t now_us, int default_days) {
  Window w;
  w.to_us = now_us;
  if (default_days > 0) {
    w.from_us = now_us - default_days * kDayUs;
  } else {
    w.from_us = cost::MonthOf(now_us).start_us;
  }
  if (auto it = req.query.find("days"); it != req.query.end()) {
    char* end = nullptr;
    double days = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !(days > 0) || days > 3660) {
      return InvalidArgument("days: must be a number of days above 0 (at most 3660), got '" +
                             it->second + "'");
    }
    w.from_us = now_us - static_cast<int64_t>(days * kDayUs);
  }
  for (const char* key : {"startTime", "endTime"}) {
    auto it = req.query.find(key);
    if (it == req.query.end()) continue;
    auto t = ParseRfc3339Micros(it->second);
    if (!t) {
      return InvalidArgument(std::string(key) + ": '" + it->second +
                             "' is not an RFC 3339 time like 2026-11-01T00:00:00Z");
    }
    (std::string(key) == "startTime" ? w.from_us : w.to_us) = *t;
  }
  if (w.from_us >= w.to_us) return InvalidArgument("startTime: must be before endTime");
  return w;
}

// The key of `u` when grouped by `by`; InvalidArgument for an unknown grouping.
Result<std::string> GroupKey(const std::string& by, const store::UsageRecord& u) {
  if (by == "user") return u.user.empty() ? std::string("(local)") : u.user;
  if (by == "project") return u.project;
  if (by == "month") return cost::MonthOf(u.start_us).name;
  if (by == "job") return std::to_string(u.job_id);
  if (by == "gpu") return u.gpu_type.empty() ? std::string("(none)") : u.gpu_type;
  if (by.rfind("label:", 0) == 0 && by.size() > 6) {
    auto it = u.labels.find(by.substr(6));
    return it != u.labels.end() && it->is_string() ? it->get<std::string>()
                                                   : std::string("(unlabelled)");
  }
  return InvalidArgument("groupBy: '" + by +
                         "' is not one of user, project, month, job, gpu, label:KEY");
}

// The rows that `caller` may see.
std::vector<store::UsageRecord> Visible(std::vector<store::UsageRecord> rows,
                                        const auth::Principal& caller) {
  std::vector<store::UsageRecord> out;
  for (store::UsageRecord& u : rows) {
    if (auth::CanSee(caller, u.user)) out.push_back(std::move(u));
  }
  return out;
}

json CatalogJson(const cost::Catalog& c, const std::string& region = "") {
  const std::string& r = region.empty() ? c.region() : region;
  return {{"region", r},
          {"priceDate", c.price_date()},
          {"usdPerTrainingUnit", cost::Catalog::TrainingUnitUsd(r)}};
}

// The location in a rendered resource's name (projects/P/locations/L/...); "" when none.
std::string LocationOf(const json& rendered) {
  static const std::regex kName(R"(^projects/[^/]+/locations/([^/]+)/)");
  std::smatch m;
  const std::string name = rendered.is_object() ? rendered.value("name", "") : "";
  return std::regex_search(name, m, kName) ? std::string(m[1]) : std::string();
}

http::Response Usage(const ApiDeps& d, const http::Request& req, const auth::Principal& caller) {
  auto w = ParseWindow(req, NowMicros(), 0);
  if (!w.ok()) return Error(w.status());
  std::string by = req.query.count("groupBy") ? req.query.at("groupBy") : "user";
  auto rows = d.accountant->RowsBetween(w->from_us, w->to_us);
  if (!rows.ok()) return Error(rows.status());
  std::vector<store::UsageRecord> mine = Visible(std::move(rows).value(), caller);
  std::map<std::string, std::vector<store::UsageRecord>> groups;
  for (const store::UsageRecord& u : mine) {
    auto key = GroupKey(by, u);
    if (!key.ok()) return Error(key.status());
    groups[*key].push_back(u);
  }
  if (mine.empty()) {  // still reject a bad groupBy
    auto key = GroupKey(by, store::UsageRecord{});
    if (!key.ok()) return Error(key.status());
  }
  auto jobs_of = [](const std::vector<store::UsageRecord>& r) {
    std::set<int64_t> ids;
    for (const store::UsageRecord& u : r) ids.insert(u.job_id);
    return static_cast<int>(ids.size());
  };
  // Each row is priced in its job's region (cost::Total): list them all.
  std::set<std::string> regions;
  for (const store::UsageRecord& u : mine) {
    regions.insert(d.accountant->catalog().RegionFor(u.location));
  }
  json out = {{"startTime", FormatRfc3339(w->from_us)},
              {"endTime", FormatRfc3339(w->to_us)},
              {"groupBy", by},
              {"groups", json::array()},
              {"catalog", CatalogJson(d.accountant->catalog())}};
  out["catalog"]["regions"] = regions;
  for (const auto& [key, r] : groups) {
    json g = cost::ToJson(d.accountant->Price(r));
    g["key"] = key;
    g["jobs"] = jobs_of(r);
    out["groups"].push_back(std::move(g));
  }
  out["total"] = cost::ToJson(d.accountant->Price(mine));
  out["total"]["jobs"] = jobs_of(mine);
  return Json(out);
}

http::Response BreakEvenRoute(const ApiDeps& d, const http::Request& req,
                              const auth::Principal& caller) {
  auto w = ParseWindow(req, NowMicros(), 30);
  if (!w.ok()) return Error(w.status());
  if (req.query.count("startTime") || req.query.count("endTime")) {
    return Error(
        InvalidArgument("startTime, endTime: the break-even uses days=N (the last N days)"));
  }
  if (caller.role == auth::Role::kUser) {
    return Error(
        PermissionDenied("the break-even is the whole node's: it needs the viewer or admin role"));
  }
  auto rows = d.accountant->RowsBetween(w->from_us, w->to_us);
  if (!rows.ok()) return Error(rows.status());
  double days = (w->to_us - w->from_us) / double(kDayUs);
  json out = cost::ToJson(cost::ComputeBreakEven(*rows, days, d.accountant->catalog(),
                                                 d.accountant->node(), NowMicros()));
  out["catalog"] = CatalogJson(d.accountant->catalog());
  return Json(out);
}

json RateJson(const cost::CloudPrice& p, double replicas) {
  auto times = [replicas](const std::optional<double>& v) {
    return v ? json(*v * replicas) : json();
  };
  return {{"vertex", times(p.vertex_usd_per_hour)},
          {"compute-engine", times(p.compute_engine_usd_per_hour)},
          {"spot", times(p.spot_usd_per_hour)}};
}

http::Response Estimate(const ApiDeps& d, const http::Request& req) {
  const cost::Catalog& catalog = d.accountant->catalog();
  std::string region = catalog.region();
  if (auto it = req.query.find("region"); it != req.query.end() && !it->second.empty()) {
    region = catalog.RegionFor(it->second);
    if (Status s = catalog.CheckRegion(region, "region"); !s.ok()) return Error(s);
  }
  json j = json::parse(req.body, nullptr, false);
  if (!j.is_object()) {
    return Error(InvalidArgument("request body: expected a CustomJob or a CustomJobSpec object"));
  }
  auto job = spec::ParseCustomJob(j);
  if (!job.ok()) return Error(job.status());
  json pools = json::array();
  std::map<std::string, std::optional<double>> total = {
      {"vertex", 0.0}, {"compute-engine", 0.0}, {"spot", 0.0}, {"own", 0.0}};
  std::vector<std::string> reasons, notes;
  const auto& specs = job->job_spec.worker_pool_specs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const spec::WorkerPoolSpec& pool = specs[i];
    if (pool.empty || pool.replica_count == 0) continue;
    const double n = static_cast<double>(pool.replica_count);
    cost::CloudPrice p = catalog.PriceReplica(pool.machine_spec, region);
    json pj = {{"pool", i},
               {"machineType", pool.machine_spec.machine_type},
               {"replicaCount", pool.replica_count},
               {"basis", p.basis},
               {"confidence", p.confidence},
               {"usdPerHour", RateJson(p, n)}};
    if (!p.reason.empty()) {
      pj["noPrice"] = p.reason;
      reasons.push_back(p.reason);
    }
    for (const std::string& note : p.notes) notes.push_back(note);
    // Own hardware: the GPUs it asks for, plus the host share by its vCPUs.
    std::string why;
    std::optional<double> own = 0.0;
    const spec::MachineSpec& m = pool.machine_spec;
    std::string gpu_type = m.accelerator_type;
    double gpus = m.accelerator_count;
    if (auto shape = resources::LookupMachineType(m.machine_type, {}); shape) {
      if (gpu_type.empty() && shape->gpu_count > 0) {
        gpu_type = shape->gpu_type;
        gpus = shape->gpu_count;
      }
      double fraction = d.accountant->node().cpus > 0
                            ? std::min(1.0, shape->vcpus / d.accountant->node().cpus)
                            : 0;
      if (auto host = catalog.OwnNodeUsdPerHour(fraction)) *own += *host;
    }
    if (!gpu_type.empty() && gpus > 0) {
      auto g = catalog.OwnGpuUsdPerHour(gpu_type, gpus, &why);
      if (g) {
        *own += *g;
      } else {
        own.reset();
      }
    }
    pj["usdPerHour"]["own"] = own ? json(*own * n) : json();
    if (!own) pj["noPriceOwn"] = why;
    for (auto& [kind, v] : total) {
      const json& r = pj["usdPerHour"][kind];
      if (r.is_number() && v) {
        *v += r.get<double>();
      } else {
        v.reset();
      }
    }
    pools.push_back(std::move(pj));
  }
  double timeout_h = job->job_spec.scheduling.timeout_seconds / 3600;
  json per_hour = json::object(), at_timeout = json::object();
  for (const auto& [kind, v] : total) {
    per_hour[kind] = v ? json(*v) : json();
    at_timeout[kind] = v ? json(*v * timeout_h) : json();
  }
  return Json({{"pools", pools},
               {"usdPerHour", per_hour},
               {"timeoutHours", timeout_h},
               {"usdAtTimeout", at_timeout},
               {"noPrice", reasons},
               {"notes", notes},
               {"catalog", CatalogJson(catalog, region)}});
}

http::Response Budgets(const ApiDeps& d) {
  auto states = d.accountant->BudgetStates();
  if (!states.ok()) return Error(states.status());
  json out = {{"budgets", json::array()}};
  for (const cost::BudgetState& s : *states) out["budgets"].push_back(cost::ToJson(s));
  return Json(out);
}

Result<store::Budget> ParseBudget(const std::string& scope, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) {
    return InvalidArgument(
        "request body: expected {\"monthlyUsd\": 100, \"monthlyGpuHours\": 50, \"price\": "
        "\"vertex\", \"warnAt\": 0.8, \"stopRunning\": false}");
  }
  store::Budget b;
  b.scope = scope;
  for (auto& [key, v] : j.items()) {
    if (key == "monthlyUsd" || key == "monthlyGpuHours") {
      if (v.is_null()) continue;
      if (!v.is_number()) return InvalidArgument(key + ": must be a number >= 0");
      (key == "monthlyUsd" ? b.monthly_usd : b.monthly_gpu_hours) = v.get<double>();
    } else if (key == "price") {
      if (!v.is_string()) return InvalidArgument("price: use vertex, compute-engine, spot or own");
      b.price = v.get<std::string>();
    } else if (key == "warnAt") {
      if (!v.is_number()) return InvalidArgument("warnAt: must be a fraction in (0, 1], e.g. 0.8");
      b.warn_at = v.get<double>();
    } else if (key == "stopRunning") {
      if (!v.is_boolean()) return InvalidArgument("stopRunning: must be true or false");
      b.stop_running = v.get<bool>();
    } else {
      return InvalidArgument("unknown field '" + key +
                             "' (known: monthlyUsd, monthlyGpuHours, price, warnAt, stopRunning)");
    }
  }
  return b;
}

}  // namespace

void AddJobUsage(const ApiDeps& d, const store::JobRecord& r, json& rendered) {
  if (d.accountant == nullptr) return;
  auto rows = d.accountant->JobRows(r);
  if (!rows.ok()) return;
  const std::string region = d.accountant->catalog().RegionFor(r.location);
  rendered["stoker"]["usage"] = cost::ToJson(d.accountant->Price(*rows, region));
}

namespace {

// Training units: the Compute Engine price in the job's region at AI
// Platform's rate there ($0.49 Americas, $0.54 Europe and Asia-Pacific).
void PutConsumedMlUnits(const ApiDeps& d, const std::vector<store::UsageRecord>& rows,
                        const std::string& location, json& rendered) {
  if (rows.empty()) return;
  const std::string region = d.accountant->catalog().RegionFor(location);
  std::optional<double> usd =
      d.accountant->Price(rows, region).usd[cost::PriceKind::kComputeEngine];
  if (!usd) return;  // no price: no number, rather than a wrong one
  rendered["trainingOutput"]["consumedMLUnits"] = *usd / cost::Catalog::TrainingUnitUsd(region);
}

}  // namespace

void AddConsumedMlUnits(const ApiDeps& d, const store::JobRecord& r, json& rendered) {
  if (d.accountant == nullptr || r.study_id != 0) return;
  auto rows = d.accountant->JobRows(r);
  if (rows.ok()) PutConsumedMlUnits(d, *rows, r.location, rendered);
}

void AddStudyConsumedMlUnits(const ApiDeps& d, int64_t study_id, json& rendered) {
  if (d.accountant == nullptr) return;
  auto rows = d.accountant->StudyRows(study_id);
  std::string location;  // an AI Platform job names its region in trainingInput
  if (rendered.contains("trainingInput") && rendered["trainingInput"].is_object()) {
    location = rendered["trainingInput"].value("region", "");
  }
  if (rows.ok()) PutConsumedMlUnits(d, *rows, location, rendered);
}

void AddStudyUsage(const ApiDeps& d, int64_t study_id, json& rendered) {
  if (d.accountant == nullptr) return;
  auto rows = d.accountant->StudyRows(study_id);
  if (!rows.ok()) return;
  const std::string region = d.accountant->catalog().RegionFor(LocationOf(rendered));
  std::map<int64_t, std::vector<store::UsageRecord>> by_job;
  for (const store::UsageRecord& u : *rows) by_job[u.job_id].push_back(u);
  auto trials = d.store->Trials(study_id);
  if (trials.ok()) {
    size_t i = 0;
    for (const store::TrialRecord& t : *trials) {
      if (i >= rendered["trials"].size()) break;
      rendered["trials"][i++]["stoker"]["usage"] =
          cost::ToJson(d.accountant->Price(by_job[t.job_id], region));
    }
  }
  rendered["stoker"]["usage"] = cost::ToJson(d.accountant->Price(*rows, region));
}

Status CheckBudgets(const ApiDeps& d, const std::string& user, const std::string& project,
                    const json& labels, std::vector<std::string>* warnings) {
  if (d.accountant == nullptr) return OkStatus();
  return d.accountant->CheckSubmission(user, project, labels, warnings);
}

std::optional<http::Response> HandleCostRoutes(const ApiDeps& d, const http::Request& req,
                                               const auth::Principal& caller) {
  static const std::regex kBudget(R"(^/v1/budgets/([^/]+)$)");
  const std::string& path = req.path;
  std::smatch m;
  bool ours = path == "/v1/usage" || path == "/v1/usage:breakEven" || path == "/v1/cost:estimate" ||
              path == "/v1/budgets" || std::regex_match(path, m, kBudget);
  if (!ours) return std::nullopt;
  if (d.accountant == nullptr) return Error(NoAccounting());
  auto wrong_method = [&] {
    return Error(InvalidArgument("method " + req.method + " is not supported on " + path));
  };
  if (path == "/v1/usage") return req.method == "GET" ? Usage(d, req, caller) : wrong_method();
  if (path == "/v1/usage:breakEven") {
    return req.method == "GET" ? BreakEvenRoute(d, req, caller) : wrong_method();
  }
  if (path == "/v1/cost:estimate") return req.method == "POST" ? Estimate(d, req) : wrong_method();
  if (path == "/v1/budgets") return req.method == "GET" ? Budgets(d) : wrong_method();
  // /v1/budgets/{scope}
  std::string scope = m[1];
  if (req.method != "PUT" && req.method != "DELETE") return wrong_method();
  if (caller.role != auth::Role::kAdmin) {
    return Error(PermissionDenied("only admins set and remove budgets (your role is " +
                                  std::string(auth::RoleName(caller.role)) + ")"));
  }
  if (Status s = cost::ValidateScope(scope); !s.ok()) return Error(s);
  if (req.method == "DELETE") {
    Status s = d.accountant->DeleteBudget(scope);
    return s.ok() ? Json(json::object()) : Error(s);
  }
  auto b = ParseBudget(scope, req.body);
  if (!b.ok()) return Error(b.status());
  b->updated_by = caller.user;
  if (Status s = d.accountant->PutBudget(*b); !s.ok()) return Error(s);
  auto states = d.accountant->BudgetStates();
  if (states.ok()) {
    for (const cost::BudgetState& s : *states) {
      if (s.budget.scope == scope) return Json(cost::ToJson(s));
    }
  }
  return Json(json::object());
}

}  // namespace stoker::api
