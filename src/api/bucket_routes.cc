// Cloud Storage's JSON API over local buckets (api.h lists the routes, and
// docs/clients.md what each does here): buckets (create, get, list, patch,
// delete), objects (list with prefixes and pages, metadata, patch,
// download with one Range, delete, copy/rewrite, compose), with the
// generation preconditions. Uploads are upload_routes.cc's and
// resumable_uploads.h's; the JSON shapes are gcs_json.h's. Users and admins
// read and write every bucket (docs/security.md, "Not done yet").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>

#include "api/gcs_json.h"
#include "api/routes.h"

namespace stoker::api {
namespace {

using nlohmann::json;

// GET .../o/OBJ?alt=media: the bytes, from the file (never read into
// memory), honouring one Range (bytes=a-b, a-, -n) with 206.
http::Response Download(const ApiDeps& d, const http::Request& req, const std::string& bucket,
                        const std::string& object) {
  auto open = d.buckets->Open(bucket, object, /*with_hashes=*/false);
  if (!open.ok()) return Error(open.status());
  if (auto unmet = UnmetPrecondition(req, open->info)) {
    ::close(open->fd);
    return *unmet;
  }
  const uint64_t size = open->info.size;
  uint64_t first = 0, length = size;
  http::Response r;
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
  r.content_type = open->info.meta.content_type;
  r.headers["x-goog-generation"] = std::to_string(open->info.mtime_us);
  r.headers["x-goog-metageneration"] = std::to_string(open->info.meta.metageneration);
  r.headers["x-goog-stored-content-length"] = std::to_string(size);
  r.headers["Accept-Ranges"] = "bytes";
  r.file = std::make_shared<http::FileBody>(open->fd, first, length);
  return r;
}

// When the bucket's directory was made (its birth time where the file
// system keeps one, else its change time).
int64_t BucketCreatedUs(const storage::Buckets& buckets, const std::string& bucket) {
  struct statx stx {};
  const std::string dir = buckets.BucketDir(bucket).string();
  if (::statx(AT_FDCWD, dir.c_str(), 0, STATX_BTIME | STATX_CTIME, &stx) != 0) return 0;
  const struct statx_timestamp& t = (stx.stx_mask & STATX_BTIME) ? stx.stx_btime : stx.stx_ctime;
  return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

http::Response NoContent() {
  http::Response r;
  r.status = 204;
  return r;
}

// Copies `sources` (objects of `from_bucket`, in order) into one new object
// gs://to_bucket/to_object with `meta`, streamed through a temp file (a
// copy onto one of its own sources is safe: the sources are open first).
Result<storage::ObjectInfo> Concatenate(const ApiDeps& d, const std::string& from_bucket,
                                        const std::vector<std::string>& sources,
                                        const std::string& to_bucket, const std::string& to_object,
                                        storage::ObjectMeta meta) {
  std::vector<int> fds;
  auto close_all = [&fds] {
    for (int fd : fds) ::close(fd);
  };
  for (const std::string& name : sources) {
    auto open = d.buckets->Open(from_bucket, name, /*with_hashes=*/false);
    if (!open.ok()) {
      close_all();
      return open.status();
    }
    fds.push_back(open->fd);
  }
  auto w = d.buckets->OpenWriter(to_bucket, to_object);
  if (!w.ok()) {
    close_all();
    return w.status();
  }
  std::vector<char> buf(1 << 20);
  Status s;
  for (int fd : fds) {
    for (off_t at = 0; s.ok();) {
      ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) s = Internal("cannot read a source object: " + std::string(std::strerror(errno)));
      if (n <= 0) break;
      s = (*w)->Append(std::string_view(buf.data(), static_cast<size_t>(n)));
      at += n;
    }
  }
  close_all();
  if (!s.ok()) return s;
  meta.metageneration = 1;
  (*w)->SetMeta(std::move(meta));
  return (*w)->Commit();
}

// POST .../o/SRC/(rewriteTo|copyTo)/b/DB/o/DST: one request copies the
// whole object (a rewrite is always `done`).
http::Response CopyObject(const ApiDeps& d, const http::Request& req, const std::string& sb,
                          const std::string& so, const std::string& verb, const std::string& db,
                          const std::string& dobj) {
  auto source = d.buckets->Open(sb, so, /*with_hashes=*/false);
  if (!source.ok()) return Error(source.status());
  ::close(source->fd);
  if (auto unmet = UnmetPrecondition(req, source->info, "ifSource")) return *unmet;
  if (auto unmet = CheckPreconditions(*d.buckets, req, db, dobj)) return *unmet;
  if (!d.buckets->Exists(db)) return Error(NotFound("bucket '" + db + "' does not exist"));
  json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
  // The body, when not empty, is the destination's resource: its metadata
  // replaces the source's (Cloud Storage copies the source's otherwise).
  storage::ObjectMeta meta = source->info.meta;
  if (!body.is_object()) return Error(InvalidArgument("body: expected an object resource"));
  if (body.contains("contentType") || body.contains("metadata")) {
    auto m = MetaFromJson(body, "body");
    if (!m.ok()) return Error(m.status());
    meta = *m;
  }
  auto made = Concatenate(d, sb, {so}, db, dobj, meta);
  if (!made.ok()) return Error(made.status());
  json object = ObjectJson(db, *made);
  if (verb == "copyTo") return Json(object);
  return Json({{"kind", "storage#rewriteResponse"},
               {"totalBytesRewritten", std::to_string(made->size)},
               {"objectSize", std::to_string(made->size)},
               {"done", true},
               {"resource", object}});
}

// POST .../o/DST/compose {"sourceObjects": [{"name", "generation"?,
// "objectPreconditions"?: {"ifGenerationMatch"}}], "destination": {...}}.
http::Response ComposeObject(const ApiDeps& d, const http::Request& req, const std::string& bucket,
                             const std::string& object) {
  json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body["sourceObjects"].is_array() || body["sourceObjects"].empty() ||
      body["sourceObjects"].size() > 32) {
    return Error(InvalidArgument(
        "sourceObjects: expected 1 to 32 objects of this bucket ({\"name\": ...}), as Cloud "
        "Storage allows"));
  }
  std::vector<std::string> names;
  for (const json& src : body["sourceObjects"]) {
    if (!src.is_object() || !src["name"].is_string()) {
      return Error(InvalidArgument("sourceObjects[].name: expected an object name"));
    }
    names.push_back(src["name"]);
    int64_t want = -1;
    if (src.contains("generation")) want = std::stoll(src["generation"].is_string()
                                                          ? src["generation"].get<std::string>()
                                                          : src["generation"].dump());
    if (src.contains("objectPreconditions") && src["objectPreconditions"].is_object() &&
        src["objectPreconditions"].contains("ifGenerationMatch")) {
      const json& g = src["objectPreconditions"]["ifGenerationMatch"];
      want = std::stoll(g.is_string() ? g.get<std::string>() : g.dump());
    }
    if (want >= 0) {
      auto info = d.buckets->Open(bucket, names.back(), /*with_hashes=*/false);
      if (!info.ok()) return Error(info.status());
      ::close(info->fd);
      if (info->info.mtime_us != want) {
        return GcsError(412, "conditionNotMet",
                        "sourceObjects: '" + names.back() + "' is at generation " +
                            std::to_string(info->info.mtime_us) + ", not " + std::to_string(want));
      }
    }
  }
  if (auto unmet = CheckPreconditions(*d.buckets, req, bucket, object)) return *unmet;
  storage::ObjectMeta meta;
  if (body.contains("destination")) {
    auto m = MetaFromJson(body["destination"], "destination");
    if (!m.ok()) return Error(m.status());
    meta = *m;
  }
  auto made = Concatenate(d, bucket, names, bucket, object, meta);
  if (!made.ok()) return Error(made.status());
  return Json(ObjectJson(bucket, *made));
}

// PATCH .../o/OBJ: contentType and metadata; the metageneration grows.
http::Response PatchObject(const ApiDeps& d, const http::Request& req, const std::string& bucket,
                           const std::string& object) {
  json body = json::parse(req.body, nullptr, false);
  auto open = d.buckets->Open(bucket, object, /*with_hashes=*/true);
  if (!open.ok()) return Error(open.status());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{open->fd};
  if (auto unmet = UnmetPrecondition(req, open->info)) return *unmet;
  auto meta = MetaFromJson(body, "body", open->info.meta);
  if (!meta.ok()) return Error(meta.status());
  meta->metageneration = open->info.meta.metageneration + 1;
  if (Status s = storage::KeepMeta(open->fd, *meta); !s.ok()) return Error(s);
  open->info.meta = *meta;
  return Json(ObjectJson(bucket, open->info));
}

}  // namespace

std::optional<http::Response> CheckPreconditions(const storage::Buckets& buckets,
                                                 const http::Request& req,
                                                 const std::string& bucket,
                                                 const std::string& object,
                                                 const std::string& prefix) {
  if (!AsksPreconditions(req, prefix)) return std::nullopt;
  std::optional<storage::ObjectInfo> now;
  if (buckets.Exists(bucket)) {
    auto open = buckets.Open(bucket, object, /*with_hashes=*/false);
    if (open.ok()) {
      ::close(open->fd);
      now = open->info;
    }
  }
  return UnmetPrecondition(req, now, prefix);
}

std::optional<http::Response> HandleBucketRoutes(const ApiDeps& d, const http::Request& req) {
  static const std::regex kBucket(R"(^/storage/v1/b/([^/]+)$)");
  static const std::regex kObjects(R"(^/storage/v1/b/([^/]+)/o$)");
  static const std::regex kCopy(R"(^/storage/v1/b/([^/]+)/o/(.+?)/(rewriteTo|copyTo)/b/([^/]+)/o/(.+)$)");
  static const std::regex kCompose(R"(^/storage/v1/b/([^/]+)/o/(.+)/compose$)");
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
      for (const std::string& b : d.buckets->ListBuckets()) {
        items.push_back(BucketJson(b, BucketCreatedUs(*d.buckets, b)));
      }
      return Json({{"kind", "storage#buckets"}, {"items", items}});
    }
    if (method == "POST") {
      json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || !body["name"].is_string()) {
        return Error(InvalidArgument("body: expected {\"name\": \"<bucket>\"}"));
      }
      std::string name = body["name"];
      auto parsed = storage::ParseGsUri("gs://" + name, "name");
      if (!parsed.ok()) return Error(parsed.status());
      if (d.buckets->Exists(name)) {
        return GcsError(409, "conflict",
                        "bucket '" + name + "' already exists (buckets are local: its name is "
                        "yours to reuse)");
      }
      Status s = d.buckets->Create(name);
      if (!s.ok()) return Error(s);
      return Json(BucketJson(name, BucketCreatedUs(*d.buckets, name)));
    }
    return not_supported();
  }
  if (std::regex_match(path, m, kBucket)) {
    const std::string bucket = m[1];
    if (!d.buckets->Exists(bucket)) {
      return GcsError(404, "notFound", "bucket '" + bucket + "' does not exist");
    }
    if (method == "GET") return Json(BucketJson(bucket, BucketCreatedUs(*d.buckets, bucket)));
    if (method == "PATCH" || method == "PUT") {
      json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
      if (!body.is_object()) return Error(InvalidArgument("body: expected a bucket resource"));
      for (auto& [key, value] : body.items()) {
        if (key != "name" && key != "kind" && key != "id") {
          return Error(InvalidArgument(
              key + ": bucket settings are not kept by Stoker (its buckets are local "
                    "directories: no labels, versioning, lifecycle, CORS or IAM; "
                    "docs/clients.md)"));
        }
      }
      return Json(BucketJson(bucket, BucketCreatedUs(*d.buckets, bucket)));
    }
    if (method == "DELETE") {
      if (bucket == storage::kStagingBucket || bucket == storage::kOutputsBucket) {
        return Error(PermissionDenied("bucket '" + bucket + "' is Stoker's own; it is not removed"));
      }
      auto list = d.buckets->List(bucket, "");
      if (!list.ok()) return Error(list.status());
      if (!list->empty()) {
        return GcsError(409, "conflict",
                        "bucket '" + bucket + "' is not empty; remove its " +
                            std::to_string(list->size()) + " objects first (rm -r)");
      }
      d.buckets->RemoveIfEmpty(bucket);
      if (d.buckets->Exists(bucket)) {
        return GcsError(409, "conflict",
                        "bucket '" + bucket +
                            "' still holds directories or files that are not objects");
      }
      return NoContent();
    }
    return not_supported();
  }
  if (std::regex_match(path, m, kObjects) && method == "GET") {
    std::string bucket = m[1];
    if (!d.buckets->Exists(bucket)) {
      return GcsError(404, "notFound", "bucket '" + bucket + "' does not exist");
    }
    auto query = ParseListQuery(req);
    if (!query.ok()) return Error(query.status());
    auto list = d.buckets->List(bucket, query->prefix);
    if (!list.ok()) return Error(list.status());
    return Json(ObjectListPage(bucket, *list, *query));
  }
  if (std::regex_match(path, m, kCopy) && method == "POST") {
    return CopyObject(d, req, m[1], m[2], m[3], m[4], m[5]);
  }
  if (std::regex_match(path, m, kCompose) && method == "POST") {
    return ComposeObject(d, req, m[1], m[2]);
  }
  if (std::regex_match(path, m, kObject)) {
    const std::string bucket = m[1], object = m[2];
    if (method == "DELETE") {
      if (auto unmet = CheckPreconditions(*d.buckets, req, bucket, object)) return *unmet;
      Status s = d.buckets->Delete(bucket, object);
      if (!s.ok()) return Error(s);
      return NoContent();
    }
    if (method == "PATCH" || method == "PUT") return PatchObject(d, req, bucket, object);
    if (method == "GET" || method == "HEAD") {
      if (QueryValue(req, "alt") == "media") return Download(d, req, bucket, object);
      auto info = d.buckets->Stat(bucket, object);
      if (!info.ok()) return Error(info.status());
      if (auto unmet = UnmetPrecondition(req, *info)) return *unmet;
      return Json(ObjectJson(bucket, *info));
    }
  }
  return std::nullopt;
}

}  // namespace stoker::api
