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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/files.h"
#include "common/status.h"
#include "storage/object_meta.h"

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
  // Cloud Storage's checksums of the bytes, base64 as its JSON API gives
  // them (`crc32c`: the CRC-32C big-endian; `md5Hash`: the MD5 digest).
  // "" when not known without reading the object (List gives the ones kept
  // from the object's upload; Stat computes missing ones).
  std::string crc32c;
  std::string md5;
  // Content type, custom metadata and metageneration (object_meta.h). The
  // object's generation is mtime_us.
  ObjectMeta meta;
};

// CRC-32C, MD5 (unless `md5` is false: a client that checks transfers by
// CRC-32C alone, as gsutil does with compiled crcmod) and, when asked,
// SHA-256 of bytes fed in order. Copyable (a resumable upload keeps one
// between its chunks).
class Hasher {
 public:
  explicit Hasher(bool sha256 = false, bool md5 = true);
  ~Hasher();
  Hasher(const Hasher& other);
  Hasher& operator=(const Hasher& other);
  void Update(std::string_view bytes);
  uint64_t bytes() const { return bytes_; }
  // The checksums so far, base64 (ObjectInfo's form); the hasher goes on.
  std::string Crc32cBase64() const;
  std::string Md5Base64() const;  // "" when made without md5
  std::string Sha256Hex() const;  // "" unless made with sha256

 private:
  uint32_t crc_ = 0;
  uint64_t bytes_ = 0;
  void* md5_ = nullptr;     // EVP_MD_CTX*
  void* sha256_ = nullptr;  // EVP_MD_CTX*, or null
};

class Buckets;

// An object being written, by streaming: bytes go to a new temp file in the
// object's directory (reached without following a link, hidden from List),
// and the object appears under its name only at Commit, by an atomic
// rename, so a reader never sees part of an upload. Destroyed without
// Commit (a broken upload), the temp file is removed. Not thread-safe.
class ObjectWriter {
 public:
  ~ObjectWriter();
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  Status Append(std::string_view bytes);
  const Hasher& hasher() const { return hasher_; }
  // The temp file, open for reading and writing (staging checks the
  // archive in it before it commits).
  int fd() const { return fd_; }
  // The metadata Commit keeps with the object (default: none).
  void SetMeta(ObjectMeta meta) { meta_ = std::move(meta); }
  // Syncs and renames the temp file to the object name (or, given,
  // `final_name`: another name in the same directory); returns its info
  // with checksums, which are kept with the object for later listings.
  Result<ObjectInfo> Commit(const std::string& final_name = "");

 private:
  friend class Buckets;
  ObjectWriter() = default;
  int dir_fd_ = -1;
  int fd_ = -1;
  std::string tmp_;   // name in dir_fd_
  std::string name_;  // the object's last path component
  std::string object_;
  std::string uri_;
  CreateModes modes_;
  Hasher hasher_;
  ObjectMeta meta_;
  Status failed_;  // a write error, returned again by Append and Commit
};

// An object open for reading: the descriptor (owned by the caller, who
// closes it) and what Stat knows.
struct OpenObject {
  int fd = -1;
  ObjectInfo info;
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

  // The data dir (resumable upload sessions live in its uploads/).
  const std::filesystem::path& DataDir() const { return data_dir_; }
  // The directory of a bucket, whether or not it exists.
  std::filesystem::path BucketDir(const std::string& bucket) const;
  bool Exists(const std::string& bucket) const;
  // Creates the bucket directory. Ok when it exists already.
  Status Create(const std::string& bucket);
  std::vector<std::string> ListBuckets() const;
  // Removes the bucket's directory if it is empty (an upload that made the
  // bucket and then failed). Best effort.
  void RemoveIfEmpty(const std::string& bucket);

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

  // Starts writing an object by streaming (ObjectWriter). The bucket must
  // exist; missing directories on the way are made. PermissionDenied for
  // the staging bucket; FailedPrecondition when a directory has the name.
  Result<std::unique_ptr<ObjectWriter>> OpenWriter(const std::string& bucket,
                                                   const std::string& object);
  // Moves the complete file `from_name` in the directory `from_dir_fd`
  // (a finished resumable upload, on the daemon's own disk) into the
  // object, atomically; copies when the bucket is on another file system.
  // `hashes` (its checksums) and `meta` are kept with the object.
  Result<ObjectInfo> AdoptFile(const std::string& bucket, const std::string& object,
                               int from_dir_fd, const std::string& from_name, const Hasher& hashes,
                               const ObjectMeta& meta = {});
  // The object's size, time and checksums (computed, and kept, when the
  // object was not written here or changed since). NotFound if absent.
  Result<ObjectInfo> Stat(const std::string& bucket, const std::string& object) const;
  // Opens an object for reading (never through a link), with Stat's info
  // when `with_hashes`, else without checksums.
  Result<OpenObject> Open(const std::string& bucket, const std::string& object,
                          bool with_hashes) const;
  // Deletes an object (never through a link), then the directories above
  // it that it leaves empty. NotFound if absent; PermissionDenied for the
  // staging bucket.
  Status Delete(const std::string& bucket, const std::string& object);
  // Stages a package archive being uploaded: returns a writer for it in the
  // staging bucket; StageCommit checks it (CheckTarGzFd) and keeps it under
  // its SHA-256, returning its gs:// URI like Stage.
  Result<std::unique_ptr<ObjectWriter>> StageWriter();
  Result<std::string> StageCommit(std::unique_ptr<ObjectWriter> writer);

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
  // OpenWriter without the staging rule.
  Result<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& bucket,
                                                  const std::string& object, bool sha256);

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
