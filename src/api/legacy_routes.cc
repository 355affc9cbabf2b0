// AI Platform Training (ml.googleapis.com/v1, reference §6) routes:
//   POST /v1/projects/{p}/jobs                  submit a Job {jobId, trainingInput, labels}
//   GET  /v1/projects/{p}/jobs                  list (filter=state=NAME, pageSize, pageToken)
//   GET  /v1/projects/{p}/jobs/{jobId}          the legacy Job
//   POST /v1/projects/{p}/jobs/{jobId}:cancel   cancel
// A legacy job is a custom job (spec/ai_platform.h converts it) stored with
// its jobId and trainingInput; the customJobs routes reach it by jobId too.
#include <algorithm>
#include <regex>

#include "api/routes.h"
#include "common/time.h"
#include "spec/ai_platform.h"

namespace stoker::api {
namespace {

using nlohmann::json;

constexpr int kDefaultPageSize = 20;  // the legacy API's default
constexpr int kMaxPageSize = 100;

json RenderLegacyJob(const store::JobRecord& r) {
  spec::LegacyJobStatus s;
  s.vertex_state = std::string(spec::JobStateName(r.state));
  s.create_time = FormatRfc3339(r.create_time_us);
  if (r.start_time_us) s.start_time = FormatRfc3339(r.start_time_us);
  if (r.end_time_us) s.end_time = FormatRfc3339(r.end_time_us);
  if (r.error_code) s.error_message = r.error_message;
  if (r.spec.is_object() && r.spec.contains("labels") && r.spec["labels"].is_object()) {
    for (const auto& [k, v] : r.spec["labels"].items()) {
      if (v.is_string()) s.labels[k] = v.get<std::string>();
    }
  }
  return spec::ToLegacyJob(r.legacy_job_id, r.legacy_input, s);
}

http::Response CreateLegacyJob(const ApiDeps& d, const std::string& project,
                               const std::string& body, const auth::Principal& caller) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    return Error(
        InvalidArgument("request body is not valid JSON (send a Job {jobId, trainingInput})"));
  }
  auto training = spec::FromLegacyJob(j);
  if (!training.ok()) return Error(training.status());
  if (!training->hyperparameters.is_null()) {
    return Error(InvalidArgument(
        "trainingInput.hyperparameters: hyperparameter tuning through the AI Platform API is "
        "not supported; submit a Vertex HyperparameterTuningJob instead ('stoker hptuning "
        "submit')"));
  }
  const std::string job_id = j["jobId"].get<std::string>();
  if (auto existing = d.store->GetJobByLegacyId(project, job_id); existing.ok()) {
    return Error(AlreadyExists("jobId: job '" + job_id + "' already exists in project " + project +
                               " (job ids are unique; pick another name)"));
  }
  store::NewJob record;
  record.project = project;
  record.location = training->region.empty() ? "local" : training->region;
  record.legacy_job_id = job_id;
  record.legacy_input = j["trainingInput"];
  record.user = caller.user;
  for (const std::string& f : training->unhonoured) {
    record.warnings.push_back("warning: " + f + " is accepted but has no effect on Stoker");
  }
  if (training->use_chief_in_tf_config) {
    record.warnings.push_back(
        "warning: trainingInput.useChiefInTfConfig is accepted but has no effect on Stoker "
        "(TF_CONFIG always names the primary replica 'chief', as Vertex does)");
  }
  auto rec = CreateCustomJob(d, training->job, record);
  if (!rec.ok()) return Error(rec.status());
  return Json(RenderLegacyJob(*rec));
}

http::Response ListLegacyJobs(const ApiDeps& d, const std::string& project,
                              const http::Request& req, const auth::Principal& caller) {
  int page_size = kDefaultPageSize;
  if (auto it = req.query.find("pageSize"); it != req.query.end() && !it->second.empty()) {
    page_size = std::clamp(std::atoi(it->second.c_str()), 1, kMaxPageSize);
  }
  int64_t after = 0;
  if (auto it = req.query.find("pageToken"); it != req.query.end() && !it->second.empty()) {
    after = std::atoll(it->second.c_str());
  }
  std::string state;  // a legacy state name; "" = any
  if (auto it = req.query.find("filter"); it != req.query.end() && !it->second.empty()) {
    static const std::regex kState(R"re(^\s*state\s*[=:]\s*"?([A-Z_]+)"?\s*$)re");
    std::smatch m;
    if (!std::regex_match(it->second, m, kState) ||
        spec::LegacyStateName(m[1].str()) != m[1].str()) {
      return Error(InvalidArgument(
          "filter: only state=NAME is supported (QUEUED, PREPARING, RUNNING, SUCCEEDED, FAILED, "
          "CANCELLING, CANCELLED), got '" +
          it->second + "'"));
    }
    state = m[1].str();
  }
  json out = {{"jobs", json::array()}};
  int64_t last = 0;
  // The store lists every job by id; the legacy ones of this project are picked here.
  while (static_cast<int>(out["jobs"].size()) < page_size) {
    store::ListOptions opts;
    opts.after_id = after;
    opts.limit = 500;
    auto jobs = d.store->ListJobs(opts);
    if (!jobs.ok()) return Error(jobs.status());
    for (const store::JobRecord& r : *jobs) {
      after = r.id;
      if (r.legacy_job_id.empty() || r.project != project || !auth::CanSee(caller, r.user)) {
        continue;
      }
      if (!state.empty() &&
          spec::LegacyStateName(std::string(spec::JobStateName(r.state))) != state) {
        continue;
      }
      out["jobs"].push_back(RenderLegacyJob(r));
      last = r.id;
      if (static_cast<int>(out["jobs"].size()) == page_size) break;
    }
    if (static_cast<int>(jobs->size()) < opts.limit) break;
  }
  if (static_cast<int>(out["jobs"].size()) == page_size)
    out["nextPageToken"] = std::to_string(last);
  return Json(out);
}

}  // namespace

std::optional<http::Response> HandleLegacyRoutes(const ApiDeps& d, const http::Request& req,
                                                 const auth::Principal& caller) {
  static const std::regex kJobs(R"(^/v1/projects/([^/]+)/jobs$)");
  static const std::regex kJob(R"(^/v1/projects/([^/]+)/jobs/([^/:]+)(:cancel)?$)");
  std::smatch m;
  if (std::regex_match(req.path, m, kJobs)) {
    if (req.method == "POST") return CreateLegacyJob(d, m[1], req.body, caller);
    if (req.method == "GET") return ListLegacyJobs(d, m[1], req, caller);
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
  }
  if (std::regex_match(req.path, m, kJob)) {
    bool cancel = m[3].matched;
    if ((cancel && req.method != "POST") || (!cancel && req.method != "GET")) {
      return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
    }
    auto rec = d.store->GetJobByLegacyId(m[1], m[2]);
    if (!rec.ok()) return Error(rec.status());
    if (!auth::CanSee(caller, rec->user)) return Error(NotVisible("job '" + m[2].str() + "'"));
    if (!cancel) {
      json j = RenderLegacyJob(*rec);
      AddConsumedMlUnits(d, *rec, j);
      return Json(j);
    }
    if (!auth::CanChange(caller, rec->user)) {
      return Error(PermissionDenied("job '" + m[2].str() + "' belongs to '" + rec->user +
                                    "'; only it or an admin may cancel it"));
    }
    Status s = d.store->RequestCancel(rec->id);
    if (!s.ok()) return Error(s);
    d.control_plane->CancelRequested(rec->id);
    return Json(json::object());
  }
  return std::nullopt;
}

}  // namespace stoker::api
