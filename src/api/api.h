// The REST API of stokerd: Vertex-style custom job routes, Cloud
// Storage-style bucket routes, and a few Stoker extensions (events, logs,
// staging). One Handler for the HTTP server; thread-safe.
//
// Routes:
//   GET  /healthz
//   POST /v1/projects/{p}/locations/{l}/customJobs            body: CustomJob
//   GET  /v1/projects/{p}/locations/{l}/customJobs ?filter=state="..."&pageSize=&pageToken= GET
//   /v1/projects/{p}/locations/{l}/customJobs/{id} POST
//   /v1/projects/{p}/locations/{l}/customJobs/{id}:cancel GET
//   /v1/projects/{p}/locations/{l}/customJobs/{id}/events   (Stoker) events and wait reason GET
//   /v1/projects/{p}/locations/{l}/customJobs/{id}/logs     (Stoker) ?replica=&offset= POST
//   /v1/stoker/staging                                     (Stoker) body: tar.gz -> {"uri"} GET
//   /storage/v1/b                                          list buckets POST /storage/v1/b body
//   {"name"}: create bucket GET  /storage/v1/b/{bucket}/o                               ?prefix=
//   GET  /storage/v1/b/{bucket}/o/{object}                      ?alt=media: the bytes
//   POST /upload/storage/v1/b/{bucket}/o                        ?name=OBJECT, body: the bytes
//   GET  /v1/admin/users, POST /v1/admin/users, DELETE /v1/admin/users/{name},
//   POST /v1/admin/users/{name}/tokens, POST /v1/admin/tokens/{id}:revoke,
//   GET  /v1/whoami                                        (Stoker) users and tokens
// Errors: {"error": {"code": <http>, "message": "...", "status": "INVALID_ARGUMENT"}}.
// Auth: "Authorization: Bearer stk_..." on every route but /healthz; 401
// (UNAUTHENTICATED) without a valid token, 403 when the role may not act.
// Users see only their own jobs and studies (404 for others'), viewers see
// all and change nothing, admins do everything (docs/security.md).
#pragma once

#include <memory>

#include "auth/auth_store.h"
#include "exec/environments.h"
#include "exec/executor.h"
#include "http/http.h"
#include "resources/resources.h"
#include "scheduler/placement.h"
#include "storage/buckets.h"
#include "store/store.h"

namespace stoker::server {
class Controller;
}

namespace stoker::api {

struct ApiDeps {
  store::Store* store;
  storage::Buckets* buckets;
  const exec::Environments* environments;
  const exec::Executor* executor;  // only ReplicaDir, to find logs
  server::Controller* controller;
  const resources::Node* node;
  scheduler::PolicyOptions policy;          // for the can-it-ever-fit check at submission
  resources::MachineCatalog machine_types;  // the config's, before the built-in catalog
  // Users and tokens: every route but /healthz (and a trainer's measurement
  // push with its trial's key) needs a valid bearer token.
  auth::AuthStore* auth = nullptr;
  // Opens trial push keys (auth::TrialPushKey): a trainer's measurement push
  // with its trial's ?key= needs no token.
  std::string push_secret;
};

// HTTP status of an error code (the one place this mapping lives).
int HttpStatusFor(Code code);

http::Handler MakeHandler(ApiDeps deps);

}  // namespace stoker::api
