// The REST API of stokerd: Vertex-style custom job and tuning job routes, AI
// Platform jobs, Cloud Storage-style bucket routes, and a few Stoker
// extensions. One Handler for the HTTP server; thread-safe.
//
// Routes ({p} project, {l} location; "(Stoker)" marks extensions):
//   GET    /healthz                                     no token needed
//   POST   /v1/projects/{p}/locations/{l}/customJobs    body: CustomJob
//   GET    /v1/projects/{p}/locations/{l}/customJobs    ?filter=&pageSize=&pageToken=&orderBy=
//   GET    /v1/projects/{p}/locations/{l}/customJobs/{id}
//   POST   /v1/projects/{p}/locations/{l}/customJobs/{id}:cancel
//   GET    /v1/projects/{p}/locations/{l}/customJobs/{id}/events  (Stoker) events, wait reason
//   GET    /v1/projects/{p}/locations/{l}/customJobs/{id}/logs    (Stoker) ?replica=&offset=
//   GET    /v1/projects/{p}/locations/{l}/customJobs/{id}/trainingMetrics  (Stoker) hypertune
//          and TensorBoard scalars as series; also /v1/projects/{p}/jobs/{jobId}/trainingMetrics
//   POST   /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs  body: HyperparameterTuningJob
//   GET    /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs[/{id}]
//   POST   /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{id}:cancel
//   POST   /v1/projects/{p}/locations/{l}/studies/{s}/trials/{t}:addTrialMeasurement
//          (a trainer's push: its trial's ?key= instead of a token)
//   POST   /v1/projects/{p}/jobs                        AI Platform Job (trainingInput)
//   GET    /v1/projects/{p}/jobs[/{jobId}]
//   POST   /v1/projects/{p}/jobs/{jobId}:cancel
//   POST   /v1/stoker/staging                           (Stoker) body: tar.gz (streamed) -> {"uri"}
//   GET    /v1/stoker/queue, /v1/stoker/nodes           (Stoker) the scheduler's views
//   GET    /storage/v1/b                                Cloud Storage's JSON API (gcs_json.h,
//   POST   /storage/v1/b                                bucket_routes.cc, docs/clients.md):
//   GET/PATCH/DELETE /storage/v1/b/{bucket}             buckets; objects listed with prefix,
//   GET    /storage/v1/b/{bucket}/o                     delimiter, maxResults, pageToken;
//   GET/HEAD/PATCH/DELETE /storage/v1/b/{bucket}/o/{object}  metadata, ?alt=media bytes (one
//          Range), contentType + metadata patches; if(Source)(Meta)Generation(Not)Match
//          preconditions (412) on every object route
//   POST   .../o/{object}/rewriteTo|copyTo/b/{bucket}/o/{object}, .../o/{object}/compose
//   POST   /upload/storage/v1/b/{bucket}/o              ?uploadType=media|multipart (streamed,
//          upload_routes.cc), ?uploadType=resumable: a session, its URI in Location;
//          PUT {session URI} with Content-Range: bytes a-b/total -> 308 (Range:
//          bytes=0-N) or 200 and the object; bytes a-*/total|* streams the rest;
//          bytes */total asks how far it got; DELETE {session URI} cancels
//          (docs/storage.md); a session is its starter's or an admin's: 404 for
//          anyone else
//   GET    /v1/whoami                                   (Stoker) the caller
//   GET    /v1/admin/users, POST /v1/admin/users, DELETE /v1/admin/users/{name}
//   POST   /v1/admin/users/{name}/tokens, POST /v1/admin/tokens/{id}:revoke
//   POST   /v1/admin/users/{name}:setMaxPriority        (Stoker) the user's priority ceiling
//   POST   /v1/admin/backup                             (Stoker) a consistent copy of the store
//   GET    /v1/usage, /v1/usage:breakEven               (Stoker) usage and cost (docs/cost.md)
//   POST   /v1/cost:estimate                            (Stoker) a job's price before it runs
//   GET    /v1/budgets, PUT|DELETE /v1/budgets/{scope}  (Stoker) monthly budgets (admins change)
//   GET    /metrics                                     Prometheus text format (viewers, admins)
//   GET    /, /console/...; POST /console/session       (Stoker) the web console (docs/console.md)
//   POST   /v1/stoker/console:signInLink                (Stoker) a one-time console sign-in link
// Errors: {"error": {"code": <http>, "message": "...", "status": "INVALID_ARGUMENT"}}.
// Auth: "Authorization: Bearer stk_..." on every route but /healthz and the
// console's files, or the console's session cookie (console_session.h); 401
// (UNAUTHENTICATED) without a valid token, 403 when the role may not act.
// Users see only their own jobs and studies (404 for others'), viewers see
// all and change nothing, admins do everything (docs/security.md).
#pragma once

#include <memory>

#include "admission/admission.h"
#include "api/console_links.h"
#include "api/control_plane.h"
#include "auth/auth_store.h"
#include "auth/policy.h"
#include "cost/accounting.h"
#include "exec/executor.h"
#include "http/http.h"
#include "metrics/daemon_metrics.h"
#include "storage/buckets.h"
#include "store/store.h"

namespace stoker::api {

struct ApiDeps {
  store::Store* store;
  storage::Buckets* buckets;
  // Every submitted job, tuning job and AI Platform job passes it before it
  // is stored (admission/admission.h).
  const admission::Admission* admission;
  // The replicas' files (logs, metrics, telemetry); a deleted job's files
  // are removed through it. Null = none (route tests).
  exec::ReplicaFiles* files;
  ControlPlane* control_plane;  // told about stored intents; the queue and nodes views
  // Users and tokens: every route but /healthz (and a trainer's measurement
  // push with its trial's key) needs a valid bearer token.
  auth::AuthStore* auth = nullptr;
  // Opens trial push keys (auth::TrialPushKey): a trainer's measurement push
  // with its trial's ?key= needs no token.
  std::string push_secret;
  // The usage ledger, prices and budgets (docs/cost.md): jobs and studies
  // show their usage and cost, submissions pass the budgets. Null = none.
  cost::Accountant* accountant = nullptr;
  // The daemon's own measurements, for GET /metrics (daemon_metrics.h); the
  // handler counts its responses into it. Null = none.
  metrics::DaemonMetrics* daemon_metrics = nullptr;
  // The server speaks HTTPS: the web console's cookie is Secure.
  bool tls = false;
  // The config's `auth:` section: priority ceilings (a submission above its
  // user's is stored lowered, with a warning event) and console sessions'
  // lifetime (auth/policy.h).
  auth::AuthPolicy auth_policy;
  // One-time console sign-in links (console_links.h). Null = none issued.
  console::SignInLinks* signin_links = nullptr;
  // Which Unix account runs a caller's trainers (AI Platform's getConfig
  // answers it as the jobs' service account).
  auth::TrainerPolicy trainer_policy;
};

// HTTP status of an error code (the one place this mapping lives).
int HttpStatusFor(Code code);

http::Handler MakeHandler(ApiDeps deps);

// The handler and the stream router (http::ServerOptions::stream_router)
// of one API: object uploads (simple and resumable chunks) and package
// staging stream to disk through the router, outside the server's
// max_body_bytes; everything else goes to the handler.
struct ApiHandlers {
  http::Handler handler;
  http::StreamRouter stream_router;
};
ApiHandlers MakeHandlers(ApiDeps deps);

}  // namespace stoker::api
