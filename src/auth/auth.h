// Who may do what: roles, principals, tokens and the pure authorisation
// rules of the API (docs/decisions/0006-auth.md). Nothing here touches the
// database; auth_store.h keeps users and tokens. Every function is
// thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stoker::auth {

// admin: everything, every user's jobs, user management. user: submits and
// manages its own jobs and studies, uses buckets. viewer: reads everything
// (jobs of all users, logs, buckets), changes nothing.
enum class Role { kViewer, kUser, kAdmin };

// "admin", "user", "viewer".
std::string_view RoleName(Role role);
// Parses a role name; InvalidArgument naming `field` and the choices.
Result<Role> ParseRole(std::string_view name, std::string_view field);

// A user name: 1-64 of [a-z0-9_.-], starting with a letter or '_' (the
// portable Unix user name rule, so that a user may share its Unix name).
Status ValidateUserName(std::string_view name, std::string_view field);

// The authenticated caller of one request.
struct Principal {
  std::string user;
  Role role = Role::kViewer;
  std::string unix_user;  // the mapped Unix account; "" = none mapped
  std::string token_id;   // the token it authenticated with
};

// What a request does, for the role check.
enum class Action {
  kRead,    // GET/HEAD of jobs, studies, logs, buckets
  kWrite,   // submit, cancel, upload, create buckets, stage packages
  kManage,  // /v1/admin/...: users and tokens
};

// Whether `role` may perform `action` at all (ownership is separate).
bool RoleAllows(Role role, Action action);

// Ownership. `owner` is the job's or study's user ("" for jobs stored before
// users existed: only admins and viewers see those). Admins see and change
// everything; viewers see everything and change nothing; users see and change
// only their own.
bool CanSee(const Principal& caller, std::string_view owner);
bool CanChange(const Principal& caller, std::string_view owner);

// ---- tokens ----

// Tokens are "stk_" followed by 64 hex digits (32 random bytes). Only the
// SHA-256 of the whole token is stored; its id (shown in listings, used to
// revoke) is the first kTokenIdLength hex digits of that hash.
inline constexpr std::string_view kTokenPrefix = "stk_";
inline constexpr size_t kTokenIdLength = 12;

// A new token from the kernel's random source (getrandom). Internal when
// the kernel gives no randomness.
Result<std::string> NewToken();
// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);
// The id of a token: a prefix of its hash.
std::string TokenId(std::string_view token);
// True when `token` has the shape of a Stoker token (cheap pre-check).
bool LooksLikeToken(std::string_view token);
// Compares two strings in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The token of an "Authorization: Bearer <token>" header value; nullopt when
// the header is not a bearer credential.
std::optional<std::string> BearerToken(std::string_view authorization);

// ---- measurement pushes ----

// Lower-case hex HMAC-SHA256 of `message` under `secret` (push keys, the
// console's CSRF values, webhook signatures).
std::string HmacSha256Hex(std::string_view secret, std::string_view message);

// The key that lets a tuning trial's trainers push measurements for that
// trial, and only that one, without a token: lower-case hex
// HMAC-SHA256(secret, "<study>/<trial>"). stokerd appends it to the trial's
// STOKER_METRICS_URL as ?key=...; knowing one trial's key tells nothing about
// the secret or any other trial's key. `secret` comes from
// AuthStore::PushSecret.
std::string TrialPushKey(std::string_view secret, std::string_view study_id,
                         std::string_view trial_id);

// ---- trainers ----

// Which Unix account runs a job's replicas.
struct TrainerPolicy {
  bool daemon_is_root = false;
  std::string default_unix_user = "nobody";  // when the job's user maps to none
  bool allow_root_trainers = false;
  std::optional<uint32_t> bucket_gid;  // trainers also get this group (bucket writers)
};

// The account for a job whose user maps to `mapped_unix_user` ("" = none):
// nullopt when the daemon is not root (replicas run as the daemon's own user,
// it cannot switch); otherwise the mapped account, else the default one.
// PermissionDenied when that account is "root" and root trainers are not
// allowed (the caller, which resolves names, also refuses any uid 0).
Result<std::optional<std::string>> TrainerAccount(const TrainerPolicy& policy,
                                                  const std::string& mapped_unix_user);

}  // namespace stoker::auth
