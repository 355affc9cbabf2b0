// Small helpers that several files of stoker_storage need (archive.cc,
// buckets.cc, object_hashes.cc, object_meta.cc): one definition each, so
// that the files also compile together as one unity translation unit.
// Private to the library.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>

namespace stoker::storage::internal {

// True when `path` is `root` or below it (both already canonical). "/a/b/"
// canonicalises with an empty last element; that is tolerated.
inline bool IsInside(const std::filesystem::path& path, const std::filesystem::path& root) {
  auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  if (root_end == root.end()) return true;
  return std::next(root_end) == root.end() && root_end->empty();
}

// The modification time of `st` in nanoseconds since the epoch.
inline int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace stoker::storage::internal
