// Store: the schema and its migrations. kSchema is the latest schema (version
// kLatestVersion); kMigrations take a store of any released version to it.
// store_migration_test.cc keeps the schema of every released version
// verbatim: a schema change adds its migration here and its version there.
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <iterator>
#include <string>

#include "store/sqlite_util.h"
#include "store/store_internal.h"

namespace stoker::store::internal {
namespace {

using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT '',
  study_id INTEGER NOT NULL DEFAULT 0,
  trial_id TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT,
  user TEXT NOT NULL DEFAULT '',
  preemptions INTEGER NOT NULL DEFAULT 0,
  restart_reason TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_legacy_id ON jobs(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS studies(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  user TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS studies_by_legacy_id ON studies(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS trials(
  study_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  state INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  measurements TEXT NOT NULL,
  final_measurement TEXT,
  infeasible_reason TEXT NOT NULL DEFAULT '',
  stopped_early INTEGER NOT NULL DEFAULT 0,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(study_id, trial_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
CREATE TABLE IF NOT EXISTS usage(
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  replica TEXT NOT NULL,
  pool INTEGER NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  labels TEXT NOT NULL,
  study_id INTEGER NOT NULL,
  node TEXT NOT NULL,
  start_time INTEGER NOT NULL,
  end_time INTEGER NOT NULL,
  end_kind TEXT NOT NULL,
  cpus REAL NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpu_type TEXT NOT NULL,
  gpus REAL NOT NULL,
  machine_type TEXT NOT NULL,
  accelerator_type TEXT NOT NULL,
  accelerator_count REAL NOT NULL,
  sampled_seconds REAL NOT NULL DEFAULT 0,
  busy_gpu_seconds REAL NOT NULL DEFAULT 0,
  energy_joules REAL,
  location TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(job_id, attempt, replica)
);
CREATE INDEX IF NOT EXISTS usage_by_end ON usage(end_time);
CREATE INDEX IF NOT EXISTS usage_by_study ON usage(study_id) WHERE study_id != 0;
CREATE TABLE IF NOT EXISTS outbox(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  url TEXT NOT NULL,
  event TEXT NOT NULL,
  body TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_time INTEGER NOT NULL DEFAULT 0,
  create_time INTEGER NOT NULL,
  last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS outbox_by_time ON outbox(next_time);
CREATE TABLE IF NOT EXISTS budgets(
  scope TEXT PRIMARY KEY,
  monthly_usd REAL,
  monthly_gpu_hours REAL,
  price TEXT NOT NULL,
  warn_at REAL NOT NULL,
  stop_running INTEGER NOT NULL,
  update_time INTEGER NOT NULL,
  updated_by TEXT NOT NULL
);
-- Jobs and studies by state, kept by triggers in each writing transaction so
-- that GET /metrics reads a few rows instead of counting every job ever
-- (docs/decisions/0023). Stores made before it are counted once by Open.
CREATE TABLE IF NOT EXISTS state_counts(
  kind TEXT NOT NULL,
  state INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY(kind, state)
);
CREATE TRIGGER IF NOT EXISTS jobs_count_insert AFTER INSERT ON jobs BEGIN
  INSERT INTO state_counts(kind, state, n) VALUES('jobs', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_count_update AFTER UPDATE OF state ON jobs
  WHEN OLD.state != NEW.state BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'jobs' AND state = OLD.state;
  INSERT INTO state_counts(kind, state, n) VALUES('jobs', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_count_delete AFTER DELETE ON jobs BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'jobs' AND state = OLD.state;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_insert AFTER INSERT ON studies BEGIN
  INSERT INTO state_counts(kind, state, n) VALUES('studies', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_update AFTER UPDATE OF state ON studies
  WHEN OLD.state != NEW.state BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'studies' AND state = OLD.state;
  INSERT INTO state_counts(kind, state, n) VALUES('studies', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_delete AFTER DELETE ON studies BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'studies' AND state = OLD.state;
END;
-- Long-running operations Stoker returned (store_deletion.cc): so far the
-- deletions of jobs and studies, done when returned; kept so that GET
-- .../operations/{id} answers them after a restart.
CREATE TABLE IF NOT EXISTS operations(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  user TEXT NOT NULL,
  type TEXT NOT NULL,
  target TEXT NOT NULL,
  create_time INTEGER NOT NULL
);
PRAGMA user_version = 5;
)sql";

// A column that a schema change added to an existing table.
struct AddedColumn {
  const char* table;
  const char* column;
  const char* definition;  // as in ALTER TABLE ... ADD COLUMN <column> <definition>
};

// Stores of version 1 come in three shapes, as three early builds wrote
// them, all with user_version 1: jobs and events only; then studies and
// trials, with jobs.study_id and jobs.trial_id; then jobs.legacy_job_id and
// jobs.legacy_input. These columns complete any of them to the last shape
// (the tables they lack are made by kSchema, which runs after the
// migrations).
constexpr AddedColumn kVersion1Completion[] = {
    {"jobs", "study_id", "INTEGER NOT NULL DEFAULT 0"},
    {"jobs", "trial_id", "TEXT NOT NULL DEFAULT ''"},
    {"jobs", "legacy_job_id", "TEXT NOT NULL DEFAULT ''"},
    {"jobs", "legacy_input", "TEXT"},
};

// Schema changes since version 1: kMigrations[v - 1] takes a store from
// version v to v + 1. A table the store lacks is skipped (kSchema makes it
// whole afterwards).
constexpr AddedColumn kMigration1To2[] = {
    // The submitting user of jobs and studies ("" = before users existed).
    {"jobs", "user", "TEXT NOT NULL DEFAULT ''"},
    {"studies", "user", "TEXT NOT NULL DEFAULT ''"},
};
constexpr AddedColumn kMigration2To3[] = {
    // How many attempts ended in a preemption (they do not count against
    // maxRetries), and why the current attempt restarted ("" = the first).
    {"jobs", "preemptions", "INTEGER NOT NULL DEFAULT 0"},
    {"jobs", "restart_reason", "TEXT NOT NULL DEFAULT ''"},
};
constexpr AddedColumn kMigration3To4[] = {
    // The AI Platform jobId and trainingInput of a tuning job submitted
    // through the ml/v1 API ("" and NULL otherwise), as jobs have them.
    {"studies", "legacy_job_id", "TEXT NOT NULL DEFAULT ''"},
    {"studies", "legacy_input", "TEXT"},
};
constexpr AddedColumn kMigration4To5[] = {
    // The location of the job a ledger row is of, whose region prices it
    // ("" = written before: priced in cost.region).
    {"usage", "location", "TEXT NOT NULL DEFAULT ''"},
};
struct Migration {
  const AddedColumn* columns;
  size_t count;
};
constexpr Migration kMigrations[] = {
    {kMigration1To2, std::size(kMigration1To2)},
    {kMigration2To3, std::size(kMigration2To3)},
    {kMigration3To4, std::size(kMigration3To4)},
    {kMigration4To5, std::size(kMigration4To5)},
};
constexpr int64_t kLatestVersion = std::size(kMigrations) + 1;

// Whether `table` exists, and whether it has `column`.
struct ColumnLookup {
  bool table_exists = false;
  bool column_exists = false;
};
ColumnLookup LookUpColumn(sqlite3* db, const std::string& table, const std::string& column) {
  ColumnLookup found;
  Stmt s(db, ("PRAGMA table_info(" + table + ")").c_str());
  while (s.Step() == SQLITE_ROW) {
    found.table_exists = true;
    if (s.Text(1) == column) found.column_exists = true;
  }
  return found;
}

// Adds each of `columns` that its table lacks; a missing table is left to
// kSchema. The caller holds a transaction.
Status AddMissingColumns(sqlite3* db, const AddedColumn* columns, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const AddedColumn& c = columns[i];
    ColumnLookup found = LookUpColumn(db, c.table, c.column);
    if (!found.table_exists || found.column_exists) continue;
    std::string sql =
        std::string("ALTER TABLE ") + c.table + " ADD COLUMN " + c.column + " " + c.definition;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqliteError(db, std::string("store migration: add ") + c.table + "." + c.column);
    }
  }
  return OkStatus();
}

// The schema version stored in `db` (PRAGMA user_version; 0 = a new file).
int64_t SchemaVersion(sqlite3* db) {
  Stmt v(db, "PRAGMA user_version");
  return v.Step() == SQLITE_ROW ? v.Int(0) : 0;
}

// Whether `db` has the state_counts table: its triggers have kept it since.
bool HasStateCounts(sqlite3* db) {
  Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'state_counts'");
  return t.Step() == SQLITE_ROW;
}

}  // namespace

Status MigrateSchema(sqlite3* db, const std::filesystem::path& path) {
  const int64_t version = SchemaVersion(db);
  if (version > kLatestVersion) {
    return FailedPrecondition(path.string() + " has schema version " + std::to_string(version) +
                              ", newer than this stokerd understands (" +
                              std::to_string(kLatestVersion) +
                              "); run the newer stokerd, or restore the backup taken before the "
                              "upgrade (docs/install.md)");
  }
  // Migrations and the schema in one transaction: a crash leaves the store
  // as it was, or wholly at the latest version. Version 0 is a new file.
  Txn txn(db);
  if (!txn.begun()) return SqliteError(db, "cannot begin the schema migration of " + path.string());
  if (version == 1) {
    STOKER_RETURN_IF_ERROR(
        AddMissingColumns(db, kVersion1Completion, std::size(kVersion1Completion)));
  }
  for (int64_t v = version; version >= 1 && v < kLatestVersion; ++v) {
    const Migration& m = kMigrations[v - 1];
    STOKER_RETURN_IF_ERROR(AddMissingColumns(db, m.columns, m.count));
  }
  const bool counted = HasStateCounts(db);
  STOKER_RETURN_IF_ERROR(ExecSql(db, kSchema));
  if (!counted) {
    STOKER_RETURN_IF_ERROR(ExecSql(
        db,
        "INSERT INTO state_counts(kind, state, n) SELECT 'jobs', state, COUNT(*) FROM jobs GROUP "
        "BY state; INSERT INTO state_counts(kind, state, n) SELECT 'studies', state, COUNT(*) "
        "FROM studies GROUP BY state"));
  }
  STOKER_RETURN_IF_ERROR(txn.Commit());
  if (version >= 1 && version < kLatestVersion) {
    spdlog::info("migrated {} from schema version {} to {}", path.string(), version,
                 kLatestVersion);
  }
  return OkStatus();
}

Status ExecSql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return SqliteError(db, std::string("store: ") + msg);
  }
  return OkStatus();
}

}  // namespace stoker::store::internal
