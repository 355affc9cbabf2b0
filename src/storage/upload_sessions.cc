#include "storage/upload_sessions.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/files.h"

namespace stoker::storage {
namespace fs = std::filesystem;
using nlohmann::json;

Status UnknownSession(const std::string& id) {
  return NotFound("upload session '" + id +
                  "' does not exist (finished, cancelled, or older than 7 days); start the "
                  "upload again");
}

namespace {

constexpr auto kExpiry = std::chrono::hours(24 * 7);

bool IsSessionId(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

UploadSessions::UploadSessions(fs::path dir, Buckets* buckets)
    : dir_(std::move(dir)), buckets_(buckets) {}

Result<UploadSession> UploadSessions::Start(const std::string& bucket, const std::string& object,
                                            int64_t size, const std::string& user,
                                            const ObjectMeta& meta) {
  std::string uri = "gs://" + bucket + "/" + object;
  if (object.empty() || object.back() == '/') {
    return InvalidArgument("name: object '" + uri + "' needs a file name (not a directory)");
  }
  if (bucket == kStagingBucket) {
    return buckets_->OpenWriter(bucket, object).status();  // PermissionDenied, with the why
  }
  STOKER_RETURN_IF_ERROR(buckets_->Resolve(uri, "name").status());
  STOKER_RETURN_IF_ERROR(MakeDirs(dir_));
  RemoveExpired();
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) return Internal("no random bytes for an upload session id");
  static constexpr char kHex[] = "0123456789abcdef";
  UploadSession s;
  for (unsigned char c : raw) {
    s.id.push_back(kHex[c >> 4]);
    s.id.push_back(kHex[c & 0xf]);
  }
  s.bucket = bucket;
  s.object = object;
  s.user = user;
  s.size = size;
  s.meta = meta;
  int fd = ::open((dir_ / (s.id + ".part")).c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot create upload session in " + dir_.string());
  ::close(fd);
  json j{{"bucket", bucket},
         {"object", object},
         {"size", size},
         {"user", user},
         {"created_us", NowUs()},
         {"contentType", meta.content_type},
         {"metadata", meta.custom}};
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir_ / (s.id + ".json"), j.dump()));
  return s;
}

Result<UploadSession> UploadSessions::Load(const std::string& id) const {
  if (!IsSessionId(id)) return UnknownSession(id);
  auto text = ReadOwnFileNoFollow(dir_, id + ".json", 64 * 1024);
  if (!text.ok()) return UnknownSession(id);
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return Internal("upload session '" + id + "': its record is not JSON");
  UploadSession s;
  s.id = id;
  s.bucket = j.value("bucket", "");
  s.object = j.value("object", "");
  s.user = j.value("user", "");
  s.size = j.value("size", int64_t{-1});
  s.meta.content_type = j.value("contentType", std::string(kDefaultContentType));
  if (j.contains("metadata") && j["metadata"].is_object()) {
    for (auto& [k, v] : j["metadata"].items()) {
      if (v.is_string()) s.meta.custom[k] = v;
    }
  }
  struct stat st {};
  if (::lstat((dir_ / (id + ".part")).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return UnknownSession(id);
  }
  s.received = static_cast<uint64_t>(st.st_size);
  return s;
}

Result<UploadSession> UploadSessions::Get(const std::string& id) const { return Load(id); }

Status UploadSessions::Cancel(const std::string& id) {
  STOKER_RETURN_IF_ERROR(Load(id).status());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_.count(id)) {
      return Unavailable("upload session '" + id + "' is receiving a chunk; cancel it after");
    }
    hashers_.erase(id);
  }
  ::unlink((dir_ / (id + ".json")).c_str());
  ::unlink((dir_ / (id + ".part")).c_str());
  return OkStatus();
}

Status UploadSessions::SaveSize(UploadSession* session, int64_t total) {
  if (total < 0 || session->size == total) return OkStatus();
  if (session->size >= 0) {
    return InvalidArgument("Content-Range: the object's size was given as " +
                           std::to_string(session->size) + " bytes, now as " +
                           std::to_string(total) + "; it cannot change during an upload");
  }
  if (static_cast<uint64_t>(total) < session->received) {
    return InvalidArgument("Content-Range: total " + std::to_string(total) + " is less than the " +
                           std::to_string(session->received) + " bytes already received");
  }
  auto text = ReadOwnFileNoFollow(dir_, session->id + ".json", 64 * 1024);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, false);
  j["size"] = total;
  session->size = total;
  return WriteFileAtomic(dir_ / (session->id + ".json"), j.dump());
}

Result<std::unique_ptr<UploadSessions::Chunk>> UploadSessions::OpenChunk(const std::string& id,
                                                                         uint64_t first,
                                                                         std::optional<uint64_t> length,
                                                                         int64_t total) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_.count(id)) {
      return Unavailable("upload session '" + id +
                         "' is receiving another chunk (a connection that broke may not have "
                         "been noticed yet); ask for its status and resend");
    }
    busy_.insert(id);
  }
  std::unique_ptr<Chunk> c(new Chunk());
  c->owner_ = this;
  auto loaded = Load(id);
  if (!loaded.ok()) {
    Release(id, c->hasher_, false);
    return loaded.status();
  }
  c->session_ = *loaded;
  c->expected_ = length;
  Status s = SaveSize(&c->session_, total);
  const UploadSession& se = c->session_;
  if (s.ok() && first > se.received) {
    s = FailedPrecondition("Content-Range: the chunk starts at byte " + std::to_string(first) +
                           " but the session has " + std::to_string(se.received) +
                           "; resend from byte " + std::to_string(se.received));
  }
  if (s.ok() && length && se.size >= 0 && first + *length > static_cast<uint64_t>(se.size)) {
    s = InvalidArgument("Content-Range: bytes up to " + std::to_string(first + *length) +
                        " exceed the object's size of " + std::to_string(se.size));
  }
  if (s.ok()) {
    c->skip_ = se.received - first;
    if (length && c->skip_ > *length) c->skip_ = *length;
    c->fd_ = ::open((dir_ / (id + ".part")).c_str(), O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (c->fd_ < 0) s = Internal("cannot open the bytes of upload session '" + id + "'");
  }
  if (s.ok()) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = hashers_.find(id);
    if (it != hashers_.end() && it->second.bytes() == se.received) {
      c->hasher_ = it->second;
    } else {
      // A restarted daemon (or a write that failed half-way): hash what is
      // on disk again.
      lock.unlock();
      std::vector<char> buf(1 << 20);
      off_t at = 0;
      while (static_cast<uint64_t>(at) < se.received) {
        ssize_t n = ::pread(c->fd_, buf.data(), buf.size(), at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          s = Internal("cannot read the bytes of upload session '" + id + "'");
          break;
        }
        c->hasher_.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
        at += n;
      }
    }
  }
  if (!s.ok()) return s;  // ~Chunk releases the session
  return c;
}

UploadSessions::Chunk::~Chunk() {
  if (fd_ >= 0) ::close(fd_);
  if (owner_) owner_->Release(session_.id, hasher_, failed_.ok());
}

Status UploadSessions::Chunk::Append(std::string_view bytes) {
  if (!failed_.ok()) return failed_;
  seen_ += bytes.size();
  if (expected_ && seen_ > *expected_) {
    failed_ = InvalidArgument("Content-Range: the chunk is longer than its range says");
    return failed_;
  }
  uint64_t already = seen_ - bytes.size();
  if (already < skip_) {
    uint64_t drop = std::min<uint64_t>(skip_ - already, bytes.size());
    bytes.remove_prefix(static_cast<size_t>(drop));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failed_ = errno == ENOSPC
                    ? ResourceExhausted(
                          "no space left for the upload; free some and "
                          "resume it")
                    : Internal(std::string("cannot store the upload: ") + std::strerror(errno));
      return failed_;
    }
    hasher_.Update(bytes.substr(done, static_cast<size_t>(n)));
    done += static_cast<size_t>(n);
  }
  session_.received = hasher_.bytes();
  return OkStatus();
}

Result<UploadSessions::Outcome> UploadSessions::Chunk::Finish() {
  if (!failed_.ok()) return failed_;
  if (expected_ && seen_ != *expected_) {
    return InvalidArgument("Content-Range: the chunk has " + std::to_string(seen_) +
                           " bytes, its range " + std::to_string(*expected_));
  }
  Outcome out;
  session_.received = hasher_.bytes();
  if (!expected_) {
    // The rest of the object: its end is this body's end.
    // (A size said earlier that differs is refused by SaveSize.)
    STOKER_RETURN_IF_ERROR(owner_->SaveSize(&session_, static_cast<int64_t>(session_.received)));
  }
  out.session = session_;
  if (session_.size >= 0 && session_.received == static_cast<uint64_t>(session_.size)) {
    int dir_fd = ::open(owner_->dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) return Internal("cannot open " + owner_->dir_.string());
    auto made = owner_->buckets_->AdoptFile(session_.bucket, session_.object, dir_fd,
                                            session_.id + ".part", hasher_, session_.meta);
    if (made.ok()) ::unlinkat(dir_fd, (session_.id + ".json").c_str(), 0);
    ::close(dir_fd);
    if (!made.ok()) return made.status();
    out.object = *made;
  }
  return out;
}

void UploadSessions::Release(const std::string& id, const Hasher& hasher, bool keep_hasher) {
  std::lock_guard<std::mutex> lock(mu_);
  busy_.erase(id);
  struct stat st {};
  bool live = ::lstat((dir_ / (id + ".json")).c_str(), &st) == 0;
  if (keep_hasher && live) {
    hashers_.insert_or_assign(id, hasher);
  } else {
    hashers_.erase(id);
  }
}

void UploadSessions::RemoveExpired() {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  std::vector<std::string> old;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() != 37 || name.compare(32, 5, ".json") != 0) continue;
    std::string id = name.substr(0, 32);
    // The .part's time is the last chunk's.
    auto t = fs::last_write_time(dir_ / (id + ".part"), ec);
    if (ec) t = fs::last_write_time(it->path(), ec);
    if (!ec && now - t > kExpiry) old.push_back(id);
    ec.clear();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& id : old) {
    if (busy_.count(id)) continue;
    hashers_.erase(id);
    ::unlink((dir_ / (id + ".json")).c_str());
    ::unlink((dir_ / (id + ".part")).c_str());
  }
}

}  // namespace stoker::storage
