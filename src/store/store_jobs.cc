// Store: custom jobs and their events. Creating jobs (with group commit),
// reading and listing them, cancel requests, state transitions, and the
// events and wait reasons the control loop records (store.h, the first
// section of Store).
#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include "store/sqlite_util.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace stoker::store {

using internal::ActiveRows;
using internal::BindJson;
using internal::kJobColumns;
using internal::ListPage;
using internal::ReadJob;
using internal::SelectOne;
using internal::SelectRows;
using spec::JobState;
using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

namespace internal {

JobRecord ReadJob(Stmt& s) {
  JobRecord r;
  ReadSharedColumns(s, r);
  r.attempt = static_cast<int>(s.Int(12));
  r.allocation = ColumnJson(s, 13);
  r.cancel_requested = s.Int(14) != 0;
  r.wait_reason = s.Text(15);
  r.study_id = s.Int(16);
  r.trial_id = s.Text(17);
  r.legacy_job_id = s.Text(18);
  r.legacy_input = ColumnJson(s, 19);
  r.user = s.Text(20);
  r.preemptions = static_cast<int>(s.Int(21));
  r.restart_reason = s.Text(22);
  return r;
}

std::string SharedTransitionSets(const TransitionUpdate& update) {
  std::string sets;
  if (update.start_time_us) sets += ", start_time = ?";
  if (update.end_time_us) sets += ", end_time = ?";
  if (update.error_code) sets += ", error_code = ?";
  if (update.error_message) sets += ", error_message = ?";
  return sets;
}

int BindSharedTransitionSets(Stmt& s, int i, const TransitionUpdate& update) {
  if (update.start_time_us) s.Bind(i++, *update.start_time_us);
  if (update.end_time_us) s.Bind(i++, *update.end_time_us);
  if (update.error_code) s.Bind(i++, static_cast<int64_t>(*update.error_code));
  if (update.error_message) s.Bind(i++, *update.error_message);
  return i;
}

}  // namespace internal

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
  BindJson(s, 11, job.legacy_input);
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

Result<JobRecord> Store::CreateJob(const NewJob& job, const CreateWatcher* watcher) {
  PendingCreate me{&job, watcher, std::nullopt};
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
        for (PendingCreate* p : batch) {
          results.push_back(InsertJob(*p->job, now));
          if (results.back().ok() && p->watcher && p->watcher->inserted) {
            p->watcher->inserted(*results.back());
          }
        }
        Status committed = txn.Commit();
        if (!committed.ok()) {
          for (size_t i = 0; i < batch.size(); ++i) {
            const CreateWatcher* w = batch[i]->watcher;
            if (results[i].ok() && w && w->not_committed) w->not_committed(results[i]->id);
            results[i] = committed;
          }
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
  return SelectOne(
      db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?",
      [&](Stmt& s) { s.Bind(1, id); }, ReadJob,
      NotFound("job " + std::to_string(id) + " does not exist"), "get job");
}

Result<JobRecord> Store::GetJobByLegacyId(const std::string& project,
                                          const std::string& legacy_job_id) {
  std::lock_guard lock(mu_);
  return SelectOne(
      db_,
      std::string("SELECT ") + kJobColumns + " FROM jobs WHERE project = ? AND legacy_job_id = ?",
      [&](Stmt& s) {
        s.Bind(1, project);
        s.Bind(2, legacy_job_id);
      },
      ReadJob, NotFound("job '" + legacy_job_id + "' does not exist in project " + project),
      "get job by legacy id");
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
  if (update.synced) return TransitionLocked(id, from, to, reason, update);
  // The level cannot change inside a transaction: around it, back to FULL
  // whatever the transition returned.
  STOKER_RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL"));
  Status s = TransitionLocked(id, from, to, reason, update);
  Status full = Exec("PRAGMA synchronous=FULL");
  return s.ok() ? full : s;
}

Status Store::TransitionLocked(int64_t id, JobState from, JobState to, const std::string& reason,
                               const TransitionUpdate& update) {
  Txn txn(db_);
  if (!txn.begun()) return SqliteError(db_, "begin");
  int64_t now = clock_.NowMicros();
  std::string sql = "UPDATE jobs SET state = ?, update_time = ?, wait_reason = ''" +
                    internal::SharedTransitionSets(update);
  if (update.allocation) sql += ", allocation = ?";
  if (update.attempt) sql += ", attempt = ?";
  if (update.preemptions) sql += ", preemptions = ?";
  if (update.restart_reason) sql += ", restart_reason = ?";
  sql += " WHERE id = ? AND state = ?";
  Stmt s(db_, sql.c_str());
  int i = 1;
  s.Bind(i++, static_cast<int64_t>(to));
  s.Bind(i++, now);
  i = internal::BindSharedTransitionSets(s, i, update);
  if (update.allocation) BindJson(s, i++, *update.allocation);
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
  return SelectRows(
      db_,
      "SELECT id, job_id, time, from_state, to_state, reason FROM events WHERE job_id = ? "
      "ORDER BY id",
      [&](Stmt& s) { s.Bind(1, id); },
      [](Stmt& s) {
        Event e;
        e.id = s.Int(0);
        e.job_id = s.Int(1);
        e.time_us = s.Int(2);
        e.from = static_cast<JobState>(s.Int(3));
        e.to = static_cast<JobState>(s.Int(4));
        e.reason = s.Text(5);
        return e;
      },
      "list events");
}

}  // namespace stoker::store
