// Resumable uploads through the API (Cloud Storage's protocol, docs/storage.md):
// the routes that start, feed, question and cancel an upload session
// (storage/upload_sessions.h keeps the sessions). Internal to src/api; api.cc
// routes to it.
//
// Every route that names a session checks its owner: the user who started
// it, or an admin (auth::CanChange). Anyone else gets the NotFound of an id
// that does not exist (storage::UnknownSession), so that knowing or trying
// an id neither spoils another user's upload nor tells that it exists.
//
// Thread-safe (the sessions are).
#pragma once

#include <memory>
#include <string>

#include "auth/auth.h"
#include "http/http.h"
#include "storage/buckets.h"
#include "storage/upload_sessions.h"

namespace stoker::api {

class ResumableUploads {
 public:
  // Sessions live under <data dir>/uploads of `buckets`, which must
  // outlive this. `tls`: session URIs in Location are https.
  ResumableUploads(storage::Buckets* buckets, bool tls);

  // POST /upload/storage/v1/b/{bucket}/o?uploadType=resumable&name=N (the
  // name may also come in the JSON body): a session for object N of
  // `bucket` (made when missing), its URI in Location and the body.
  http::Response Start(const http::Request& req, const std::string& bucket,
                       const auth::Principal& caller);
  // DELETE {session URI}: 499, as Cloud Storage answers a cancelled session.
  http::Response Cancel(const http::Request& req, const auth::Principal& caller);
  // PUT (or POST) {session URI} with Content-Range: the sink that takes the
  // chunk's body (308 with how far the session got, or 200 and the object
  // when it is complete); a sink that refuses the body when the request
  // cannot go on.
  std::unique_ptr<http::BodySink> OpenChunk(const http::Request& head,
                                            const auth::Principal& caller);

 private:
  storage::Buckets* buckets_;
  bool tls_;
  storage::UploadSessions sessions_;
};

}  // namespace stoker::api
