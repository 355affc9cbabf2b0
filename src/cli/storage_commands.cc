// Storage commands: `stoker storage ...` and `stoker gsutil ...` between
// local paths and gs:// buckets (docs/storage.md).
//
// Transfers stream: a file is read and written a piece at a time, so memory
// stays flat whatever the size. Files over kResumableThreshold go up as
// resumable uploads in kChunkBytes chunks, with a tracker file per upload
// under $STOKER_HOME/tracker-files (the session URI), so that the same
// command run again after an interruption continues where it stopped;
// downloads go to "<dest>_.gstmp" and continue from its length with a
// Range request. Every transfer is checked against the object's crc32c and
// md5Hash. Several files go through a pool of connections (8).
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "common/files.h"
#include "http/http.h"
#include "storage/buckets.h"

namespace stoker::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kResumableThreshold = 8ull << 20;
constexpr uint64_t kChunkBytes = 64ull << 20;
constexpr int kWorkers = 8;
constexpr int kRetries = 5;

bool IsGs(const std::string& s) { return s.rfind("gs://", 0) == 0; }
bool HasWildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string Human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

std::string ObjectPath(const std::string& bucket, const std::string& object) {
  return "/storage/v1/b/" + http::UrlEncode(bucket) + "/o/" + http::UrlEncode(object);
}

// ---- progress --------------------------------------------------------------

// Bytes moved so far, shown on stderr ~4 times a second when it is a
// terminal (and not -q): done/total, rate, ETA, refreshed in place.
class Progress {
 public:
  Progress(bool show, uint64_t total_bytes, size_t total_files)
      : show_(show && ::isatty(2)), quiet_(!show), total_(total_bytes), files_(total_files) {
    if (show_) thread_ = std::thread([this] { Loop(); });
  }
  ~Progress() { Stop(); }
  void Add(uint64_t n) { done_ += n; }
  bool quiet() const { return quiet_; }
  void FileDone() { ++files_done_; }
  void AddTotal(uint64_t n) { total_ += n; }
  void Stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    Print();
    std::fputs("\n", stderr);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) Print();
  }
  void Print() {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    uint64_t done = done_;
    uint64_t total = total_;
    double rate = secs > 0 ? done / secs : 0;
    std::string eta = "--:--:--";
    if (rate > 0 && total >= done) {
      int64_t left = static_cast<int64_t>((total - done) / rate);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(left / 3600),
                    static_cast<long long>(left / 60 % 60), static_cast<long long>(left % 60));
      eta = buf;
    }
    std::fprintf(stderr, "\r\033[K[%zu/%zu files][%s/%s] %3d%% %s/s ETA %s", files_done_.load(),
                 files_, Human(done).c_str(), Human(total).c_str(),
                 total ? static_cast<int>(100.0 * done / total) : 100, Human(rate).c_str(),
                 eta.c_str());
    std::fflush(stderr);
  }

  const bool show_;
  const bool quiet_;  // -q: no messages either
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

// ---- checksums -------------------------------------------------------------

// What transfers are checked with: CRC-32C alone (the CPU's crc32
// instruction, several GB/s), as gsutil checks with compiled crcmod; MD5
// would cost a core per 600 MB/s on top of the daemon's.
storage::Hasher TransferHasher() { return storage::Hasher(/*sha256=*/false, /*md5=*/false); }

// The object's checksums against what was sent or received.
Status Verify(const json& object, const storage::Hasher& local, const std::string& what) {
  std::string crc = object.value("crc32c", ""), md5 = object.value("md5Hash", "");
  const std::string local_md5 = local.Md5Base64();  // "" for a CRC-only hasher
  if ((!crc.empty() && crc != local.Crc32cBase64()) ||
      (!md5.empty() && !local_md5.empty() && md5 != local_md5) || (crc.empty() && md5.empty())) {
    return Internal(what + ": checksum mismatch: the object has crc32c " + crc + " md5 " + md5 +
                    ", the local bytes crc32c " + local.Crc32cBase64() + " md5 " +
                    local.Md5Base64() + "; the copy is corrupt, copy it again");
  }
  return OkStatus();
}

Status HashRange(int fd, uint64_t length, storage::Hasher* h) {
  std::vector<char> buf(1 << 20);
  uint64_t at = 0;
  while (at < length) {
    ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), length - at), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Internal("cannot read back " + std::to_string(length) + " bytes");
    h->Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    at += static_cast<uint64_t>(n);
  }
  return OkStatus();
}

// ---- tracker files ---------------------------------------------------------

// $STOKER_HOME/tracker-files/<sha256 of what the transfer is>.json: the
// resumable session of an upload (or the object checksum of a download),
// as gsutil keeps its tracker files.
fs::path TrackerPath(const std::string& key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned i = 0; i < 16; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return DefaultStokerHome() / "tracker-files" / (hex + ".json");
}

json ReadTracker(const fs::path& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return json::object();
  json j = json::parse(*text, nullptr, false);
  return j.is_object() ? j : json::object();
}

void WriteTracker(const fs::path& path, const json& j) {
  (void)MakeDirs(path.parent_path());
  (void)WriteFileAtomic(path, j.dump(), Durability::kNoSync);
}

// ---- uploads ---------------------------------------------------------------

struct Source {
  std::string display;  // "file.txt", "-" for stdin
  int fd = -1;          // owned by the caller
  int64_t size = -1;    // -1: unknown (stdin)
  std::string tracker_key;
};

// Sends bytes [from, from + n) of `src` (pread; the fd's offset for
// stdin is not used: stdin goes through UploadStream).
http::Client::BodyReader FileReader(const Source& src, uint64_t from, storage::Hasher* hasher,
                                    Progress* progress) {
  auto at = std::make_shared<uint64_t>(from);
  return [fd = src.fd, at, hasher, progress](char* buf, size_t n) -> Result<size_t> {
    ssize_t got;
    do {
      got = ::pread(fd, buf, n, static_cast<off_t>(*at));
    } while (got < 0 && errno == EINTR);
    if (got < 0) return Internal(std::string("cannot read the file: ") + std::strerror(errno));
    *at += static_cast<uint64_t>(got);
    hasher->Update(std::string_view(buf, static_cast<size_t>(got)));
    progress->Add(static_cast<uint64_t>(got));
    return static_cast<size_t>(got);
  };
}

// How far a resumable session got: its byte count, or -1 when it no longer
// exists; `done` gets the object when it is complete.
Result<int64_t> SessionProgress(Connection& conn, const std::string& session, int64_t total,
                                json* done) {
  std::string range = "bytes */" + (total >= 0 ? std::to_string(total) : std::string("*"));
  auto r = conn.Stream("PUT", session, {{"content-range", range}}, 0, nullptr, nullptr);
  if (!r.ok()) return r.status();
  if (r->status == 404) return int64_t{-1};
  if (r->status == 200 || r->status == 201) {
    *done = json::parse(r->body, nullptr, false);
    return total;
  }
  if (r->status != 308) return Connection::StatusOf(*r);
  auto it = r->headers.find("range");
  if (it == r->headers.end()) return int64_t{0};
  size_t dash = it->second.find('-');
  return dash == std::string::npos ? int64_t{0} : std::stoll(it->second.substr(dash + 1)) + 1;
}

Result<std::string> StartSession(Connection& conn, const std::string& bucket,
                                 const std::string& object, int64_t size) {
  std::map<std::string, std::string> headers;
  if (size >= 0) headers["x-upload-content-length"] = std::to_string(size);
  auto r = conn.Stream("POST",
                       "/upload/storage/v1/b/" + http::UrlEncode(bucket) +
                           "/o?uploadType=resumable&name=" + http::UrlEncode(object),
                       headers, 0, nullptr, nullptr);
  if (!r.ok()) return r.status();
  STOKER_RETURN_IF_ERROR(Connection::StatusOf(*r));
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("sessionUri")) {
    return Internal("stokerd did not return an upload session for gs://" + bucket + "/" + object);
  }
  return j["sessionUri"].get<std::string>();
}

// A file of known size as a resumable upload (continued from its tracker
// file when one matches), in kChunkBytes chunks; a broken connection or a
// restarted daemon is retried from where the session stands.
Result<json> UploadResumable(Connection& conn, const Source& src, const std::string& bucket,
                             const std::string& object, Progress* progress, uint64_t* sent) {
  const uint64_t size = static_cast<uint64_t>(src.size);
  fs::path tracker = TrackerPath(src.tracker_key);
  json t = ReadTracker(tracker);
  std::string session = t.value("session", "");
  storage::Hasher hasher = TransferHasher();
  uint64_t offset = 0;
  json done;
  for (int attempt = 0;; ++attempt) {
    if (session.empty()) {
      STOKER_ASSIGN_OR_RETURN(session, StartSession(conn, bucket, object, src.size));
      WriteTracker(tracker, {{"session", session}, {"object", "gs://" + bucket + "/" + object}});
      offset = 0;
    } else {
      auto at = SessionProgress(conn, session, src.size, &done);
      if (!at.ok()) {
        if (attempt < kRetries && (at.status().code() == Code::kUnavailable ||
                                   at.status().code() == Code::kDeadlineExceeded)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
          continue;
        }
        return at.status();
      }
      if (*at < 0) {  // the session is gone: start over
        session.clear();
        continue;
      }
      offset = static_cast<uint64_t>(*at);
      if (attempt == 0 && !progress->quiet()) {
        std::cerr << "Resuming upload of " << src.display << " at byte " << offset << " of " << size
                  << "\n";
      }
    }
    if (!done.is_null() && done.is_object()) break;
    // The checksum covers the whole file: hash what the session already
    // has (or had: a retry may land before the bytes hashed so far).
    if (hasher.bytes() != offset) {
      hasher = TransferHasher();
      int64_t before = static_cast<int64_t>(offset);
      STOKER_RETURN_IF_ERROR(HashRange(src.fd, offset, &hasher));
      (void)before;
    }
    Status failed;
    while (offset < size || size == 0) {
      uint64_t n = std::min<uint64_t>(kChunkBytes, size - offset);
      std::string range = size == 0
                              ? "bytes */0"
                              : "bytes " + std::to_string(offset) + "-" +
                                    std::to_string(offset + n - 1) + "/" + std::to_string(size);
      auto r = conn.Stream("PUT", session, {{"content-range", range}}, n,
                           FileReader(src, offset, &hasher, progress), nullptr);
      if (!r.ok()) {
        failed = r.status();
        break;
      }
      if (r->status == 308) {
        *sent += n;
        offset += n;
        if (size == 0) break;
        continue;
      }
      if (r->status / 100 == 2) {
        *sent += n;
        done = json::parse(r->body, nullptr, false);
        offset = size;
        break;
      }
      failed = Connection::StatusOf(*r);
      break;
    }
    if (done.is_object()) break;
    if (failed.ok()) return Internal("the upload of " + src.display + " ended without an object");
    if (attempt >= kRetries ||
        (failed.code() != Code::kUnavailable && failed.code() != Code::kDeadlineExceeded &&
         failed.code() != Code::kFailedPrecondition)) {
      return failed;  // the tracker stays: the same command resumes
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
  }
  std::error_code ec;
  fs::remove(tracker, ec);
  if (hasher.bytes() != size) {
    hasher = TransferHasher();
    STOKER_RETURN_IF_ERROR(HashRange(src.fd, size, &hasher));
  }
  Status v = Verify(done, hasher, "gs://" + bucket + "/" + object);
  if (!v.ok()) {
    (void)conn.Stream("DELETE", ObjectPath(bucket, object), {}, 0, nullptr, nullptr);
    return v;
  }
  return done;
}

// Stdin (size unknown): a resumable session fed kChunkBytes at a time from
// a buffer, the last chunk saying the total. Memory: one chunk.
Result<json> UploadStream(Connection& conn, int fd, const std::string& bucket,
                          const std::string& object, Progress* progress) {
  STOKER_ASSIGN_OR_RETURN(std::string session, StartSession(conn, bucket, object, -1));
  storage::Hasher hasher = TransferHasher();
  std::string chunk;
  uint64_t offset = 0;
  bool eof = false;
  while (!eof) {
    chunk.resize(kChunkBytes);
    size_t have = 0;
    while (have < chunk.size()) {
      ssize_t n = ::read(fd, chunk.data() + have, chunk.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Internal(std::string("cannot read stdin: ") + std::strerror(errno));
      if (n == 0) {
        eof = true;
        break;
      }
      have += static_cast<size_t>(n);
    }
    chunk.resize(have);
    hasher.Update(chunk);
    std::string total = eof ? std::to_string(offset + have) : "*";
    std::string range = have == 0 ? "bytes */" + total
                                  : "bytes " + std::to_string(offset) + "-" +
                                        std::to_string(offset + have - 1) + "/" + total;
    Status failed;
    for (int attempt = 0;; ++attempt) {
      size_t pos = 0;
      auto reader = [&](char* buf, size_t n) -> Result<size_t> {
        size_t k = std::min(n, chunk.size() - pos);
        std::memcpy(buf, chunk.data() + pos, k);
        pos += k;
        progress->Add(k);
        return k;
      };
      auto r = conn.Stream("PUT", session, {{"content-range", range}}, have, reader, nullptr);
      if (r.ok() && r->status == 308 && !eof) break;
      if (r.ok() && r->status / 100 == 2 && eof) {
        json done = json::parse(r->body, nullptr, false);
        Status v = Verify(done, hasher, "gs://" + bucket + "/" + object);
        if (!v.ok()) {
          (void)conn.Stream("DELETE", ObjectPath(bucket, object), {}, 0, nullptr, nullptr);
          return v;
        }
        return done;
      }
      failed = r.ok() ? Connection::StatusOf(*r) : r.status();
      if (r.ok() && failed.ok())
        failed = Internal("unexpected answer " + std::to_string(r->status));
      if (attempt >= kRetries ||
          (failed.code() != Code::kUnavailable && failed.code() != Code::kDeadlineExceeded)) {
        return failed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
    }
    offset += have;
  }
  return Internal("stdin upload ended without an object");
}

// Uploads one local file (or "-": stdin) to gs://bucket/object.
Result<json> Upload(Connection& conn, const std::string& local, const std::string& bucket,
                    const std::string& object, Progress* progress, uint64_t* sent) {
  if (local == "-") return UploadStream(conn, 0, bucket, object, progress);
  int fd = ::open(local.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(local + ": " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  Source src{local, fd, st.st_size, ""};
  std::error_code ec;
  // Not the server's URL: a daemon restarted on another port still has the
  // session (and a session it lacks is simply started again).
  src.tracker_key = "upload\n" + fs::absolute(local, ec).string() + "\n" + bucket + "\n" + object +
                    "\n" + std::to_string(st.st_size) + "\n" + std::to_string(st.st_mtim.tv_sec) +
                    "." + std::to_string(st.st_mtim.tv_nsec);
  Result<json> out = Internal("");
  if (static_cast<uint64_t>(st.st_size) > kResumableThreshold) {
    out = UploadResumable(conn, src, bucket, object, progress, sent);
  } else {
    storage::Hasher hasher = TransferHasher();
    auto r = conn.Stream("POST",
                         "/upload/storage/v1/b/" + http::UrlEncode(bucket) +
                             "/o?uploadType=media&name=" + http::UrlEncode(object),
                         {{"content-type", "application/octet-stream"}},
                         static_cast<uint64_t>(st.st_size), FileReader(src, 0, &hasher, progress),
                         nullptr);
    if (!r.ok()) {
      out = r.status();
    } else if (Status s = Connection::StatusOf(*r); !s.ok()) {
      out = s;
    } else {
      *sent += static_cast<uint64_t>(st.st_size);
      json done = json::parse(r->body, nullptr, false);
      Status v = Verify(done, hasher, "gs://" + bucket + "/" + object);
      if (!v.ok()) {
        (void)conn.Stream("DELETE", ObjectPath(bucket, object), {}, 0, nullptr, nullptr);
        out = v;
      } else {
        out = done;
      }
    }
  }
  ::close(fd);
  return out;
}

// ---- downloads -------------------------------------------------------------

Status WriteAllFd(int fd, std::string_view b) {
  while (!b.empty()) {
    ssize_t n = ::write(fd, b.data(), b.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(std::string("cannot write: ") + std::strerror(errno));
    b.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

Result<json> Stat(Connection& conn, const std::string& bucket, const std::string& object) {
  return conn.Call("GET", ObjectPath(bucket, object));
}

// Streams the object to `out_fd` from byte `from`, hashing into `hasher`.
Status Fetch(Connection& conn, const std::string& bucket, const std::string& object, uint64_t from,
             int out_fd, storage::Hasher* hasher, Progress* progress) {
  std::map<std::string, std::string> headers;
  if (from > 0) headers["range"] = "bytes=" + std::to_string(from) + "-";
  auto r = conn.Stream("GET", ObjectPath(bucket, object) + "?alt=media", headers, 0, nullptr,
                       [&](std::string_view b) {
                         hasher->Update(b);
                         progress->Add(b.size());
                         return WriteAllFd(out_fd, b);
                       });
  if (!r.ok()) return r.status();
  return Connection::StatusOf(*r);
}

// Downloads gs://bucket/object to `dest` through "<dest>_.gstmp", which a
// second run continues (Range) when the object is unchanged; checked, then
// renamed. A mismatch removes the temp file.
Status Download(Connection& conn, const std::string& bucket, const std::string& object,
                const fs::path& dest, Progress* progress) {
  std::string what = "gs://" + bucket + "/" + object;
  STOKER_ASSIGN_OR_RETURN(json meta, Stat(conn, bucket, object));
  const uint64_t size = std::stoull(meta.value("size", "0"));
  fs::path tmp = dest.string() + "_.gstmp";
  fs::path tracker =
      TrackerPath("download\n" + conn.url() + "\n" + what + "\n" + fs::absolute(dest).string());
  json t = ReadTracker(tracker);
  std::error_code ec;
  if (dest.has_parent_path()) fs::create_directories(dest.parent_path(), ec);
  uint64_t from = 0;
  int fd = -1;
  if (t.value("md5Hash", "") == meta.value("md5Hash", "") && fs::exists(tmp, ec)) {
    fd = ::open(tmp.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) <= size) {
      from = static_cast<uint64_t>(st.st_size);
      ::lseek(fd, 0, SEEK_END);
    } else if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
    from = 0;
  }
  WriteTracker(tracker, {{"md5Hash", meta.value("md5Hash", "")}, {"object", what}});
  storage::Hasher hasher = TransferHasher();
  Status s = HashRange(fd, from, &hasher);
  progress->Add(from);
  for (int attempt = 0; s.ok(); ++attempt) {
    s = Fetch(conn, bucket, object, from, fd, &hasher, progress);
    if (s.ok() || attempt >= kRetries ||
        (s.code() != Code::kUnavailable && s.code() != Code::kDeadlineExceeded)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
    from = hasher.bytes();
    s = OkStatus();
  }
  bool corrupt = false;
  if (s.ok()) {
    s = Verify(meta, hasher, what);
    corrupt = !s.ok();
  }
  if (s.ok() && hasher.bytes() != size) {
    s = Internal(what + ": got " + std::to_string(hasher.bytes()) + " bytes of " +
                 std::to_string(size));
    corrupt = true;
  }
  ::close(fd);
  if (!s.ok()) {
    if (corrupt) {
      fs::remove(tmp, ec);
      fs::remove(tracker, ec);
    }
    return s;  // a broken transfer keeps its temp file for the next run
  }
  fs::rename(tmp, dest, ec);
  fs::remove(tracker, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + " to " + dest.string());
  return OkStatus();
}

// ---- listing and wildcards -------------------------------------------------

struct Obj {
  std::string name;
  uint64_t size = 0;
  std::string updated, crc32c, md5;
};

Result<std::vector<Obj>> ListObjects(Connection& conn, const std::string& bucket,
                                     const std::string& prefix) {
  STOKER_ASSIGN_OR_RETURN(json r, conn.Call("GET", "/storage/v1/b/" + http::UrlEncode(bucket) +
                                                       "/o?prefix=" + http::UrlEncode(prefix)));
  std::vector<Obj> out;
  for (const json& o : r["items"]) {
    out.push_back({o.value("name", ""), std::stoull(o.value("size", "0")), o.value("updated", ""),
                   o.value("crc32c", ""), o.value("md5Hash", "")});
  }
  return out;
}

// gsutil's wildcards over object names: '*' and '?' stay within one
// '/'-separated part, '**' crosses them.
bool WildMatch(std::string_view pat, std::string_view name) {
  if (pat.empty()) return name.empty();
  if (pat.substr(0, 2) == "**") {
    for (size_t i = 0; i <= name.size(); ++i) {
      if (WildMatch(pat.substr(2), name.substr(i))) return true;
    }
    return false;
  }
  if (pat[0] == '*') {
    for (size_t i = 0; i <= name.size(); ++i) {
      if (WildMatch(pat.substr(1), name.substr(i))) return true;
      if (i < name.size() && name[i] == '/') break;
    }
    return false;
  }
  if (name.empty()) return false;
  if (pat[0] == '?') return name[0] != '/' && WildMatch(pat.substr(1), name.substr(1));
  if (pat[0] == '[') {
    size_t close = pat.find(']', 1);
    if (close != std::string_view::npos) {
      std::string set(pat.substr(1, close - 1));
      return fnmatch(("[" + set + "]").c_str(), std::string(1, name[0]).c_str(), 0) == 0 &&
             WildMatch(pat.substr(close + 1), name.substr(1));
    }
  }
  return pat[0] == name[0] && WildMatch(pat.substr(1), name.substr(1));
}

// What a gs:// argument names: the objects it matches (a wildcard, an
// object, or with `recursive` everything under a prefix). `is_prefix` says
// the URL named a "directory" (or bucket) rather than one object.
struct Expanded {
  std::string bucket;
  std::string base;  // the part of the names the copy strips ("" = bucket root)
  std::vector<Obj> objects;
  bool is_prefix = false;
};

Result<Expanded> ExpandGs(Connection& conn, const std::string& url, bool recursive) {
  STOKER_ASSIGN_OR_RETURN(storage::GsUri u, storage::ParseGsUri(url, "URL"));
  Expanded e;
  e.bucket = u.bucket;
  if (HasWildcard(u.object)) {
    std::string fixed = u.object.substr(0, u.object.find_first_of("*?["));
    STOKER_ASSIGN_OR_RETURN(auto all, ListObjects(conn, u.bucket, fixed));
    size_t slash = fixed.rfind('/');
    e.base = slash == std::string::npos ? "" : fixed.substr(0, slash + 1);
    for (Obj& o : all) {
      if (WildMatch(u.object, o.name)) {
        e.objects.push_back(std::move(o));
      } else if (recursive) {
        // "gs://b/dir*" with -r takes everything under a matching prefix.
        for (size_t p = o.name.find('/'); p != std::string::npos; p = o.name.find('/', p + 1)) {
          if (WildMatch(u.object, o.name.substr(0, p))) {
            e.objects.push_back(o);
            break;
          }
        }
      }
    }
    return e;
  }
  std::string object = u.object;
  STOKER_ASSIGN_OR_RETURN(auto all, ListObjects(conn, u.bucket, object));
  std::string dir = object.empty() || object.back() == '/' ? object : object + "/";
  for (Obj& o : all) {
    if (o.name == object) {
      e.objects.push_back(o);
      size_t slash = object.rfind('/');
      e.base = slash == std::string::npos ? "" : object.substr(0, slash + 1);
      return e;  // an object of that name wins over a prefix
    }
  }
  e.is_prefix = true;
  e.base = dir;
  for (Obj& o : all) {
    if (o.name.rfind(dir, 0) == 0) e.objects.push_back(std::move(o));
  }
  return e;
}

// Local files a source names: a file, a glob, or (recursive) a directory.
// `base` gets the directory whose relative paths become object names.
struct LocalFile {
  fs::path path;
  std::string relative;
};

Result<std::vector<LocalFile>> ExpandLocal(const std::string& arg, bool recursive,
                                           bool* omitted_dir) {
  std::vector<std::string> matches;
  if (HasWildcard(arg)) {
    glob_t g{};
    if (::glob(arg.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) matches.push_back(g.gl_pathv[i]);
    }
    globfree(&g);
  } else {
    matches.push_back(arg);
  }
  std::vector<LocalFile> out;
  for (const std::string& m : matches) {
    std::error_code ec;
    if (fs::is_directory(m, ec)) {
      if (!recursive) {
        *omitted_dir = true;
        std::cerr << "Omitting directory \"" << m << "\". (Did you mean to do cp -r?)\n";
        continue;
      }
      fs::path root = fs::path(m).lexically_normal();
      std::string top = root.filename().empty() ? root.parent_path().filename().string()
                                                : root.filename().string();
      if (top == "." || top.empty()) top = "";
      std::vector<LocalFile> files;
      for (auto it = fs::recursive_directory_iterator(m, ec); !ec && it != fs::end(it);
           it.increment(ec)) {
        if (it->is_regular_file()) {
          std::string rel = fs::relative(it->path(), m).generic_string();
          files.push_back({it->path(), top.empty() ? rel : top + "/" + rel});
        }
      }
      std::sort(files.begin(), files.end(),
                [](const LocalFile& a, const LocalFile& b) { return a.relative < b.relative; });
      out.insert(out.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(m, ec) || m == "-") {
      out.push_back({m, fs::path(m).filename().string()});
    }
  }
  return out;
}

// ---- the worker pool -------------------------------------------------------

struct Job {
  std::function<Status(Connection&)> run;
  std::string what;
};

// Runs the jobs on up to kWorkers connections; failures are printed as they
// happen. Returns how many failed.
int RunJobs(const Globals& g, std::vector<Job>& jobs, int workers) {
  std::atomic<size_t> next{0};
  std::atomic<int> failed{0};
  std::mutex print_mu;
  auto work = [&] {
    auto conn = Connect(g);
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Status s = conn.ok() ? jobs[i].run(**conn) : conn.status();
      if (!s.ok()) {
        ++failed;
        std::lock_guard<std::mutex> lock(print_mu);
        std::cerr << "\nCommandException: " << jobs[i].what << ": " << s.message() << "\n";
      }
    }
  };
  int n = std::max(1, std::min<int>(workers, static_cast<int>(jobs.size())));
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return failed;
}

// ---- commands --------------------------------------------------------------

struct Opts {
  bool recursive = false;
  bool parallel = false;
  bool quiet = false;
  bool long_list = false;
  bool summarize = false;
  bool human = false;
  bool delete_extra = false;
  bool force = false;
  bool gsutil = false;  // gsutil's messages and exit codes (1 on any failure)
};

int Fail(const Opts& o, const Status& s) {
  if (o.gsutil) {
    std::cerr << "CommandException: " << s.message() << "\n";
    return 1;
  }
  return Report(s);
}

std::string Join(const std::string& base, const std::string& rel) {
  if (base.empty()) return rel;
  return base.back() == '/' ? base + rel : base + "/" + rel;
}

int Cp(const Globals& g, std::vector<std::string> args, const Opts& o) {
  if (args.size() < 2) {
    return Fail(o, InvalidArgument("cp needs a SOURCE and a DESTINATION (cp [-r] SRC... DST)"));
  }
  std::string dst = args.back();
  args.pop_back();
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  std::vector<Job> jobs;
  uint64_t total = 0;
  std::atomic<uint64_t> sent{0};
  Progress* progress_ptr = nullptr;
  bool omitted = false;
  const bool many = args.size() > 1 || o.recursive;

  if (IsGs(dst)) {
    auto to = storage::ParseGsUri(dst, "DESTINATION");
    if (!to.ok()) return Fail(o, to.status());
    for (const std::string& src : args) {
      if (IsGs(src)) {
        return Fail(o, InvalidArgument("copying between two gs:// URLs (" + src + " to " + dst +
                                       ") is not supported; copy through a local file"));
      }
      if (src == "-") {
        std::string object = to->object;
        if (object.empty() || object.back() == '/') {
          return Fail(o, InvalidArgument("cp - needs an object name: cp - gs://BUCKET/OBJECT"));
        }
        jobs.push_back({[&, object, b = to->bucket](Connection& c) {
                          uint64_t n = 0;
                          return Upload(c, "-", b, object, progress_ptr, &n).status();
                        },
                        "- -> " + dst});
        continue;
      }
      auto files = ExpandLocal(src, o.recursive, &omitted);
      if (!files.ok()) return Fail(o, files.status());
      if (files->empty() && !omitted) {
        return Fail(o, NotFound("No URLs matched: " + src));
      }
      std::error_code ec;
      const bool src_is_dir = fs::is_directory(src, ec);
      // "cp -r ./data gs://b/data" makes gs://b/data/..., as gsutil does
      // when gs://b/data/ does not exist yet; into an existing "directory"
      // (or a bucket root, or a URL ending in '/') it goes below it.
      bool into =
          to->object.empty() || to->object.back() == '/' || args.size() > 1 || HasWildcard(src);
      if (!into && src_is_dir) {
        auto existing = ListObjects(**conn, to->bucket, to->object + "/");
        into = existing.ok() && !existing->empty();
      }
      for (const LocalFile& f : *files) {
        std::string object;
        if (src_is_dir) {
          std::string rel = f.relative;
          if (!into) rel = rel.substr(rel.find('/') == std::string::npos ? 0 : rel.find('/') + 1);
          object = Join(to->object, rel);
        } else {
          object = into ? Join(to->object, fs::path(f.path).filename().string()) : to->object;
        }
        std::error_code size_ec;
        total += fs::file_size(f.path, size_ec);
        jobs.push_back({[&, p = f.path.string(), object, b = to->bucket](Connection& c) {
                          uint64_t n = 0;
                          auto r = Upload(c, p, b, object, progress_ptr, &n);
                          sent += n;
                          if (r.ok() && progress_ptr) progress_ptr->FileDone();
                          return r.status();
                        },
                        f.path.string() + " -> gs://" + to->bucket + "/" + object});
      }
    }
  } else {
    for (const std::string& src : args) {
      if (!IsGs(src)) {
        return Fail(o, InvalidArgument("cp copies between local paths and gs:// URLs; '" + src +
                                       "' and '" + dst + "' are both local (use cp(1))"));
      }
      auto e = ExpandGs(**conn, src, o.recursive || !o.gsutil);
      if (!e.ok()) return Fail(o, e.status());
      if (e->objects.empty()) return Fail(o, NotFound("No URLs matched: " + src));
      if (e->is_prefix && !o.recursive && o.gsutil) {
        return Fail(o, InvalidArgument("No URLs matched: " + src +
                                       " names a prefix; use cp -r to copy everything below it"));
      }
      if (dst == "-") {
        for (const Obj& obj : e->objects) {
          jobs.push_back({[&, b = e->bucket, name = obj.name](Connection& c) {
                            storage::Hasher h = TransferHasher();
                            STOKER_ASSIGN_OR_RETURN(json meta, Stat(c, b, name));
                            STOKER_RETURN_IF_ERROR(Fetch(c, b, name, 0, 1, &h, progress_ptr));
                            return Verify(meta, h, "gs://" + b + "/" + name);
                          },
                          "gs://" + e->bucket + "/" + obj.name + " -> -"});
        }
        continue;
      }
      std::error_code ec;
      const bool dst_dir = fs::is_directory(dst, ec);
      if (e->objects.size() > 1 && !dst_dir && !e->is_prefix) {
        fs::create_directories(dst, ec);  // several matches go into a directory
      }
      for (const Obj& obj : e->objects) {
        fs::path out;
        std::string rel = obj.name.substr(e->base.size());
        if (e->is_prefix) {
          // gs://b/data -> DST/data/... when DST exists, else DST/...
          std::string top =
              e->base.empty() ? ""
                              : fs::path(e->base.substr(0, e->base.size() - 1)).filename().string();
          out = dst_dir && !top.empty() ? fs::path(dst) / top / rel : fs::path(dst) / rel;
        } else if (dst_dir || e->objects.size() > 1 || dst.back() == '/') {
          out = fs::path(dst) / (o.recursive ? rel : fs::path(obj.name).filename().string());
        } else {
          out = dst;
        }
        total += obj.size;
        jobs.push_back({[&, b = e->bucket, name = obj.name, out](Connection& c) {
                          Status s = Download(c, b, name, out, progress_ptr);
                          if (s.ok() && progress_ptr) progress_ptr->FileDone();
                          return s;
                        },
                        "gs://" + e->bucket + "/" + obj.name + " -> " + out.string()});
      }
    }
  }
  (void)many;
  Progress progress(!o.quiet && !g.quiet && dst != "-", total, jobs.size());
  progress_ptr = &progress;
  int failed = RunJobs(g, jobs, kWorkers);
  progress.Stop();
  if (failed > 0 || omitted) {
    if (o.gsutil) return 1;
    return Report(Status(Code::kInternal, std::to_string(failed) + " of " +
                                              std::to_string(jobs.size()) + " copies failed"));
  }
  if (o.gsutil && !o.quiet && !g.quiet) {
    std::cerr << "Operation completed over " << jobs.size() << " objects/" << Human(total) << ".\n";
  } else if (!o.gsutil && !o.quiet && dst != "-") {
    // `storage cp` printed its summary on stdout.
    std::cout << "Copied " << jobs.size() << " file(s), " << total << " bytes, to " << dst << "\n";
  }
  return 0;
}

int Ls(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  if (urls.empty()) {
    auto r = (*conn)->Call("GET", "/storage/v1/b");
    if (!r.ok()) return Fail(o, r.status());
    for (const json& b : (*r)["items"])
      std::cout << "gs://" << b["name"].get<std::string>() << "/\n";
    return 0;
  }
  int rc = 0;
  uint64_t count = 0, bytes = 0;
  for (const std::string& url : urls) {
    auto u = storage::ParseGsUri(url, "URL");
    if (!u.ok()) return Fail(o, u.status());
    auto e = ExpandGs(**conn, url, true);
    if (!e.ok()) {
      rc = Fail(o, e.status());
      continue;
    }
    if (e->objects.empty()) {
      // An empty but existing bucket lists nothing, successfully.
      if (u->object.empty()) continue;
      rc = Fail(o, NotFound("One or more URLs matched no objects: " + url));
      continue;
    }
    std::set<std::string> dirs;
    for (const Obj& obj : e->objects) {
      std::string rel = obj.name.substr(e->base.size());
      size_t slash = rel.find('/');
      if (!o.recursive && e->is_prefix && slash != std::string::npos) {
        std::string d = "gs://" + e->bucket + "/" + e->base + rel.substr(0, slash + 1);
        if (dirs.insert(d).second) {
          std::cout << (o.long_list ? "                                 " : "") << d << "\n";
        }
        continue;
      }
      ++count;
      bytes += obj.size;
      if (o.long_list) {
        std::printf("%10llu  %s  gs://%s/%s\n", static_cast<unsigned long long>(obj.size),
                    obj.updated.substr(0, 19).append("Z").c_str(), e->bucket.c_str(),
                    obj.name.c_str());
      } else if (!o.gsutil) {
        // `storage ls` keeps its old columns: size, time, URL.
        std::printf("%12llu  %s  gs://%s/%s\n", static_cast<unsigned long long>(obj.size),
                    obj.updated.c_str(), e->bucket.c_str(), obj.name.c_str());
      } else {
        std::cout << "gs://" << e->bucket << "/" << obj.name << "\n";
      }
    }
  }
  if (o.long_list) {
    std::cout << "TOTAL: " << count << " objects, " << bytes << " bytes (" << Human(bytes) << ")\n";
  }
  return rc;
}

int Mb(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  int rc = 0;
  for (const std::string& url : urls) {
    auto at = storage::ParseGsUri(url, "URL");
    if (!at.ok()) return Fail(o, at.status());
    if (!at->object.empty()) {
      return Fail(o, InvalidArgument("mb takes a bucket URL (gs://BUCKET), not an object: " + url));
    }
    std::cout << "Creating gs://" << at->bucket << "/...\n";
    auto r = (*conn)->Call("POST", "/storage/v1/b", json{{"name", at->bucket}}.dump());
    if (!r.ok()) {
      if (o.gsutil && r.status().code() == Code::kAlreadyExists) {
        std::cerr << "ServiceException: 409 A Cloud Storage bucket named '" << at->bucket
                  << "' already exists. Try another name.\n";
        rc = 1;
        continue;
      }
      return Fail(o, r.status());
    }
  }
  return rc;
}

int Rm(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  std::vector<Job> jobs;
  std::vector<std::string> buckets_to_remove;
  for (const std::string& url : urls) {
    auto u = storage::ParseGsUri(url, "URL");
    if (!u.ok()) return Fail(o, u.status());
    auto e = ExpandGs(**conn, url, o.recursive);
    if (!e.ok()) return Fail(o, e.status());
    if (e->is_prefix && !o.recursive && !e->objects.empty()) {
      return Fail(o, InvalidArgument("\"rm " + url +
                                     "\" names a prefix or bucket; use rm -r to delete "
                                     "everything below it"));
    }
    if (e->objects.empty() && !(o.recursive && u->object.empty())) {
      if (o.force) continue;
      return Fail(o, NotFound("No URLs matched: " + url));
    }
    if (o.recursive && u->object.empty()) buckets_to_remove.push_back(u->bucket);
    for (const Obj& obj : e->objects) {
      std::string what = "gs://" + e->bucket + "/" + obj.name;
      jobs.push_back({[b = e->bucket, name = obj.name, what, &o](Connection& c) {
                        auto r = c.Stream("DELETE", ObjectPath(b, name), {}, 0, nullptr, nullptr);
                        if (!r.ok()) return r.status();
                        STOKER_RETURN_IF_ERROR(Connection::StatusOf(*r));
                        if (!o.quiet) std::cerr << "Removing " + what + "...\n";
                        return OkStatus();
                      },
                      what});
    }
  }
  int failed = RunJobs(g, jobs, kWorkers);
  for (const std::string& b : buckets_to_remove) {
    auto r =
        (*conn)->Stream("DELETE", "/storage/v1/b/" + http::UrlEncode(b), {}, 0, nullptr, nullptr);
    Status s = r.ok() ? Connection::StatusOf(*r) : r.status();
    if (!s.ok()) {
      std::cerr << "CommandException: gs://" << b << ": " << s.message() << "\n";
      ++failed;
    } else if (!o.quiet) {
      std::cerr << "Removing gs://" << b << "/...\n";
    }
  }
  if (failed > 0)
    return o.gsutil ? 1 : Report(Internal(std::to_string(failed) + " removals failed"));
  return 0;
}

int Cat(const Globals& g, const std::vector<std::string>& urls, const Opts& o) {
  Opts c = o;
  c.quiet = true;
  std::vector<std::string> args;
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  for (const std::string& url : urls) {
    auto e = ExpandGs(**conn, url, false);
    if (!e.ok()) return Fail(o, e.status());
    if (e->objects.empty() || e->is_prefix) return Fail(o, NotFound("No URLs matched: " + url));
    for (const Obj& obj : e->objects) {
      storage::Hasher h = TransferHasher();
      Progress none(false, 0, 0);
      auto meta = Stat(**conn, e->bucket, obj.name);
      if (!meta.ok()) return Fail(o, meta.status());
      Status s = Fetch(**conn, e->bucket, obj.name, 0, 1, &h, &none);
      if (s.ok()) s = Verify(*meta, h, "gs://" + e->bucket + "/" + obj.name);
      if (!s.ok()) return Fail(o, s);
    }
  }
  return 0;
}

int Du(const Globals& g, const std::vector<std::string>& in, const Opts& o) {
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  std::vector<std::string> urls = in;
  if (urls.empty()) {
    auto r = (*conn)->Call("GET", "/storage/v1/b");
    if (!r.ok()) return Fail(o, r.status());
    for (const json& b : (*r)["items"]) urls.push_back("gs://" + b["name"].get<std::string>());
  }
  auto size_text = [&](uint64_t n) {
    return o.human ? Human(static_cast<double>(n)) : std::to_string(n);
  };
  int rc = 0;
  for (const std::string& url : urls) {
    auto u = storage::ParseGsUri(url, "URL");
    if (!u.ok()) return Fail(o, u.status());
    auto e = ExpandGs(**conn, url, true);
    if (!e.ok()) return Fail(o, e.status());
    if (e->objects.empty() && !u->object.empty()) {
      rc = Fail(o, NotFound("No URLs matched: " + url));
      continue;
    }
    uint64_t sum = 0;
    for (const Obj& obj : e->objects) {
      sum += obj.size;
      if (!o.summarize) {
        std::cout << size_text(obj.size) << "  gs://" << e->bucket << "/" << obj.name << "\n";
      }
    }
    if (o.summarize) std::cout << size_text(sum) << "  " << url << "\n";
  }
  return rc;
}

// rsync SRC DST: copies what is missing or different (size, then md5) from
// SRC to DST; with -d, deletes what DST has that SRC lacks.
int Rsync(const Globals& g, const std::string& src, const std::string& dst, const Opts& o) {
  auto conn = Connect(g);
  if (!conn.ok()) return Fail(o, conn.status());
  if (IsGs(src) == IsGs(dst)) {
    return Fail(o, InvalidArgument("rsync syncs a local directory with a gs:// URL (either way)"));
  }
  auto local_root = fs::path(IsGs(src) ? dst : src);
  std::string url = IsGs(src) ? src : dst;
  auto u = storage::ParseGsUri(url, "URL");
  if (!u.ok()) return Fail(o, u.status());
  std::string prefix = u->object.empty() || u->object.back() == '/' ? u->object : u->object + "/";
  auto remote_list = ListObjects(**conn, u->bucket, prefix);
  if (!remote_list.ok()) return Fail(o, remote_list.status());
  std::map<std::string, Obj> remote;
  for (Obj& obj : *remote_list) {
    std::string rel = obj.name.substr(prefix.size());
    if (!o.recursive && rel.find('/') != std::string::npos) continue;
    remote[rel] = std::move(obj);
  }
  std::map<std::string, fs::path> local;
  std::error_code ec;
  if (fs::is_directory(local_root, ec)) {
    auto add = [&](const fs::directory_entry& e) {
      if (e.is_regular_file())
        local[fs::relative(e.path(), local_root).generic_string()] = e.path();
    };
    if (o.recursive) {
      for (const auto& e : fs::recursive_directory_iterator(local_root, ec)) add(e);
    } else {
      for (const auto& e : fs::directory_iterator(local_root, ec)) add(e);
    }
  } else if (!IsGs(src)) {
    return Fail(o, NotFound("No URLs matched: " + src));
  }
  auto md5_of = [](const fs::path& p) {
    storage::Hasher h;
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0)
      (void)HashRange(fd, static_cast<uint64_t>(st.st_size), &h);
    if (fd >= 0) ::close(fd);
    return h.Md5Base64();
  };
  std::vector<Job> jobs;
  uint64_t total = 0;
  Progress* progress_ptr = nullptr;
  const bool up = !IsGs(src);
  for (const auto& [rel, path] : local) {
    auto it = remote.find(rel);
    bool same = it != remote.end() && it->second.size == fs::file_size(path, ec) &&
                (it->second.md5.empty() || it->second.md5 == md5_of(path));
    if (up && !same) {
      total += fs::file_size(path, ec);
      jobs.push_back({[&, p = path.string(), object = prefix + rel, b = u->bucket](Connection& c) {
                        uint64_t n = 0;
                        return Upload(c, p, b, object, progress_ptr, &n).status();
                      },
                      "Copying file://" + path.string()});
    }
    if (!up && it == remote.end() && o.delete_extra) {
      jobs.push_back({[p = path](Connection&) {
                        std::error_code e;
                        fs::remove(p, e);
                        return e ? Internal("cannot remove " + p.string()) : OkStatus();
                      },
                      "Removing file://" + path.string()});
    }
    if (!up && it != remote.end() && !same) {
      total += it->second.size;
      jobs.push_back({[&, b = u->bucket, name = it->second.name, path](Connection& c) {
                        return Download(c, b, name, path, progress_ptr);
                      },
                      "Copying gs://" + u->bucket + "/" + it->second.name});
    }
  }
  for (const auto& [rel, obj] : remote) {
    if (local.count(rel)) continue;
    if (up && o.delete_extra) {
      jobs.push_back({[b = u->bucket, name = obj.name](Connection& c) {
                        auto r = c.Stream("DELETE", ObjectPath(b, name), {}, 0, nullptr, nullptr);
                        return r.ok() ? Connection::StatusOf(*r) : r.status();
                      },
                      "Removing gs://" + u->bucket + "/" + obj.name});
    }
    if (!up) {
      total += obj.size;
      jobs.push_back({[&, b = u->bucket, name = obj.name, out = local_root / rel](Connection& c) {
                        return Download(c, b, name, out, progress_ptr);
                      },
                      "Copying gs://" + u->bucket + "/" + obj.name});
    }
  }
  if (!o.quiet) {
    std::cerr << "Building synchronization state...\nStarting synchronization...\n";
    for (const Job& j : jobs) std::cerr << j.what << "\n";
  }
  Progress progress(!o.quiet && !g.quiet, total, jobs.size());
  progress_ptr = &progress;
  int failed = RunJobs(g, jobs, kWorkers);
  progress.Stop();
  if (failed > 0)
    return o.gsutil ? 1 : Report(Internal(std::to_string(failed) + " transfers failed"));
  return 0;
}

// Adds the verbs to `group` (`storage` or `gsutil`).
void AddVerbs(CLI::App* group, const Globals& g, int& rc, bool gsutil, std::shared_ptr<Opts> top) {
  struct Args {
    std::vector<std::string> urls;
    Opts o;
  };
  auto setup = [&](CLI::App* cmd, std::shared_ptr<Args> a) {
    cmd->allow_extras(false);
    cmd->add_flag("-r,-R,--recursive", a->o.recursive, "Recurse into directories / prefixes");
    cmd->add_flag("-m", a->o.parallel, "Parallel transfers (always on: 8 connections)");
    cmd->add_flag("-q,--quiet", a->o.quiet, "No progress or per-file messages");
  };
  auto finish = [top, gsutil](const Args& a) {
    Opts o = a.o;
    o.gsutil = gsutil;
    o.quiet = o.quiet || top->quiet;
    o.parallel = o.parallel || top->parallel;
    return o;
  };
  {
    auto a = std::make_shared<Args>();
    auto* cp = group->add_subcommand(
        "cp", "Copy files and objects (cp [-r] SRC... DST; - is stdin/stdout)");
    setup(cp, a);
    cp->add_option("URLS", a->urls, "Sources, then the destination")->required()->expected(-1);
    cp->callback([&g, &rc, a, finish, gsutil] {
      Opts o = finish(*a);
      // `storage cp DIR gs://...` always copied directories whole.
      if (!gsutil) o.recursive = true;
      rc = Cp(g, a->urls, o);
    });
  }
  {
    auto a = std::make_shared<Args>();
    auto* ls = group->add_subcommand("ls", "List buckets, or objects under gs://BUCKET/PREFIX");
    setup(ls, a);
    ls->add_flag("-l", a->o.long_list, "Long listing: size, time, and a total");
    ls->add_option("URLS", a->urls);
    ls->callback([&g, &rc, a, finish, gsutil] {
      Opts o = finish(*a);
      // `storage ls gs://b/prefix` always listed every object below.
      if (!gsutil) o.recursive = true;
      rc = Ls(g, a->urls, o);
    });
  }
  {
    auto a = std::make_shared<Args>();
    auto* mb = group->add_subcommand("mb", "Make buckets");
    setup(mb, a);
    mb->add_option("URLS", a->urls)->required()->expected(-1);
    mb->callback([&g, &rc, a, finish] { rc = Mb(g, a->urls, finish(*a)); });
    if (!gsutil) {
      // gcloud storage buckets create gs://B
      auto* buckets = group->add_subcommand("buckets", "Buckets (gcloud storage buckets ...)");
      buckets->require_subcommand(1);
      auto b = std::make_shared<Args>();
      auto* create = buckets->add_subcommand("create", "Make buckets");
      create->add_option("URLS", b->urls)->required()->expected(-1);
      create->callback([&g, &rc, b, finish] { rc = Mb(g, b->urls, finish(*b)); });
      auto* list = buckets->add_subcommand("list", "List buckets");
      list->callback([&g, &rc, b, finish] { rc = Ls(g, {}, finish(*b)); });
    }
  }
  {
    auto a = std::make_shared<Args>();
    auto* rm = group->add_subcommand("rm", "Remove objects (rm -r gs://B removes the bucket too)");
    setup(rm, a);
    rm->add_flag("-f", a->o.force, "Go on when a URL matches nothing");
    rm->add_option("URLS", a->urls)->required()->expected(-1);
    rm->callback([&g, &rc, a, finish] { rc = Rm(g, a->urls, finish(*a)); });
  }
  {
    auto a = std::make_shared<Args>();
    auto* cat = group->add_subcommand("cat", "Write objects to stdout");
    setup(cat, a);
    cat->add_option("URLS", a->urls)->required()->expected(-1);
    cat->callback([&g, &rc, a, finish] { rc = Cat(g, a->urls, finish(*a)); });
  }
  {
    auto a = std::make_shared<Args>();
    auto* du = group->add_subcommand("du", "Object sizes (du [-s] [-h] URL...)");
    du->set_help_flag("--help", "Print this help message and exit");  // -h is gsutil's
    setup(du, a);
    du->add_flag("-s", a->o.summarize, "One total per URL");
    du->add_flag("-h", a->o.human, "Sizes in KiB, MiB, GiB");
    du->add_option("URLS", a->urls);
    du->callback([&g, &rc, a, finish] { rc = Du(g, a->urls, finish(*a)); });
  }
  {
    auto a = std::make_shared<Args>();
    auto* rs = group->add_subcommand("rsync", "Make DST like SRC (rsync [-r] [-d] SRC DST)");
    setup(rs, a);
    rs->add_flag("-d,--delete-unmatched-destination-objects", a->o.delete_extra,
                 "Delete what DST has and SRC lacks");
    rs->add_option("URLS", a->urls)->required()->expected(2);
    rs->callback([&g, &rc, a, finish] { rc = Rsync(g, a->urls[0], a->urls[1], finish(*a)); });
  }
}

}  // namespace

int StorageCp(const Globals& g, const std::string& src, const std::string& dst) {
  Opts o;
  o.recursive = true;
  return Cp(g, {src, dst}, o);
}

int StorageLs(const Globals& g, const std::string& uri) {
  Opts o;
  o.recursive = true;
  return Ls(g, uri.empty() ? std::vector<std::string>{} : std::vector<std::string>{uri}, o);
}

int StorageMb(const Globals& g, const std::string& uri) { return Mb(g, {uri}, Opts{}); }

void AddStorageCommands(CLI::App& app, const Globals& g, int& rc) {
  auto storage_top = std::make_shared<Opts>();
  auto* st = app.add_subcommand("storage", "Local buckets behind gs:// URIs (gcloud storage)");
  st->require_subcommand(1);
  AddVerbs(st, g, rc, /*gsutil=*/false, storage_top);

  auto gsutil_top = std::make_shared<Opts>();
  auto* gs = app.add_subcommand(
      "gsutil",
      "gsutil's command lines against the local buckets (cp, ls, mb, rm, cat, du, rsync)");
  gs->require_subcommand(1);
  gs->add_flag("-m", gsutil_top->parallel, "Parallel transfers (always on: 8 connections)");
  gs->add_flag("-q", gsutil_top->quiet, "Quiet: no progress or per-file messages");
  AddVerbs(gs, g, rc, /*gsutil=*/true, gsutil_top);
}

}  // namespace stoker::cli
