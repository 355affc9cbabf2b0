// Local buckets behind gs:// URIs.
//
// A bucket is a directory: `<data_dir>/buckets/<name>/` unless the config maps
// the name to another path. The reserved bucket `stoker-staging` is
// `<data_dir>/staging/`, where package archives are kept by content hash.
// Object names are relative paths inside the bucket; a name that would leave
// the bucket (absolute, `..`, through a symlink) is refused.
//
// Thread-safe: the object holds no mutable state after construction; the
// file system is the state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::storage {

inline constexpr char kStagingBucket[] = "stoker-staging";
// The bucket that holds the outputs of jobs without baseOutputDirectory
// (gs://stoker-outputs/<job id>/, trials .../hptuning-<study>/<trial>/);
// made by the daemon when a job first needs it.
inline constexpr char kOutputsBucket[] = "stoker-outputs";

struct GsUri {
  std::string bucket;
  std::string object;  // "" for the bucket root; no leading '/'
};

// Parses "gs://bucket/path/to/obj". InvalidArgument (naming `field`) for a
// URI that is not gs://, has no bucket, or a bucket name that breaks the
// Cloud Storage rules (3-63 chars of a-z 0-9 - _ .).
Result<GsUri> ParseGsUri(const std::string& uri, const std::string& field);

struct ObjectInfo {
  std::string name;  // object name relative to the bucket
  uint64_t size = 0;
  int64_t mtime_us = 0;
};

class Buckets {
 public:
  // `overrides` maps bucket names to directories (from the config).
  // `writer_gid`: the group of the accounts that may write buckets (config
  // bucket_group; the trainers of a root daemon). When set, every bucket
  // directory is that group's, setgid and group-writable (02775), and every
  // object 0664, so trainers write anywhere in a bucket as on GCS while
  // other local accounts only read
  // (docs/decisions/0012-trainer-writes-only-its-work-dir.md).
  Buckets(std::filesystem::path data_dir, std::map<std::string, std::filesystem::path> overrides,
          std::optional<uint32_t> writer_gid = std::nullopt);

  // The directory of a bucket, whether or not it exists.
  std::filesystem::path BucketDir(const std::string& bucket) const;
  bool Exists(const std::string& bucket) const;
  // Creates the bucket directory. Ok when it exists already.
  Status Create(const std::string& bucket);
  std::vector<std::string> ListBuckets() const;

  // Resolves a gs:// URI to a local path inside an existing bucket.
  // NotFound (naming `field` and how to create the bucket) when the bucket
  // does not exist; InvalidArgument when the object name escapes the bucket.
  // "gs://b" and "gs://b/" give the bucket directory; "gs://b/out/" gives
  // `<bucket dir>/out` (no trailing '/'). The object need not exist.
  Result<std::filesystem::path> Resolve(const std::string& uri, const std::string& field) const;

  // Writes an object (creating parent directories) atomically.
  // PermissionDenied for the staging bucket, which only Stage writes.
  Status Put(const std::string& bucket, const std::string& object, std::string_view data);
  // Creates the directory `uri` names (like mkdir -p; for a job's output
  // directory) as Put makes an object's parents, and returns its path.
  Result<std::filesystem::path> MakeDir(const std::string& uri, const std::string& field);

  // Makes buckets made before writer_gid was set writable by that group:
  // each bucket whose top directory is not yet the group's is walked once
  // (never through a link). Returns how many directories and objects it
  // changed (0 without writer_gid).
  Result<int64_t> ShareWithWriters();

  // Reads an object (never through a link: trainers may write buckets).
  // NotFound if it does not exist.
  Result<std::string> Get(const std::string& bucket, const std::string& object) const;
  // Lists objects (files, recursively) whose names start with `prefix`, sorted by name.
  Result<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) const;

  // Stores an archive in the staging bucket under its SHA-256
  // ("<hex>.tar.gz") and returns its gs:// URI. Storing the same bytes
  // twice keeps one copy.
  Result<std::string> Stage(std::string_view archive_bytes);

 private:
  // Put without the staging rule.
  Status Write(const std::string& bucket, const std::string& object, std::string_view data);

  std::filesystem::path data_dir_;
  std::map<std::string, std::filesystem::path> overrides_;
  std::optional<uint32_t> writer_gid_;
};

// For an object of the staging bucket: ok only when it is named
// "<sha256 hex>.tar.gz" and `bytes` (its content) has that SHA-256, so a
// package changed after staging is never run; InvalidArgument (a name that
// staging never makes) or FailedPrecondition naming `field` otherwise. Ok for
// every other bucket.
Status CheckStagedContent(const GsUri& uri, std::string_view bytes, const std::string& field);

// Replaces every "gs://bucket/obj" inside `text` (an argument, an env value)
// by the local path of that object. Unknown buckets are left unchanged.
// A URI runs from "gs://" to the next whitespace, quote, comma or the end;
// one that fails to resolve (bad name, escape) is also left unchanged, and a
// trailing '/' is kept.
std::string RewriteGsUris(const std::string& text, const Buckets& buckets);

}  // namespace stoker::storage
