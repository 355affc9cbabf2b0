// Resumable uploads, in the shape of Cloud Storage's protocol: a session is
// opened for one object, receives the object's bytes in order, in chunks,
// over any number of requests (and daemon restarts), and becomes the
// object, atomically, when the last byte has arrived.
//
// On disk, under `dir` (<data_dir>/uploads/), per session (id: 32 random
// hex digits, the session URI's secret):
//   <id>.json  {"bucket","object","size" (-1 until known),"user","created_us"}
//   <id>.part  the bytes received so far: its length is the progress.
// Nothing else is kept between requests, so a restarted daemon resumes a
// session from these two files (docs/decisions/0028). Sessions untouched
// for 7 days are removed when a new one starts. When the object is made,
// the .part file is renamed into the bucket (copied when the bucket is on
// another file system) and the .json removed.
//
// Thread-safe. One chunk per session at a time: a second writer gets
// Unavailable until the first ends.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/buckets.h"

namespace stoker::storage {

struct UploadSession {
  std::string id;
  std::string bucket;
  std::string object;
  std::string user;   // who started it ("" = anyone with the id)
  int64_t size = -1;  // the object's size, -1 until a chunk says it
  uint64_t received = 0;
  ObjectMeta meta;  // kept with the object it becomes
};

// The NotFound for an id that names no session. The API answers it too to
// a caller who may not use a session that exists (another user's), so
// that trying ids tells nothing.
Status UnknownSession(const std::string& id);

class UploadSessions {
 public:
  UploadSessions(std::filesystem::path dir, Buckets* buckets);

  // Opens a session for gs://bucket/object (the bucket must exist; the name
  // is checked now). `size` -1 when not yet known.
  Result<UploadSession> Start(const std::string& bucket, const std::string& object, int64_t size,
                              const std::string& user, const ObjectMeta& meta = {});
  // The session and its progress. NotFound (UnknownSession) for an
  // unknown, finished or expired id. Whether a caller may use it (its
  // `user`, or an admin) is the API's check, on every route that names it.
  Result<UploadSession> Get(const std::string& id) const;
  // Removes a session and its bytes. NotFound as Get.
  Status Cancel(const std::string& id);

  // What a chunk (or a finalising request) left behind.
  struct Outcome {
    UploadSession session;             // with `received` after the chunk
    std::optional<ObjectInfo> object;  // set when the upload is complete
  };

  // One chunk: bytes [first, first + length) of an object of `total` bytes
  // (-1: not said yet). `length` nullopt: the chunk is the rest of the
  // object, however long its body turns out (Content-Range `bytes N-*/...`,
  // the single request of a client that streams): the object is complete
  // when it ends. Bytes the session already has (a resent chunk) are
  // skipped; a chunk that starts past the session's end is refused
  // (FailedPrecondition, saying where it stands).
  class Chunk {
   public:
    ~Chunk();
    Chunk(const Chunk&) = delete;
    Chunk& operator=(const Chunk&) = delete;
    Status Append(std::string_view bytes);
    // Ends the chunk: checks it had `length` bytes, and when that completes
    // the object (received == total), makes it.
    Result<Outcome> Finish();

   private:
    friend class UploadSessions;
    Chunk() = default;
    UploadSessions* owner_ = nullptr;
    UploadSession session_;
    int fd_ = -1;
    uint64_t skip_ = 0;      // bytes of the body the session already had
    std::optional<uint64_t> expected_;  // the body's length; nullopt: the rest
    uint64_t seen_ = 0;
    Hasher hasher_;
    Status failed_;
  };
  Result<std::unique_ptr<Chunk>> OpenChunk(const std::string& id, uint64_t first,
                                           std::optional<uint64_t> length, int64_t total);

 private:
  Result<UploadSession> Load(const std::string& id) const;
  Status SaveSize(UploadSession* session, int64_t total);
  void Release(const std::string& id, const Hasher& hasher, bool keep_hasher);
  void RemoveExpired();

  std::filesystem::path dir_;
  Buckets* buckets_;
  mutable std::mutex mu_;
  std::set<std::string> busy_;             // sessions with a chunk open
  std::map<std::string, Hasher> hashers_;  // checksums of each .part so far
};

}  // namespace stoker::storage
