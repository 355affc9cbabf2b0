// Hasher (buckets.h), and the checksums kept with an object in an xattr
// (buckets_internal.h).
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <sstream>
#include <utility>

#include "common/crc32c.h"
#include "storage/buckets.h"
#include "storage/buckets_internal.h"
#include "storage/storage_internal.h"

namespace stoker::storage {

// ---- checksums ----

Hasher::Hasher(bool sha256, bool md5) {
  if (md5) {
    md5_ = EVP_MD_CTX_new();
    EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(md5_), EVP_md5(), nullptr);
  }
  if (sha256) {
    sha256_ = EVP_MD_CTX_new();
    EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(sha256_), EVP_sha256(), nullptr);
  }
}

Hasher::~Hasher() {
  if (md5_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(md5_));
  if (sha256_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(sha256_));
}

Hasher::Hasher(const Hasher& other) : crc_(other.crc_), bytes_(other.bytes_) {
  if (other.md5_) {
    md5_ = EVP_MD_CTX_new();
    EVP_MD_CTX_copy_ex(static_cast<EVP_MD_CTX*>(md5_), static_cast<EVP_MD_CTX*>(other.md5_));
  }
  if (other.sha256_) {
    sha256_ = EVP_MD_CTX_new();
    EVP_MD_CTX_copy_ex(static_cast<EVP_MD_CTX*>(sha256_), static_cast<EVP_MD_CTX*>(other.sha256_));
  }
}

Hasher& Hasher::operator=(const Hasher& other) {
  if (this == &other) return *this;
  Hasher copy(other);
  std::swap(crc_, copy.crc_);
  std::swap(bytes_, copy.bytes_);
  std::swap(md5_, copy.md5_);
  std::swap(sha256_, copy.sha256_);
  return *this;
}

void Hasher::Update(std::string_view bytes) {
  crc_ = Crc32c(bytes, crc_);
  bytes_ += bytes.size();
  if (md5_) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(md5_), bytes.data(), bytes.size());
  if (sha256_) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(sha256_), bytes.data(), bytes.size());
}

std::string Hasher::Crc32cBase64() const { return ::stoker::Crc32cBase64(crc_); }

namespace {

std::string Base64(const unsigned char* data, size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  int len =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<size_t>(len));
  return out;
}

// The digest so far of `ctx` (a copy is finalised; `ctx` goes on).
void DigestSoFar(void* ctx, unsigned int* len, unsigned char* digest) {
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, static_cast<EVP_MD_CTX*>(ctx));
  EVP_DigestFinal_ex(copy, digest, len);
  EVP_MD_CTX_free(copy);
}

}  // namespace

std::string Hasher::Md5Base64() const {
  if (!md5_) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  DigestSoFar(md5_, &len, digest);
  return Base64(digest, len);
}

std::string Hasher::Sha256Hex() const {
  if (!sha256_) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  DigestSoFar(sha256_, &len, digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

namespace {

using internal::MtimeNs;

// An object's checksums are kept in this extended attribute as
// "v1 <size> <mtime ns> <crc32c> <md5>": believed only while the size and
// the modification time still match (a trainer may rewrite the file in
// place), recomputed otherwise. Best effort: a file system without user
// attributes just recomputes.
constexpr char kHashesXattr[] = "user.stoker.hashes";

// Fills info->crc32c/md5 from a kept value that still matches `st`.
bool KeptHashes(const char* value, ssize_t len, const struct stat& st, ObjectInfo* info) {
  if (len <= 0) return false;
  std::istringstream in(std::string(value, static_cast<size_t>(len)));
  std::string version, crc, md5;
  int64_t size = -1, mtime = -1;
  if (!(in >> version >> size >> mtime >> crc >> md5) || version != "v1") return false;
  if (size != st.st_size || mtime != MtimeNs(st)) return false;
  info->crc32c = crc;
  info->md5 = md5;
  return true;
}

}  // namespace

namespace buckets_internal {

void FillFromStat(const struct stat& st, ObjectInfo* info) {
  info->size = static_cast<uint64_t>(st.st_size);
  info->mtime_us = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
}

bool KeptHashesAt(const std::string& path, const struct stat& st, ObjectInfo* info) {
  char kept[256];
  ssize_t len = ::lgetxattr(path.c_str(), kHashesXattr, kept, sizeof kept);
  return KeptHashes(kept, len, st, info);
}

bool KeptHashesOf(int fd, const struct stat& st, ObjectInfo* info) {
  char kept[256];
  ssize_t len = ::fgetxattr(fd, kHashesXattr, kept, sizeof kept);
  return KeptHashes(kept, len, st, info);
}

void KeepHashes(int fd, const ObjectInfo& info) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  std::string value = "v1 " + std::to_string(st.st_size) + " " + std::to_string(MtimeNs(st)) + " " +
                      info.crc32c + " " + info.md5;
  (void)::fsetxattr(fd, kHashesXattr, value.data(), value.size(), 0);
}

}  // namespace buckets_internal

}  // namespace stoker::storage
