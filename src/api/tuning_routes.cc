// hyperparameterTuningJobs routes (Vertex HyperparameterTuningJob), and the
// metrics push endpoint for trainers that cannot use the hypertune file.
#include <regex>

#include "api/routes.h"
#include "common/files.h"
#include "common/time.h"
#include "spec/study.h"

namespace stoker::api {
namespace {

using nlohmann::json;

json RenderTrial(const store::StudyRecord& s, const store::TrialRecord& t) {
  json j = {{"name", "projects/" + s.project + "/locations/" + s.location + "/studies/" +
                         std::to_string(s.id) + "/trials/" + std::to_string(t.trial_id)},
            {"id", std::to_string(t.trial_id)},
            {"state", store::TrialStateName(t.state)},
            {"parameters", t.parameters},
            {"measurements", t.measurements},
            {"customJob", "projects/" + s.project + "/locations/" + s.location + "/customJobs/" +
                              std::to_string(t.job_id)}};
  if (!t.final_measurement.is_null()) j["finalMeasurement"] = t.final_measurement;
  if (t.start_time_us) j["startTime"] = FormatRfc3339(t.start_time_us);
  if (t.end_time_us) j["endTime"] = FormatRfc3339(t.end_time_us);
  if (!t.infeasible_reason.empty()) j["infeasibleReason"] = t.infeasible_reason;
  if (t.stopped_early) j["stoppedEarly"] = true;  // Stoker extension
  return j;
}

json RenderStudy(const ApiDeps& d, const store::StudyRecord& s) {
  json j = s.spec;
  j["name"] = "projects/" + s.project + "/locations/" + s.location + "/hyperparameterTuningJobs/" +
              std::to_string(s.id);
  j["state"] = spec::JobStateName(s.state);
  j["createTime"] = FormatRfc3339(s.create_time_us);
  j["updateTime"] = FormatRfc3339(s.update_time_us);
  if (s.start_time_us) j["startTime"] = FormatRfc3339(s.start_time_us);
  if (s.end_time_us) j["endTime"] = FormatRfc3339(s.end_time_us);
  if (s.error_code) j["error"] = {{"code", s.error_code}, {"message", s.error_message}};
  j["trials"] = json::array();
  auto trials = d.store->Trials(s.id);
  if (trials.ok()) {
    for (const store::TrialRecord& t : *trials) j["trials"].push_back(RenderTrial(s, t));
  }
  return j;
}

Result<int64_t> ParseStudyId(const std::string& s) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v <= 0) {
    return NotFound("hyperparameter tuning job '" + s + "' does not exist");
  }
  return static_cast<int64_t>(v);
}

http::Response Submit(const ApiDeps& d, const std::string& project, const std::string& location,
                      const std::string& body, const auth::Principal& caller) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) {
    return Error(InvalidArgument("request body: expected a HyperparameterTuningJob JSON object"));
  }
  auto job = spec::ParseHyperparameterTuningJob(j);
  if (!job.ok()) return Error(job.status());
  // Its trials are stored with the lowered priority; a study has no events.
  if (auto lowered = ApplyPriorityCeiling(d, caller.user, job->trial_job_spec); !lowered.ok()) {
    return Error(lowered.status());
  }
  if (Status s = d.admission->AdmitStudy(*job); !s.ok()) return Error(s);
  std::vector<std::string> warnings;  // a study has no events: its trials' jobs carry them
  if (Status s =
          CheckBudgets(d, caller.user, project, j.value("labels", json::object()), &warnings);
      !s.ok()) {
    return Error(s);
  }
  auto rec =
      d.store->CreateStudy(project, location, job->display_name, spec::ToJson(*job), caller.user);
  if (!rec.ok()) return Error(rec.status());
  d.control_plane->StudySubmitted(rec->id);
  return Json(RenderStudy(d, *rec));
}

// POST .../studies/{study}/trials/{trial}:addTrialMeasurement with
// {"measurement": {"stepCount": "3", "metrics": [{"metricId": "m", "value": 0.9}]}}
// (Vertex Vizier's shape). The measurement is appended, in the hypertune
// line format, to the trial's pushed.metrics file, which the study driver
// reads beside the hypertune file.
http::Response AddMeasurement(const ApiDeps& d, int64_t study_id, int64_t trial_id,
                              const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j["measurement"].is_object()) {
    return Error(
        InvalidArgument("body: expected {\"measurement\": {\"stepCount\": \"1\", \"metrics\": "
                        "[{\"metricId\": \"accuracy\", \"value\": 0.9}]}}"));
  }
  const json& m = j["measurement"];
  json line = {{"timestamp", NowMicros() / 1e6}, {"trial", std::to_string(trial_id)}};
  const json& step = m.value("stepCount", json("0"));
  line["global_step"] = step.is_string() ? step.get<std::string>() : step.dump();
  if (!m["metrics"].is_array() || m["metrics"].empty()) {
    return Error(InvalidArgument("measurement.metrics: give at least one {metricId, value}"));
  }
  for (size_t i = 0; i < m["metrics"].size(); ++i) {
    const json& x = m["metrics"][i];
    std::string field = "measurement.metrics[" + std::to_string(i) + "]";
    if (!x["metricId"].is_string() || x["metricId"].get<std::string>().empty()) {
      return Error(InvalidArgument(field + ".metricId: required"));
    }
    if (!x["value"].is_number()) return Error(InvalidArgument(field + ".value: must be a number"));
    line[x["metricId"].get<std::string>()] = std::to_string(x["value"].get<double>());
  }
  auto trials = d.store->Trials(study_id);
  if (!trials.ok()) return Error(trials.status());
  for (const store::TrialRecord& t : *trials) {
    if (t.trial_id != trial_id) continue;
    if (t.state != store::TrialState::kActive && t.state != store::TrialState::kStopping) {
      return Error(FailedPrecondition("trial " + std::to_string(trial_id) + " is " +
                                      std::string(store::TrialStateName(t.state)) +
                                      "; measurements are taken only while it runs"));
    }
    auto job = d.store->GetJob(t.job_id);
    if (!job.ok()) return Error(job.status());
    // The executor keeps it beside the trainer's own reports, never through a link.
    Status s = d.files->AppendPushedMetrics(job->id, job->attempt, "workerpool0-0", line.dump());
    if (!s.ok()) return Error(s);
    return Json(json::object());
  }
  return Error(NotFound("trial " + std::to_string(trial_id) + " of study " +
                        std::to_string(study_id) + " does not exist"));
}

}  // namespace

std::optional<http::Response> HandleTuningRoutes(const ApiDeps& d, const http::Request& req,
                                                 const auth::Principal& caller) {
  static const std::regex kStudies(
      R"(^/v1/projects/([^/]+)/locations/([^/]+)/hyperparameterTuningJobs$)");
  static const std::regex kStudy(
      R"(^/v1/projects/([^/]+)/locations/([^/]+)/hyperparameterTuningJobs/([^/:]+)(:cancel)?$)");
  static const std::regex kMeasure(
      R"(^/v1/projects/([^/]+)/locations/([^/]+)/studies/(\d+)/trials/(\d+):addTrialMeasurement$)");
  std::smatch m;
  if (std::regex_match(req.path, m, kMeasure) && req.method == "POST") {
    auto study = ParseStudyId(m[3]);
    auto trial = ParseStudyId(m[4]);
    if (!study.ok() || !trial.ok()) {
      return Error(NotFound("no trial " + m[4].str() + " in study " + m[3].str()));
    }
    // caller.user is "" for a trainer's push, authenticated by its trial's
    // push key instead of a token (api.cc): the key opens this trial only.
    if (!caller.user.empty()) {
      auto owned = d.store->GetStudy(*study);
      if (!owned.ok()) return Error(owned.status());
      if (!auth::CanChange(caller, owned->user)) {
        return Error(NotVisible("hyperparameter tuning job '" + m[3].str() + "'"));
      }
    }
    return AddMeasurement(d, *study, *trial, req.body);
  }
  if (std::regex_match(req.path, m, kStudies)) {
    if (req.method == "POST") return Submit(d, m[1], m[2], req.body, caller);
    if (req.method != "GET")
      return Error(InvalidArgument("method " + req.method + " is not supported"));
    auto opts = ParseListOptions(req);
    if (!opts.ok()) return Error(opts.status());
    auto list = d.store->ListStudies(*opts);
    if (!list.ok()) return Error(list.status());
    json out = {{"hyperparameterTuningJobs", json::array()}};
    for (const store::StudyRecord& s : *list) {
      if (auth::CanSee(caller, s.user))
        out["hyperparameterTuningJobs"].push_back(RenderStudy(d, s));
    }
    if (static_cast<int>(list->size()) == opts->limit)
      out["nextPageToken"] = std::to_string(list->back().id);
    return Json(out);
  }
  if (std::regex_match(req.path, m, kStudy)) {
    auto id = ParseStudyId(m[3]);
    if (!id.ok()) return Error(id.status());
    auto owned = d.store->GetStudy(*id);
    if (!owned.ok()) return Error(owned.status());
    if (!auth::CanSee(caller, owned->user)) {
      return Error(NotVisible("hyperparameter tuning job '" + m[3].str() + "'"));
    }
    if (m[4].matched && req.method == "POST") {
      if (!auth::CanChange(caller, owned->user)) {
        return Error(PermissionDenied("hyperparameter tuning job " + m[3].str() + " belongs to '" +
                                      owned->user + "'; only it or an admin may cancel it"));
      }
      Status s = d.store->RequestStudyCancel(*id);
      if (!s.ok()) return Error(s);
      d.control_plane->StudyCancelRequested(*id);
      return Json(json::object());
    }
    if (!m[4].matched && req.method == "GET") {
      auto s = d.store->GetStudy(*id);
      if (!s.ok()) return Error(s.status());
      json rendered = RenderStudy(d, *s);
      AddStudyUsage(d, *id, rendered);
      return Json(rendered);
    }
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
  }
  return std::nullopt;
}

}  // namespace stoker::api
