// Buckets (buckets.h): streamed writes (ObjectWriter), AdoptFile, Open, Stat
// and Delete of single objects.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/files.h"
#include "storage/archive.h"
#include "storage/buckets.h"
#include "storage/buckets_internal.h"

namespace stoker::storage {
namespace fs = std::filesystem;
using buckets_internal::FillFromStat;
using buckets_internal::KeepHashes;
using buckets_internal::KeptHashesOf;
using buckets_internal::kScheme;
using buckets_internal::kUploadTempPrefix;
using buckets_internal::ModesFor;
using buckets_internal::ObjectPath;
using buckets_internal::RealDir;

namespace {

Status WriteAll(int fd, std::string_view bytes, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return errno == ENOSPC ? ResourceExhausted("cannot write " + what +
                                                 ": no space left on the "
                                                 "device; free some and "
                                                 "upload again")
                             : Internal("cannot write " + what + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

// Reads the whole file from its start through `hasher`.
Status HashFile(int fd, Hasher* hasher, const std::string& what) {
  std::vector<char> buf(1 << 20);
  off_t at = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) return OkStatus();
    hasher->Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    at += n;
  }
}

// "a/b/c" -> ("a/b", "c").
std::pair<std::string, std::string> SplitObject(const std::string& object) {
  size_t slash = object.rfind('/');
  if (slash == std::string::npos) return {"", object};
  return {object.substr(0, slash), object.substr(slash + 1)};
}

std::string NotFoundMessage(const std::string& uri, const std::string& bucket) {
  return "object '" + uri + "' does not exist; list the bucket with 'stoker storage ls gs://" +
         bucket + "/'";
}

}  // namespace

// ---- streamed writes ----

ObjectWriter::~ObjectWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (dir_fd_ >= 0) {
    if (!tmp_.empty()) ::unlinkat(dir_fd_, tmp_.c_str(), 0);
    ::close(dir_fd_);
  }
}

Status ObjectWriter::Append(std::string_view bytes) {
  if (!failed_.ok()) return failed_;
  failed_ = WriteAll(fd_, bytes, "object '" + uri_ + "'");
  if (failed_.ok()) hasher_.Update(bytes);
  return failed_;
}

Result<ObjectInfo> ObjectWriter::Commit(const std::string& final_name) {
  if (!failed_.ok()) return failed_;
  const std::string name = final_name.empty() ? name_ : final_name;
  if ((modes_.gid >= 0 &&
       ::fchown(fd_, static_cast<uid_t>(-1), static_cast<gid_t>(modes_.gid)) != 0) ||
      ::fchmod(fd_, modes_.file_mode) != 0) {
    return Internal("cannot set the mode of object '" + uri_ + "': " + std::strerror(errno));
  }
  STOKER_RETURN_IF_ERROR(KeepMeta(fd_, meta_));
  if (::fsync(fd_) != 0) return Internal("cannot sync object '" + uri_ + "'");
  if (::renameat(dir_fd_, tmp_.c_str(), dir_fd_, name.c_str()) != 0) {
    return Internal("cannot rename the upload into object '" + uri_ + "': " + std::strerror(errno));
  }
  tmp_.clear();
  ::fsync(dir_fd_);
  ObjectInfo info;
  info.name = final_name.empty()                   ? object_
              : SplitObject(object_).first.empty() ? final_name
                                                   : SplitObject(object_).first + "/" + final_name;
  struct stat st {};
  if (::fstat(fd_, &st) == 0) FillFromStat(st, &info);
  info.crc32c = hasher_.Crc32cBase64();
  info.md5 = hasher_.Md5Base64();
  KeepHashes(fd_, info);
  info.meta = meta_;
  return info;
}

namespace {

// Opens the directory that will hold `object` (made as needed) and checks
// that no directory already has the object's name.
Result<int> ObjectDir(const fs::path& real_dir, const std::string& object, const std::string& uri,
                      const CreateModes& modes) {
  auto [parent, name] = SplitObject(object);
  STOKER_ASSIGN_OR_RETURN(int dir_fd, OpenDirNoFollow(real_dir, parent, /*create=*/true, modes));
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
    ::close(dir_fd);
    return FailedPrecondition("object '" + uri +
                              "': a directory of that name exists in the bucket (objects below "
                              "gs://" +
                              uri.substr(5) + "/ use it); pick another name");
  }
  return dir_fd;
}

}  // namespace

Result<std::unique_ptr<ObjectWriter>> Buckets::NewWriter(const std::string& bucket,
                                                         const std::string& object, bool sha256) {
  std::string uri = std::string(kScheme) + bucket + "/" + object;
  if (object.empty() || object.back() == '/') {
    return InvalidArgument("object '" + uri + "': an object needs a file name (not a directory)");
  }
  STOKER_ASSIGN_OR_RETURN(fs::path path, ObjectPath(*this, bucket, object, "object", uri));
  (void)path;
  CreateModes modes = bucket == kStagingBucket ? CreateModes{} : ModesFor(writer_gid_);
  STOKER_ASSIGN_OR_RETURN(int dir_fd, ObjectDir(RealDir(*this, bucket), object, uri, modes));
  static std::atomic<uint64_t> counter{0};
  std::string tmp = std::string(kUploadTempPrefix) + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1));
  int fd = ::openat(dir_fd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    Status s =
        Internal("cannot create a temp file for object '" + uri + "': " + std::strerror(errno));
    ::close(dir_fd);
    return s;
  }
  std::unique_ptr<ObjectWriter> w(new ObjectWriter());
  w->dir_fd_ = dir_fd;
  w->fd_ = fd;
  w->tmp_ = tmp;
  w->name_ = SplitObject(object).second;
  w->object_ = object;
  w->uri_ = uri;
  w->modes_ = modes;
  w->hasher_ = Hasher(sha256);
  return w;
}

Result<std::unique_ptr<ObjectWriter>> Buckets::OpenWriter(const std::string& bucket,
                                                          const std::string& object) {
  if (bucket == kStagingBucket) {
    return PermissionDenied("bucket '" + std::string(kStagingBucket) +
                            "' is written only by staging: send the archive to POST "
                            "/v1/stoker/staging (stoker jobs submit --package-path does) or copy "
                            "it to a bucket of your own");
  }
  return NewWriter(bucket, object, /*sha256=*/false);
}

Result<std::unique_ptr<ObjectWriter>> Buckets::StageWriter() {
  STOKER_RETURN_IF_ERROR(Create(kStagingBucket));
  return NewWriter(kStagingBucket, "upload.tar.gz", /*sha256=*/true);
}

Result<std::string> Buckets::StageCommit(std::unique_ptr<ObjectWriter> writer) {
  STOKER_RETURN_IF_ERROR(CheckTarGzFd(writer->fd(), "package archive"));
  std::string object = writer->hasher().Sha256Hex() + ".tar.gz";
  STOKER_RETURN_IF_ERROR(writer->Commit(object).status());
  return std::string(kScheme) + kStagingBucket + "/" + object;
}

Result<ObjectInfo> Buckets::AdoptFile(const std::string& bucket, const std::string& object,
                                      int from_dir_fd, const std::string& from_name,
                                      const Hasher& hashes, const ObjectMeta& meta) {
  std::string uri = std::string(kScheme) + bucket + "/" + object;
  if (bucket == kStagingBucket) return OpenWriter(bucket, object).status();
  if (object.empty() || object.back() == '/') {
    return InvalidArgument("object '" + uri + "': an object needs a file name (not a directory)");
  }
  STOKER_ASSIGN_OR_RETURN(fs::path path, ObjectPath(*this, bucket, object, "object", uri));
  (void)path;
  CreateModes modes = ModesFor(writer_gid_);
  int src = ::openat(from_dir_fd, from_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0) return Internal("cannot open the finished upload for '" + uri + "'");
  STOKER_ASSIGN_OR_RETURN(int dir_fd, ObjectDir(RealDir(*this, bucket), object, uri, modes));
  std::string name = SplitObject(object).second;
  ObjectInfo info;
  info.name = object;
  info.crc32c = hashes.Crc32cBase64();
  info.md5 = hashes.Md5Base64();
  Status s = KeepMeta(src, meta);
  if (!s.ok()) {
    // Nothing is moved: the object would lose the metadata it was sent with.
  } else if ((modes.gid >= 0 &&
              ::fchown(src, static_cast<uid_t>(-1), static_cast<gid_t>(modes.gid)) != 0) ||
             ::fchmod(src, modes.file_mode) != 0 || ::fsync(src) != 0) {
    s = Internal("cannot prepare the finished upload for '" + uri + "': " + std::strerror(errno));
  } else if (::renameat(from_dir_fd, from_name.c_str(), dir_fd, name.c_str()) == 0) {
    ::fsync(dir_fd);
    struct stat st {};
    if (::fstat(src, &st) == 0) FillFromStat(st, &info);
    KeepHashes(src, info);
    info.meta = meta;
  } else if (errno == EXDEV) {
    // The bucket is on another file system (a config override): copy.
    ::close(dir_fd);
    dir_fd = -1;
    auto w = OpenWriter(bucket, object);
    if (!w.ok()) {
      s = w.status();
    } else {
      std::vector<char> buf(1 << 20);
      for (;;) {
        ssize_t n = ::read(src, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          s = Internal("cannot read the finished upload for '" + uri + "'");
          break;
        }
        if (n == 0) break;
        s = (*w)->Append(std::string_view(buf.data(), static_cast<size_t>(n)));
        if (!s.ok()) break;
      }
      if (s.ok()) {
        (*w)->SetMeta(meta);
        auto committed = (*w)->Commit();
        if (committed.ok()) {
          info = *committed;
          ::unlinkat(from_dir_fd, from_name.c_str(), 0);
        } else {
          s = committed.status();
        }
      }
    }
  } else {
    s = Internal("cannot move the finished upload into '" + uri + "': " + std::strerror(errno));
  }
  ::close(src);
  if (dir_fd >= 0) ::close(dir_fd);
  if (!s.ok()) return s;
  return info;
}

Result<OpenObject> Buckets::Open(const std::string& bucket, const std::string& object,
                                 bool with_hashes) const {
  std::string uri = std::string(kScheme) + bucket + "/" + object;
  STOKER_ASSIGN_OR_RETURN(fs::path path, ObjectPath(*this, bucket, object, "object", uri));
  (void)path;
  if (object.empty() || object.back() == '/') return NotFound(NotFoundMessage(uri, bucket));
  auto fd = OpenReadNoFollow(RealDir(*this, bucket), object);
  if (!fd.ok()) {
    if (fd.status().code() == Code::kNotFound) return NotFound(NotFoundMessage(uri, bucket));
    // A directory of that name is a prefix, not an object.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return NotFound(NotFoundMessage(uri, bucket));
    }
    return fd.status();
  }
  OpenObject out;
  out.fd = *fd;
  out.info.name = object;
  struct stat st {};
  if (::fstat(out.fd, &st) != 0) {
    ::close(out.fd);
    return Internal("cannot stat object '" + uri + "'");
  }
  FillFromStat(st, &out.info);
  out.info.meta = KeptMeta(out.fd, st);
  if (!KeptHashesOf(out.fd, st, &out.info) && with_hashes) {
    Hasher hasher;
    Status s = HashFile(out.fd, &hasher, "object '" + uri + "'");
    if (!s.ok()) {
      ::close(out.fd);
      return s;
    }
    out.info.crc32c = hasher.Crc32cBase64();
    out.info.md5 = hasher.Md5Base64();
    KeepHashes(out.fd, out.info);
  }
  return out;
}

Result<ObjectInfo> Buckets::Stat(const std::string& bucket, const std::string& object) const {
  STOKER_ASSIGN_OR_RETURN(OpenObject open, Open(bucket, object, /*with_hashes=*/true));
  ::close(open.fd);
  return open.info;
}

Status Buckets::Delete(const std::string& bucket, const std::string& object) {
  std::string uri = std::string(kScheme) + bucket + "/" + object;
  if (bucket == kStagingBucket) {
    return PermissionDenied("bucket '" + std::string(kStagingBucket) +
                            "' is kept by staging (packages of jobs); its objects are not deleted "
                            "by hand");
  }
  STOKER_ASSIGN_OR_RETURN(fs::path path, ObjectPath(*this, bucket, object, "object", uri));
  (void)path;
  if (object.empty() || object.back() == '/') return NotFound(NotFoundMessage(uri, bucket));
  fs::path real_dir = RealDir(*this, bucket);
  auto [parent, name] = SplitObject(object);
  auto dir_fd = OpenDirNoFollow(real_dir, parent, /*create=*/false);
  if (!dir_fd.ok()) return NotFound(NotFoundMessage(uri, bucket));
  struct stat st {};
  if (::fstatat(*dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) {
    ::close(*dir_fd);
    return NotFound(NotFoundMessage(uri, bucket));
  }
  int rc = ::unlinkat(*dir_fd, name.c_str(), 0);
  int e = errno;
  ::close(*dir_fd);
  if (rc != 0) return Internal("cannot delete object '" + uri + "': " + std::strerror(e));
  // Directories are only prefixes here: remove the ones left empty, from
  // the deepest up, each through its parent's descriptor.
  while (!parent.empty()) {
    auto [up, last] = SplitObject(parent);
    auto up_fd = OpenDirNoFollow(real_dir, up, /*create=*/false);
    if (!up_fd.ok()) break;
    rc = ::unlinkat(*up_fd, last.c_str(), AT_REMOVEDIR);
    ::close(*up_fd);
    if (rc != 0) break;
    parent = up;
  }
  return OkStatus();
}

}  // namespace stoker::storage
