// Store: opening a store (the files' permissions, the integrity check, the
// pragmas, the schema, the read-only connection), closing it, and Backup.
// What the other methods do lives with their concern: store_jobs.cc (jobs,
// events, waits), store_studies.cc (studies, trials), store_outbox.cc (the
// webhook outbox), store_ledger.cc (usage, counts, budgets),
// store_deletion.cc (deletion, operations); the schema is store_schema.cc.
#include "store/store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "store/sqlite_util.h"
#include "store/store_internal.h"

namespace stoker::store {
namespace {

using sqlite_util::SqliteError;
using sqlite_util::Stmt;

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
  STOKER_RETURN_IF_ERROR(internal::MigrateSchema(db, path));
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
  // After the migration: no statement is kept across a schema change.
  store->db_statements_ = std::make_unique<sqlite_util::StatementCache>(db);
  store->reader_statements_ = std::make_unique<sqlite_util::StatementCache>(reader);
  return store;
}

Store::Store(sqlite3* db, const Clock& clock) : db_(db), clock_(clock) {}
Store::~Store() {
  reader_statements_.reset();
  db_statements_.reset();
  sqlite3_close(reader_);
  sqlite3_close(db_);
}

Status Store::Exec(const char* sql) { return internal::ExecSql(db_, sql); }

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
