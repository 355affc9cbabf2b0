// Buckets (buckets.h): gs:// names, bucket directories, whole-object reads
// and writes, listing, staging; RewriteGsUris.
#include "storage/buckets.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/files.h"
#include "storage/archive.h"
#include "storage/buckets_internal.h"
#include "storage/storage_internal.h"

namespace stoker::storage {
namespace fs = std::filesystem;
using buckets_internal::KeptHashesAt;
using buckets_internal::kScheme;
using buckets_internal::kUploadTempPrefix;
using buckets_internal::ModesFor;
using buckets_internal::ObjectPath;
using buckets_internal::RealDir;
using internal::IsInside;

namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Empty when `bucket` follows the Cloud Storage naming rules, else what is wrong.
std::string BucketNameProblem(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) {
    return "bucket name '" + bucket + "' must be 3-63 characters long";
  }
  for (char c : bucket) {
    if (!IsLowerAlnum(c) && c != '-' && c != '_' && c != '.') {
      return "bucket name '" + bucket +
             "' may only contain lowercase letters, digits, '-', '_' and '.'";
    }
  }
  if (!IsLowerAlnum(bucket.front()) || !IsLowerAlnum(bucket.back())) {
    return "bucket name '" + bucket + "' must start and end with a letter or digit";
  }
  return "";
}

// Empty when `object` is a safe relative object name, else what is wrong. A
// single trailing '/' is allowed (a "directory" such as a job's output dir).
std::string ObjectNameProblem(std::string_view object) {
  if (object.empty()) return "";
  if (object.find('\0') != std::string_view::npos) return "object name contains a NUL byte";
  if (object.front() == '/') return "object name '" + std::string(object) + "' is absolute";
  std::string_view rest = object;
  if (rest.back() == '/') rest.remove_suffix(1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find('/', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view part = rest.substr(start, end - start);
    if (part.empty()) {
      return "object name '" + std::string(object) + "' has an empty path component ('//')";
    }
    if (part == "." || part == "..") {
      return "object name '" + std::string(object) + "' has a '" + std::string(part) +
             "' component; object names cannot leave the bucket";
    }
    if (part.size() > 255) {
      return "object name has a component of " + std::to_string(part.size()) +
             " bytes; each part between '/' may have at most 255 (the file system's NAME_MAX)";
    }
    start = end + 1;
  }
  return "";
}

std::string MissingBucketMessage(const std::string& field, const std::string& bucket) {
  return field + ": bucket '" + bucket +
         "' does not exist; create it with 'stoker storage mb gs://" + bucket +
         "' or copy data into it with 'stoker storage cp'";
}

Result<std::string> Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    return Internal("SHA-256 of the package archive failed (OpenSSL EVP_Digest)");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

// WriteFileAtomic leaves "<name>.tmp.<pid>" beside the target while it
// writes, ObjectWriter ".stoker-upload.<pid>.<n>".
bool IsTempFile(const std::string& name) {
  size_t slash = name.rfind('/');
  std::string_view last = std::string_view(name).substr(slash == std::string::npos ? 0 : slash + 1);
  if (last.substr(0, kUploadTempPrefix.size()) == kUploadTempPrefix) return true;
  size_t pos = name.rfind(".tmp.");
  if (pos == std::string::npos || pos + 5 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(pos) + 5, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// Directories and objects in a bucket shared with a writer group.
constexpr unsigned kSharedDirMode = 02775;
constexpr unsigned kSharedFileMode = 0664;

}  // namespace

namespace buckets_internal {

// Maps bucket + object to a path inside the (existing) bucket directory, or
// refuses the name. `field` and `uri` only shape the messages.
Result<fs::path> ObjectPath(const Buckets& buckets, const std::string& bucket,
                            const std::string& object, const std::string& field,
                            const std::string& uri) {
  if (std::string problem = BucketNameProblem(bucket); !problem.empty()) {
    return InvalidArgument(field + ": " + problem);
  }
  if (!buckets.Exists(bucket)) return NotFound(MissingBucketMessage(field, bucket));
  if (std::string problem = ObjectNameProblem(object); !problem.empty()) {
    return InvalidArgument(field + ": " + problem + " (in '" + uri + "')");
  }
  fs::path dir = buckets.BucketDir(bucket);
  std::string trimmed = object;
  if (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
  fs::path path = trimmed.empty() ? dir : dir / trimmed;
  // The lexical checks above cannot see symlinks inside the bucket; resolve
  // every existing component and require the result to stay inside.
  std::error_code ec;
  fs::path real_dir = fs::weakly_canonical(dir, ec);
  if (ec)
    return Internal(field + ": cannot resolve bucket directory " + dir.string() + ": " +
                    ec.message());
  fs::path real_path = fs::weakly_canonical(path, ec);
  if (ec) return Internal(field + ": cannot resolve " + path.string() + ": " + ec.message());
  if (!IsInside(real_path, real_dir)) {
    return InvalidArgument(field + ": '" + uri + "' resolves to " + real_path.string() +
                           ", outside bucket '" + bucket +
                           "' (through a symlink); object names must stay inside their bucket");
  }
  return path;
}

fs::path RealDir(const Buckets& buckets, const std::string& bucket) {
  std::error_code ec;
  fs::path dir = buckets.BucketDir(bucket);
  fs::path real = fs::weakly_canonical(dir, ec);
  return ec ? dir : real;
}

CreateModes ModesFor(const std::optional<uint32_t>& gid) {
  if (!gid) return {};
  return {kSharedDirMode, kSharedFileMode, static_cast<int64_t>(*gid)};
}

}  // namespace buckets_internal

Result<GsUri> ParseGsUri(const std::string& uri, const std::string& field) {
  if (uri.compare(0, kScheme.size(), kScheme) != 0) {
    return InvalidArgument(field + ": '" + uri +
                           "' is not a gs:// URI; write it as gs://BUCKET/OBJECT (a local bucket, "
                           "see 'stoker storage ls')");
  }
  std::string rest = uri.substr(kScheme.size());
  size_t slash = rest.find('/');
  GsUri out;
  out.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) out.object = rest.substr(slash + 1);
  if (out.bucket.empty()) {
    return InvalidArgument(field + ": '" + uri + "' has no bucket; write it as gs://BUCKET/OBJECT");
  }
  if (std::string problem = BucketNameProblem(out.bucket); !problem.empty()) {
    return InvalidArgument(field + ": " + problem + " (in '" + uri + "')");
  }
  return out;
}

Buckets::Buckets(fs::path data_dir, std::map<std::string, fs::path> overrides,
                 std::optional<uint32_t> writer_gid)
    : data_dir_(std::move(data_dir)), overrides_(std::move(overrides)), writer_gid_(writer_gid) {}

namespace {

// Gives the directory open as `fd` (and, below it, everything, never
// through a link) to group `gid` with group write. Counts what it changed.
void ShareTree(int fd, gid_t gid, int depth, int64_t* changed) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  if (st.st_gid != gid || (st.st_mode & 02070) != 02070) {
    (void)::fchown(fd, static_cast<uid_t>(-1), gid);
    (void)::fchmod(fd, (st.st_mode & 07777) | 02070);
    ++*changed;
  }
  if (depth > 256) return;
  int list_fd = ::dup(fd);
  DIR* d = list_fd >= 0 ? ::fdopendir(list_fd) : nullptr;
  if (d == nullptr) {
    if (list_fd >= 0) ::close(list_fd);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    int child = ::openat(fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (child < 0) continue;  // a link (ELOOP), or gone
    struct stat cs {};
    if (::fstat(child, &cs) == 0) {
      if (S_ISDIR(cs.st_mode)) {
        ShareTree(child, gid, depth + 1, changed);
      } else if (S_ISREG(cs.st_mode) && (cs.st_gid != gid || (cs.st_mode & 060) != 060)) {
        (void)::fchown(child, static_cast<uid_t>(-1), gid);
        (void)::fchmod(child, (cs.st_mode & 07777) | 060);
        ++*changed;
      }
    }
    ::close(child);
  }
  ::closedir(d);
}

}  // namespace

fs::path Buckets::BucketDir(const std::string& bucket) const {
  if (auto it = overrides_.find(bucket); it != overrides_.end()) return it->second;
  if (bucket == kStagingBucket) return data_dir_ / "staging";
  return data_dir_ / "buckets" / bucket;
}

bool Buckets::Exists(const std::string& bucket) const {
  if (!BucketNameProblem(bucket).empty()) return false;
  std::error_code ec;
  return fs::is_directory(BucketDir(bucket), ec);
}

Status Buckets::Create(const std::string& bucket) {
  if (std::string problem = BucketNameProblem(bucket); !problem.empty()) {
    return InvalidArgument(problem);
  }
  fs::path dir = BucketDir(bucket);
  STOKER_RETURN_IF_ERROR(MakeDirs(dir));
  if (!writer_gid_ || bucket == kStagingBucket) return OkStatus();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open bucket directory " + dir.string());
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 &&
            ((st.st_gid == *writer_gid_ && (st.st_mode & 07777) == kSharedDirMode) ||
             (::fchown(fd, static_cast<uid_t>(-1), *writer_gid_) == 0 &&
              ::fchmod(fd, kSharedDirMode) == 0));
  ::close(fd);
  if (!ok) return Internal("cannot share bucket directory " + dir.string() + " with its writers");
  return OkStatus();
}

Result<int64_t> Buckets::ShareWithWriters() {
  int64_t changed = 0;
  if (!writer_gid_) return changed;
  for (const std::string& bucket : ListBuckets()) {
    if (bucket == kStagingBucket) continue;
    fs::path dir = BucketDir(bucket);
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && (st.st_gid != *writer_gid_ || (st.st_mode & 02070) != 02070)) {
      ShareTree(fd, *writer_gid_, 0, &changed);
    }
    ::close(fd);
  }
  return changed;
}

Result<fs::path> Buckets::MakeDir(const std::string& uri, const std::string& field) {
  STOKER_ASSIGN_OR_RETURN(GsUri parsed, ParseGsUri(uri, field));
  STOKER_ASSIGN_OR_RETURN(fs::path path, Resolve(uri, field));
  std::string object = parsed.object;
  while (!object.empty() && object.back() == '/') object.pop_back();
  if (!object.empty()) {
    STOKER_RETURN_IF_ERROR(
        MakeDirsBelow(RealDir(*this, parsed.bucket), object, ModesFor(writer_gid_)));
  }
  return path;
}

void Buckets::RemoveIfEmpty(const std::string& bucket) {
  if (bucket == kStagingBucket || overrides_.count(bucket)) return;
  (void)::rmdir(BucketDir(bucket).c_str());
}

std::vector<std::string> Buckets::ListBuckets() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(data_dir_ / "buckets", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (BucketNameProblem(name).empty() && Exists(name)) names.push_back(name);
  }
  for (const auto& [name, dir] : overrides_) {
    if (Exists(name)) names.push_back(name);
  }
  if (Exists(kStagingBucket)) names.push_back(kStagingBucket);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Result<fs::path> Buckets::Resolve(const std::string& uri, const std::string& field) const {
  STOKER_ASSIGN_OR_RETURN(GsUri parsed, ParseGsUri(uri, field));
  return ObjectPath(*this, parsed.bucket, parsed.object, field, uri);
}

Status Buckets::Put(const std::string& bucket, const std::string& object, std::string_view data) {
  if (bucket == kStagingBucket) {
    // Content addressed: only Stage writes there, so what a name promises
    // holds (another user's upload must never replace a package).
    return PermissionDenied("bucket '" + std::string(kStagingBucket) +
                            "' is written only by staging: send the archive to POST "
                            "/v1/stoker/staging (stoker jobs submit --package-path does) or copy "
                            "it to a bucket of your own");
  }
  return Write(bucket, object, data);
}

Status Buckets::Write(const std::string& bucket, const std::string& object, std::string_view data) {
  std::string uri = std::string(kScheme) + bucket + "/" + object;
  if (object.empty() || object.back() == '/') {
    return InvalidArgument("object '" + uri + "': an object needs a file name (not a directory)");
  }
  STOKER_ASSIGN_OR_RETURN(fs::path path, ObjectPath(*this, bucket, object, "object", uri));
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return FailedPrecondition("object '" + uri +
                              "': a directory of that name exists in the bucket");
  }
  // Trainers may write buckets: walk to the object without following a link
  // (a directory swapped for one after the check above is refused).
  CreateModes modes = bucket == kStagingBucket ? CreateModes{} : ModesFor(writer_gid_);
  return WriteFileBelow(RealDir(*this, bucket), object, data, modes);
}

Result<std::string> Buckets::Get(const std::string& bucket, const std::string& object) const {
  std::string uri = std::string(kScheme) + bucket + "/" + object;
  STOKER_ASSIGN_OR_RETURN(fs::path path, ObjectPath(*this, bucket, object, "object", uri));
  std::error_code ec;
  if (object.empty() || !fs::is_regular_file(path, ec)) {
    return NotFound("object '" + uri +
                    "' does not exist; list the bucket with 'stoker storage ls gs://" + bucket +
                    "/'");
  }
  // Not through a link a trainer may have put at the name since the check.
  std::string name = object;
  while (!name.empty() && name.back() == '/') name.pop_back();
  return ReadFileNoFollow(RealDir(*this, bucket), name);
}

Result<std::vector<ObjectInfo>> Buckets::List(const std::string& bucket,
                                              const std::string& prefix) const {
  if (std::string problem = BucketNameProblem(bucket); !problem.empty()) {
    return InvalidArgument(problem);
  }
  if (!Exists(bucket)) return NotFound(MissingBucketMessage("bucket", bucket));
  fs::path dir = BucketDir(bucket);
  std::vector<ObjectInfo> out;
  std::error_code ec;
  // Symlinked directories are not followed: a listing never leaves the bucket.
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec)
    return Internal("cannot list bucket '" + bucket + "' at " + dir.string() + ": " + ec.message());
  for (fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) {
      return Internal("cannot list bucket '" + bucket + "' at " + dir.string() + ": " +
                      ec.message());
    }
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    std::string name = it->path().lexically_relative(dir).generic_string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (IsTempFile(name)) continue;
    ObjectInfo info;
    info.name = std::move(name);
    info.size = static_cast<uint64_t>(st.st_size);
    info.mtime_us = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
    KeptHashesAt(it->path().string(), st, &info);
    info.meta = KeptMetaAt(it->path().string(), st);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

Result<std::string> Buckets::Stage(std::string_view archive_bytes) {
  STOKER_RETURN_IF_ERROR(CheckTarGz(archive_bytes, "package archive"));
  STOKER_ASSIGN_OR_RETURN(std::string hex, Sha256Hex(archive_bytes));
  std::string object = hex + ".tar.gz";
  STOKER_RETURN_IF_ERROR(Create(kStagingBucket));
  // Content-addressed: a file of that name already holds these bytes,
  // unless something other than Stage wrote it; then it is replaced.
  auto have = Get(kStagingBucket, object);
  if (!have.ok() || *have != archive_bytes) {
    STOKER_RETURN_IF_ERROR(Write(kStagingBucket, object, archive_bytes));
  }
  return std::string(kScheme) + kStagingBucket + "/" + object;
}

Status CheckStagedContent(const GsUri& uri, std::string_view bytes, const std::string& field) {
  if (uri.bucket != kStagingBucket) return OkStatus();
  const std::string& o = uri.object;
  constexpr size_t kHexLen = 64;
  bool named = o.size() == kHexLen + 7 && o.compare(kHexLen, 7, ".tar.gz") == 0 &&
               o.find_first_not_of("0123456789abcdef") == kHexLen;
  std::string where = std::string(kScheme) + kStagingBucket + "/" + o;
  if (!named) {
    return InvalidArgument(field + ": " + where + " is not a staged package (gs://" +
                           kStagingBucket +
                           "/<sha256>.tar.gz); stage the package again with --package-path");
  }
  STOKER_ASSIGN_OR_RETURN(std::string hex, Sha256Hex(bytes));
  if (hex != o.substr(0, kHexLen)) {
    return FailedPrecondition(field + ": " + where + " does not hold the bytes its name promises " +
                              "(its SHA-256 is " + hex +
                              "); it was changed after staging: stage the package again");
  }
  return OkStatus();
}

std::string RewriteGsUris(const std::string& text, const Buckets& buckets) {
  auto ends_token = [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == ',';
  };
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = text.find(kScheme, pos);
    if (start == std::string::npos) break;
    // "xgs://" is part of another word, not a URI.
    if (start > 0 && std::isalnum(static_cast<unsigned char>(text[start - 1]))) {
      out.append(text, pos, start + kScheme.size() - pos);
      pos = start + kScheme.size();
      continue;
    }
    size_t end = start;
    while (end < text.size() && !ends_token(text[end])) ++end;
    std::string uri = text.substr(start, end - start);
    out.append(text, pos, start - pos);
    Result<fs::path> path = buckets.Resolve(uri, "uri");
    if (path.ok()) {
      std::string local = path->string();
      if (uri.back() == '/' && (local.empty() || local.back() != '/')) local.push_back('/');
      out += local;
    } else {
      out += uri;
    }
    pos = end;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

}  // namespace stoker::storage
