// A job's resource telemetry (docs/telemetry.md):
//   GET .../customJobs/{id}/telemetry[?attempt=N]  every replica's samples and summary
//   GET /v1/stoker/top                             the running jobs' latest samples
// Samples are read from each replica's telemetry.jsonl (written by its
// supervisor, bounded by it) at request time: nothing is copied into the
// store, and retention removes them with the job's files.
#include <cstdlib>
#include <regex>

#include "api/routes.h"
#include "telemetry/telemetry.h"

namespace stoker::api {
namespace {

using nlohmann::json;

// A sampler keeps its file under ~1,000 points of a few hundred bytes.
constexpr size_t kMaxTelemetryBytes = 4 << 20;

std::vector<std::string> ReplicasOf(const store::JobRecord& r) {
  std::vector<std::string> names;
  if (r.allocation.is_object() && r.allocation.contains("replicas")) {
    for (const json& x : r.allocation["replicas"]) {
      if (x.contains("name") && x["name"].is_string()) names.push_back(x["name"]);
    }
  }
  return names;
}

// One replica's samples and summary, as the API shows them.
json ReplicaTelemetry(const ApiDeps& d, const store::JobRecord& r, int attempt,
                      const std::string& replica, bool with_points) {
  std::vector<telemetry::Point> points =
      telemetry::ParsePoints(d.files->ReadTelemetry(r.id, attempt, replica, kMaxTelemetryBytes));
  json out = {{"replica", replica}, {"attempt", attempt + 1}};
  if (with_points) {
    json pts = json::array();
    for (const telemetry::Point& p : points) pts.push_back(telemetry::PointJson(p));
    out["points"] = std::move(pts);
  } else if (!points.empty()) {
    out["latest"] = telemetry::PointJson(points.back());
  }
  if (std::optional<telemetry::Summary> s = telemetry::Summarize(points)) {
    out["summary"] = telemetry::SummaryJson(*s);
  }
  return out;
}

http::Response JobTelemetry(const ApiDeps& d, const http::Request& req,
                            const auth::Principal& caller, const std::string& project,
                            const std::string& ref) {
  Result<store::JobRecord> rec = VisibleJob(d, project, ref, caller);
  if (!rec.ok()) return Error(rec.status());
  // Attempts are numbered from 1 here, as people count them (the store's
  // first attempt is 0).
  int attempt = rec->attempt;
  if (auto a = req.query.find("attempt"); a != req.query.end()) {
    char* end = nullptr;
    long v = std::strtol(a->second.c_str(), &end, 10);
    if (a->second.empty() || *end != '\0' || v < 1 || v > rec->attempt + 1) {
      return Error(InvalidArgument("attempt: must be a whole number from 1 to " +
                                   std::to_string(rec->attempt + 1) +
                                   " (this job's attempts), got '" + a->second + "'"));
    }
    attempt = static_cast<int>(v) - 1;
  }
  json replicas = json::array();
  for (const std::string& name : ReplicasOf(*rec)) {
    replicas.push_back(ReplicaTelemetry(d, *rec, attempt, name, /*with_points=*/true));
  }
  return Json({{"state", spec::JobStateName(rec->state)},
               {"attempt", attempt + 1},
               {"replicas", std::move(replicas)}});
}

// The running jobs the caller may see, each replica's latest sample.
http::Response Top(const ApiDeps& d, const auth::Principal& caller) {
  Result<std::vector<store::JobRecord>> running = d.store->RunningJobs();
  if (!running.ok()) return Error(running.status());
  json jobs = json::array();
  for (const store::JobRecord& r : *running) {
    if (!auth::CanSee(caller, r.user)) continue;
    json replicas = json::array();
    for (const std::string& name : ReplicasOf(r)) {
      replicas.push_back(ReplicaTelemetry(d, r, r.attempt, name, /*with_points=*/false));
    }
    jobs.push_back({{"id", r.id},
                    {"displayName", r.display_name},
                    {"user", r.user},
                    {"state", spec::JobStateName(r.state)},
                    {"startTime", r.start_time_us},
                    {"replicas", std::move(replicas)}});
  }
  return Json({{"jobs", std::move(jobs)}});
}

}  // namespace

Result<store::JobRecord> VisibleJob(const ApiDeps& d, const std::string& project,
                                    const std::string& ref, const auth::Principal& caller) {
  Result<store::JobRecord> rec = NotFound("");
  char* end = nullptr;
  long long number = std::strtoll(ref.c_str(), &end, 10);
  if (!ref.empty() && *end == '\0' && number > 0) {
    rec = d.store->GetJob(number);
  } else {
    rec = d.store->GetJobByLegacyId(project, ref);  // an AI Platform job's jobId
  }
  if (rec.ok() && auth::CanSee(caller, rec->user)) return rec;
  if (rec.ok() || rec.status().code() == Code::kNotFound) {
    return NotVisible("custom job '" + ref + "'");
  }
  return rec.status();
}

std::optional<http::Response> HandleTelemetryRoutes(const ApiDeps& d, const http::Request& req,
                                                    const auth::Principal& caller) {
  static const std::regex kTelemetry(
      R"(^/v1/projects/([^/]+)/locations/([^/]+)/customJobs/([^/:]+)/telemetry$)");
  std::smatch m;
  if (std::regex_match(req.path, m, kTelemetry)) {
    if (req.method != "GET") return Error(InvalidArgument("telemetry: only GET"));
    return JobTelemetry(d, req, caller, m[1], m[3]);
  }
  if (req.path == "/v1/stoker/top") {
    if (req.method != "GET") return Error(InvalidArgument("/v1/stoker/top: only GET"));
    return Top(d, caller);
  }
  return std::nullopt;
}

}  // namespace stoker::api
