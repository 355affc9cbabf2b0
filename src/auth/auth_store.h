// Users and API tokens, in their own tables (`users`, `tokens`) of the
// store's SQLite file (<data>/stoker.db), through a connection of their own.
// Tokens are kept as SHA-256 hashes only: the secret is shown once, when it
// is issued, and cannot be recovered from the database.
//
// Thread-safe: one mutex serialises every call. Authenticate is cheap (one
// indexed lookup); it runs on every API request.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/auth.h"
#include "common/status.h"

struct sqlite3;

namespace stoker::auth {

struct User {
  std::string name;
  Role role = Role::kUser;
  std::string unix_user;  // "" = none mapped
  int64_t create_time_us = 0;
  // The highest job priority an admin let this user set; nullopt = its
  // role's ceiling from the config (auth/policy.h).
  std::optional<int> max_priority;
};

struct TokenInfo {
  std::string id;  // first hex digits of the token's hash
  std::string user;
  int64_t create_time_us = 0;
  int64_t revoke_time_us = 0;  // 0 = valid
};

struct IssuedToken {
  std::string id;
  std::string token;  // the secret; not stored anywhere
};

class AuthStore {
 public:
  // Opens `db_file` (the store's stoker.db; created if missing), creates
  // the users, tokens, secrets and console_sessions tables if they do not
  // exist, and adds the columns later versions added (users.max_priority)
  // to a store made before them.
  static Result<std::unique_ptr<AuthStore>> Open(const std::filesystem::path& db_file);
  ~AuthStore();
  AuthStore(const AuthStore&) = delete;
  AuthStore& operator=(const AuthStore&) = delete;

  // AlreadyExists when the name is taken; InvalidArgument for a bad name.
  Status AddUser(const User& user);
  Result<User> GetUser(const std::string& name);
  Result<std::vector<User>> ListUsers();
  // Removes the user, revokes every token of it and ends its console
  // sessions. NotFound if absent.
  Status RemoveUser(const std::string& name);
  Result<int64_t> CountUsers();
  // Sets (or, with nullopt, clears back to its role's) the user's priority
  // ceiling. NotFound if there is no such user; the value is checked by
  // the caller (ValidatePriorityCeiling).
  Status SetMaxPriority(const std::string& name, std::optional<int> max_priority);

  // A new token for `user` (NotFound if there is no such user).
  Result<IssuedToken> IssueToken(const std::string& user);
  // Revokes a token by id, and ends every console session of its user (a
  // revoked token may have leaked: its user signs in again). NotFound when
  // no token has that id; revoking a revoked token is fine (idempotent).
  Status RevokeToken(const std::string& id);
  // Tokens of `user`, or of everyone when `user` is "".
  Result<std::vector<TokenInfo>> ListTokens(const std::string& user = "");

  // The principal a bearer token stands for. NotFound (with a message fit
  // for a 401 answer) when the token is malformed, unknown, revoked, or its
  // user is gone; the message never echoes the token.
  Result<Principal> Authenticate(std::string_view token);

  // ---- web console sessions (docs/console.md) ----
  // A session is a random id (32 bytes from getrandom, 64 hex digits) that
  // the browser keeps in its cookie; the table holds only its SHA-256, the
  // user, the token it was opened with and when it expires.

  // Opens a session for `who` (authenticated with its token, whose id is
  // who.token_id), valid until `expire_time_us`. Returns the session id,
  // shown only now. Expired sessions of everyone are removed on the way.
  Result<std::string> OpenConsoleSession(const Principal& who, int64_t expire_time_us);
  // The principal of a session id. NotFound (fit for a 401, never echoing
  // the id) when the id is malformed, unknown, signed out, expired, or its
  // token was revoked or its user removed.
  Result<Principal> AuthenticateConsoleSession(std::string_view session_id);
  // Ends a session (sign-out). Ending an unknown session is fine.
  Status CloseConsoleSession(std::string_view session_id);

  // The secret behind trial push keys (TrialPushKey): 32 random bytes as hex,
  // made on first use and kept in the `secrets` table, so keys handed to
  // running trials stay valid across restarts.
  Result<std::string> PushSecret();

 private:
  explicit AuthStore(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql);
  Status Migrate();

  std::mutex mu_;
  sqlite3* db_;
};

// The local single-user default (docs/security.md): when no user exists yet,
// `os_user` becomes an admin. Then, if `os_user` is a user: when `token_file`
// is missing, holds no valid token of `os_user`, or is not a private (0600,
// ours, regular) file, a new token for `os_user` is written there with mode
// 0600 (the token of a file that others could read is revoked first).
// Returns whether a token was written.
Result<bool> EnsureLocalAdmin(AuthStore& store, const std::string& os_user,
                              const std::filesystem::path& token_file);

// Writes `token` to `path` with mode 0600: a fresh temp file created with
// O_EXCL|O_NOFOLLOW and 0600, synced, then renamed over `path`.
Status WriteSecretFile(const std::filesystem::path& path, const std::string& token);

}  // namespace stoker::auth
