// Shared pieces of the API's route files (api.cc: custom jobs and storage;
// legacy_routes.cc: AI Platform ml/v1; tuning_routes.cc:
// hyperparameterTuningJobs). Internal to src/api.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/api.h"
#include "auth/auth.h"
#include "spec/custom_job.h"
#include "store/store.h"

namespace stoker::api {

// A JSON response.
http::Response Json(const nlohmann::json& j, int status = 200);
// A Google API error body {"error": {code, message, status}} with the HTTP
// status of the code.
http::Response Error(const Status& s);
// The value of query parameter `key` of `req`, "" when absent.
std::string QueryValue(const http::Request& req, const std::string& key);
// A body sink that takes no byte of a streamed body and answers `response`
// (a streamed request refused before its body).
std::unique_ptr<http::BodySink> RejectBody(http::Response response);
// The preconditions of `req` (gcs_json.h) against gs://bucket/object as it
// is now; looks at the object only when the request states some.
std::optional<http::Response> CheckPreconditions(const storage::Buckets& buckets,
                                                 const http::Request& req,
                                                 const std::string& bucket,
                                                 const std::string& object,
                                                 const std::string& prefix = "if");
// Buckets and objects (bucket_routes.cc): the /storage/v1/b routes, and
// nullopt for other paths.
std::optional<http::Response> HandleBucketRoutes(const ApiDeps& d, const http::Request& req);
// The streamed body of a simple upload (POST /upload/storage/v1/b/{bucket}/o
// ?name=OBJECT) and of a staged package (POST /v1/stoker/staging): written
// to a temp file and committed when the body ends; a missing bucket is made,
// and removed again when the upload fails.
std::unique_ptr<http::BodySink> OpenObjectUpload(const ApiDeps& d, const http::Request& head,
                                                 const std::string& bucket);
std::unique_ptr<http::BodySink> OpenStagingUpload(const ApiDeps& d);
// A simple upload whose body was collected (a server without the stream
// router): the same writer, fed at once.
http::Response UploadCollected(const ApiDeps& d, const http::Request& req,
                               const std::string& bucket);
// The Vertex CustomJob JSON of a stored job.
nlohmann::json RenderJob(const store::JobRecord& r);

// pageSize (1..1000, default 100), pageToken and filter (state="JOB_STATE_X"
// only, so far) of a list request. InvalidArgument naming the parameter.
Result<store::ListOptions> ParseListOptions(const http::Request& req);

// Admits `job` (admission/admission.h), stores it (with `record`'s project, location
// and links; display name, spec and warnings are filled here) and tells the
// controller. Nothing is stored when it returns an error.
Result<store::JobRecord> CreateCustomJob(const ApiDeps& d, const spec::CustomJob& job,
                                         store::NewJob record);

// Lowers `spec`'s scheduling.priority to the highest `user` may set (its
// own ceiling, else its role's: auth/policy.h). Returns the warning to
// record as an event of the job, "" when the priority was kept; an error
// only when the user's record cannot be read (a user not found has the
// user role's ceiling).
Result<std::string> ApplyPriorityCeiling(const ApiDeps& d, const std::string& user,
                                         spec::CustomJobSpec& spec);

// A job's (a study's and each trial's) usage and cost as `stoker.usage` of
// the rendered JSON (cost_routes.cc); nothing when the daemon keeps no ledger.
void AddJobUsage(const ApiDeps& d, const store::JobRecord& r, nlohmann::json& rendered);
void AddStudyUsage(const ApiDeps& d, int64_t study_id, nlohmann::json& rendered);
// An AI Platform Job's trainingOutput.consumedMLUnits: its usage at Compute
// Engine list prices in training units of $0.49 (the Americas rate at which
// AI Platform billed Compute Engine machine types; docs/cost.md).
void AddConsumedMlUnits(const ApiDeps& d, const store::JobRecord& r, nlohmann::json& rendered);
// The same for an AI Platform tuning job: all its trials together.
void AddStudyConsumedMlUnits(const ApiDeps& d, int64_t study_id, nlohmann::json& rendered);
// The budgets' word on a submission (cost::Accountant::CheckSubmission).
Status CheckBudgets(const ApiDeps& d, const std::string& user, const std::string& project,
                    const nlohmann::json& labels, std::vector<std::string>* warnings);

// The custom job `ref` names in `project` (its number, or an AI Platform
// jobId) when `caller` may see it; NotVisible when it does not exist or is
// someone else's (telemetry_routes.cc).
Result<store::JobRecord> VisibleJob(const ApiDeps& d, const std::string& project,
                                    const std::string& ref, const auth::Principal& caller);

// The answer for a job or study that `caller` may not see (the same as for
// one that does not exist, so that ids of others' jobs leak nothing).
Status NotVisible(const std::string& what);

// Route files: each answers the requests it owns and nullopt for the others.
// `caller` is the authenticated principal; its role was already checked
// against the method (reads for every role, writes for user and admin);
// the routes check ownership.
std::optional<http::Response> HandleLegacyRoutes(const ApiDeps& d, const http::Request& req,
                                                 const auth::Principal& caller);
std::optional<http::Response> HandleTuningRoutes(const ApiDeps& d, const http::Request& req,
                                                 const auth::Principal& caller);
std::optional<http::Response> HandleClusterRoutes(const ApiDeps& d, const http::Request& req,
                                                  const auth::Principal& caller);
std::optional<http::Response> HandleMetricsRoutes(const ApiDeps& d, const http::Request& req,
                                                  const auth::Principal& caller);
std::optional<http::Response> HandleCostRoutes(const ApiDeps& d, const http::Request& req,
                                               const auth::Principal& caller);
std::optional<http::Response> HandleAdminRoutes(const ApiDeps& d, const http::Request& req,
                                                const auth::Principal& caller);
// DELETE of custom and tuning jobs, and GET of the operations that answer
// them, under /v1/ and /ui/ (operation_routes.cc).
std::optional<http::Response> HandleOperationRoutes(const ApiDeps& d, const http::Request& req,
                                                    const auth::Principal& caller);
// A job's telemetry per replica (telemetry_routes.cc).
std::optional<http::Response> HandleTelemetryRoutes(const ApiDeps& d, const http::Request& req,
                                                    const auth::Principal& caller);
// A job's training metrics: hypertune reports and TensorBoard scalars
// (training_metrics_routes.cc).
std::optional<http::Response> HandleTrainingMetricsRoutes(const ApiDeps& d,
                                                          const http::Request& req,
                                                          const auth::Principal& caller);

// The web console's files and sign-in (console_routes.cc); called before
// authentication, answers "/", "/index.html" and "/console/..." only.
std::optional<http::Response> HandleConsoleRoutes(const ApiDeps& d, const http::Request& req);
// POST kSignInLinkPath: a one-time console sign-in link for the caller
// (console_links.h; `stoker console`). Any role may ask: the link opens no
// more than the caller's token does.
inline constexpr char kSignInLinkPath[] = "/v1/stoker/console:signInLink";
std::optional<http::Response> HandleConsoleLinkRoutes(const ApiDeps& d, const http::Request& req,
                                                      const auth::Principal& caller);

}  // namespace stoker::api
