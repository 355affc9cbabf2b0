// Store: the usage ledger and budgets (docs/cost.md). Writing an attempt's
// usage rows and reading them by job, study or time; the jobs that use
// resources now and the counts by state (both on the read-only connection);
// the monthly budgets.
#include <sqlite3.h>

#include <string>
#include <vector>

#include "store/sqlite_util.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace stoker::store {
namespace {

using internal::kJobColumns;
using internal::ReadJob;
using internal::SelectRows;
using spec::JobState;
using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

constexpr char kUsageColumns[] =
    "job_id, attempt, replica, pool, user, project, labels, study_id, node, start_time, "
    "end_time, end_kind, cpus, memory_bytes, gpu_type, gpus, machine_type, accelerator_type, "
    "accelerator_count, sampled_seconds, busy_gpu_seconds, energy_joules, location";

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
  u.location = s.Text(22);
  return u;
}

// The ledger's rows that match `condition` (a WHERE clause with its ORDER
// BY), with `bind` applied. On the read-only connection: the caller holds
// reader_mu_.
template <typename Bind>
Result<std::vector<UsageRecord>> SelectUsage(sqlite3* reader, const char* condition, Bind bind) {
  return SelectRows(reader,
                    std::string("SELECT ") + kUsageColumns + " FROM usage WHERE " + condition, bind,
                    ReadUsage, "read usage");
}

}  // namespace

Status Store::RecordUsage(const std::vector<UsageRecord>& rows) {
  if (rows.empty()) return OkStatus();
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  Stmt s(db_, (std::string("INSERT OR REPLACE INTO usage(") + kUsageColumns +
               ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
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
    s.Bind(23, u.location);
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "record usage");
  }
  return txn.Commit();
}

Result<std::vector<UsageRecord>> Store::JobUsage(int64_t job_id) {
  std::lock_guard lock(reader_mu_);
  return SelectUsage(reader_, "job_id = ? ORDER BY attempt, replica",
                     [&](Stmt& s) { s.Bind(1, job_id); });
}

Result<std::vector<UsageRecord>> Store::StudyUsage(int64_t study_id) {
  std::lock_guard lock(reader_mu_);
  return SelectUsage(reader_, "study_id = ? AND study_id != 0 ORDER BY job_id, attempt, replica",
                     [&](Stmt& s) { s.Bind(1, study_id); });
}

Result<std::vector<UsageRecord>> Store::UsageBetween(int64_t from_us, int64_t to_us) {
  std::lock_guard lock(reader_mu_);
  return SelectUsage(reader_, "end_time > ? AND start_time < ? ORDER BY start_time", [&](Stmt& s) {
    s.Bind(1, from_us);
    s.Bind(2, to_us);
  });
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

}  // namespace stoker::store
