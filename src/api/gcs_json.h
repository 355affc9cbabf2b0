// Cloud Storage's JSON API shapes (https://cloud.google.com/storage/docs/json_api),
// as the official clients read them: the object and bucket resources, a
// page of an object listing (prefix, delimiter, paging, offsets), the
// generation preconditions and the error body. Pure: no file system and no
// routes (bucket_routes.cc uses them). Internal to src/api.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "http/http.h"
#include "storage/buckets.h"

namespace stoker::api {

// storage#object. `generation` is the object's mtime in microseconds
// (object_meta.h); `etag` changes with the generation and the
// metageneration.
nlohmann::json ObjectJson(const std::string& bucket, const storage::ObjectInfo& o);
// storage#bucket: Stoker's buckets are local directories, so location
// "LOCAL", storage class STANDARD, metageneration 1 (docs/clients.md).
nlohmann::json BucketJson(const std::string& name, int64_t created_us);

// contentType and metadata of an object resource in a request body (an
// upload's metadata part, a PATCH): InvalidArgument naming `field`.
// Other fields are not object metadata Stoker keeps (acl, storageClass,
// kmsKeyName, ...): accepted and ignored, as docs/clients.md lists.
// `base` is the metadata the object had (PATCH changes only what it names;
// a JSON null removes a custom key, as in Cloud Storage).
Result<storage::ObjectMeta> MetaFromJson(const nlohmann::json& resource, const std::string& field,
                                         storage::ObjectMeta base = {});

// The query of GET /storage/v1/b/{bucket}/o.
struct ListQuery {
  std::string prefix, delimiter, page_token, start_offset, end_offset;
  size_t max_results = 1000;
  bool include_trailing_delimiter = false;
};
// InvalidArgument naming the parameter (maxResults not 1..1000 digits).
Result<ListQuery> ParseListQuery(const http::Request& req);
// One page of storage#objects from `objects` (every object whose name starts
// with q.prefix, sorted by name): items, `prefixes` (names rolled up at the
// first delimiter after the prefix; they count against maxResults as in
// Cloud Storage) and nextPageToken when more remain. The token is the last
// name or prefix given (opaque to clients).
nlohmann::json ObjectListPage(const std::string& bucket,
                              const std::vector<storage::ObjectInfo>& objects, const ListQuery& q);

// The generation preconditions of a request (ifGenerationMatch,
// ifGenerationNotMatch, ifMetagenerationMatch, ifMetagenerationNotMatch,
// each with an optional `prefix`: "ifSource..." for a copy's source) against
// the object as it is now (nullopt: it does not exist; ifGenerationMatch=0
// asks for that). nullopt when they hold; otherwise the response to send:
// 412 conditionNotMet (304 for a GET's *NotMatch, as Cloud Storage), or
// 400 for a value that is not a number.
std::optional<http::Response> UnmetPrecondition(const http::Request& req,
                                                const std::optional<storage::ObjectInfo>& now,
                                                const std::string& prefix = "if");

// Whether `req` states any of those preconditions.
bool AsksPreconditions(const http::Request& req, const std::string& prefix = "if");

// Cloud Storage's error body: {"error": {"code", "message", "errors":
// [{"reason", "message", "domain": "global"}]}} with HTTP status `code`.
http::Response GcsError(int code, const std::string& reason, const std::string& message);

}  // namespace stoker::api
