#include "storage/object_meta.h"

#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "storage/storage_internal.h"

namespace stoker::storage {
namespace {

using internal::MtimeNs;

using nlohmann::json;

constexpr char kMetaXattr[] = "user.stoker.meta";
constexpr size_t kMaxCustomBytes = 8 << 10;  // Cloud Storage's limit on custom metadata

ObjectMeta Parse(const std::vector<char>& value, ssize_t len, const struct stat& st) {
  ObjectMeta meta;
  if (len <= 0) return meta;
  json j = json::parse(value.begin(), value.begin() + len, nullptr, false);
  if (!j.is_object() || j.value("v", 0) != 1 || j.value("size", int64_t{-1}) != st.st_size ||
      j.value("mtime_ns", int64_t{-1}) != MtimeNs(st)) {
    return meta;
  }
  if (j["contentType"].is_string()) meta.content_type = j["contentType"];
  if (j["metageneration"].is_number_integer()) meta.metageneration = j["metageneration"];
  if (j["metadata"].is_object()) {
    for (auto& [k, v] : j["metadata"].items()) {
      if (v.is_string()) meta.custom[k] = v;
    }
  }
  return meta;
}

// Room for the largest value KeepMeta writes (custom metadata is bounded).
constexpr size_t kMaxValue = kMaxCustomBytes * 2 + 4096;

}  // namespace

ObjectMeta KeptMeta(int fd, const struct stat& st) {
  std::vector<char> value(kMaxValue);
  ssize_t len = ::fgetxattr(fd, kMetaXattr, value.data(), value.size());
  return Parse(value, len, st);
}

ObjectMeta KeptMetaAt(const std::string& path, const struct stat& st) {
  std::vector<char> value(kMaxValue);
  ssize_t len = ::lgetxattr(path.c_str(), kMetaXattr, value.data(), value.size());
  return Parse(value, len, st);
}

Status KeepMeta(int fd, const ObjectMeta& meta) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Internal("cannot stat an object to keep its metadata");
  if (meta == ObjectMeta()) {
    // The defaults need no attribute; remove one an earlier write left.
    if (::fremovexattr(fd, kMetaXattr) != 0 && errno != ENODATA && errno != ENOTSUP) {
      return Internal(std::string("cannot clear an object's metadata: ") + std::strerror(errno));
    }
    return OkStatus();
  }
  json j{{"v", 1},
         {"size", static_cast<int64_t>(st.st_size)},
         {"mtime_ns", MtimeNs(st)},
         {"contentType", meta.content_type},
         {"metageneration", meta.metageneration},
         {"metadata", meta.custom}};
  const std::string value = j.dump();
  if (::fsetxattr(fd, kMetaXattr, value.data(), value.size(), 0) != 0) {
    return Internal(std::string("cannot keep an object's metadata (contentType, metadata): the "
                                "file system refused an extended attribute: ") +
                    std::strerror(errno));
  }
  return OkStatus();
}

Status CheckCustomMeta(const std::map<std::string, std::string>& custom, const std::string& field) {
  size_t total = 0;
  for (const auto& [k, v] : custom) {
    if (k.empty()) return InvalidArgument(field + ": a metadata key is empty");
    total += k.size() + v.size();
  }
  if (total > kMaxCustomBytes) {
    return InvalidArgument(field + ": custom metadata is " + std::to_string(total) +
                           " bytes; Cloud Storage allows at most 8 KiB of keys and values");
  }
  return OkStatus();
}

}  // namespace stoker::storage
