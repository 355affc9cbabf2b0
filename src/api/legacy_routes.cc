// AI Platform Training (ml.googleapis.com/v1, reference §6) routes:
//   POST /v1/projects/{p}/jobs                  submit a Job {jobId, trainingInput, labels}
//   GET  /v1/projects/{p}/jobs                  list both kinds, oldest first (filter=state=NAME,
//                                               pageSize, pageToken)
//   GET  /v1/projects/{p}/jobs/{jobId}          the legacy Job
//   POST /v1/projects/{p}/jobs/{jobId}:cancel   cancel
// A legacy job is a custom job (spec/ai_platform.h converts it) stored with
// its jobId and trainingInput; the customJobs routes reach it by jobId too.
// One with trainingInput.hyperparameters is a tuning job: a study (Vertex
// HyperparameterTuningJob, spec/study.h) stored with its jobId and
// trainingInput, whose trials are custom jobs. One jobId names one job of
// either kind in a project (the store enforces it), so every route here
// takes both; the trainingOutput of a tuning job carries its trials in
// AI Platform's HyperparameterOutput shape (reference §6).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <tuple>

#include "api/routes.h"
#include "common/time.h"
#include "spec/ai_platform.h"
#include "spec/study.h"

namespace stoker::api {
namespace {

// Whether `caller` may cancel job `job_id` of `owner` (its owner or an admin).
Status MayCancel(const auth::Principal& caller, const std::string& owner,
                 const std::string& job_id) {
  if (auth::CanChange(caller, owner)) return OkStatus();
  return PermissionDenied("job '" + job_id + "' belongs to '" + owner +
                          "'; only it or an admin may cancel it");
}

using nlohmann::json;

constexpr int kDefaultPageSize = 20;  // the legacy API's default
constexpr int kMaxPageSize = 100;

std::map<std::string, std::string> LabelsOf(const json& spec) {
  std::map<std::string, std::string> labels;
  if (spec.is_object() && spec.contains("labels") && spec["labels"].is_object()) {
    for (const auto& [k, v] : spec["labels"].items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  return labels;
}

json RenderLegacyJob(const store::JobRecord& r) {
  spec::LegacyJobStatus s;
  s.vertex_state = std::string(spec::JobStateName(r.state));
  s.create_time = FormatRfc3339(r.create_time_us);
  if (r.start_time_us) s.start_time = FormatRfc3339(r.start_time_us);
  if (r.end_time_us) s.end_time = FormatRfc3339(r.end_time_us);
  if (r.error_code) s.error_message = r.error_message;
  s.labels = LabelsOf(r.spec);
  return spec::ToLegacyJob(r.legacy_job_id, r.legacy_input, s);
}

// A parameter value as HyperparameterOutput.hyperparameters has it: a string.
std::string ParameterText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();  // integers as written, doubles in their shortest exact form
}

// One trial as AI Platform's HyperparameterOutput. `metric` is the study's
// objective (hyperparameterMetricTag); the state is that of the trial's job.
json RenderLegacyTrial(const ApiDeps& d, const store::StudyRecord& study,
                       const store::TrialRecord& t, const std::string& metric) {
  json hp = json::object();
  if (t.parameters.is_array()) {
    for (const json& p : t.parameters) {
      if (p.is_object() && p.contains("parameterId") && p.contains("value")) {
        hp[p["parameterId"].get<std::string>()] = ParameterText(p["value"]);
      }
    }
  }
  json out = {{"trialId", std::to_string(t.trial_id)}, {"hyperparameters", hp}};
  if (t.final_measurement.is_object()) {
    const json& m = t.final_measurement;
    for (const json& x : m.value("metrics", json::array())) {
      if (x.value("metricId", "") != metric || !x.contains("value")) continue;
      const json& step = m.value("stepCount", json("0"));
      out["finalMetric"] = {
          {"trainingStep", step.is_string() ? step.get<std::string>() : step.dump()},
          {"objectiveValue", x["value"]}};
    }
  }
  if (t.start_time_us) out["startTime"] = FormatRfc3339(t.start_time_us);
  if (t.end_time_us) out["endTime"] = FormatRfc3339(t.end_time_us);
  std::string state;
  if (auto job = d.store->GetJob(t.job_id); job.ok()) {
    state = spec::LegacyStateName(std::string(spec::JobStateName(job->state)));
  } else {
    state = t.state == store::TrialState::kSucceeded ? "SUCCEEDED" : "QUEUED";
  }
  if (t.state == store::TrialState::kInfeasible) state = "FAILED";
  out["state"] = state;
  out["isTrialStoppedEarly"] = t.stopped_early;
  out["stoker"] = {{"customJob", "projects/" + study.project + "/locations/" + study.location +
                                     "/customJobs/" + std::to_string(t.job_id)}};
  return out;
}

// A tuning job as a legacy Job: trainingOutput with its trials
// (HyperparameterOutput), completedTrialCount (trials that succeeded),
// isHyperparameterTuningJob, hyperparameterMetricTag and, where the daemon
// keeps a ledger, consumedMLUnits (all trials together). `stoker` names the
// Vertex HyperparameterTuningJob behind it.
json RenderLegacyStudy(const ApiDeps& d, const store::StudyRecord& r, bool with_usage) {
  spec::LegacyJobStatus s;
  s.vertex_state = std::string(spec::JobStateName(r.state));
  s.create_time = FormatRfc3339(r.create_time_us);
  if (r.start_time_us) s.start_time = FormatRfc3339(r.start_time_us);
  if (r.end_time_us) s.end_time = FormatRfc3339(r.end_time_us);
  if (r.error_code) s.error_message = r.error_message;
  s.labels = LabelsOf(r.spec);
  std::string metric = "training/hptuning/metric";
  if (r.spec.is_object() && r.spec.contains("studySpec")) {
    const json& metrics = r.spec["studySpec"].value("metrics", json::array());
    if (!metrics.empty()) metric = metrics[0].value("metricId", metric);
  }
  json& out = s.training_output;
  out["isHyperparameterTuningJob"] = true;
  out["hyperparameterMetricTag"] = metric;
  out["trials"] = json::array();
  int64_t completed = 0;
  if (auto trials = d.store->Trials(r.id); trials.ok()) {
    for (const store::TrialRecord& t : *trials) {
      json trial = RenderLegacyTrial(d, r, t, metric);
      if (trial["state"] == "SUCCEEDED") ++completed;
      out["trials"].push_back(std::move(trial));
    }
  }
  out["completedTrialCount"] = std::to_string(completed);  // int64: a string in JSON
  json j = spec::ToLegacyJob(r.legacy_job_id, r.legacy_input, s);
  j["stoker"] = {{"hyperparameterTuningJob", "projects/" + r.project + "/locations/" + r.location +
                                                 "/hyperparameterTuningJobs/" +
                                                 std::to_string(r.id)}};
  if (with_usage) AddStudyConsumedMlUnits(d, r.id, j);
  return j;
}

// trainingInput.hyperparameters: the study that runs the job's trials, as
// `stoker jobs submit training` builds it (its trials are the job itself).
Result<spec::HyperparameterTuningJob> LegacyStudy(const std::string& job_id,
                                                  const spec::LegacyTraining& training) {
  STOKER_ASSIGN_OR_RETURN(
      spec::StudyFromLegacy study,
      spec::ParseLegacyHyperparameters(training.hyperparameters, "trainingInput.hyperparameters"));
  spec::HyperparameterTuningJob hp;
  hp.display_name = job_id;
  hp.labels = training.job.labels;
  hp.study_spec = study.study_spec;
  hp.max_trial_count = study.max_trial_count;
  hp.parallel_trial_count = study.parallel_trial_count;
  hp.max_failed_trial_count = study.max_failed_trial_count;
  hp.trial_job_spec = training.job.job_spec;
  STOKER_RETURN_IF_ERROR(spec::Validate(hp));
  return hp;
}

http::Response CreateLegacyTuningJob(const ApiDeps& d, const std::string& project, const json& body,
                                     const spec::LegacyTraining& training,
                                     const auth::Principal& caller) {
  const std::string job_id = body["jobId"].get<std::string>();
  auto hp = LegacyStudy(job_id, training);
  if (!hp.ok()) return Error(hp.status());
  // Its trials are stored with the lowered priority; a study has no events.
  if (auto lowered = ApplyPriorityCeiling(d, caller.user, hp->trial_job_spec); !lowered.ok()) {
    return Error(lowered.status());
  }
  if (Status s = d.admission->AdmitStudy(*hp, /*frameworks=*/false); !s.ok()) return Error(s);
  std::vector<std::string> warnings;
  if (Status s =
          CheckBudgets(d, caller.user, project, body.value("labels", json::object()), &warnings);
      !s.ok()) {
    return Error(s);
  }
  std::string location = training.region.empty() ? "local" : training.region;
  auto rec = d.store->CreateStudy(project, location, job_id, spec::ToJson(*hp), caller.user, job_id,
                                  body["trainingInput"]);
  if (!rec.ok()) return Error(rec.status());
  d.control_plane->StudySubmitted(rec->id);
  return Json(RenderLegacyStudy(d, *rec, false));
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
  const std::string job_id = j["jobId"].get<std::string>();
  if (d.store->GetJobByLegacyId(project, job_id).ok() ||
      d.store->GetStudyByLegacyId(project, job_id).ok()) {
    return Error(AlreadyExists("jobId: job '" + job_id + "' already exists in project " + project +
                               " (job ids are unique; pick another name)"));
  }
  if (!training->hyperparameters.is_null()) {
    return CreateLegacyTuningJob(d, project, j, *training, caller);
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

// Where a listed job sorts: by creation, then custom jobs before tuning
// jobs, then id. The page token is the key of the last job of the page.
using ListKey = std::tuple<int64_t, int, int64_t>;

std::string TokenOf(const ListKey& k) {
  return std::to_string(std::get<0>(k)) + "." + std::to_string(std::get<1>(k)) + "." +
         std::to_string(std::get<2>(k));
}

Result<ListKey> ParseToken(const std::string& token) {
  static const std::regex kToken(R"(^(\d+)\.([01])\.(\d+)$)");
  std::smatch m;
  if (!std::regex_match(token, m, kToken)) {
    return InvalidArgument("pageToken: '" + token +
                           "' is not a token this API gave; pass the nextPageToken of the "
                           "previous page, or none for the first");
  }
  return ListKey{std::stoll(m[1]), std::stoi(m[2]), std::stoll(m[3])};
}

// Lists the legacy jobs of both kinds, oldest first. Every job and study of
// the store is read (the legacy ones are picked here), as the legacy API
// has no index of its own; pages are cut by the token's key.
http::Response ListLegacyJobs(const ApiDeps& d, const std::string& project,
                              const http::Request& req, const auth::Principal& caller) {
  int page_size = kDefaultPageSize;
  if (auto it = req.query.find("pageSize"); it != req.query.end() && !it->second.empty()) {
    page_size = std::clamp(std::atoi(it->second.c_str()), 1, kMaxPageSize);
  }
  std::optional<ListKey> after;
  if (auto it = req.query.find("pageToken"); it != req.query.end() && !it->second.empty()) {
    auto key = ParseToken(it->second);
    if (!key.ok()) return Error(key.status());
    after = *key;
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
  auto wanted = [&](const std::string& legacy_id, const std::string& rec_project,
                    const std::string& user, spec::JobState s, const ListKey& key) {
    if (legacy_id.empty() || rec_project != project || !auth::CanSee(caller, user)) return false;
    if (after && key <= *after) return false;
    return state.empty() || spec::LegacyStateName(std::string(spec::JobStateName(s))) == state;
  };
  std::vector<store::JobRecord> jobs;
  std::vector<store::StudyRecord> studies;
  for (int64_t last = 0;;) {
    store::ListOptions opts;
    opts.after_id = last;
    opts.limit = 500;
    auto page = d.store->ListJobs(opts);
    if (!page.ok()) return Error(page.status());
    for (store::JobRecord& r : *page) {
      last = r.id;
      ListKey key{r.create_time_us, 0, r.id};
      if (wanted(r.legacy_job_id, r.project, r.user, r.state, key)) jobs.push_back(std::move(r));
    }
    if (static_cast<int>(page->size()) < opts.limit) break;
  }
  for (int64_t last = 0;;) {
    store::ListOptions opts;
    opts.after_id = last;
    opts.limit = 500;
    auto page = d.store->ListStudies(opts);
    if (!page.ok()) return Error(page.status());
    for (store::StudyRecord& r : *page) {
      last = r.id;
      ListKey key{r.create_time_us, 1, r.id};
      if (wanted(r.legacy_job_id, r.project, r.user, r.state, key)) {
        studies.push_back(std::move(r));
      }
    }
    if (static_cast<int>(page->size()) < opts.limit) break;
  }
  // Merge in key order, up to a page.
  size_t ji = 0, si = 0;
  auto job_key = [&](size_t i) { return ListKey{jobs[i].create_time_us, 0, jobs[i].id}; };
  auto study_key = [&](size_t i) { return ListKey{studies[i].create_time_us, 1, studies[i].id}; };
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    return std::tie(a.create_time_us, a.id) < std::tie(b.create_time_us, b.id);
  });
  std::sort(studies.begin(), studies.end(), [](const auto& a, const auto& b) {
    return std::tie(a.create_time_us, a.id) < std::tie(b.create_time_us, b.id);
  });
  json out = {{"jobs", json::array()}};
  std::optional<ListKey> last_key;
  while (static_cast<int>(out["jobs"].size()) < page_size &&
         (ji < jobs.size() || si < studies.size())) {
    bool take_job = si >= studies.size() || (ji < jobs.size() && job_key(ji) < study_key(si));
    if (take_job) {
      json j = RenderLegacyJob(jobs[ji]);
      AddConsumedMlUnits(d, jobs[ji], j);
      out["jobs"].push_back(std::move(j));
      last_key = job_key(ji++);
    } else {
      out["jobs"].push_back(RenderLegacyStudy(d, studies[si], true));
      last_key = study_key(si++);
    }
  }
  if (last_key && (ji < jobs.size() || si < studies.size())) {
    out["nextPageToken"] = TokenOf(*last_key);
  }
  return Json(out);
}

// GET /v1/projects/{p}:getConfig: AI Platform's answer, with what is true
// here. Jobs run as a Unix account, not a Google service account: it is
// given as ACCOUNT@HOST (the account the caller's trainers run as), in no
// project ("0"), and no TPU account (Stoker runs no TPU jobs).
http::Response ProjectConfig(const ApiDeps& d, const auth::Principal& caller) {
  std::string account;
  auto chosen = auth::TrainerAccount(d.trainer_policy, caller.unix_user);
  if (chosen.ok() && *chosen) {
    account = **chosen;
  } else if (chosen.ok()) {
    struct passwd* pw = ::getpwuid(::geteuid());  // a daemon that is not root: its own account
    account = pw ? pw->pw_name : std::to_string(::geteuid());
  } else {
    return Error(chosen.status());
  }
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  return Json({{"serviceAccount", account + "@" + host},
               {"serviceAccountProject", "0"},
               {"config", {{"tpuServiceAccount", ""}}}});
}

}  // namespace

std::optional<http::Response> HandleLegacyRoutes(const ApiDeps& d, const http::Request& req,
                                                 const auth::Principal& caller) {
  static const std::regex kJobs(R"(^/v1/projects/([^/]+)/jobs$)");
  static const std::regex kJob(R"(^/v1/projects/([^/]+)/jobs/([^/:]+)(:cancel)?$)");
  static const std::regex kConfig(R"(^/v1/projects/([^/:]+):getConfig$)");
  std::smatch m;
  if (std::regex_match(req.path, m, kConfig)) {
    if (req.method != "GET") {
      return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
    }
    return ProjectConfig(d, caller);
  }
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
    const std::string job_id = m[2];
    auto rec = d.store->GetJobByLegacyId(m[1], job_id);
    if (!rec.ok() && rec.status().code() == Code::kNotFound) {
      // Not a custom job: a tuning job, or nothing.
      auto study = d.store->GetStudyByLegacyId(m[1], job_id);
      if (!study.ok()) return Error(study.status());
      if (!auth::CanSee(caller, study->user)) return Error(NotVisible("job '" + job_id + "'"));
      if (!cancel) return Json(RenderLegacyStudy(d, *study, true));
      if (Status s = MayCancel(caller, study->user, job_id); !s.ok()) return Error(s);
      Status s = d.store->RequestStudyCancel(study->id);
      if (!s.ok()) return Error(s);
      d.control_plane->StudyCancelRequested(study->id);
      return Json(json::object());
    }
    if (!rec.ok()) return Error(rec.status());
    if (!auth::CanSee(caller, rec->user)) return Error(NotVisible("job '" + job_id + "'"));
    if (!cancel) {
      json j = RenderLegacyJob(*rec);
      AddConsumedMlUnits(d, *rec, j);
      return Json(j);
    }
    if (Status s = MayCancel(caller, rec->user, job_id); !s.ok()) return Error(s);
    Status s = d.store->RequestCancel(rec->id);
    if (!s.ok()) return Error(s);
    d.control_plane->CancelRequested(rec->id);
    return Json(json::object());
  }
  return std::nullopt;
}

}  // namespace stoker::api
