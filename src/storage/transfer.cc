// The transfer engine of `stoker storage` and `stoker gsutil` (transfer.h).
#include "storage/transfer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "common/files.h"

namespace stoker::storage {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kRetries = 5;

std::string ObjectTarget(const std::string& bucket, const std::string& object) {
  return "/storage/v1/b/" + http::UrlEncode(bucket) + "/o/" + http::UrlEncode(object);
}

}  // namespace

// ---- progress --------------------------------------------------------------

Progress::Progress(bool show, uint64_t total_bytes, size_t total_files)
    : show_(show && ::isatty(2)), quiet_(!show), total_(total_bytes), files_(total_files) {
  if (show_) thread_ = std::thread([this] { Loop(); });
}

Progress::~Progress() { Stop(); }

void Progress::Stop() {
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

void Progress::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) Print();
}

void Progress::Print() {
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
               files_, HumanBytes(done).c_str(), HumanBytes(total).c_str(),
               total ? static_cast<int>(100.0 * done / total) : 100, HumanBytes(rate).c_str(),
               eta.c_str());
  std::fflush(stderr);
}

namespace {

// ---- checksums -------------------------------------------------------------

// What transfers are checked with: CRC-32C alone (the CPU's crc32
// instruction, several GB/s), as gsutil checks with compiled crcmod; MD5
// would cost a core per 600 MB/s on top of the daemon's.
Hasher TransferHasher() { return Hasher(/*sha256=*/false, /*md5=*/false); }

// The object's checksums against what was sent or received.
Status Verify(const json& object, const Hasher& local, const std::string& what) {
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

Status HashRange(int fd, uint64_t length, Hasher* h) {
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

struct Source {
  std::string display;  // "file.txt", "-" for stdin
  int fd = -1;          // owned by the caller
  int64_t size = -1;    // -1: unknown (stdin)
  std::string tracker_key;
};

// Sends bytes [from, from + n) of `src` (pread; the fd's offset for
// stdin is not used: stdin goes through UploadStream).
http::Client::BodyReader FileReader(const Source& src, uint64_t from, Hasher* hasher,
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
Result<int64_t> SessionProgress(ObjectApi& conn, const std::string& session, int64_t total,
                                json* done) {
  std::string range = "bytes */" + (total >= 0 ? std::to_string(total) : std::string("*"));
  auto r = conn.Stream("PUT", session, {{"content-range", range}}, 0, nullptr, nullptr);
  if (!r.ok()) return r.status();
  if (r->status == 404) return int64_t{-1};
  if (r->status == 200 || r->status == 201) {
    *done = json::parse(r->body, nullptr, false);
    return total;
  }
  if (r->status != 308) return conn.StatusOf(*r);
  auto it = r->headers.find("range");
  if (it == r->headers.end()) return int64_t{0};
  size_t dash = it->second.find('-');
  return dash == std::string::npos ? int64_t{0} : std::stoll(it->second.substr(dash + 1)) + 1;
}

Result<std::string> StartSession(ObjectApi& conn, const std::string& bucket,
                                 const std::string& object, int64_t size) {
  std::map<std::string, std::string> headers;
  if (size >= 0) headers["x-upload-content-length"] = std::to_string(size);
  auto r = conn.Stream("POST",
                       "/upload/storage/v1/b/" + http::UrlEncode(bucket) +
                           "/o?uploadType=resumable&name=" + http::UrlEncode(object),
                       headers, 0, nullptr, nullptr);
  if (!r.ok()) return r.status();
  STOKER_RETURN_IF_ERROR(conn.StatusOf(*r));
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("sessionUri")) {
    return Internal("stokerd did not return an upload session for gs://" + bucket + "/" + object);
  }
  return j["sessionUri"].get<std::string>();
}

// A file of known size as a resumable upload (continued from its tracker
// file when one matches), in kChunkBytes chunks; a broken connection or a
// restarted daemon is retried from where the session stands.
Result<json> UploadResumable(ObjectApi& conn, const Source& src, const std::string& bucket,
                             const std::string& object, Progress* progress, uint64_t* sent) {
  const uint64_t size = static_cast<uint64_t>(src.size);
  fs::path tracker = TrackerPath(src.tracker_key);
  json t = ReadTracker(tracker);
  std::string session = t.value("session", "");
  Hasher hasher = TransferHasher();
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
      STOKER_RETURN_IF_ERROR(HashRange(src.fd, offset, &hasher));
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
      failed = conn.StatusOf(*r);
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
    (void)DeleteObject(conn, bucket, object);
    return v;
  }
  return done;
}

// Stdin (size unknown): a resumable session fed kChunkBytes at a time from
// a buffer, the last chunk saying the total. Memory: one chunk.
Result<json> UploadStream(ObjectApi& conn, int fd, const std::string& bucket,
                          const std::string& object, Progress* progress) {
  STOKER_ASSIGN_OR_RETURN(std::string session, StartSession(conn, bucket, object, -1));
  Hasher hasher = TransferHasher();
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
          (void)DeleteObject(conn, bucket, object);
          return v;
        }
        return done;
      }
      failed = r.ok() ? conn.StatusOf(*r) : r.status();
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

}  // namespace

// Uploads one local file (or "-": stdin) to gs://bucket/object.
Result<json> Upload(ObjectApi& conn, const std::string& local, const std::string& bucket,
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
    Hasher hasher = TransferHasher();
    auto r = conn.Stream("POST",
                         "/upload/storage/v1/b/" + http::UrlEncode(bucket) +
                             "/o?uploadType=media&name=" + http::UrlEncode(object),
                         {{"content-type", "application/octet-stream"}},
                         static_cast<uint64_t>(st.st_size), FileReader(src, 0, &hasher, progress),
                         nullptr);
    if (!r.ok()) {
      out = r.status();
    } else if (Status s = conn.StatusOf(*r); !s.ok()) {
      out = s;
    } else {
      *sent += static_cast<uint64_t>(st.st_size);
      json done = json::parse(r->body, nullptr, false);
      Status v = Verify(done, hasher, "gs://" + bucket + "/" + object);
      if (!v.ok()) {
        (void)DeleteObject(conn, bucket, object);
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

namespace {

Status WriteAllFd(int fd, std::string_view b) {
  while (!b.empty()) {
    ssize_t n = ::write(fd, b.data(), b.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(std::string("cannot write: ") + std::strerror(errno));
    b.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

Result<json> Stat(ObjectApi& conn, const std::string& bucket, const std::string& object) {
  return conn.Call("GET", ObjectTarget(bucket, object));
}

// Streams the object to `out_fd` from byte `from`, hashing into `hasher`.
Status Fetch(ObjectApi& conn, const std::string& bucket, const std::string& object, uint64_t from,
             int out_fd, Hasher* hasher, Progress* progress) {
  std::map<std::string, std::string> headers;
  if (from > 0) headers["range"] = "bytes=" + std::to_string(from) + "-";
  auto r = conn.Stream("GET", ObjectTarget(bucket, object) + "?alt=media", headers, 0, nullptr,
                       [&](std::string_view b) {
                         hasher->Update(b);
                         progress->Add(b.size());
                         return WriteAllFd(out_fd, b);
                       });
  if (!r.ok()) return r.status();
  return conn.StatusOf(*r);
}

}  // namespace

// Downloads gs://bucket/object to `dest` through "<dest>_.gstmp", which a
// second run continues (Range) when the object is unchanged; checked, then
// renamed. A mismatch removes the temp file.
Status Download(ObjectApi& conn, const std::string& bucket, const std::string& object,
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
  Hasher hasher = TransferHasher();
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

Status FetchChecked(ObjectApi& conn, const std::string& bucket, const std::string& object,
                    int out_fd, Progress* progress) {
  Hasher hasher = TransferHasher();
  STOKER_ASSIGN_OR_RETURN(json meta, Stat(conn, bucket, object));
  STOKER_RETURN_IF_ERROR(Fetch(conn, bucket, object, 0, out_fd, &hasher, progress));
  return Verify(meta, hasher, "gs://" + bucket + "/" + object);
}

Status DeleteObject(ObjectApi& conn, const std::string& bucket, const std::string& object) {
  auto r = conn.Stream("DELETE", ObjectTarget(bucket, object), {}, 0, nullptr, nullptr);
  return r.ok() ? conn.StatusOf(*r) : r.status();
}

// ---- listing and wildcards -------------------------------------------------

Result<std::vector<RemoteObject>> ListObjects(ObjectApi& conn, const std::string& bucket,
                                              const std::string& prefix) {
  STOKER_ASSIGN_OR_RETURN(json r, conn.Call("GET", "/storage/v1/b/" + http::UrlEncode(bucket) +
                                                       "/o?prefix=" + http::UrlEncode(prefix)));
  std::vector<RemoteObject> out;
  for (const json& o : r["items"]) {
    out.push_back({o.value("name", ""), std::stoull(o.value("size", "0")), o.value("updated", ""),
                   o.value("crc32c", ""), o.value("md5Hash", "")});
  }
  return out;
}

Result<ExpandedUrl> ExpandGs(ObjectApi& conn, const std::string& url, bool recursive) {
  STOKER_ASSIGN_OR_RETURN(GsUri u, ParseGsUri(url, "URL"));
  STOKER_ASSIGN_OR_RETURN(auto all, ListObjects(conn, u.bucket, ListingPrefix(u)));
  return SelectObjects(u, std::move(all), recursive);
}

bool SameContent(const RemoteObject& object, const fs::path& file) {
  std::error_code ec;
  if (object.size != fs::file_size(file, ec)) return false;
  if (object.md5.empty()) return true;
  Hasher h;  // with MD5: the object's md5Hash is what rsync compares
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0) (void)HashRange(fd, static_cast<uint64_t>(st.st_size), &h);
  if (fd >= 0) ::close(fd);
  return object.md5 == h.Md5Base64();
}

// ---- the worker pool -------------------------------------------------------

int RunTransfers(const ObjectApiFactory& connect, const std::vector<TransferJob>& jobs,
                 int workers) {
  std::atomic<size_t> next{0};
  std::atomic<int> failed{0};
  std::mutex print_mu;
  auto work = [&] {
    auto conn = connect();
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

}  // namespace stoker::storage
