// The client side of copies between local files and gs:// buckets: the
// transfer engine of `stoker storage ...` and `stoker gsutil ...`
// (docs/storage.md), talking to a Cloud Storage JSON API server (stokerd's)
// through an ObjectApi.
//
// Transfers stream: a file is read and written a piece at a time, so memory
// stays flat whatever the size. Files over kResumableThreshold go up as
// resumable uploads in kChunkBytes chunks, with a tracker file per upload
// under $STOKER_HOME/tracker-files (the session URI), so that the same
// command run again after an interruption continues where it stopped;
// downloads go to "<dest>_.gstmp" and continue from its length with a
// Range request. Every transfer is checked against the object's crc32c and
// md5Hash. Several files go through a pool of connections (RunTransfers).
//
// The planning (which objects a URL names, where each copy goes, what an
// rsync must do) is pure and apart from the transfers, so tests can drive it
// without a server. Messages about skipped directories and resumed uploads
// go to stderr, as gsutil prints them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "http/http.h"
#include "storage/buckets.h"

namespace stoker::storage {

// Files over this size go up as resumable uploads.
inline constexpr uint64_t kResumableThreshold = 8ull << 20;
// The size of one chunk of a resumable upload (and of stdin's buffer).
inline constexpr uint64_t kChunkBytes = 64ull << 20;
// Connections a multi-file transfer uses.
inline constexpr int kTransferWorkers = 8;

// What the engine needs of one connection to the object API, credentials
// included. Used by one thread at a time.
class ObjectApi {
 public:
  virtual ~ObjectApi() = default;

  // One streamed request (http::Client::Stream). Any HTTP status is a
  // successful Result; a failed transport is an error (kUnavailable or
  // kDeadlineExceeded are worth retrying).
  virtual Result<http::Response> Stream(const std::string& method, const std::string& target,
                                        std::map<std::string, std::string> headers,
                                        uint64_t body_size, const http::Client::BodyReader& reader,
                                        const http::Client::BodyWriter& writer) = 0;
  // A call whose answer is JSON; a non-2xx answer is its Status.
  virtual Result<nlohmann::json> Call(const std::string& method, const std::string& target) = 0;
  // The Status a Stream answer stands for: Ok for 2xx, else the server's
  // message with the code matching the HTTP status.
  virtual Status StatusOf(const http::Response& response) const = 0;
  // The server's URL (a download's tracker file is per server).
  virtual const std::string& url() const = 0;
};

// "1.50 MiB": bytes in B, KiB, MiB, GiB or TiB, with `decimals` decimals
// above bytes.
std::string HumanBytes(double bytes, int decimals = 2);

// True when `s` has one of gsutil's wildcard characters (* ? [).
bool HasWildcard(const std::string& s);

// gsutil's wildcards over object names: '*' and '?' stay within one
// '/'-separated part, '**' crosses them, [set] as in fnmatch(3).
bool WildMatch(std::string_view pattern, std::string_view name);

// ---------------------------------------------------------------- progress

// Bytes moved so far, shown on stderr ~4 times a second when it is a
// terminal (and `show`): done/total, rate, ETA, refreshed in place.
// Add, AddTotal and FileDone are thread-safe.
class Progress {
 public:
  Progress(bool show, uint64_t total_bytes, size_t total_files);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Add(uint64_t n) { done_ += n; }
  void AddTotal(uint64_t n) { total_ += n; }
  void FileDone() { ++files_done_; }
  // False when made with show=false (-q): transfers print no messages.
  bool quiet() const { return quiet_; }
  // Stops refreshing and prints the last line. Idempotent.
  void Stop();

 private:
  void Loop();
  void Print();

  const bool show_;
  const bool quiet_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> total_;
  std::atomic<size_t> files_done_{0};
  size_t files_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------- transfers

// Uploads one local file (or "-": stdin) to gs://bucket/object, checked
// against the object's checksums (a mismatch deletes the object and is
// kInternal). `sent` counts the bytes sent (for files; stdin adds none).
// Returns the object's resource.
Result<nlohmann::json> Upload(ObjectApi& api, const std::string& local, const std::string& bucket,
                              const std::string& object, Progress* progress, uint64_t* sent);

// Downloads gs://bucket/object to `dest` (parent directories made) through
// "<dest>_.gstmp", which a second run continues when the object is
// unchanged; checked, then renamed over `dest`. A checksum mismatch removes
// the temp file; a broken transfer keeps it.
Status Download(ObjectApi& api, const std::string& bucket, const std::string& object,
                const std::filesystem::path& dest, Progress* progress);

// Writes gs://bucket/object to `out_fd` (stdout for cat and cp to "-"),
// then checks the bytes against the object's checksums.
Status FetchChecked(ObjectApi& api, const std::string& bucket, const std::string& object,
                    int out_fd, Progress* progress);

// Deletes gs://bucket/object.
Status DeleteObject(ObjectApi& api, const std::string& bucket, const std::string& object);

// ---------------------------------------------------------------- naming

// An object as a listing gives it.
struct RemoteObject {
  std::string name;
  uint64_t size = 0;
  std::string updated, crc32c, md5;
};

// Every object of `bucket` whose name starts with `prefix`, by name.
Result<std::vector<RemoteObject>> ListObjects(ObjectApi& api, const std::string& bucket,
                                              const std::string& prefix);

// What a gs:// argument names: the objects it matches (a wildcard, an
// object, or everything under a prefix).
struct ExpandedUrl {
  std::string bucket;
  std::string base;  // the part of the names a copy strips ("" = bucket root)
  std::vector<RemoteObject> objects;
  bool is_prefix = false;  // the URL named a "directory" (or bucket), not one object
};

// The prefix to list for `uri`: its object part up to the first wildcard.
std::string ListingPrefix(const GsUri& uri);

// Which of `listing` (ListObjects of ListingPrefix(uri)) `uri` names. An
// object of exactly the URL's name wins over a prefix of that name; with
// `recursive`, a wildcard also takes everything under a matching prefix
// ("gs://b/dir*" -r).
ExpandedUrl SelectObjects(const GsUri& uri, std::vector<RemoteObject> listing, bool recursive);

// ListObjects + SelectObjects for a gs:// URL. InvalidArgument for a bad URL.
Result<ExpandedUrl> ExpandGs(ObjectApi& api, const std::string& url, bool recursive);

// A local file a source argument names, and its name relative to what the
// copy keeps: the file name, or for a directory "<dir name>/<path below>".
struct LocalFile {
  std::filesystem::path path;
  std::string relative;
};

// Local files a source names: a file, "-" (stdin), a glob, or (recursive) a
// directory, sorted within a directory. A directory without `recursive` is
// skipped with a message on stderr and sets *omitted_dir.
std::vector<LocalFile> ExpandLocal(const std::string& arg, bool recursive, bool* omitted_dir);

// The object name `file` gets under the destination object `dest_object`
// ("" = the bucket root). `into`: the destination is a "directory" (it ends
// in '/', is the bucket root, an existing prefix, or takes several
// sources), so the copy goes below it; else a directory source's top
// directory is replaced by the destination, and a file becomes it.
std::string UploadObjectName(const std::string& dest_object, bool into, bool src_is_dir,
                             const LocalFile& file);

// The local path `object` of `from` goes to under the destination `dst`.
// `dst_is_dir`: dst is an existing directory. A prefix keeps the names
// below it (under its own last part when dst exists); several objects, or a
// dst ending in '/', take their file names (with `recursive` their names
// below the base); one object otherwise becomes dst.
std::filesystem::path DownloadPath(const std::string& dst, bool dst_is_dir, bool recursive,
                                   const ExpandedUrl& from, const RemoteObject& object);

// ---------------------------------------------------------------- rsync

enum class SyncAction { kUpload, kDownload, kDeleteLocal, kDeleteRemote };

struct SyncStep {
  SyncAction action;
  std::filesystem::path local;  // the local file (to write, for a download)
  std::string object;           // the object's full name
  uint64_t bytes = 0;           // what the step moves (0 for a delete)
};

// Regular files below `root` by their '/'-separated relative names: every
// level with `recursive`, else the top one. Empty when root is no directory.
std::map<std::string, std::filesystem::path> LocalFilesByName(const std::filesystem::path& root,
                                                              bool recursive);

// `listing` (objects below `prefix`, which is "" or ends in '/') by their
// names below the prefix; without `recursive` only the top level.
std::map<std::string, RemoteObject> RemoteObjectsByName(std::vector<RemoteObject> listing,
                                                        const std::string& prefix, bool recursive);

// True when the local file has the object's size and (when the object has
// one) its md5Hash.
bool SameContent(const RemoteObject& object, const std::filesystem::path& file);

// What `rsync` does to make the destination like the source: copies what
// the destination lacks or has different (per `same`, asked only of names
// on both sides), and with `delete_extra` deletes what only the destination
// has. `upload`: local -> gs://; else gs:// -> local (new files go to
// local_root/<name>). `prefix` is the objects' prefix (as for
// RemoteObjectsByName). Steps come in name order, local names first.
std::vector<SyncStep> PlanRsync(
    const std::map<std::string, std::filesystem::path>& local,
    const std::map<std::string, RemoteObject>& remote, const std::filesystem::path& local_root,
    const std::string& prefix, bool upload, bool delete_extra,
    const std::function<bool(const RemoteObject&, const std::filesystem::path&)>& same);

// ---------------------------------------------------------------- the pool

// One transfer of a multi-file command; `what` names it in messages.
struct TransferJob {
  std::function<Status(ObjectApi&)> run;
  std::string what;
};

// Opens a connection for one worker.
using ObjectApiFactory = std::function<Result<std::unique_ptr<ObjectApi>>()>;

// Runs the jobs on up to `workers` connections (each worker opens its own);
// a failure is printed on stderr as it happens ("CommandException: WHAT:
// MESSAGE") and the others go on. Returns how many failed.
int RunTransfers(const ObjectApiFactory& connect, const std::vector<TransferJob>& jobs,
                 int workers);

}  // namespace stoker::storage
