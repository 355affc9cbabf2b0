// DELETE of custom jobs and hyperparameter tuning jobs, and the long-running
// operations that answer them (docs/formats.md, "Deleting and operations";
// docs/decisions/0038).
//
//   DELETE /v1/projects/{p}/locations/{l}/customJobs/{id}
//   DELETE /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{id}
//   GET    /v1/projects/{p}/locations/{l}/operations/{id}
//   GET    /ui/projects/{p}/locations/{l}/operations/{id}   (the REST transports' form)
//
// As on Vertex, only an ended job can be deleted (FAILED_PRECONDITION
// otherwise: cancel it first). A deletion removes the job's files (its
// replica directories, as retention does) and then its rows, and answers an
// Operation that is already done; the operation is stored, so that GET
// answers it after a restart too.
#include <regex>
#include <string>

#include "api/routes.h"
#include "common/time.h"
#include "exec/executor.h"

namespace stoker::api {
namespace {

using nlohmann::json;

constexpr char kDeleteMetadata[] =
    "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata";
constexpr char kEmpty[] = "type.googleapis.com/google.protobuf.Empty";

std::string LocationName(const std::string& project, const std::string& location) {
  return "projects/" + project + "/locations/" + location;
}

// The google.longrunning.Operation of a recorded deletion: done, with an Empty response.
json RenderOperation(const store::OperationRecord& op) {
  std::string time = FormatRfc3339(op.create_time_us);
  return {{"name", LocationName(op.project, op.location) + "/operations/" + std::to_string(op.id)},
          {"metadata",
           {{"@type", kDeleteMetadata},
            {"genericMetadata", {{"createTime", time}, {"updateTime", time}}}}},
          {"done", true},
          {"response", {{"@type", kEmpty}}}};
}

// Removes the files of job `id` (exec::Executor::RemoveJobFiles, as retention
// does). Unavailable while a replica of it is still stopping: clients retry that.
Status RemoveFiles(const ApiDeps& d, int64_t id) {
  if (d.files == nullptr) return OkStatus();
  auto gone = d.files->RemoveJobFiles(id);
  if (!gone.ok()) return gone.status();
  if (!*gone) {
    return Unavailable("job " + std::to_string(id) +
                       " has a replica that is still stopping; retry in a few seconds");
  }
  return OkStatus();
}

Status CheckEnded(spec::JobState state, const std::string& what) {
  if (spec::IsTerminal(state)) return OkStatus();
  return FailedPrecondition(what + " is " + std::string(spec::JobStateName(state)) +
                            "; only an ended job can be deleted: cancel it first (POST "
                            "...:cancel, or 'stoker ai custom-jobs cancel'), then delete it "
                            "once it has ended");
}

// Jobs are found by number (or an AI Platform job id in `project`), as
// every job route finds them: the path's location is not part of the lookup.
http::Response DeleteCustomJob(const ApiDeps& d, const std::string& project, const std::string& ref,
                               const auth::Principal& caller) {
  auto job = VisibleJob(d, project, ref, caller);
  if (!job.ok()) return Error(job.status());
  std::string what = "custom job " + std::to_string(job->id);
  if (!auth::CanChange(caller, job->user)) {
    return Error(PermissionDenied(what + " belongs to '" + job->user +
                                  "'; only it or an admin may delete it"));
  }
  if (Status s = CheckEnded(job->state, what); !s.ok()) return Error(s);
  if (job->study_id != 0) {
    return Error(FailedPrecondition(what + " is a trial of hyperparameter tuning job " +
                                    std::to_string(job->study_id) +
                                    "; delete the tuning job, which deletes its trials"));
  }
  if (Status s = RemoveFiles(d, job->id); !s.ok()) return Error(s);
  store::OperationRecord op{.project = job->project,
                            .location = job->location,
                            .user = caller.user,
                            .type = "DeleteCustomJob",
                            .target = LocationName(job->project, job->location) + "/customJobs/" +
                                      std::to_string(job->id)};
  auto recorded = d.store->DeleteJob(job->id, op);
  if (!recorded.ok()) return Error(recorded.status());
  return Json(RenderOperation(*recorded));
}

http::Response DeleteTuningJob(const ApiDeps& d, const std::string& ref,
                               const auth::Principal& caller) {
  char* end = nullptr;
  long long id = std::strtoll(ref.c_str(), &end, 10);
  std::string what = "hyperparameter tuning job '" + ref + "'";
  if (ref.empty() || *end != '\0' || id <= 0) return Error(NotFound(what + " does not exist"));
  auto study = d.store->GetStudy(id);
  if (!study.ok()) return Error(study.status());
  if (!auth::CanSee(caller, study->user)) return Error(NotVisible(what));
  if (!auth::CanChange(caller, study->user)) {
    return Error(PermissionDenied(what + " belongs to '" + study->user +
                                  "'; only it or an admin may delete it"));
  }
  if (Status s = CheckEnded(study->state, what); !s.ok()) return Error(s);
  auto trials = d.store->Trials(id);
  if (!trials.ok()) return Error(trials.status());
  for (const store::TrialRecord& t : *trials) {
    if (Status s = RemoveFiles(d, t.job_id); !s.ok()) return Error(s);
  }
  store::OperationRecord op{.project = study->project,
                            .location = study->location,
                            .user = caller.user,
                            .type = "DeleteHyperparameterTuningJob",
                            .target = LocationName(study->project, study->location) +
                                      "/hyperparameterTuningJobs/" + std::to_string(id)};
  auto recorded = d.store->DeleteStudy(id, op);
  if (!recorded.ok()) return Error(recorded.status());
  return Json(RenderOperation(*recorded));
}

http::Response GetOperation(const ApiDeps& d, const std::string& project, const std::string& ref,
                            const auth::Principal& caller) {
  std::string what = "operation '" + ref + "'";
  char* end = nullptr;
  long long id = std::strtoll(ref.c_str(), &end, 10);
  if (ref.empty() || *end != '\0' || id <= 0) return Error(NotFound(what + " does not exist"));
  auto op = d.store->GetOperation(id);
  if (!op.ok()) return Error(op.status());
  if (op->project != project || !auth::CanSee(caller, op->user)) return Error(NotVisible(what));
  return Json(RenderOperation(*op));
}

}  // namespace

std::optional<http::Response> HandleOperationRoutes(const ApiDeps& d, const http::Request& req,
                                                    const auth::Principal& caller) {
  static const std::regex kDelete(
      R"(^/v1/projects/([^/]+)/locations/([^/]+)/(customJobs|hyperparameterTuningJobs)/([^/:]+)$)");
  static const std::regex kOperation(
      R"(^/(v1|ui)/projects/([^/]+)/locations/([^/]+)/operations/([^/:]+)$)");
  std::smatch m;
  if (req.method == "DELETE" && std::regex_match(req.path, m, kDelete)) {
    if (m[3] == "customJobs") return DeleteCustomJob(d, m[1], m[4], caller);
    return DeleteTuningJob(d, m[4], caller);
  }
  if (std::regex_match(req.path, m, kOperation)) {
    if (req.method != "GET") {
      return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path +
                                   "; operations are read with GET"));
    }
    return GetOperation(d, m[2], m[4], caller);
  }
  return std::nullopt;
}

}  // namespace stoker::api
