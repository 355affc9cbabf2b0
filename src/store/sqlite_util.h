// Internal to src/store: the small SQLite helpers every store file uses (a
// prepared statement, the Status of an SQLite error, a transaction). Not a
// public header.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"

namespace stoker::store::sqlite_util {

// The prepared statements of one connection, kept for reuse by their SQL
// text, so that a statement run again is not compiled again (an UPDATE of
// jobs compiles its triggers: ~40 us). Stmt takes from the cache of its
// connection (Of) and gives the statement back, reset, when it ends. The
// caller holds the connection's lock, as for any use of the connection.
class StatementCache {
 public:
  // Registers the cache as `db`'s. It must end before the connection closes.
  explicit StatementCache(sqlite3* db);
  // Finalizes every statement it keeps and unregisters.
  ~StatementCache();
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // The cache registered for `db`, or nullptr.
  static StatementCache* Of(sqlite3* db);
  // A kept statement for `sql`, taken out of the cache (a second Stmt of
  // the same text meanwhile prepares its own); nullptr when none is kept.
  sqlite3_stmt* Take(const std::string& sql);
  // Keeps `stmt` (prepared from `sql`), reset and unbound; finalizes it
  // when one is kept already or the cache is full.
  void Give(std::string sql, sqlite3_stmt* stmt);

 private:
  sqlite3* db_;
  std::map<std::string, sqlite3_stmt*> kept_;
};

// A prepared statement: from its connection's StatementCache when it has
// one (and given back at the end), else prepared here and finalized.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : cache_(StatementCache::Of(db)) {
    if (cache_) {
      sql_ = sql;
      stmt_ = cache_->Take(sql_);
      if (stmt_) {
        rc_ = SQLITE_OK;
        return;
      }
    }
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() {
    if (cache_ && stmt_) {
      cache_->Give(std::move(sql_), stmt_);
    } else {
      sqlite3_finalize(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool prepared() const { return rc_ == SQLITE_OK; }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void Bind(int i, const std::optional<double>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      BindNull(i);
    }
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  // Ready to run again with new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  double Double(int col) { return sqlite3_column_double(stmt_, col); }
  std::optional<double> OptDouble(int col) {
    return IsNull(col) ? std::nullopt : std::optional<double>(Double(col));
  }

 private:
  StatementCache* cache_;
  std::string sql_;  // with a cache: the key to give the statement back under
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

inline Status SqliteError(sqlite3* db, const std::string& what) {
  int rc = sqlite3_errcode(db);
  std::string msg = what + ": " + sqlite3_errmsg(db);
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    return Unavailable(msg + " (the database is locked by another process; retry)");
  }
  // A full disk is the server's condition, not the caller's quota: Unavailable
  // (HTTP 503, retry later) rather than ResourceExhausted (429).
  if (rc == SQLITE_FULL) {
    return Unavailable(msg +
                       " (the disk holding the data dir is full; free space there and retry)");
  }
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) {
    return FailedPrecondition(msg + " (the store is damaged; see docs/recovery.md)");
  }
  return Internal(msg);
}

// RAII transaction: rolls back unless committed.
class Txn {
 public:
  explicit Txn(sqlite3* db) : db_(db) {
    ok_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~Txn() {
    if (ok_ && !done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  bool begun() const { return ok_; }
  Status Commit() {
    done_ = true;
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      Status s = SqliteError(db_, "commit");
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
    return OkStatus();
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool done_ = false;
};

}  // namespace stoker::store::sqlite_util
