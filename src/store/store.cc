#include "store/store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/files.h"
#include "common/time.h"
#include "store/sqlite_util.h"

namespace stoker::store {
namespace {

using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

using spec::JobState;

constexpr char kJobColumns[] =
    "id, project, location, display_name, state, spec, create_time, start_time, end_time, "
    "update_time, error_code, error_message, attempt, allocation, cancel_requested, wait_reason, "
    "study_id, trial_id, legacy_job_id, legacy_input, user, preemptions, restart_reason";

JobRecord ReadJob(Stmt& s) {
  JobRecord r;
  r.id = s.Int(0);
  r.project = s.Text(1);
  r.location = s.Text(2);
  r.display_name = s.Text(3);
  r.state = static_cast<JobState>(s.Int(4));
  r.spec = nlohmann::json::parse(s.Text(5), nullptr, /*allow_exceptions=*/false);
  r.create_time_us = s.Int(6);
  r.start_time_us = s.Int(7);
  r.end_time_us = s.Int(8);
  r.update_time_us = s.Int(9);
  r.error_code = static_cast<int>(s.Int(10));
  r.error_message = s.Text(11);
  r.attempt = static_cast<int>(s.Int(12));
  if (!s.IsNull(13)) r.allocation = nlohmann::json::parse(s.Text(13), nullptr, false);
  r.cancel_requested = s.Int(14) != 0;
  r.wait_reason = s.Text(15);
  r.study_id = s.Int(16);
  r.trial_id = s.Text(17);
  r.legacy_job_id = s.Text(18);
  if (!s.IsNull(19)) r.legacy_input = nlohmann::json::parse(s.Text(19), nullptr, false);
  r.user = s.Text(20);
  r.preemptions = static_cast<int>(s.Int(21));
  r.restart_reason = s.Text(22);
  return r;
}

// Runs `sql` (with `bind` applied) and reads every row with `read`.
template <typename Read, typename Bind>
auto SelectRows(sqlite3* db, const std::string& sql, Bind bind, Read read, const char* what)
    -> Result<std::vector<decltype(read(std::declval<Stmt&>()))>> {
  Stmt s(db, sql.c_str());
  bind(s);
  std::vector<decltype(read(s))> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(read(s));
  if (rc != SQLITE_DONE) return SqliteError(db, what);
  return out;
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
      [&](Stmt& s) {
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
      [](Stmt&) {}, read, what);
}

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
PRAGMA user_version = 4;
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
struct Migration {
  const AddedColumn* columns;
  size_t count;
};
constexpr Migration kMigrations[] = {
    {kMigration1To2, std::size(kMigration1To2)},
    {kMigration2To3, std::size(kMigration2To3)},
    {kMigration3To4, std::size(kMigration3To4)},
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

}  // namespace

namespace {

// The store holds token hashes, the push secret and every spec: only the
// daemon's account may read it. Creates `path` 0600 when missing; makes it,
// its -wal and its -shm 0600 when they are open to others (SQLite creates
// the WAL and SHM with the database's mode, so this holds for them too),
// with a warning; refuses a database that another account owns, which could
// then rewrite it.
Status LockDownStoreFiles(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return FailedPrecondition("cannot open " + path.string() + ": " + std::strerror(errno) +
                              " (it must be a regular file of the daemon's account)");
  }
  ::close(fd);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::path f = path;
    f += suffix;
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0) continue;  // no WAL yet
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      return FailedPrecondition(f.string() + " is not a regular file owned by uid " +
                                std::to_string(::geteuid()) +
                                " (the daemon's account); another account could read or rewrite "
                                "the store: chown it to the account stokerd runs as");
    }
    if ((st.st_mode & 077) != 0) {
      if (::chmod(f.c_str(), 0600) != 0) {
        return Internal("cannot make " + f.string() + " private (0600): " + std::strerror(errno));
      }
      spdlog::warn("{} was readable by other accounts (mode {:o}); made it 0600", f.string(),
                   st.st_mode & 0777);
    }
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::filesystem::path& data_dir,
                                           const Clock& clock) {
  STOKER_RETURN_IF_ERROR(MakeDirs(data_dir));
  std::filesystem::path path = data_dir / "stoker.db";
  STOKER_RETURN_IF_ERROR(LockDownStoreFiles(path));
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteError(db, "cannot open " + path.string());
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<Store> store(new Store(db, clock));
  // Integrity first: refuse to run on a damaged store rather than make it worse.
  {
    Stmt check(db, "PRAGMA quick_check");
    if (!check.prepared() || check.Step() != SQLITE_ROW || check.Text(0) != "ok") {
      std::string detail = check.prepared() ? check.Text(0) : sqlite3_errmsg(db);
      return FailedPrecondition(
          path.string() + " is damaged (" + detail +
          "); stop stokerd, keep a copy of the file, and recover it as docs/recovery.md says "
          "(sqlite3 stoker.db '.recover' | sqlite3 recovered.db)");
    }
  }
  STOKER_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  // The WAL and SHM exist now: check them too.
  STOKER_RETURN_IF_ERROR(LockDownStoreFiles(path));
  STOKER_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  STOKER_RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=ON"));
  int64_t version = 0;
  {
    Stmt v(db, "PRAGMA user_version");
    if (v.Step() == SQLITE_ROW) version = v.Int(0);
  }
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
  bool counted = false;  // state_counts exists: its triggers have kept it since
  {
    Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'state_counts'");
    counted = t.Step() == SQLITE_ROW;
  }
  STOKER_RETURN_IF_ERROR(store->Exec(kSchema));
  if (!counted) {
    STOKER_RETURN_IF_ERROR(store->Exec(
        "INSERT INTO state_counts(kind, state, n) SELECT 'jobs', state, COUNT(*) FROM jobs GROUP "
        "BY state; INSERT INTO state_counts(kind, state, n) SELECT 'studies', state, COUNT(*) "
        "FROM studies GROUP BY state"));
  }
  STOKER_RETURN_IF_ERROR(txn.Commit());
  if (version >= 1 && version < kLatestVersion) {
    spdlog::info("migrated {} from schema version {} to {}", path.string(), version,
                 kLatestVersion);
  }
  // A second connection for long reads (the ledger): in WAL mode it reads a
  // snapshot while the main connection commits, so a report never holds up
  // a submission or a transition.
  sqlite3* reader = nullptr;
  if (sqlite3_open_v2(path.c_str(), &reader, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    Status s = SqliteError(reader, "cannot open " + path.string() + " for reading");
    sqlite3_close(reader);
    return s;
  }
  sqlite3_busy_timeout(reader, 5000);
  store->reader_ = reader;
  return store;
}

Store::Store(sqlite3* db, const Clock& clock) : db_(db), clock_(clock) {}
Store::~Store() {
  sqlite3_close(reader_);
  sqlite3_close(db_);
}

Status Store::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return SqliteError(db_, std::string("store: ") + msg);
  }
  return OkStatus();
}

Result<bool> Store::LegacyIdTaken(const char* table, const std::string& project,
                                  const std::string& legacy_job_id) {
  Stmt s(db_, (std::string("SELECT 1 FROM ") + table +
               " WHERE project = ? AND legacy_job_id = ? LIMIT 1")
                  .c_str());
  s.Bind(1, project);
  s.Bind(2, legacy_job_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, "look up a jobId");
}

Status Store::LegacyIdExists(const std::string& project, const std::string& legacy_job_id) {
  return AlreadyExists("job '" + legacy_job_id + "' already exists in project " + project +
                       "; job ids cannot be reused, pick another");
}

Status Store::InsertEvent(int64_t id, JobState from, JobState to, const std::string& reason,
                          int64_t time_us) {
  Stmt s(db_, "INSERT INTO events(job_id, time, from_state, to_state, reason) VALUES(?,?,?,?,?)");
  s.Bind(1, id);
  s.Bind(2, time_us);
  s.Bind(3, static_cast<int64_t>(from));
  s.Bind(4, static_cast<int64_t>(to));
  s.Bind(5, reason);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "insert event");
  return OkStatus();
}

Result<JobRecord> Store::InsertJob(const NewJob& job, int64_t now) {
  if (!job.legacy_job_id.empty()) {
    // One jobId per project across both kinds: a tuning job may hold it.
    STOKER_ASSIGN_OR_RETURN(bool taken, LegacyIdTaken("studies", job.project, job.legacy_job_id));
    if (taken) return LegacyIdExists(job.project, job.legacy_job_id);
  }
  Stmt s(db_,
         "INSERT INTO jobs(project, location, display_name, state, spec, create_time, "
         "update_time, study_id, trial_id, legacy_job_id, legacy_input, user) "
         "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  s.Bind(1, job.project);
  s.Bind(2, job.location);
  s.Bind(3, job.display_name);
  s.Bind(4, static_cast<int64_t>(JobState::kQueued));
  s.Bind(5, job.spec.dump());
  s.Bind(6, now);
  s.Bind(7, now);
  s.Bind(8, job.study_id);
  s.Bind(9, job.trial_id);
  s.Bind(10, job.legacy_job_id);
  if (job.legacy_input.is_null()) {
    s.BindNull(11);
  } else {
    s.Bind(11, job.legacy_input.dump());
  }
  s.Bind(12, job.user);
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT && !job.legacy_job_id.empty()) {
    return LegacyIdExists(job.project, job.legacy_job_id);
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "insert job");
  int64_t id = sqlite3_last_insert_rowid(db_);
  STOKER_RETURN_IF_ERROR(
      InsertEvent(id, JobState::kUnspecified, JobState::kQueued, "submitted", now));
  for (const std::string& w : job.warnings) {
    STOKER_RETURN_IF_ERROR(InsertEvent(id, JobState::kQueued, JobState::kQueued, w, now));
  }
  JobRecord r;
  r.id = id;
  r.project = job.project;
  r.location = job.location;
  r.display_name = job.display_name;
  r.state = JobState::kQueued;
  r.spec = job.spec;
  r.create_time_us = now;
  r.update_time_us = now;
  r.study_id = job.study_id;
  r.trial_id = job.trial_id;
  r.legacy_job_id = job.legacy_job_id;
  r.legacy_input = job.legacy_input;
  r.user = job.user;
  return r;
}

Result<JobRecord> Store::CreateJob(const NewJob& job) {
  PendingCreate me{&job, std::nullopt};
  std::unique_lock batch_lock(batch_mu_);
  batch_.push_back(&me);
  while (!me.result) {
    if (leader_active_) {
      batch_cv_.wait(batch_lock);
      continue;
    }
    // Lead: commit everything queued so far in one transaction.
    leader_active_ = true;
    std::vector<PendingCreate*> batch;
    batch.swap(batch_);
    batch_lock.unlock();
    {
      std::lock_guard lock(mu_);
      int64_t now = clock_.NowMicros();
      Txn txn(db_);
      std::vector<Result<JobRecord>> results;
      if (!txn.begun()) {
        results.assign(batch.size(), SqliteError(db_, "begin"));
      } else {
        // A failed INSERT rolls back only its own statement; the rest commit.
        for (PendingCreate* p : batch) results.push_back(InsertJob(*p->job, now));
        Status committed = txn.Commit();
        if (!committed.ok()) {
          for (auto& r : results) r = committed;
        }
      }
      for (size_t i = 0; i < batch.size(); ++i) batch[i]->result = std::move(results[i]);
    }
    batch_lock.lock();
    leader_active_ = false;
    batch_cv_.notify_all();
  }
  return std::move(*me.result);
}

Result<JobRecord> Store::GetJob(int64_t id) {
  std::lock_guard lock(mu_);
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?";
  Stmt s(db_, sql.c_str());
  s.Bind(1, id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadJob(s);
  if (rc == SQLITE_DONE) return NotFound("job " + std::to_string(id) + " does not exist");
  return SqliteError(db_, "get job");
}

Result<JobRecord> Store::GetJobByLegacyId(const std::string& project,
                                          const std::string& legacy_job_id) {
  std::lock_guard lock(mu_);
  std::string sql =
      std::string("SELECT ") + kJobColumns + " FROM jobs WHERE project = ? AND legacy_job_id = ?";
  Stmt s(db_, sql.c_str());
  s.Bind(1, project);
  s.Bind(2, legacy_job_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadJob(s);
  if (rc == SQLITE_DONE) {
    return NotFound("job '" + legacy_job_id + "' does not exist in project " + project);
  }
  return SqliteError(db_, "get job by legacy id");
}

Result<std::vector<JobRecord>> Store::ListJobs(const ListOptions& options) {
  std::lock_guard lock(mu_);
  return ListPage(db_, kJobColumns, "jobs", options, ReadJob, "list jobs");
}

Result<std::vector<JobRecord>> Store::ActiveJobs() {
  std::lock_guard lock(mu_);
  return ActiveRows(db_, kJobColumns, "jobs", ReadJob, "list active jobs");
}

Result<std::vector<JobRecord>> Store::EndedJobsSince(int64_t since_us) {
  std::lock_guard lock(mu_);
  return SelectRows(
      db_,
      std::string("SELECT ") + kJobColumns +
          " FROM jobs WHERE state IN (4, 5, 7) AND end_time >= ? AND allocation IS NOT NULL "
          "ORDER BY id",
      [&](Stmt& s) { s.Bind(1, since_us); }, ReadJob, "list ended jobs");
}

Status Store::RequestCancel(int64_t id) {
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  Stmt get(db_, "SELECT state, cancel_requested FROM jobs WHERE id = ?");
  get.Bind(1, id);
  int rc = get.Step();
  if (rc == SQLITE_DONE) return NotFound("job " + std::to_string(id) + " does not exist");
  if (rc != SQLITE_ROW) return SqliteError(db_, "get job");
  auto state = static_cast<JobState>(get.Int(0));
  if (spec::IsTerminal(state)) {
    return FailedPrecondition("job " + std::to_string(id) + " already ended in " +
                              std::string(spec::JobStateName(state)) + "; nothing to cancel");
  }
  if (get.Int(1) != 0) return OkStatus();  // asked before: cancelling is idempotent
  int64_t now = clock_.NowMicros();
  Stmt s(db_, "UPDATE jobs SET cancel_requested = 1, update_time = ? WHERE id = ?");
  s.Bind(1, now);
  s.Bind(2, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "request cancel");
  STOKER_RETURN_IF_ERROR(InsertEvent(id, state, state, "cancel requested", now));
  return txn.Commit();
}

Status Store::Transition(int64_t id, JobState from, JobState to, const std::string& reason,
                         const TransitionUpdate& update) {
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  int64_t now = clock_.NowMicros();
  std::string sql = "UPDATE jobs SET state = ?, update_time = ?, wait_reason = ''";
  if (update.start_time_us) sql += ", start_time = ?";
  if (update.end_time_us) sql += ", end_time = ?";
  if (update.error_code) sql += ", error_code = ?";
  if (update.error_message) sql += ", error_message = ?";
  if (update.allocation) sql += ", allocation = ?";
  if (update.attempt) sql += ", attempt = ?";
  if (update.preemptions) sql += ", preemptions = ?";
  if (update.restart_reason) sql += ", restart_reason = ?";
  sql += " WHERE id = ? AND state = ?";
  Stmt s(db_, sql.c_str());
  int i = 1;
  s.Bind(i++, static_cast<int64_t>(to));
  s.Bind(i++, now);
  if (update.start_time_us) s.Bind(i++, *update.start_time_us);
  if (update.end_time_us) s.Bind(i++, *update.end_time_us);
  if (update.error_code) s.Bind(i++, static_cast<int64_t>(*update.error_code));
  if (update.error_message) s.Bind(i++, *update.error_message);
  if (update.allocation) {
    if (update.allocation->is_null()) {
      s.BindNull(i++);
    } else {
      s.Bind(i++, update.allocation->dump());
    }
  }
  if (update.attempt) s.Bind(i++, static_cast<int64_t>(*update.attempt));
  if (update.preemptions) s.Bind(i++, static_cast<int64_t>(*update.preemptions));
  if (update.restart_reason) s.Bind(i++, *update.restart_reason);
  s.Bind(i++, id);
  s.Bind(i++, static_cast<int64_t>(from));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "transition");
  if (sqlite3_changes(db_) != 1) {
    return FailedPrecondition("job " + std::to_string(id) + " is not in " +
                              std::string(spec::JobStateName(from)));
  }
  STOKER_RETURN_IF_ERROR(InsertEvent(id, from, to, reason, now));
  STOKER_RETURN_IF_ERROR(InsertMessages(update.outbox, now));
  return txn.Commit();
}

Status Store::InsertMessages(const std::vector<OutboxMessage>& messages, int64_t now_us) {
  if (messages.empty()) return OkStatus();
  Stmt s(db_,
         "INSERT INTO outbox(url, event, body, attempts, next_time, create_time) "
         "VALUES(?,?,?,0,?,?)");
  for (const OutboxMessage& m : messages) {
    s.Reset();
    s.Bind(1, m.url);
    s.Bind(2, m.event);
    s.Bind(3, m.body);
    s.Bind(4, m.next_time_us);
    s.Bind(5, now_us);
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "enqueue webhook");
  }
  return OkStatus();
}

Status Store::Enqueue(const std::vector<OutboxMessage>& messages) {
  if (messages.empty()) return OkStatus();
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  STOKER_RETURN_IF_ERROR(InsertMessages(messages, clock_.NowMicros()));
  return txn.Commit();
}

Result<std::vector<OutboxMessage>> Store::OutboxHeads() {
  std::lock_guard lock(mu_);
  return SelectRows(
      db_,
      "SELECT id, url, event, body, attempts, next_time, create_time, last_error FROM outbox "
      "WHERE id IN (SELECT MIN(id) FROM outbox GROUP BY url) ORDER BY id",
      [](Stmt&) {},
      [](Stmt& s) {
        OutboxMessage m;
        m.id = s.Int(0);
        m.url = s.Text(1);
        m.event = s.Text(2);
        m.body = s.Text(3);
        m.attempts = static_cast<int>(s.Int(4));
        m.next_time_us = s.Int(5);
        m.create_time_us = s.Int(6);
        m.last_error = s.Text(7);
        return m;
      },
      "read the outbox");
}

Status Store::RemoveMessage(int64_t id) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "DELETE FROM outbox WHERE id = ?");
  s.Bind(1, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "remove webhook message");
  return OkStatus();
}

Status Store::RescheduleMessage(int64_t id, int attempts, int64_t next_time_us,
                                const std::string& last_error) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE outbox SET attempts = ?, next_time = ?, last_error = ? WHERE id = ?");
  s.Bind(1, static_cast<int64_t>(attempts));
  s.Bind(2, next_time_us);
  s.Bind(3, last_error);
  s.Bind(4, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "reschedule webhook message");
  return OkStatus();
}

Status Store::AddEvent(int64_t id, const std::string& reason) {
  std::lock_guard lock(mu_);
  Stmt get(db_, "SELECT state FROM jobs WHERE id = ?");
  get.Bind(1, id);
  if (get.Step() != SQLITE_ROW) return NotFound("job " + std::to_string(id) + " does not exist");
  auto state = static_cast<JobState>(get.Int(0));
  return InsertEvent(id, state, state, reason, clock_.NowMicros());
}

Status Store::RecordWaits(const std::vector<WaitNote>& notes) {
  if (notes.empty()) return OkStatus();
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  int64_t now = clock_.NowMicros();
  Stmt set(db_, "UPDATE jobs SET wait_reason = ? WHERE id = ? AND wait_reason != ?");
  Stmt state(db_, "SELECT state FROM jobs WHERE id = ?");
  for (const WaitNote& n : notes) {
    set.Reset();
    set.Bind(1, n.reason);
    set.Bind(2, n.id);
    set.Bind(3, n.reason);
    if (set.Step() != SQLITE_DONE) return SqliteError(db_, "set wait reason");
    if (n.event.empty()) continue;
    state.Reset();
    state.Bind(1, n.id);
    if (state.Step() != SQLITE_ROW) continue;
    auto st = static_cast<JobState>(state.Int(0));
    STOKER_RETURN_IF_ERROR(InsertEvent(n.id, st, st, n.event, now));
  }
  return txn.Commit();
}

Result<std::vector<Event>> Store::Events(int64_t id) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "SELECT id, job_id, time, from_state, to_state, reason FROM events WHERE job_id = ? "
         "ORDER BY id");
  s.Bind(1, id);
  std::vector<Event> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    Event e;
    e.id = s.Int(0);
    e.job_id = s.Int(1);
    e.time_us = s.Int(2);
    e.from = static_cast<JobState>(s.Int(3));
    e.to = static_cast<JobState>(s.Int(4));
    e.reason = s.Text(5);
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "list events");
  return out;
}

// ---- studies and trials ----------------------------------------------------

std::string_view TrialStateName(TrialState s) {
  switch (s) {
    case TrialState::kUnspecified:
      return "STATE_UNSPECIFIED";
    case TrialState::kRequested:
      return "REQUESTED";
    case TrialState::kActive:
      return "ACTIVE";
    case TrialState::kStopping:
      return "STOPPING";
    case TrialState::kSucceeded:
      return "SUCCEEDED";
    case TrialState::kInfeasible:
      return "INFEASIBLE";
  }
  return "STATE_UNSPECIFIED";
}

namespace {

constexpr char kStudyColumns[] =
    "id, project, location, display_name, state, spec, create_time, start_time, end_time, "
    "update_time, error_code, error_message, cancel_requested, user, legacy_job_id, legacy_input";

StudyRecord ReadStudy(Stmt& s) {
  StudyRecord r;
  r.id = s.Int(0);
  r.project = s.Text(1);
  r.location = s.Text(2);
  r.display_name = s.Text(3);
  r.state = static_cast<JobState>(s.Int(4));
  r.spec = nlohmann::json::parse(s.Text(5), nullptr, false);
  r.create_time_us = s.Int(6);
  r.start_time_us = s.Int(7);
  r.end_time_us = s.Int(8);
  r.update_time_us = s.Int(9);
  r.error_code = static_cast<int>(s.Int(10));
  r.error_message = s.Text(11);
  r.cancel_requested = s.Int(12) != 0;
  r.user = s.Text(13);
  r.legacy_job_id = s.Text(14);
  if (!s.IsNull(15)) r.legacy_input = nlohmann::json::parse(s.Text(15), nullptr, false);
  return r;
}

constexpr char kTrialColumns[] =
    "study_id, trial_id, job_id, state, parameters, measurements, final_measurement, "
    "infeasible_reason, stopped_early, start_time, end_time";

TrialRecord ReadTrial(Stmt& s) {
  TrialRecord t;
  t.study_id = s.Int(0);
  t.trial_id = s.Int(1);
  t.job_id = s.Int(2);
  t.state = static_cast<TrialState>(s.Int(3));
  t.parameters = nlohmann::json::parse(s.Text(4), nullptr, false);
  t.measurements = nlohmann::json::parse(s.Text(5), nullptr, false);
  if (!s.IsNull(6)) t.final_measurement = nlohmann::json::parse(s.Text(6), nullptr, false);
  t.infeasible_reason = s.Text(7);
  t.stopped_early = s.Int(8) != 0;
  t.start_time_us = s.Int(9);
  t.end_time_us = s.Int(10);
  return t;
}

}  // namespace

Result<StudyRecord> Store::CreateStudy(const std::string& project, const std::string& location,
                                       const std::string& display_name, const nlohmann::json& spec,
                                       const std::string& user, const std::string& legacy_job_id,
                                       const nlohmann::json& legacy_input) {
  std::lock_guard lock(mu_);
  int64_t now = clock_.NowMicros();
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  if (!legacy_job_id.empty()) {
    // One jobId per project across both kinds: a custom job may hold it.
    STOKER_ASSIGN_OR_RETURN(bool taken, LegacyIdTaken("jobs", project, legacy_job_id));
    if (taken) return LegacyIdExists(project, legacy_job_id);
  }
  Stmt s(db_,
         "INSERT INTO studies(project, location, display_name, state, spec, create_time, "
         "update_time, user, legacy_job_id, legacy_input) VALUES(?,?,?,?,?,?,?,?,?,?)");
  s.Bind(1, project);
  s.Bind(2, location);
  s.Bind(3, display_name);
  s.Bind(4, static_cast<int64_t>(JobState::kQueued));
  s.Bind(5, spec.dump());
  s.Bind(6, now);
  s.Bind(7, now);
  s.Bind(8, user);
  s.Bind(9, legacy_job_id);
  if (legacy_input.is_null()) {
    s.BindNull(10);
  } else {
    s.Bind(10, legacy_input.dump());
  }
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT && !legacy_job_id.empty()) {
    return LegacyIdExists(project, legacy_job_id);
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "insert study");
  StudyRecord r;
  r.id = sqlite3_last_insert_rowid(db_);
  STOKER_RETURN_IF_ERROR(txn.Commit());
  r.project = project;
  r.location = location;
  r.display_name = display_name;
  r.spec = spec;
  r.create_time_us = now;
  r.update_time_us = now;
  r.user = user;
  r.legacy_job_id = legacy_job_id;
  r.legacy_input = legacy_input;
  return r;
}

Result<StudyRecord> Store::GetStudyByLegacyId(const std::string& project,
                                              const std::string& legacy_job_id) {
  std::lock_guard lock(mu_);
  std::string sql = std::string("SELECT ") + kStudyColumns +
                    " FROM studies WHERE project = ? AND legacy_job_id = ?";
  Stmt s(db_, sql.c_str());
  s.Bind(1, project);
  s.Bind(2, legacy_job_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadStudy(s);
  if (rc == SQLITE_DONE) {
    return NotFound("job '" + legacy_job_id + "' does not exist in project " + project);
  }
  return SqliteError(db_, "get study by legacy id");
}

Result<StudyRecord> Store::GetStudy(int64_t id) {
  std::lock_guard lock(mu_);
  std::string sql = std::string("SELECT ") + kStudyColumns + " FROM studies WHERE id = ?";
  Stmt s(db_, sql.c_str());
  s.Bind(1, id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadStudy(s);
  if (rc == SQLITE_DONE) {
    return NotFound("hyperparameter tuning job " + std::to_string(id) + " does not exist");
  }
  return SqliteError(db_, "get study");
}

Result<std::vector<StudyRecord>> Store::ListStudies(const ListOptions& options) {
  std::lock_guard lock(mu_);
  return ListPage(db_, kStudyColumns, "studies", options, ReadStudy, "list studies");
}

Result<std::vector<StudyRecord>> Store::ActiveStudies() {
  std::lock_guard lock(mu_);
  return ActiveRows(db_, kStudyColumns, "studies", ReadStudy, "list active studies");
}

Status Store::RequestStudyCancel(int64_t id) {
  std::lock_guard lock(mu_);
  Stmt get(db_, "SELECT state FROM studies WHERE id = ?");
  get.Bind(1, id);
  int rc = get.Step();
  if (rc == SQLITE_DONE) {
    return NotFound("hyperparameter tuning job " + std::to_string(id) + " does not exist");
  }
  if (rc != SQLITE_ROW) return SqliteError(db_, "get study");
  auto state = static_cast<JobState>(get.Int(0));
  if (spec::IsTerminal(state)) {
    return FailedPrecondition("hyperparameter tuning job " + std::to_string(id) +
                              " already ended in " + std::string(spec::JobStateName(state)) +
                              "; nothing to cancel");
  }
  Stmt s(db_, "UPDATE studies SET cancel_requested = 1, update_time = ? WHERE id = ?");
  s.Bind(1, clock_.NowMicros());
  s.Bind(2, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "request study cancel");
  return OkStatus();
}

Status Store::TransitionStudy(int64_t id, JobState from, JobState to,
                              const TransitionUpdate& update) {
  std::lock_guard lock(mu_);
  std::string sql = "UPDATE studies SET state = ?, update_time = ?";
  if (update.start_time_us) sql += ", start_time = ?";
  if (update.end_time_us) sql += ", end_time = ?";
  if (update.error_code) sql += ", error_code = ?";
  if (update.error_message) sql += ", error_message = ?";
  sql += " WHERE id = ? AND state = ?";
  Stmt s(db_, sql.c_str());
  int i = 1;
  s.Bind(i++, static_cast<int64_t>(to));
  s.Bind(i++, clock_.NowMicros());
  if (update.start_time_us) s.Bind(i++, *update.start_time_us);
  if (update.end_time_us) s.Bind(i++, *update.end_time_us);
  if (update.error_code) s.Bind(i++, static_cast<int64_t>(*update.error_code));
  if (update.error_message) s.Bind(i++, *update.error_message);
  s.Bind(i++, id);
  s.Bind(i++, static_cast<int64_t>(from));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "transition study");
  if (sqlite3_changes(db_) != 1) {
    return FailedPrecondition("study " + std::to_string(id) + " is not in " +
                              std::string(spec::JobStateName(from)));
  }
  return OkStatus();
}

Result<JobRecord> Store::CreateTrial(const TrialRecord& trial, const NewJob& job) {
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  int64_t now = clock_.NowMicros();
  STOKER_ASSIGN_OR_RETURN(JobRecord rec, InsertJob(job, now));
  Stmt s(db_,
         "INSERT INTO trials(study_id, trial_id, job_id, state, parameters, measurements) "
         "VALUES(?,?,?,?,?,?)");
  s.Bind(1, trial.study_id);
  s.Bind(2, trial.trial_id);
  s.Bind(3, rec.id);
  s.Bind(4, static_cast<int64_t>(trial.state));
  s.Bind(5, trial.parameters.dump());
  s.Bind(6, trial.measurements.dump());
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) {
    return AlreadyExists("trial " + std::to_string(trial.trial_id) + " of study " +
                         std::to_string(trial.study_id) + " exists");
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "insert trial");
  STOKER_RETURN_IF_ERROR(txn.Commit());
  return rec;
}

Status Store::UpdateTrial(const TrialRecord& t) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "UPDATE trials SET state = ?, measurements = ?, final_measurement = ?, "
         "infeasible_reason = ?, stopped_early = ?, start_time = ?, end_time = ? "
         "WHERE study_id = ? AND trial_id = ?");
  s.Bind(1, static_cast<int64_t>(t.state));
  s.Bind(2, t.measurements.dump());
  if (t.final_measurement.is_null()) {
    s.BindNull(3);
  } else {
    s.Bind(3, t.final_measurement.dump());
  }
  s.Bind(4, t.infeasible_reason);
  s.Bind(5, static_cast<int64_t>(t.stopped_early));
  s.Bind(6, t.start_time_us);
  s.Bind(7, t.end_time_us);
  s.Bind(8, t.study_id);
  s.Bind(9, t.trial_id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "update trial");
  if (sqlite3_changes(db_) != 1)
    return NotFound("trial " + std::to_string(t.trial_id) + " does not exist");
  return OkStatus();
}

Result<std::vector<TrialRecord>> Store::Trials(int64_t study_id) {
  std::lock_guard lock(mu_);
  std::string sql =
      std::string("SELECT ") + kTrialColumns + " FROM trials WHERE study_id = ? ORDER BY trial_id";
  Stmt s(db_, sql.c_str());
  s.Bind(1, study_id);
  std::vector<TrialRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadTrial(s));
  if (rc != SQLITE_DONE) return SqliteError(db_, "list trials");
  return out;
}

constexpr char kUsageColumns[] =
    "job_id, attempt, replica, pool, user, project, labels, study_id, node, start_time, "
    "end_time, end_kind, cpus, memory_bytes, gpu_type, gpus, machine_type, accelerator_type, "
    "accelerator_count, sampled_seconds, busy_gpu_seconds, energy_joules";

UsageRecord ReadUsage(Stmt& s) {
  UsageRecord u;
  u.job_id = s.Int(0);
  u.attempt = static_cast<int>(s.Int(1));
  u.replica = s.Text(2);
  u.pool = static_cast<int>(s.Int(3));
  u.user = s.Text(4);
  u.project = s.Text(5);
  u.labels = nlohmann::json::parse(s.Text(6), nullptr, false);
  if (!u.labels.is_object()) u.labels = nlohmann::json::object();
  u.study_id = s.Int(7);
  u.node = s.Text(8);
  u.start_us = s.Int(9);
  u.end_us = s.Int(10);
  u.end = s.Text(11);
  u.cpus = s.Double(12);
  u.memory_bytes = static_cast<uint64_t>(s.Int(13));
  u.gpu_type = s.Text(14);
  u.gpus = s.Double(15);
  u.machine_type = s.Text(16);
  u.accelerator_type = s.Text(17);
  u.accelerator_count = s.Double(18);
  u.sampled_seconds = s.Double(19);
  u.busy_gpu_seconds = s.Double(20);
  u.energy_joules = s.OptDouble(21);
  return u;
}

Status Store::RecordUsage(const std::vector<UsageRecord>& rows) {
  if (rows.empty()) return OkStatus();
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  Stmt s(db_, (std::string("INSERT OR REPLACE INTO usage(") + kUsageColumns +
               ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
                  .c_str());
  for (const UsageRecord& u : rows) {
    s.Reset();
    s.Bind(1, u.job_id);
    s.Bind(2, static_cast<int64_t>(u.attempt));
    s.Bind(3, u.replica);
    s.Bind(4, static_cast<int64_t>(u.pool));
    s.Bind(5, u.user);
    s.Bind(6, u.project);
    s.Bind(7, u.labels.dump());
    s.Bind(8, u.study_id);
    s.Bind(9, u.node);
    s.Bind(10, u.start_us);
    s.Bind(11, u.end_us);
    s.Bind(12, u.end);
    s.Bind(13, u.cpus);
    s.Bind(14, static_cast<int64_t>(u.memory_bytes));
    s.Bind(15, u.gpu_type);
    s.Bind(16, u.gpus);
    s.Bind(17, u.machine_type);
    s.Bind(18, u.accelerator_type);
    s.Bind(19, u.accelerator_count);
    s.Bind(20, u.sampled_seconds);
    s.Bind(21, u.busy_gpu_seconds);
    s.Bind(22, u.energy_joules);
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "record usage");
  }
  return txn.Commit();
}

Result<std::vector<UsageRecord>> Store::JobUsage(int64_t job_id) {
  std::lock_guard lock(reader_mu_);
  return SelectRows(
      reader_,
      std::string("SELECT ") + kUsageColumns +
          " FROM usage WHERE job_id = ? ORDER BY attempt, replica",
      [&](Stmt& s) { s.Bind(1, job_id); }, ReadUsage, "read usage");
}

Result<std::vector<UsageRecord>> Store::StudyUsage(int64_t study_id) {
  std::lock_guard lock(reader_mu_);
  return SelectRows(
      reader_,
      std::string("SELECT ") + kUsageColumns +
          " FROM usage WHERE study_id = ? AND study_id != 0 ORDER BY job_id, attempt, replica",
      [&](Stmt& s) { s.Bind(1, study_id); }, ReadUsage, "read usage");
}

Result<std::vector<UsageRecord>> Store::UsageBetween(int64_t from_us, int64_t to_us) {
  std::lock_guard lock(reader_mu_);
  return SelectRows(
      reader_,
      std::string("SELECT ") + kUsageColumns +
          " FROM usage WHERE end_time > ? AND start_time < ? ORDER BY start_time",
      [&](Stmt& s) {
        s.Bind(1, from_us);
        s.Bind(2, to_us);
      },
      ReadUsage, "read usage");
}

Result<std::vector<JobRecord>> Store::RunningJobs() {
  std::lock_guard lock(reader_mu_);
  return SelectRows(
      reader_,
      std::string("SELECT ") + kJobColumns + " FROM jobs WHERE state IN (" +
          std::to_string(static_cast<int>(JobState::kRunning)) + ", " +
          std::to_string(static_cast<int>(JobState::kCancelling)) + ") ORDER BY id",
      [](Stmt&) {}, ReadJob, "read running jobs");
}

Result<StateCounts> Store::CountByState() {
  std::lock_guard lock(reader_mu_);
  // One read transaction: the counts and the oldest queued job are of one moment.
  if (sqlite3_exec(reader_, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK)
    return SqliteError(reader_, "count jobs by state");
  struct EndRead {
    sqlite3* db;
    ~EndRead() { sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr); }
  } end_read{reader_};
  StateCounts out;
  Stmt counts(reader_, "SELECT kind, state, n FROM state_counts WHERE n != 0");
  int rc;
  while ((rc = counts.Step()) == SQLITE_ROW) {
    auto& m = counts.Text(0) == "jobs" ? out.jobs : out.studies;
    m[static_cast<JobState>(counts.Int(1))] = counts.Int(2);
  }
  if (rc != SQLITE_DONE) return SqliteError(reader_, "count jobs by state");
  // Ids grow with create time, so the lowest queued id is the oldest (one index seek).
  Stmt oldest(reader_, "SELECT create_time FROM jobs WHERE state = ? ORDER BY id LIMIT 1");
  oldest.Bind(1, static_cast<int64_t>(JobState::kQueued));
  rc = oldest.Step();
  if (rc == SQLITE_ROW) {
    out.oldest_queued_create_us = oldest.Int(0);
  } else if (rc != SQLITE_DONE) {
    return SqliteError(reader_, "find the oldest queued job");
  }
  return out;
}

Result<std::vector<Budget>> Store::Budgets() {
  std::lock_guard lock(mu_);
  return SelectRows(
      db_,
      "SELECT scope, monthly_usd, monthly_gpu_hours, price, warn_at, stop_running, update_time, "
      "updated_by FROM budgets ORDER BY scope",
      [](Stmt&) {},
      [](Stmt& s) {
        Budget b;
        b.scope = s.Text(0);
        b.monthly_usd = s.OptDouble(1);
        b.monthly_gpu_hours = s.OptDouble(2);
        b.price = s.Text(3);
        b.warn_at = s.Double(4);
        b.stop_running = s.Int(5) != 0;
        b.update_time_us = s.Int(6);
        b.updated_by = s.Text(7);
        return b;
      },
      "read budgets");
}

Status Store::PutBudget(const Budget& b) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "INSERT OR REPLACE INTO budgets(scope, monthly_usd, monthly_gpu_hours, price, warn_at, "
         "stop_running, update_time, updated_by) VALUES(?,?,?,?,?,?,?,?)");
  s.Bind(1, b.scope);
  s.Bind(2, b.monthly_usd);
  s.Bind(3, b.monthly_gpu_hours);
  s.Bind(4, b.price);
  s.Bind(5, b.warn_at);
  s.Bind(6, static_cast<int64_t>(b.stop_running));
  s.Bind(7, clock_.NowMicros());
  s.Bind(8, b.updated_by);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "write budget");
  return OkStatus();
}

Status Store::DeleteBudget(const std::string& scope) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "DELETE FROM budgets WHERE scope = ?");
  s.Bind(1, scope);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete budget");
  if (sqlite3_changes(db_) == 0) return NotFound("there is no budget for '" + scope + "'");
  return OkStatus();
}

Result<std::string> Store::Backup() {
  std::filesystem::path db_path = sqlite3_db_filename(db_, "main");
  std::string dir_name = (db_path.parent_path() / "stoker.db.backup-XXXXXX").string();
  if (::mkdtemp(dir_name.data()) == nullptr) {
    return Unavailable("cannot make a directory for the backup beside " + db_path.string() + ": " +
                       std::strerror(errno));
  }
  std::filesystem::path dir = dir_name;
  std::filesystem::path copy = dir / "stoker.db";
  Status status = OkStatus();
  sqlite3* source = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &source, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    status = SqliteError(source, "backup: cannot open " + db_path.string());
  } else {
    sqlite3_busy_timeout(source, 5000);
    Stmt vacuum(source, "VACUUM INTO ?");
    vacuum.Bind(1, copy.string());
    if (!vacuum.prepared() || vacuum.Step() != SQLITE_DONE) {
      status = SqliteError(source, "backup of " + db_path.string());
    }
  }
  sqlite3_close_v2(source);
  Result<std::string> bytes = status.ok() ? ReadFile(copy) : Result<std::string>(status);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return bytes;
}

}  // namespace stoker::store
