#include "auth/auth_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"
#include "common/time.h"

namespace stoker::auth {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS users (
  name TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  unix_user TEXT NOT NULL DEFAULT '',
  create_time_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  hash TEXT NOT NULL,
  create_time_us INTEGER NOT NULL,
  revoke_time_us INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tokens_by_user ON tokens(user);
CREATE TABLE IF NOT EXISTS secrets (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS console_sessions (
  hash TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  token_id TEXT NOT NULL,
  create_time_us INTEGER NOT NULL,
  expire_time_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_by_user ON console_sessions(user);
)sql";

// Columns added to the tables above since they were first released, for
// stores made before: (table, column, definition as in ALTER TABLE ADD
// COLUMN). The store's PRAGMA user_version belongs to src/store, which
// shares the file, so a column is added when the table lacks it.
struct AddedColumn {
  const char* table;
  const char* column;
  const char* definition;
};
constexpr AddedColumn kAddedColumns[] = {
    {"users", "max_priority", "INTEGER"},  // NULL = the role's ceiling
};

bool IsSessionId(std::string_view id) {
  if (id.size() != 64) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status SqliteError(sqlite3* db, const std::string& what) {
  int code = db ? sqlite3_errcode(db) : SQLITE_ERROR;
  std::string message = what + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return Unavailable(message);
  return Internal(message);
}

// A prepared statement that finalises itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  bool ok() const { return stmt_ != nullptr; }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int col) {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  Status Error(const std::string& what) { return SqliteError(db_, what); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

Result<User> ReadUser(Stmt& s) {
  User u;
  u.name = s.Text(0);
  auto role = ParseRole(s.Text(1), "users.role of " + u.name);
  if (!role.ok()) return Internal(role.status().message());
  u.role = *role;
  u.unix_user = s.Text(2);
  u.create_time_us = s.Int(3);
  if (!s.IsNull(4)) u.max_priority = static_cast<int>(s.Int(4));
  return u;
}

}  // namespace

Result<std::unique_ptr<AuthStore>> AuthStore::Open(const fs::path& db_file) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(db_file.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteError(db, "cannot open " + db_file.string());
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<AuthStore> store(new AuthStore(db));
  STOKER_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  STOKER_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  STOKER_RETURN_IF_ERROR(store->Exec(kSchema));
  STOKER_RETURN_IF_ERROR(store->Migrate());
  return store;
}

Status AuthStore::Migrate() {
  for (const AddedColumn& c : kAddedColumns) {
    Stmt info(
        db_,
        (std::string("SELECT 1 FROM pragma_table_info('") + c.table + "') WHERE name = ?").c_str());
    if (!info.ok()) return info.Error("auth store migration");
    info.Bind(1, std::string(c.column));
    int rc = info.Step();
    if (rc == SQLITE_ROW) continue;
    if (rc != SQLITE_DONE) return info.Error("auth store migration");
    const std::string sql =
        std::string("ALTER TABLE ") + c.table + " ADD COLUMN " + c.column + " " + c.definition;
    STOKER_RETURN_IF_ERROR(Exec(sql.c_str()));
  }
  return OkStatus();
}

AuthStore::~AuthStore() { sqlite3_close(db_); }

Status AuthStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : "unknown error";
    sqlite3_free(err);
    return Internal(std::string("auth store: ") + message);
  }
  return OkStatus();
}

Status AuthStore::AddUser(const User& user) {
  STOKER_RETURN_IF_ERROR(ValidateUserName(user.name, "name"));
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO users(name, role, unix_user, create_time_us) VALUES (?, ?, ?, ?)");
  if (!s.ok()) return s.Error("cannot add user");
  s.Bind(1, user.name);
  s.Bind(2, std::string(RoleName(user.role)));
  s.Bind(3, user.unix_user);
  s.Bind(4, NowMicros());
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) {
    return AlreadyExists("user '" + user.name +
                         "' already exists; remove it first or pick another name");
  }
  if (rc != SQLITE_DONE) return s.Error("cannot add user " + user.name);
  return OkStatus();
}

Result<User> AuthStore::GetUser(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT name, role, unix_user, create_time_us, max_priority FROM users WHERE name = ?");
  if (!s.ok()) return s.Error("cannot read user");
  s.Bind(1, name);
  int rc = s.Step();
  if (rc == SQLITE_DONE) {
    return NotFound("user '" + name + "' does not exist (see 'stoker admin users list')");
  }
  if (rc != SQLITE_ROW) return s.Error("cannot read user " + name);
  return ReadUser(s);
}

Result<std::vector<User>> AuthStore::ListUsers() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT name, role, unix_user, create_time_us, max_priority FROM users ORDER BY name");
  if (!s.ok()) return s.Error("cannot list users");
  std::vector<User> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    STOKER_ASSIGN_OR_RETURN(User u, ReadUser(s));
    out.push_back(std::move(u));
  }
  if (rc != SQLITE_DONE) return s.Error("cannot list users");
  return out;
}

Result<int64_t> AuthStore::CountUsers() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT COUNT(*) FROM users");
  if (!s.ok() || s.Step() != SQLITE_ROW) return s.Error("cannot count users");
  return s.Int(0);
}

Status AuthStore::RemoveUser(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  STOKER_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto rollback = [this](Status s) {
    (void)Exec("ROLLBACK");
    return s;
  };
  {
    Stmt del(db_, "DELETE FROM users WHERE name = ?");
    if (!del.ok()) return rollback(del.Error("cannot remove user"));
    del.Bind(1, name);
    if (del.Step() != SQLITE_DONE) return rollback(del.Error("cannot remove user " + name));
    if (sqlite3_changes(db_) == 0) {
      return rollback(
          NotFound("user '" + name + "' does not exist (see 'stoker admin users list')"));
    }
    Stmt revoke(db_, "UPDATE tokens SET revoke_time_us = ? WHERE user = ? AND revoke_time_us = 0");
    if (!revoke.ok()) return rollback(revoke.Error("cannot revoke tokens"));
    revoke.Bind(1, NowMicros());
    revoke.Bind(2, name);
    if (revoke.Step() != SQLITE_DONE)
      return rollback(revoke.Error("cannot revoke tokens of " + name));
    Stmt end(db_, "DELETE FROM console_sessions WHERE user = ?");
    if (!end.ok()) return rollback(end.Error("cannot end console sessions"));
    end.Bind(1, name);
    if (end.Step() != SQLITE_DONE)
      return rollback(end.Error("cannot end the console sessions of " + name));
  }
  return Exec("COMMIT");
}

Result<IssuedToken> AuthStore::IssueToken(const std::string& user) {
  STOKER_ASSIGN_OR_RETURN(User u, GetUser(user));
  STOKER_ASSIGN_OR_RETURN(std::string token, NewToken());
  IssuedToken out{TokenId(token), token};
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO tokens(id, user, hash, create_time_us) VALUES (?, ?, ?, ?)");
  if (!s.ok()) return s.Error("cannot issue token");
  s.Bind(1, out.id);
  s.Bind(2, u.name);
  s.Bind(3, Sha256Hex(token));
  s.Bind(4, NowMicros());
  // A collision of 48-bit id prefixes between two random tokens is the
  // one failure that retrying would fix; at these numbers it does not happen.
  if (s.Step() != SQLITE_DONE) return s.Error("cannot issue a token for " + user);
  return out;
}

Status AuthStore::RevokeToken(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "UPDATE tokens SET revoke_time_us = CASE WHEN revoke_time_us = 0 THEN ? ELSE "
         "revoke_time_us END WHERE id = ?");
  if (!s.ok()) return s.Error("cannot revoke token");
  s.Bind(1, NowMicros());
  s.Bind(2, id);
  if (s.Step() != SQLITE_DONE) return s.Error("cannot revoke token " + id);
  if (sqlite3_changes(db_) == 0) {
    return NotFound("token '" + id + "' does not exist (see 'stoker admin users list')");
  }
  // Whoever holds a revoked token may have opened console sessions with it,
  // under any of the user's sessions: all of them end.
  Stmt end(db_, "DELETE FROM console_sessions WHERE user = (SELECT user FROM tokens WHERE id = ?)");
  if (!end.ok()) return end.Error("cannot end console sessions");
  end.Bind(1, id);
  if (end.Step() != SQLITE_DONE) return end.Error("cannot end the console sessions of token " + id);
  return OkStatus();
}

Status AuthStore::SetMaxPriority(const std::string& name, std::optional<int> max_priority) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "UPDATE users SET max_priority = ? WHERE name = ?");
  if (!s.ok()) return s.Error("cannot set max_priority");
  if (max_priority) {
    s.Bind(1, static_cast<int64_t>(*max_priority));
  } else {
    s.BindNull(1);
  }
  s.Bind(2, name);
  if (s.Step() != SQLITE_DONE) return s.Error("cannot set max_priority of " + name);
  if (sqlite3_changes(db_) == 0) {
    return NotFound("user '" + name + "' does not exist (see 'stoker admin users list')");
  }
  return OkStatus();
}

Result<std::string> AuthStore::OpenConsoleSession(const Principal& who, int64_t expire_time_us) {
  STOKER_ASSIGN_OR_RETURN(std::string random, NewToken());  // 32 bytes from getrandom, as hex
  const std::string id = random.substr(kTokenPrefix.size());
  const int64_t now = NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  Stmt expired(db_, "DELETE FROM console_sessions WHERE expire_time_us <= ?");
  if (!expired.ok()) return expired.Error("cannot remove expired console sessions");
  expired.Bind(1, now);
  if (expired.Step() != SQLITE_DONE) return expired.Error("cannot remove expired console sessions");
  Stmt s(db_,
         "INSERT INTO console_sessions(hash, user, token_id, create_time_us, expire_time_us) "
         "VALUES (?, ?, ?, ?, ?)");
  if (!s.ok()) return s.Error("cannot open a console session");
  s.Bind(1, Sha256Hex(id));
  s.Bind(2, who.user);
  s.Bind(3, who.token_id);
  s.Bind(4, now);
  s.Bind(5, expire_time_us);
  if (s.Step() != SQLITE_DONE) return s.Error("cannot open a console session for " + who.user);
  return id;
}

Result<Principal> AuthStore::AuthenticateConsoleSession(std::string_view session_id) {
  const Status denied = NotFound(
      "the console session is not valid (signed out, expired, or its token was revoked); "
      "sign in again");
  if (!IsSessionId(session_id)) return denied;
  std::lock_guard<std::mutex> lock(mu_);
  // The session's token must still be valid and its user still exist.
  Stmt s(db_,
         "SELECT u.name, u.role, u.unix_user, c.token_id FROM console_sessions c "
         "JOIN tokens t ON t.id = c.token_id AND t.user = c.user AND t.revoke_time_us = 0 "
         "JOIN users u ON u.name = c.user WHERE c.hash = ? AND c.expire_time_us > ?");
  if (!s.ok()) return s.Error("cannot check the console session");
  s.Bind(1, Sha256Hex(session_id));
  s.Bind(2, NowMicros());
  int rc = s.Step();
  if (rc == SQLITE_DONE) return denied;
  if (rc != SQLITE_ROW) return s.Error("cannot check the console session");
  Principal p;
  p.user = s.Text(0);
  auto role = ParseRole(s.Text(1), "users.role of " + p.user);
  if (!role.ok()) return Internal(role.status().message());
  p.role = *role;
  p.unix_user = s.Text(2);
  p.token_id = s.Text(3);
  return p;
}

Status AuthStore::CloseConsoleSession(std::string_view session_id) {
  if (!IsSessionId(session_id)) return OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "DELETE FROM console_sessions WHERE hash = ?");
  if (!s.ok()) return s.Error("cannot end the console session");
  s.Bind(1, Sha256Hex(session_id));
  if (s.Step() != SQLITE_DONE) return s.Error("cannot end the console session");
  return OkStatus();
}

Result<std::vector<TokenInfo>> AuthStore::ListTokens(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT id, user, create_time_us, revoke_time_us FROM tokens WHERE ?1 = '' OR user = ?1 "
         "ORDER BY create_time_us, id");
  if (!s.ok()) return s.Error("cannot list tokens");
  s.Bind(1, user);
  std::vector<TokenInfo> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({s.Text(0), s.Text(1), s.Int(2), s.Int(3)});
  }
  if (rc != SQLITE_DONE) return s.Error("cannot list tokens");
  return out;
}

Result<Principal> AuthStore::Authenticate(std::string_view token) {
  const Status denied = NotFound(
      "the bearer token is not valid (unknown, revoked, or its user was removed); ask an admin "
      "for a new one: stoker admin users token NAME");
  if (!LooksLikeToken(token)) {
    return NotFound("the bearer token is malformed (Stoker tokens are stk_ and 64 hex digits)");
  }
  const std::string hash = Sha256Hex(token);
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "SELECT t.hash, t.revoke_time_us, u.name, u.role, u.unix_user FROM tokens t "
         "JOIN users u ON u.name = t.user WHERE t.id = ?");
  if (!s.ok()) return s.Error("cannot check token");
  s.Bind(1, hash.substr(0, kTokenIdLength));
  int rc = s.Step();
  if (rc == SQLITE_DONE) return denied;
  if (rc != SQLITE_ROW) return s.Error("cannot check token");
  // The id is a prefix of the hash; the rest is compared in constant time.
  if (!ConstantTimeEquals(s.Text(0), hash) || s.Int(1) != 0) return denied;
  Principal p;
  p.user = s.Text(2);
  auto role = ParseRole(s.Text(3), "users.role of " + p.user);
  if (!role.ok()) return Internal(role.status().message());
  p.role = *role;
  p.unix_user = s.Text(4);
  p.token_id = hash.substr(0, kTokenIdLength);
  return p;
}

Status WriteSecretFile(const fs::path& path, const std::string& token) {
  fs::path tmp = path;
  tmp += ".tmp";
  ::unlink(tmp.c_str());  // a leftover of a crash; O_EXCL below needs it gone
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Internal("cannot create " + tmp.string() + ": " + std::strerror(errno));
  }
  // The umask can only remove bits; make sure of exactly 0600 anyway.
  bool ok = ::fchmod(fd, 0600) == 0;
  std::string text = token + "\n";
  ok = ok && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    return Internal("cannot write " + path.string() + ": " + std::strerror(err));
  }
  return OkStatus();
}

Result<bool> EnsureLocalAdmin(AuthStore& store, const std::string& os_user,
                              const fs::path& token_file) {
  STOKER_ASSIGN_OR_RETURN(int64_t users, store.CountUsers());
  if (users == 0) {
    User admin;
    admin.name = os_user;
    admin.role = Role::kAdmin;
    STOKER_RETURN_IF_ERROR(store.AddUser(admin));
  }
  auto user = store.GetUser(os_user);
  if (!user.ok()) return false;  // the admins chose other users: no local token
  struct stat st;
  if (::lstat(token_file.c_str(), &st) == 0) {
    auto text = ReadFile(token_file);
    std::string token = text.ok() ? *text : "";
    while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
    auto who = store.Authenticate(token);
    bool private_file = S_ISREG(st.st_mode) && (st.st_mode & 077) == 0 && st.st_uid == ::geteuid();
    if (who.ok() && private_file && who->user == os_user) return false;
    // Readable by others (or not a plain file of ours): the token may have
    // leaked. Revoke it before replacing it.
    if (who.ok()) STOKER_RETURN_IF_ERROR(store.RevokeToken(who->token_id));
  }
  STOKER_ASSIGN_OR_RETURN(IssuedToken issued, store.IssueToken(os_user));
  ::unlink(token_file.c_str());
  STOKER_RETURN_IF_ERROR(WriteSecretFile(token_file, issued.token));
  return true;
}

Result<std::string> AuthStore::PushSecret() {
  STOKER_ASSIGN_OR_RETURN(std::string fresh, NewToken());  // 32 random bytes, hex
  std::lock_guard<std::mutex> lock(mu_);
  Stmt insert(db_, "INSERT OR IGNORE INTO secrets(name, value) VALUES ('push', ?)");
  if (!insert.ok()) return insert.Error("cannot store the push secret");
  insert.Bind(1, fresh.substr(kTokenPrefix.size()));
  if (insert.Step() != SQLITE_DONE) return insert.Error("cannot store the push secret");
  Stmt get(db_, "SELECT value FROM secrets WHERE name = 'push'");
  if (!get.ok() || get.Step() != SQLITE_ROW) return get.Error("cannot read the push secret");
  return get.Text(0);
}

}  // namespace stoker::auth
