#include "auth/auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace stoker::auth {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* data, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 0xF]);
  }
  return out;
}

bool IsHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kUser:
      return "user";
    case Role::kViewer:
      return "viewer";
  }
  return "viewer";
}

Result<Role> ParseRole(std::string_view name, std::string_view field) {
  if (name == "admin") return Role::kAdmin;
  if (name == "user") return Role::kUser;
  if (name == "viewer") return Role::kViewer;
  return InvalidArgument(std::string(field) + ": unknown role '" + std::string(name) +
                         "'; use admin, user or viewer");
}

Status ValidateUserName(std::string_view name, std::string_view field) {
  bool ok =
      !name.empty() && name.size() <= 64 && ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) {
      ok = false;
    }
  }
  if (ok) return OkStatus();
  return InvalidArgument(std::string(field) + ": '" + std::string(name.substr(0, 80)) +
                         "' is not a valid user name; use 1-64 of a-z, 0-9, '_', '.', '-', "
                         "starting with a letter or '_'");
}

bool RoleAllows(Role role, Action action) {
  switch (action) {
    case Action::kRead:
      return true;
    case Action::kWrite:
      return role == Role::kUser || role == Role::kAdmin;
    case Action::kManage:
      return role == Role::kAdmin;
  }
  return false;
}

bool CanSee(const Principal& caller, std::string_view owner) {
  if (caller.role == Role::kAdmin || caller.role == Role::kViewer) return true;
  return !owner.empty() && owner == caller.user;
}

bool CanChange(const Principal& caller, std::string_view owner) {
  if (caller.role == Role::kAdmin) return true;
  if (caller.role == Role::kViewer) return false;
  return !owner.empty() && owner == caller.user;
}

Result<std::string> NewToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal(std::string("cannot read random bytes for a token: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return std::string(kTokenPrefix) + Hex(bytes, sizeof bytes);
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest with SHA-256 cannot fail for in-memory input short of
  // allocation failure, which is a broken invariant here.
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    std::abort();
  }
  return Hex(digest, len);
}

std::string HmacSha256Hex(std::string_view secret, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // HMAC over in-memory input cannot fail short of allocation failure.
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
           &len) == nullptr) {
    std::abort();
  }
  return Hex(digest, len);
}

std::string TrialPushKey(std::string_view secret, std::string_view study_id,
                         std::string_view trial_id) {
  return HmacSha256Hex(secret, std::string(study_id) + "/" + std::string(trial_id));
}

std::string TokenId(std::string_view token) { return Sha256Hex(token).substr(0, kTokenIdLength); }

bool LooksLikeToken(std::string_view token) {
  if (token.size() != kTokenPrefix.size() + 64 ||
      token.substr(0, kTokenPrefix.size()) != kTokenPrefix)
    return false;
  for (char c : token.substr(kTokenPrefix.size())) {
    if (!IsHexDigit(c)) return false;
  }
  return true;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

std::optional<std::string> BearerToken(std::string_view authorization) {
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return std::nullopt;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

Result<std::optional<std::string>> TrainerAccount(const TrainerPolicy& policy,
                                                  const std::string& mapped_unix_user) {
  if (!policy.daemon_is_root) return std::optional<std::string>();
  std::string account = mapped_unix_user.empty() ? policy.default_unix_user : mapped_unix_user;
  if (account.empty()) account = "nobody";
  if (account == "root" && !policy.allow_root_trainers) {
    return PermissionDenied(
        "replicas would run as root (" +
        std::string(mapped_unix_user.empty() ? "default_unix_user" : "the user's unix_user") +
        " is root); map the user to another account with 'stoker admin users add NAME "
        "--unix-user U', or set allow_root_trainers: true in the daemon config");
  }
  return std::optional<std::string>(account);
}

}  // namespace stoker::auth
