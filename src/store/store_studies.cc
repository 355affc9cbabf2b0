// Store: hyperparameter tuning jobs (studies) and their trials. Creating,
// reading, listing, cancelling and moving studies between states; creating
// a trial together with its custom job, updating and listing trials (store.h,
// "studies (HyperparameterTuningJob) and their trials").
#include <sqlite3.h>

#include <string>
#include <vector>

#include "store/sqlite_util.h"
#include "store/store.h"
#include "store/store_internal.h"

namespace stoker::store {
namespace {

using internal::ActiveRows;
using internal::BindJson;
using internal::ColumnJson;
using internal::ListPage;
using internal::SelectOne;
using internal::SelectRows;
using spec::JobState;
using sqlite_util::SqliteError;
using sqlite_util::Stmt;
using sqlite_util::Txn;

// The columns ReadStudy reads, in its order; the first twelve are those
// internal::ReadSharedColumns reads.
constexpr char kStudyColumns[] =
    "id, project, location, display_name, state, spec, create_time, start_time, end_time, "
    "update_time, error_code, error_message, cancel_requested, user, legacy_job_id, legacy_input";

StudyRecord ReadStudy(Stmt& s) {
  StudyRecord r;
  internal::ReadSharedColumns(s, r);
  r.cancel_requested = s.Int(12) != 0;
  r.user = s.Text(13);
  r.legacy_job_id = s.Text(14);
  r.legacy_input = ColumnJson(s, 15);
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
  t.final_measurement = ColumnJson(s, 6);
  t.infeasible_reason = s.Text(7);
  t.stopped_early = s.Int(8) != 0;
  t.start_time_us = s.Int(9);
  t.end_time_us = s.Int(10);
  return t;
}

}  // namespace

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
  BindJson(s, 10, legacy_input);
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
  return SelectOne(
      db_,
      std::string("SELECT ") + kStudyColumns +
          " FROM studies WHERE project = ? AND legacy_job_id = ?",
      [&](Stmt& s) {
        s.Bind(1, project);
        s.Bind(2, legacy_job_id);
      },
      ReadStudy, NotFound("job '" + legacy_job_id + "' does not exist in project " + project),
      "get study by legacy id");
}

Result<StudyRecord> Store::GetStudy(int64_t id) {
  std::lock_guard lock(mu_);
  return SelectOne(
      db_, std::string("SELECT ") + kStudyColumns + " FROM studies WHERE id = ?",
      [&](Stmt& s) { s.Bind(1, id); }, ReadStudy,
      NotFound("hyperparameter tuning job " + std::to_string(id) + " does not exist"), "get study");
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
  std::string sql = "UPDATE studies SET state = ?, update_time = ?" +
                    internal::SharedTransitionSets(update) + " WHERE id = ? AND state = ?";
  Stmt s(db_, sql.c_str());
  int i = 1;
  s.Bind(i++, static_cast<int64_t>(to));
  s.Bind(i++, clock_.NowMicros());
  i = internal::BindSharedTransitionSets(s, i, update);
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
  BindJson(s, 3, t.final_measurement);
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
  return SelectRows(
      db_,
      std::string("SELECT ") + kTrialColumns + " FROM trials WHERE study_id = ? ORDER BY trial_id",
      [&](Stmt& s) { s.Bind(1, study_id); }, ReadTrial, "list trials");
}

}  // namespace stoker::store
