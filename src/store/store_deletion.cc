// Store: deleting ended jobs and studies, and the operations that record
// each deletion (store.h, "Deletion and operations").
#include <sqlite3.h>

#include "common/status.h"
#include "store/sqlite_util.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace stoker::store {
namespace {

using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

std::string StateName(int64_t state) {
  return std::string(spec::JobStateName(static_cast<spec::JobState>(state)));
}

// Deletes the rows of job `id` (the job and its events). The caller holds a transaction.
Status DeleteJobRows(sqlite3* db, int64_t id) {
  Stmt events(db, "DELETE FROM events WHERE job_id = ?");
  events.Bind(1, id);
  if (events.Step() != SQLITE_DONE) return SqliteError(db, "delete events");
  Stmt job(db, "DELETE FROM jobs WHERE id = ?");
  job.Bind(1, id);
  if (job.Step() != SQLITE_DONE) return SqliteError(db, "delete job");
  return OkStatus();
}

}  // namespace

Result<OperationRecord> Store::InsertOperation(OperationRecord op, int64_t now_us) {
  Stmt s(db_,
         "INSERT INTO operations(project, location, user, type, target, create_time) "
         "VALUES(?,?,?,?,?,?)");
  s.Bind(1, op.project);
  s.Bind(2, op.location);
  s.Bind(3, op.user);
  s.Bind(4, op.type);
  s.Bind(5, op.target);
  s.Bind(6, now_us);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "insert operation");
  op.id = sqlite3_last_insert_rowid(db_);
  op.create_time_us = now_us;
  return op;
}

Result<OperationRecord> Store::DeleteJob(int64_t id, OperationRecord op) {
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  Stmt get(db_, "SELECT state, study_id FROM jobs WHERE id = ?");
  get.Bind(1, id);
  int rc = get.Step();
  if (rc == SQLITE_DONE) return NotFound("custom job " + std::to_string(id) + " does not exist");
  if (rc != SQLITE_ROW) return SqliteError(db_, "get job");
  if (!spec::IsTerminal(static_cast<spec::JobState>(get.Int(0)))) {
    return FailedPrecondition("custom job " + std::to_string(id) + " is " + StateName(get.Int(0)) +
                              "; only an ended job can be deleted: cancel it first, then delete "
                              "it once it has ended");
  }
  if (get.Int(1) != 0) {
    return FailedPrecondition("custom job " + std::to_string(id) + " is a trial of tuning job " +
                              std::to_string(get.Int(1)) +
                              "; delete the hyperparameterTuningJob, which deletes its trials");
  }
  STOKER_RETURN_IF_ERROR(DeleteJobRows(db_, id));
  STOKER_ASSIGN_OR_RETURN(OperationRecord recorded, InsertOperation(op, clock_.NowMicros()));
  STOKER_RETURN_IF_ERROR(txn.Commit());
  return recorded;
}

Result<OperationRecord> Store::DeleteStudy(int64_t id, OperationRecord op) {
  std::lock_guard lock(mu_);
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  Stmt get(db_, "SELECT state FROM studies WHERE id = ?");
  get.Bind(1, id);
  int rc = get.Step();
  if (rc == SQLITE_DONE) return NotFound("tuning job " + std::to_string(id) + " does not exist");
  if (rc != SQLITE_ROW) return SqliteError(db_, "get study");
  if (!spec::IsTerminal(static_cast<spec::JobState>(get.Int(0)))) {
    return FailedPrecondition("tuning job " + std::to_string(id) + " is " + StateName(get.Int(0)) +
                              "; only an ended tuning job can be deleted: cancel it first, then "
                              "delete it once it has ended");
  }
  Stmt trials(db_, "SELECT id, state FROM jobs WHERE study_id = ?");
  trials.Bind(1, id);
  std::vector<int64_t> jobs;
  while ((rc = trials.Step()) == SQLITE_ROW) {
    if (!spec::IsTerminal(static_cast<spec::JobState>(trials.Int(1)))) {
      return FailedPrecondition("trial job " + std::to_string(trials.Int(0)) + " of tuning job " +
                                std::to_string(id) + " is still " + StateName(trials.Int(1)) +
                                "; retry once it has ended");
    }
    jobs.push_back(trials.Int(0));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "list trial jobs");
  for (int64_t job : jobs) STOKER_RETURN_IF_ERROR(DeleteJobRows(db_, job));
  Stmt del_trials(db_, "DELETE FROM trials WHERE study_id = ?");
  del_trials.Bind(1, id);
  if (del_trials.Step() != SQLITE_DONE) return SqliteError(db_, "delete trials");
  Stmt del_study(db_, "DELETE FROM studies WHERE id = ?");
  del_study.Bind(1, id);
  if (del_study.Step() != SQLITE_DONE) return SqliteError(db_, "delete study");
  STOKER_ASSIGN_OR_RETURN(OperationRecord recorded, InsertOperation(op, clock_.NowMicros()));
  STOKER_RETURN_IF_ERROR(txn.Commit());
  return recorded;
}

Result<OperationRecord> Store::GetOperation(int64_t id) {
  std::lock_guard lock(mu_);
  return internal::SelectOne(
      db_,
      "SELECT id, project, location, user, type, target, create_time FROM operations WHERE id = ?",
      [&](Stmt& s) { s.Bind(1, id); },
      [](Stmt& s) {
        OperationRecord op;
        op.id = s.Int(0);
        op.project = s.Text(1);
        op.location = s.Text(2);
        op.user = s.Text(3);
        op.type = s.Text(4);
        op.target = s.Text(5);
        op.create_time_us = s.Int(6);
        return op;
      },
      NotFound("operation " + std::to_string(id) + " does not exist"), "get operation");
}

}  // namespace stoker::store
