// Shared by the files of stoker_storage that implement Buckets (buckets.h):
// buckets.cc (names, bucket directories, whole-object reads and writes),
// bucket_objects.cc (streamed writes, reads, deletes) and object_hashes.cc
// (Hasher, the checksums kept with an object). Private to the library.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/files.h"
#include "common/status.h"
#include "storage/buckets.h"

namespace stoker::storage::buckets_internal {

inline constexpr std::string_view kScheme = "gs://";

// ObjectWriter's temp files: ".stoker-upload.<pid>.<n>" (List skips them).
inline constexpr std::string_view kUploadTempPrefix = ".stoker-upload.";

// Maps bucket + object to a path inside the (existing) bucket directory, or
// refuses the name: InvalidArgument for a bad bucket or object name or one
// that resolves outside the bucket through a link, NotFound for a missing
// bucket. `field` and `uri` only shape the messages.
Result<std::filesystem::path> ObjectPath(const Buckets& buckets, const std::string& bucket,
                                         const std::string& object, const std::string& field,
                                         const std::string& uri);

// The bucket's directory with the links on its way resolved: the admin's
// (a config override may be a link), unlike anything below it.
std::filesystem::path RealDir(const Buckets& buckets, const std::string& bucket);

// How directories and objects are created in a bucket: the writer group's
// shared modes when `gid` is set, else the defaults.
CreateModes ModesFor(const std::optional<uint32_t>& gid);

// Size and modification time of `st` into `info`.
void FillFromStat(const struct stat& st, ObjectInfo* info);

// The checksums kept with the object at `path` (not followed) or open as
// `fd`, into info->crc32c/md5 if still valid for `st` (same size and
// mtime); false (info untouched) when none are kept or they are stale.
bool KeptHashesAt(const std::string& path, const struct stat& st, ObjectInfo* info);
bool KeptHashesOf(int fd, const struct stat& st, ObjectInfo* info);

// Keeps info.crc32c/md5 with the object open as `fd`, for its current size
// and mtime. Best effort: a file system without user xattrs keeps nothing.
void KeepHashes(int fd, const ObjectInfo& info);

}  // namespace stoker::storage::buckets_internal
