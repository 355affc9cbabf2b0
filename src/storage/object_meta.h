// What Cloud Storage keeps about an object besides its bytes and checksums:
// its content type, its custom metadata and its metageneration (how many
// times its metadata was set). Its generation is not kept: it is the
// object's modification time in microseconds, which changes exactly when
// the bytes are replaced (an upload commits by rename; a trainer that
// rewrites the file in place gives it a new generation too).
//
// Kept in the extended attribute `user.stoker.meta` of the object's file as
// JSON, with the size and modification time (ns) it was written for:
// believed only while both still match, so a file replaced or rewritten by
// anything but the API reads as a new object with default metadata
// (application/octet-stream, none, metageneration 1). Best effort, like the
// checksums: a file system without user attributes keeps nothing.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace stoker::storage {

inline constexpr char kDefaultContentType[] = "application/octet-stream";

struct ObjectMeta {
  std::string content_type = kDefaultContentType;
  std::map<std::string, std::string> custom;  // Cloud Storage's `metadata`
  int64_t metageneration = 1;
  bool operator==(const ObjectMeta&) const = default;
};

// The metadata kept with the open file `fd` whose stat is `st`; defaults
// when none is kept or it was kept for other bytes.
ObjectMeta KeptMeta(int fd, const struct stat& st);
// The same for the file at `path` (its last component not followed).
ObjectMeta KeptMetaAt(const std::string& path, const struct stat& st);
// Keeps `meta` with the open file `fd`, for its present size and
// modification time (call it after the last write). Internal when the file
// system refuses (a user who set metadata must not believe it kept).
Status KeepMeta(int fd, const ObjectMeta& meta);

// Checks a custom metadata map as Cloud Storage would: keys non-empty, the
// total of keys and values at most 8 KiB. InvalidArgument naming `field`.
Status CheckCustomMeta(const std::map<std::string, std::string>& custom, const std::string& field);

}  // namespace stoker::storage
