#include "api/gcs_json.h"

#include "api/routes.h"
#include "common/time.h"

namespace stoker::api {

using nlohmann::json;

json ObjectJson(const std::string& bucket, const storage::ObjectInfo& o) {
  const std::string generation = std::to_string(o.mtime_us);
  const std::string metageneration = std::to_string(o.meta.metageneration);
  json j{{"kind", "storage#object"},
         {"bucket", bucket},
         {"name", o.name},
         {"id", bucket + "/" + o.name + "/" + generation},
         {"selfLink", "/storage/v1/b/" + bucket + "/o/" + http::UrlEncode(o.name)},
         {"size", std::to_string(o.size)},
         {"generation", generation},
         {"metageneration", metageneration},
         {"etag", generation + "." + metageneration},
         {"contentType", o.meta.content_type},
         {"storageClass", "STANDARD"},
         {"timeCreated", FormatRfc3339(o.mtime_us)},
         {"updated", FormatRfc3339(o.mtime_us)}};
  if (!o.crc32c.empty()) j["crc32c"] = o.crc32c;
  if (!o.md5.empty()) j["md5Hash"] = o.md5;
  if (!o.meta.custom.empty()) j["metadata"] = o.meta.custom;
  return j;
}

json BucketJson(const std::string& name, int64_t created_us) {
  return {{"kind", "storage#bucket"},
          {"id", name},
          {"name", name},
          {"selfLink", "/storage/v1/b/" + name},
          {"projectNumber", "0"},
          {"metageneration", "1"},
          {"etag", "1"},
          {"location", "LOCAL"},
          {"locationType", "region"},
          {"storageClass", "STANDARD"},
          {"timeCreated", FormatRfc3339(created_us)},
          {"updated", FormatRfc3339(created_us)}};
}

Result<storage::ObjectMeta> MetaFromJson(const json& resource, const std::string& field,
                                         storage::ObjectMeta base) {
  if (!resource.is_object()) return InvalidArgument(field + ": expected a JSON object");
  if (auto it = resource.find("contentType"); it != resource.end()) {
    if (it->is_null()) {
      base.content_type = storage::kDefaultContentType;
    } else if (!it->is_string()) {
      return InvalidArgument(field + ".contentType: expected a string such as \"text/plain\"");
    } else {
      base.content_type = it->get<std::string>().empty() ? storage::kDefaultContentType
                                                          : it->get<std::string>();
    }
  }
  if (auto it = resource.find("metadata"); it != resource.end()) {
    if (it->is_null()) {
      base.custom.clear();
    } else if (!it->is_object()) {
      return InvalidArgument(field + ".metadata: expected an object of string values");
    } else {
      for (const auto& [k, v] : it->items()) {
        if (v.is_null()) {
          base.custom.erase(k);
        } else if (v.is_string()) {
          base.custom[k] = v.get<std::string>();
        } else if (v.is_number() || v.is_boolean()) {
          base.custom[k] = v.dump();  // Cloud Storage keeps every value as a string
        } else {
          return InvalidArgument(field + ".metadata." + k + ": expected a string");
        }
      }
    }
  }
  STOKER_RETURN_IF_ERROR(storage::CheckCustomMeta(base.custom, field + ".metadata"));
  return base;
}

Result<ListQuery> ParseListQuery(const http::Request& req) {
  ListQuery q;
  q.prefix = QueryValue(req, "prefix");
  q.delimiter = QueryValue(req, "delimiter");
  q.page_token = QueryValue(req, "pageToken");
  q.start_offset = QueryValue(req, "startOffset");
  q.end_offset = QueryValue(req, "endOffset");
  q.include_trailing_delimiter = QueryValue(req, "includeTrailingDelimiter") == "true";
  if (std::string m = QueryValue(req, "maxResults"); !m.empty()) {
    if (m.size() > 9 || m.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(m) == 0) {
      return InvalidArgument("maxResults: '" + m + "' is not a number from 1 to 1000");
    }
    q.max_results = std::min<size_t>(std::stoul(m), 1000);  // Cloud Storage's cap, too
  }
  return q;
}

json ObjectListPage(const std::string& bucket, const std::vector<storage::ObjectInfo>& objects,
                    const ListQuery& q) {
  json items = json::array(), prefixes = json::array();
  std::string last;  // the last key given: a name or a prefix
  size_t given = 0;
  std::optional<std::string> next;
  for (const storage::ObjectInfo& o : objects) {
    if (o.name.compare(0, q.prefix.size(), q.prefix) != 0) continue;
    if (!q.start_offset.empty() && o.name < q.start_offset) continue;
    if (!q.end_offset.empty() && o.name >= q.end_offset) continue;
    std::string key = o.name;
    bool rolled = false;
    if (!q.delimiter.empty()) {
      size_t at = o.name.find(q.delimiter, q.prefix.size());
      if (at != std::string::npos) {
        key = o.name.substr(0, at + q.delimiter.size());
        // An object named exactly like its prefix is listed as an item too
        // with includeTrailingDelimiter.
        rolled = !(q.include_trailing_delimiter && key == o.name);
      }
    }
    // Keys only grow along sorted names (a name's prefix key never sorts
    // before an earlier name's), so "after the token" is a comparison.
    if (!q.page_token.empty() && key <= q.page_token) continue;
    if (rolled && given > 0 && key == last) continue;  // the same prefix again
    if (given == q.max_results) {
      next = last;
      break;
    }
    if (rolled) {
      prefixes.push_back(key);
    } else {
      items.push_back(ObjectJson(bucket, o));
    }
    last = key;
    ++given;
  }
  json page{{"kind", "storage#objects"}, {"items", items}};
  if (!prefixes.empty()) page["prefixes"] = prefixes;
  if (next) page["nextPageToken"] = *next;
  return page;
}

namespace {

// The value of an int64 query parameter; nullopt when absent.
Result<std::optional<int64_t>> Int64Param(const http::Request& req, const std::string& name) {
  std::string v = QueryValue(req, name);
  if (v.empty()) return std::optional<int64_t>();
  if (v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(name + ": '" + v + "' is not a generation number");
  }
  return std::optional<int64_t>(std::stoll(v));
}

}  // namespace

std::optional<http::Response> UnmetPrecondition(const http::Request& req,
                                                const std::optional<storage::ObjectInfo>& now,
                                                const std::string& prefix) {
  const int64_t generation = now ? now->mtime_us : 0;
  struct Check {
    std::string param;
    bool metageneration, match;
  };
  const Check checks[] = {{prefix + "GenerationMatch", false, true},
                          {prefix + "GenerationNotMatch", false, false},
                          {prefix + "MetagenerationMatch", true, true},
                          {prefix + "MetagenerationNotMatch", true, false}};
  for (const Check& c : checks) {
    auto want = Int64Param(req, c.param);
    if (!want.ok()) return Error(want.status());
    if (!*want) continue;
    if (c.metageneration && !now) {
      return GcsError(412, "conditionNotMet",
                      c.param + ": the object does not exist, so it has no metageneration");
    }
    const int64_t have = c.metageneration ? now->meta.metageneration : generation;
    if ((have == **want) == c.match) continue;
    if (!c.match && (req.method == "GET" || req.method == "HEAD")) {
      return GcsError(304, "notModified", c.param + ": the object has not changed");
    }
    return GcsError(412, "conditionNotMet",
                    c.param + "=" + std::to_string(**want) + " does not hold: the object " +
                        (now ? "has " + std::string(c.metageneration ? "metageneration " : "generation ") +
                                   std::to_string(have)
                             : std::string("does not exist")));
  }
  return std::nullopt;
}

bool AsksPreconditions(const http::Request& req, const std::string& prefix) {
  for (const char* what : {"GenerationMatch", "GenerationNotMatch", "MetagenerationMatch",
                           "MetagenerationNotMatch"}) {
    if (req.query.count(prefix + what)) return true;
  }
  return false;
}

http::Response GcsError(int code, const std::string& reason, const std::string& message) {
  return Json({{"error",
                {{"code", code},
                 {"message", message},
                 {"errors", json::array({{{"domain", "global"},
                                           {"reason", reason},
                                           {"message", message}}})}}}},
              code);
}

}  // namespace stoker::api
