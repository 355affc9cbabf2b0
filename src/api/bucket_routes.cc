// Cloud Storage-style buckets and objects (api.h lists the routes): bucket
// create, list and remove; object list, metadata, download (with one Range)
// and delete; simple uploads and package staging, streamed to disk. The
// resumable upload sessions are resumable_uploads.h's. Users and admins
// read and write every bucket (docs/security.md, "Not done yet").
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "api/routes.h"

namespace stoker::api {
namespace {

using nlohmann::json;

// A simple upload (or a staged package): the body streams into an
// ObjectWriter, committed when the body ends.
class WriterSink : public http::BodySink {
 public:
  WriterSink(std::unique_ptr<storage::ObjectWriter> w, storage::Buckets* buckets,
             std::string bucket, bool made_bucket, bool staging)
      : writer_(std::move(w)),
        buckets_(buckets),
        bucket_(std::move(bucket)),
        made_bucket_(made_bucket),
        staging_(staging) {}
  ~WriterSink() override {
    if (!done_ && made_bucket_) {
      writer_.reset();  // removes the temp file first
      buckets_->RemoveIfEmpty(bucket_);
    }
  }
  bool Write(std::string_view bytes) override {
    status_ = writer_->Append(bytes);
    return status_.ok();
  }
  http::Response Finish() override {
    if (!status_.ok()) return Error(status_);
    if (staging_) {
      auto uri = buckets_->StageCommit(std::move(writer_));
      if (!uri.ok()) return Error(uri.status());
      done_ = true;
      return Json({{"uri", *uri}});
    }
    auto info = writer_->Commit();
    if (!info.ok()) return Error(info.status());
    done_ = true;
    return Json(ObjectJson(bucket_, *info));
  }

 private:
  std::unique_ptr<storage::ObjectWriter> writer_;
  storage::Buckets* buckets_;
  std::string bucket_;
  bool made_bucket_;
  bool staging_;
  bool done_ = false;
  Status status_;
};

// GET .../o/OBJ?alt=media: the bytes, from the file (never read into
// memory), honouring one Range (bytes=a-b, a-, -n) with 206.
http::Response Download(const ApiDeps& d, const http::Request& req, const std::string& bucket,
                        const std::string& object) {
  auto open = d.buckets->Open(bucket, object, /*with_hashes=*/false);
  if (!open.ok()) return Error(open.status());
  const uint64_t size = open->info.size;
  uint64_t first = 0, length = size;
  http::Response r;
  r.content_type = "application/octet-stream";
  auto range = req.headers.find("range");
  if (range != req.headers.end()) {
    const std::string& v = range->second;
    size_t dash = v.find('-');
    bool ok =
        v.rfind("bytes=", 0) == 0 && dash != std::string::npos && v.find(',') == std::string::npos;
    std::string a = ok ? v.substr(6, dash - 6) : "", b = ok ? v.substr(dash + 1) : "";
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() <= 18 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!ok || (a.empty() && !digits(b)) || (!a.empty() && !digits(a)) ||
        (!b.empty() && !digits(b))) {
      ::close(open->fd);
      return Error(InvalidArgument("Range: '" + v + "' is not 'bytes=FIRST-[LAST]' or 'bytes=-N'"));
    }
    if (a.empty()) {
      length = std::min<uint64_t>(size, std::stoull(b));
      first = size - length;
    } else {
      first = std::stoull(a);
      uint64_t last = b.empty() ? size - 1 : std::min<uint64_t>(std::stoull(b), size - 1);
      if (first >= size || (size > 0 && last < first)) {
        ::close(open->fd);
        http::Response bad =
            Error(InvalidArgument("Range: '" + v + "' starts at or past the object's end (" +
                                  std::to_string(size) + " bytes)"));
        bad.status = 416;
        bad.headers["Content-Range"] = "bytes */" + std::to_string(size);
        return bad;
      }
      length = last - first + 1;
    }
    r.status = 206;
    r.headers["Content-Range"] = "bytes " + std::to_string(first) + "-" +
                                 std::to_string(first + length - 1) + "/" + std::to_string(size);
  }
  if (!open->info.crc32c.empty()) {
    r.headers["x-goog-hash"] = "crc32c=" + open->info.crc32c + ",md5=" + open->info.md5;
  }
  r.headers["Accept-Ranges"] = "bytes";
  r.file = std::make_shared<http::FileBody>(open->fd, first, length);
  return r;
}

}  // namespace

std::unique_ptr<http::BodySink> OpenStagingUpload(const ApiDeps& d) {
  auto w = d.buckets->StageWriter();
  if (!w.ok()) return RejectBody(Error(w.status()));
  return std::make_unique<WriterSink>(std::move(*w), d.buckets, storage::kStagingBucket,
                                      /*made_bucket=*/false, /*staging=*/true);
}

std::unique_ptr<http::BodySink> OpenObjectUpload(const ApiDeps& d, const http::Request& head,
                                                 const std::string& bucket) {
  auto name = QueryValue(head, "name");
  if (name.empty()) {
    return RejectBody(
        Error(InvalidArgument("name: the object name is required (?name=path/in/bucket)")));
  }
  auto parsed = storage::ParseGsUri("gs://" + bucket + "/" + name, "name");
  if (!parsed.ok()) return RejectBody(Error(parsed.status()));
  // An upload into a missing bucket makes it (as `stoker storage cp`
  // always did), and takes it away again if the upload fails.
  bool made = false;
  if (!d.buckets->Exists(bucket)) {
    Status s = d.buckets->Create(bucket);
    if (!s.ok()) return RejectBody(Error(s));
    made = true;
  }
  auto w = d.buckets->OpenWriter(bucket, parsed->object);
  if (!w.ok()) {
    if (made) d.buckets->RemoveIfEmpty(bucket);
    return RejectBody(Error(w.status()));
  }
  return std::make_unique<WriterSink>(std::move(*w), d.buckets, bucket, made,
                                      /*staging=*/false);
}

// A simple upload whose body was collected (a server without the stream
// router): the same writer, fed at once.
http::Response UploadCollected(const ApiDeps& d, const http::Request& req,
                               const std::string& bucket) {
  auto name = QueryValue(req, "name");
  if (name.empty()) {
    return Error(InvalidArgument("name: the object name is required (?name=path/in/bucket)"));
  }
  auto parsed = storage::ParseGsUri("gs://" + bucket + "/" + name, "name");
  if (!parsed.ok()) return Error(parsed.status());
  Status s = d.buckets->Create(bucket);
  if (!s.ok()) return Error(s);
  auto w = d.buckets->OpenWriter(bucket, parsed->object);
  if (!w.ok()) return Error(w.status());
  s = (*w)->Append(req.body);
  if (!s.ok()) return Error(s);
  auto info = (*w)->Commit();
  if (!info.ok()) return Error(info.status());
  return Json(ObjectJson(bucket, *info));
}

std::optional<http::Response> HandleBucketRoutes(const ApiDeps& d, const http::Request& req) {
  static const std::regex kObjects(R"(^/storage/v1/b/([^/]+)/o$)");
  static const std::regex kObject(R"(^/storage/v1/b/([^/]+)/o/(.+)$)");
  std::smatch m;
  const std::string& path = req.path;
  const std::string& method = req.method;
  auto not_supported = [&req] {
    return Error(InvalidArgument("method " + req.method + " is not supported on " + req.path));
  };
  if (path == "/storage/v1/b") {
    if (method == "GET") {
      json items = json::array();
      for (const std::string& b : d.buckets->ListBuckets()) items.push_back({{"name", b}});
      return Json({{"items", items}});
    }
    if (method == "POST") {
      json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || !body["name"].is_string()) {
        return Error(InvalidArgument("body: expected {\"name\": \"<bucket>\"}"));
      }
      std::string name = body["name"];
      auto parsed = storage::ParseGsUri("gs://" + name, "name");
      if (!parsed.ok()) return Error(parsed.status());
      if (d.buckets->Exists(name))
        return Error(AlreadyExists("bucket '" + name + "' already exists"));
      Status s = d.buckets->Create(name);
      if (!s.ok()) return Error(s);
      return Json({{"name", name}});
    }
    return not_supported();
  }
  static const std::regex kBucket(R"(^/storage/v1/b/([^/]+)$)");
  if (std::regex_match(path, m, kBucket) && method == "DELETE") {
    std::string bucket = m[1];
    if (bucket == storage::kStagingBucket || bucket == storage::kOutputsBucket) {
      return Error(PermissionDenied("bucket '" + bucket + "' is Stoker's own; it is not removed"));
    }
    auto list = d.buckets->List(bucket, "");
    if (!list.ok()) return Error(list.status());
    if (!list->empty()) {
      return Error(FailedPrecondition("bucket '" + bucket + "' is not empty; remove its " +
                                      std::to_string(list->size()) + " objects first (rm -r)"));
    }
    d.buckets->RemoveIfEmpty(bucket);
    if (d.buckets->Exists(bucket)) {
      return Error(FailedPrecondition("bucket '" + bucket +
                                      "' still holds directories or files that are not objects"));
    }
    http::Response r;
    r.status = 204;
    return r;
  }
  if (std::regex_match(path, m, kObjects) && method == "GET") {
    std::string bucket = m[1];
    if (!d.buckets->Exists(bucket))
      return Error(NotFound("bucket '" + bucket + "' does not exist"));
    auto prefix = req.query.count("prefix") ? req.query.at("prefix") : "";
    auto list = d.buckets->List(bucket, prefix);
    if (!list.ok()) return Error(list.status());
    json items = json::array();
    for (const storage::ObjectInfo& o : *list) items.push_back(ObjectJson(bucket, o));
    return Json({{"kind", "storage#objects"}, {"items", items}});
  }
  if (std::regex_match(path, m, kObject) && method == "DELETE") {
    Status s = d.buckets->Delete(m[1], m[2]);
    if (!s.ok()) return Error(s);
    http::Response r;
    r.status = 204;
    return r;
  }
  if (std::regex_match(path, m, kObject) && (method == "GET" || method == "HEAD")) {
    if (QueryValue(req, "alt") != "media") {
      auto info = d.buckets->Stat(m[1], m[2]);
      if (!info.ok()) return Error(info.status());
      return Json(ObjectJson(m[1], *info));
    }
    return Download(d, req, m[1], m[2]);
  }
  return std::nullopt;
}

}  // namespace stoker::api
