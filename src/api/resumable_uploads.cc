// Resumable uploads (resumable_uploads.h).
#include "api/resumable_uploads.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "api/gcs_json.h"
#include "api/routes.h"

namespace stoker::api {
namespace {

using nlohmann::json;

// The upload session `id` when `caller` may act on it (send a chunk, ask
// how far it got, cancel it): the user who started it, or an admin, as
// for jobs (auth::CanChange). For anyone else NotFound, the answer for an
// id that does not exist, so that trying ids tells nothing.
Result<storage::UploadSession> OwnedUploadSession(const storage::UploadSessions& sessions,
                                                  const std::string& id,
                                                  const auth::Principal& caller) {
  auto session = sessions.Get(id);
  if (!session.ok()) return session.status();
  if (!auth::CanChange(caller, session->user)) {
    return storage::UnknownSession(id);
  }
  return session;
}

// One chunk of a resumable upload (PUT to the session URI with
// Content-Range), or, with an empty body, the question how far it got.
class ChunkSink : public http::BodySink {
 public:
  static std::unique_ptr<http::BodySink> Open(storage::UploadSessions* sessions,
                                              const http::Request& head,
                                              const auth::Principal& caller) {
    const std::string id = QueryValue(head, "upload_id");
    auto session = OwnedUploadSession(*sessions, id, caller);
    if (!session.ok()) return RejectBody(Error(session.status()));
    // Content-Range: "bytes a-b/total", "bytes a-b/*", "bytes */total",
    // "bytes */*" (a status question), or "bytes a-*/total" and "bytes
    // a-*/*": the rest of the object, as long as the body (which may come
    // chunked, without Content-Length); none: the whole object at once.
    auto it = head.headers.find("content-range");
    std::optional<uint64_t> length;
    if (auto cl = head.headers.find("content-length"); cl != head.headers.end()) {
      length = std::strtoull(cl->second.c_str(), nullptr, 10);
    }
    uint64_t first = session->received;
    int64_t total = -1;
    std::optional<uint64_t> chunk_length;
    if (it == head.headers.end()) {
      first = 0;
      chunk_length = length;  // nullopt (chunked): the whole object, whatever its length
      if (length) total = static_cast<int64_t>(*length);
    } else {
      auto range = ParseContentRange(it->second, length);
      if (!range.ok()) return RejectBody(Error(range.status()));
      if (range->first >= 0) first = static_cast<uint64_t>(range->first);
      total = range->total;
      chunk_length = range->open ? std::nullopt : std::optional<uint64_t>(range->length);
    }
    auto chunk = sessions->OpenChunk(id, first, chunk_length, total);
    if (!chunk.ok()) {
      if (chunk.status().code() == Code::kFailedPrecondition) {
        // Out of order: say where the session stands, as Cloud Storage does.
        auto now = sessions->Get(id);
        if (now.ok()) return RejectBody(Incomplete(*now));
      }
      return RejectBody(Error(chunk.status()));
    }
    return std::unique_ptr<http::BodySink>(new ChunkSink(std::move(*chunk)));
  }

  bool Write(std::string_view bytes) override {
    status_ = chunk_->Append(bytes);
    return status_.ok();
  }
  http::Response Finish() override {
    if (!status_.ok()) return Error(status_);
    auto outcome = chunk_->Finish();
    if (!outcome.ok()) return Error(outcome.status());
    if (!outcome->object) return Incomplete(outcome->session);
    return Json(ObjectJson(outcome->session.bucket, *outcome->object));
  }

 private:
  explicit ChunkSink(std::unique_ptr<storage::UploadSessions::Chunk> c) : chunk_(std::move(c)) {}

  struct ContentRange {
    int64_t first = -1;  // -1: "*"
    int64_t total = -1;  // -1: "*"
    bool open = false;   // "first-*": the rest of the object
    uint64_t length = 0;  // of a closed span
  };
  // `body_length`: the Content-Length, nullopt for a chunked body.
  static Result<ContentRange> ParseContentRange(const std::string& v,
                                                std::optional<uint64_t> body_length) {
    const Status bad = InvalidArgument(
        "Content-Range: '" + v +
        "' is not 'bytes FIRST-LAST/TOTAL', 'bytes FIRST-*/TOTAL' (either TOTAL may be '*') or "
        "'bytes */TOTAL'");
    if (v.rfind("bytes ", 0) != 0) return bad;
    std::string rest = v.substr(6);
    size_t slash = rest.find('/');
    if (slash == std::string::npos) return bad;
    std::string span = rest.substr(0, slash), total = rest.substr(slash + 1);
    ContentRange out;
    auto number = [](const std::string& t, int64_t* n) {
      if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos)
        return false;
      *n = std::stoll(t);
      return true;
    };
    if (total != "*" && !number(total, &out.total)) return bad;
    if (span == "*") {
      if (body_length.value_or(0) != 0) return bad;
      out.length = 0;
      return out;
    }
    size_t dash = span.find('-');
    if (dash == std::string::npos || !number(span.substr(0, dash), &out.first)) return bad;
    if (span.substr(dash + 1) == "*") {
      out.open = true;
      return out;
    }
    int64_t last = 0;
    if (!number(span.substr(dash + 1), &last) || last < out.first) return bad;
    out.length = static_cast<uint64_t>(last - out.first + 1);
    if (body_length && out.length != *body_length) {
      return InvalidArgument("Content-Range: '" + v + "' covers " + std::to_string(out.length) +
                             " bytes but the body has " + std::to_string(*body_length));
    }
    return out;
  }

  // 308 with how much the session has, as Cloud Storage answers.
  static http::Response Incomplete(const storage::UploadSession& s) {
    http::Response r = Json({{"uploadId", s.id}, {"received", std::to_string(s.received)}}, 308);
    if (s.received > 0) r.headers["Range"] = "bytes=0-" + std::to_string(s.received - 1);
    return r;
  }

  std::unique_ptr<storage::UploadSessions::Chunk> chunk_;
  Status status_;
};

}  // namespace

ResumableUploads::ResumableUploads(storage::Buckets* buckets, bool tls)
    : buckets_(buckets), tls_(tls), sessions_(buckets->DataDir() / "uploads", buckets) {}

// POST .../o?uploadType=resumable&name=N: a session for object N (the
// name may also come in the JSON body); its URI in Location.
http::Response ResumableUploads::Start(const http::Request& req, const std::string& bucket,
                                       const auth::Principal& caller) {
  std::string name = QueryValue(req, "name");
  // The body, when there is one, is the object resource: its name,
  // contentType and metadata (X-Upload-Content-Type when it has no type).
  json resource = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
  if (!resource.is_object()) {
    return Error(InvalidArgument("body: expected the object's JSON resource ({\"name\": ...})"));
  }
  if (name.empty() && resource.contains("name") && resource["name"].is_string()) {
    name = resource["name"];
  }
  storage::ObjectMeta base;
  if (auto t = req.headers.find("x-upload-content-type"); t != req.headers.end() && !t->second.empty()) {
    base.content_type = t->second;
  }
  auto meta = MetaFromJson(resource, "body", base);
  if (!meta.ok()) return Error(meta.status());
  if (name.empty()) {
    return Error(InvalidArgument(
        "name: the object name is required (?name=path/in/bucket or {\"name\": ...})"));
  }
  auto parsed = storage::ParseGsUri("gs://" + bucket + "/" + name, "name");
  if (!parsed.ok()) return Error(parsed.status());
  // Preconditions are checked when the session starts (not again when the
  // last chunk lands: docs/clients.md).
  if (auto unmet = CheckPreconditions(*buckets_, req, bucket, parsed->object)) return *unmet;
  int64_t size = -1;
  if (auto it = req.headers.find("x-upload-content-length"); it != req.headers.end()) {
    const std::string& v = it->second;
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      return Error(InvalidArgument("X-Upload-Content-Length: '" + v + "' is not a byte count"));
    }
    size = std::stoll(v);
  }
  bool made = false;
  if (!buckets_->Exists(bucket)) {
    Status s = buckets_->Create(bucket);
    if (!s.ok()) return Error(s);
    made = true;
  }
  auto session = sessions_.Start(bucket, parsed->object, size, caller.user, *meta);
  if (!session.ok()) {
    if (made) buckets_->RemoveIfEmpty(bucket);
    return Error(session.status());
  }
  std::string target = "/upload/storage/v1/b/" + http::UrlEncode(bucket) +
                       "/o?uploadType=resumable&upload_id=" + session->id;
  auto host = req.headers.find("host");
  http::Response r = Json({{"uploadId", session->id}, {"sessionUri", target}});
  r.headers["Location"] =
      host == req.headers.end() ? target : (tls_ ? "https://" : "http://") + host->second + target;
  return r;
}

http::Response ResumableUploads::Cancel(const http::Request& req, const auth::Principal& caller) {
  const std::string id = QueryValue(req, "upload_id");
  auto owned = OwnedUploadSession(sessions_, id, caller);
  if (!owned.ok()) return Error(owned.status());
  Status s = sessions_.Cancel(id);
  if (!s.ok()) return Error(s);
  http::Response r;
  r.status = 499;  // what Cloud Storage answers for a cancelled session
  r.body = "{}";
  return r;
}

std::unique_ptr<http::BodySink> ResumableUploads::OpenChunk(const http::Request& head,
                                                            const auth::Principal& caller) {
  return ChunkSink::Open(&sessions_, head, caller);
}

}  // namespace stoker::api
