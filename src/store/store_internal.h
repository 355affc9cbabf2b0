// Internal to src/store: what the files that implement Store share beyond
// sqlite_util.h: the row-reading templates, the columns and reader of a job
// row (jobs, the ledger and deletion read them), JSON columns, the SET clauses
// that job and study transitions share, and the schema's entry point. Not a
// public header: callers include store.h.
//
// Every function here takes the connection it works on and holds no lock:
// the caller holds the mutex that guards that connection (Store::mu_ or
// Store::reader_mu_), and a transaction where a function says so.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "store/sqlite_util.h"
#include "store/store.h"

namespace stoker::store::internal {

// ---- the schema (store_schema.cc) ----

// Brings the database `db` (the file `path`, named in messages) to the latest
// schema version in one transaction: a store of an older version is migrated,
// a new file gets the whole schema. FailedPrecondition when the file's
// version is newer than this build understands. Idempotent.
Status MigrateSchema(sqlite3* db, const std::filesystem::path& path);

// Runs `sql` (one or more statements) on `db`; the error names what SQLite said.
Status ExecSql(sqlite3* db, const char* sql);

// ---- reading rows ----

// Runs `sql` (with `bind` applied) and reads every row with `read`.
template <typename Read, typename Bind>
auto SelectRows(sqlite3* db, const std::string& sql, Bind bind, Read read, const char* what)
    -> Result<std::vector<decltype(read(std::declval<sqlite_util::Stmt&>()))>> {
  sqlite_util::Stmt s(db, sql.c_str());
  bind(s);
  std::vector<decltype(read(s))> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(read(s));
  if (rc != SQLITE_DONE) return sqlite_util::SqliteError(db, what);
  return out;
}

// Runs `sql` (with `bind` applied) for one row and reads it with `read`;
// `missing` (a NotFound naming what was asked for) when there is no row.
template <typename Read, typename Bind>
auto SelectOne(sqlite3* db, const std::string& sql, Bind bind, Read read, Status missing,
               const char* what) -> Result<decltype(read(std::declval<sqlite_util::Stmt&>()))> {
  sqlite_util::Stmt s(db, sql.c_str());
  bind(s);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return read(s);
  if (rc == SQLITE_DONE) return missing;
  return sqlite_util::SqliteError(db, what);
}

// A page of rows of `table` in id order (ListOptions), read with `read`.
template <typename Read>
auto ListPage(sqlite3* db, const char* columns, const char* table, const ListOptions& options,
              Read read, const char* what) {
  const bool desc = options.newest_first;
  std::string sql = std::string("SELECT ") + columns + " FROM " + table +
                    (desc ? " WHERE id < ?" : " WHERE id > ?");
  if (options.state) sql += " AND state = ?";
  sql += desc ? " ORDER BY id DESC LIMIT ?" : " ORDER BY id LIMIT ?";
  return SelectRows(
      db, sql,
      [&](sqlite_util::Stmt& s) {
        int i = 1;
        s.Bind(i++, desc && options.after_id == 0 ? std::numeric_limits<int64_t>::max()
                                                  : options.after_id);
        if (options.state) s.Bind(i++, static_cast<int64_t>(*options.state));
        s.Bind(i++, static_cast<int64_t>(options.limit));
      },
      read, what);
}

// Rows of `table` not in a terminal state, oldest first.
template <typename Read>
auto ActiveRows(sqlite3* db, const char* columns, const char* table, Read read, const char* what) {
  return SelectRows(
      db,
      std::string("SELECT ") + columns + " FROM " + table +
          " WHERE state NOT IN (4, 5, 7) ORDER BY id",
      [](sqlite_util::Stmt&) {}, read, what);
}

// ---- JSON columns ----

// The JSON in column `col`; null when the column is NULL, discarded (not an
// exception) when the text is not JSON.
inline nlohmann::json ColumnJson(sqlite_util::Stmt& s, int col) {
  if (s.IsNull(col)) return nullptr;
  return nlohmann::json::parse(s.Text(col), nullptr, /*allow_exceptions=*/false);
}

// Binds `value` as JSON text, or NULL when it is null.
inline void BindJson(sqlite_util::Stmt& s, int i, const nlohmann::json& value) {
  if (value.is_null()) {
    s.BindNull(i);
  } else {
    s.Bind(i, value.dump());
  }
}

// ---- jobs and studies (store_jobs.cc, store_studies.cc) ----

// The columns jobs and studies share, first in both column lists below:
// id, project, location, display_name, state, spec, create_time, start_time,
// end_time, update_time, error_code, error_message. Reads them into `r` (a
// JobRecord or a StudyRecord).
template <typename Record>
void ReadSharedColumns(sqlite_util::Stmt& s, Record& r) {
  r.id = s.Int(0);
  r.project = s.Text(1);
  r.location = s.Text(2);
  r.display_name = s.Text(3);
  r.state = static_cast<spec::JobState>(s.Int(4));
  r.spec = nlohmann::json::parse(s.Text(5), nullptr, /*allow_exceptions=*/false);
  r.create_time_us = s.Int(6);
  r.start_time_us = s.Int(7);
  r.end_time_us = s.Int(8);
  r.update_time_us = s.Int(9);
  r.error_code = static_cast<int>(s.Int(10));
  r.error_message = s.Text(11);
}

// The columns ReadJob reads, in its order.
inline constexpr char kJobColumns[] =
    "id, project, location, display_name, state, spec, create_time, start_time, end_time, "
    "update_time, error_code, error_message, attempt, allocation, cancel_requested, wait_reason, "
    "study_id, trial_id, legacy_job_id, legacy_input, user, preemptions, restart_reason";

// A job from a row of kJobColumns.
JobRecord ReadJob(sqlite_util::Stmt& s);

// The SET clauses (", start_time = ?" ...) of the fields of `update` that
// jobs and studies share: start and end time, error code and message, in
// that order, each only where set.
std::string SharedTransitionSets(const TransitionUpdate& update);
// Binds the values of those clauses from index `i` on; returns the next index.
int BindSharedTransitionSets(sqlite_util::Stmt& s, int i, const TransitionUpdate& update);

}  // namespace stoker::store::internal
