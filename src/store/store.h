// The durable record of jobs and their events, in SQLite.
//
// Every write is one transaction, committed with WAL and synchronous=FULL
// before the call returns: once CreateJob or Transition returns ok, the
// change survives a crash of the process or the machine.
//
// Ownership of writes (DESIGN.md §2): API handlers call CreateJob and
// RequestCancel (intents); only the control loop calls Transition, AddEvent
// and RecordWaits. Reads may come from any thread.
//
// Thread-safe: one connection guarded by a mutex.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "spec/job_state.h"

struct sqlite3;

namespace stoker::store {

namespace sqlite_util {
class StatementCache;
}

struct JobRecord {
  int64_t id = 0;
  std::string project;
  std::string location;
  std::string display_name;
  spec::JobState state = spec::JobState::kQueued;
  nlohmann::json spec;  // canonical CustomJob JSON (input fields only)
  int64_t create_time_us = 0;
  int64_t start_time_us = 0;  // 0 = unset
  int64_t end_time_us = 0;
  int64_t update_time_us = 0;
  int error_code = 0;  // google.rpc.Code; 0 = no error
  std::string error_message;
  int attempt = 0;
  nlohmann::json allocation;  // the placement of the current attempt; null when none
  bool cancel_requested = false;
  std::string wait_reason;  // why a QUEUED job waits; "" otherwise
  int64_t study_id = 0;     // the tuning job that owns this trial job; 0 = none
  std::string trial_id;     // its trial id ("1", "2", ...); "" = not a trial
  // AI Platform (ml.googleapis.com/v1) jobs: the user's jobId and the
  // trainingInput as submitted, for the legacy routes; "" and null otherwise.
  std::string legacy_job_id;
  nlohmann::json legacy_input;
  // Who submitted it (the authenticated principal; "" = the local user of a
  // store made before users existed). Quotas, fair share and ownership key on it.
  std::string user;
  // Attempts that ended in a preemption (docs/preemption.md): they never
  // count against scheduling.maxRetries.
  int preemptions = 0;
  // Why the current attempt is a restart: "" for the first attempt, else
  // "preemption", "node_failure", "worker_restart" or "retry" (the trainer's
  // STOKER_RESTART_REASON).
  std::string restart_reason;
};

struct Event {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t time_us = 0;
  spec::JobState from = spec::JobState::kUnspecified;
  spec::JobState to = spec::JobState::kUnspecified;
  std::string reason;
};

struct NewJob {
  std::string project;
  std::string location;
  std::string display_name;
  nlohmann::json spec;
  std::vector<std::string> warnings;  // recorded as events on the new job
  int64_t study_id = 0;
  std::string trial_id;
  std::string legacy_job_id;  // unique per project when set
  nlohmann::json legacy_input;
  std::string user;  // the submitting principal
};

// A HyperparameterTuningJob (a study) as stored.
struct StudyRecord {
  int64_t id = 0;
  std::string project;
  std::string location;
  std::string display_name;
  spec::JobState state = spec::JobState::kQueued;
  nlohmann::json spec;  // canonical HyperparameterTuningJob JSON (input fields)
  int64_t create_time_us = 0;
  int64_t start_time_us = 0;
  int64_t end_time_us = 0;
  int64_t update_time_us = 0;
  int error_code = 0;
  std::string error_message;
  bool cancel_requested = false;
  std::string user;  // the submitting principal; its trials' jobs carry it too
  // The AI Platform jobId and trainingInput of a tuning job submitted through
  // the ml/v1 API (trainingInput.hyperparameters); "" and null otherwise.
  std::string legacy_job_id;
  nlohmann::json legacy_input;
};

// A long-running operation Stoker returned: so far the deletion of a job or
// a study, done when it is returned (store_deletion.cc).
struct OperationRecord {
  int64_t id = 0;
  std::string project;
  std::string location;
  std::string user;    // who asked for it; only it and admins may read it
  std::string type;    // the Vertex method: "DeleteCustomJob", "DeleteHyperparameterTuningJob"
  std::string target;  // the resource it acted on ("projects/p/locations/l/customJobs/7")
  int64_t create_time_us = 0;
};

// Trial states (reference §2.3).
enum class TrialState {
  kUnspecified = 0,
  kRequested = 1,
  kActive = 2,
  kStopping = 3,
  kSucceeded = 4,
  kInfeasible = 5
};
std::string_view TrialStateName(TrialState s);

struct TrialRecord {
  int64_t study_id = 0;
  int64_t trial_id = 0;  // 1, 2, ... within the study
  int64_t job_id = 0;    // its custom job
  TrialState state = TrialState::kRequested;
  nlohmann::json parameters = nlohmann::json::array();    // [{parameterId, value}]
  nlohmann::json measurements = nlohmann::json::array();  // [{stepCount, elapsedDuration, metrics}]
  nlohmann::json final_measurement;                       // null until known
  std::string infeasible_reason;
  bool stopped_early = false;
  int64_t start_time_us = 0;
  int64_t end_time_us = 0;
};

// A webhook delivery waiting in the outbox (docs/webhooks.md): written in
// the same transaction as what it reports, so a crash never loses it;
// removed once delivered or given up.
struct OutboxMessage {
  int64_t id = 0;
  std::string url;    // the hook it goes to (its secret is in the config)
  std::string event;  // "job.state", "budget.warning", ...
  std::string body;   // the JSON to POST
  int attempts = 0;
  int64_t next_time_us = 0;  // not before; 0 = at once
  int64_t create_time_us = 0;
  std::string last_error;
};

// What a state change writes besides the state itself.
struct TransitionUpdate {
  std::optional<int64_t> start_time_us;
  std::optional<int64_t> end_time_us;
  std::optional<int> error_code;
  std::optional<std::string> error_message;
  std::optional<nlohmann::json> allocation;   // null json clears it
  std::optional<int> attempt;                 // a retry starts the next attempt
  std::optional<int> preemptions;             // a preemption counts one more
  std::optional<std::string> restart_reason;  // JobRecord::restart_reason of that attempt
  std::vector<OutboxMessage> outbox;          // webhook deliveries reporting this change
  // False: committed without an fsync (SQLite's synchronous=NORMAL in WAL
  // mode), so the change survives a crash of stokerd but not of the
  // machine. Only for a change that a machine crash undoes anyway: a local
  // launch's PENDING, whose trainer dies with the machine (recovery then
  // finds the job QUEUED and places it again, or finds the replica's claim
  // and reports it lost). The next synced commit makes it durable too: the
  // WAL is written in order.
  bool synced = true;
};

// One replica's part of one attempt in the usage ledger (docs/cost.md): what
// it booked and for how long. The control loop writes the rows of an attempt
// when it ends, with the supervisor's own start and end times, so the ledger
// is exact across daemon restarts. (job_id, attempt, replica) is the key:
// writing the same rows again (a crash between the write and the job's
// transition) changes nothing.
struct UsageRecord {
  int64_t job_id = 0;
  int attempt = 0;
  std::string replica;  // "workerpool0-0"
  int pool = 0;         // index into workerPoolSpecs
  // The job's owner, project and labels, copied so reports need not read specs.
  std::string user;
  std::string project;
  nlohmann::json labels = nlohmann::json::object();
  int64_t study_id = 0;  // the study of a trial's job; 0 = none
  std::string node;
  int64_t start_us = 0;
  int64_t end_us = 0;  // rows of a running attempt (never stored) end "now"
  std::string end;     // succeeded | failed | retried | cancelled | running
  // Booked: CPUs, memory, and GPUs of one type (fractions of shared GPUs summed).
  double cpus = 0;
  uint64_t memory_bytes = 0;
  std::string gpu_type;
  double gpus = 0;
  // The replica's machineSpec as asked (what a cloud-equivalent price prices).
  std::string machine_type;
  std::string accelerator_type;
  double accelerator_count = 0;
  // GPU telemetry (docs/cost.md), where the daemon sampled NVML while the
  // replica ran: for `sampled_seconds` of its run, its GPUs (by their booked
  // fractions) were busy for `busy_gpu_seconds` and used `energy_joules`
  // (nullopt: the counter was not available). 0 / nullopt without telemetry.
  double sampled_seconds = 0;
  double busy_gpu_seconds = 0;
  std::optional<double> energy_joules;
  // The job's location (projects/P/locations/L; an AI Platform job's
  // trainingInput.region), whose region prices the row (Catalog::RegionFor).
  // "" = a row written before the ledger kept it (schema 5): priced in the
  // config's cost.region.
  std::string location;

  double seconds() const { return end_us > start_us ? (end_us - start_us) / 1e6 : 0; }
};

// A monthly limit on a scope's usage (docs/cost.md, "Budgets").
struct Budget {
  std::string scope;                        // "user:NAME", "project:NAME" or "label:KEY=VALUE"
  std::optional<double> monthly_usd;        // in the price named by `price`
  std::optional<double> monthly_gpu_hours;  // booked GPU-hours
  std::string price = "vertex";             // vertex | compute-engine | spot | own
  double warn_at = 0.8;                     // soft limit: a warning at this fraction
  bool stop_running = false;                // hard limit also cancels the scope's running jobs
  int64_t update_time_us = 0;
  std::string updated_by;
};

// How many jobs and studies are in each state (states with none are absent),
// and when the oldest job still QUEUED was submitted (0 = none queued).
struct StateCounts {
  std::map<spec::JobState, int64_t> jobs;
  std::map<spec::JobState, int64_t> studies;
  int64_t oldest_queued_create_us = 0;
};

struct ListOptions {
  std::optional<spec::JobState> state;
  int64_t after_id = 0;  // page token: list ids greater (newest_first: smaller) than this
  int limit = 100;
  bool newest_first = false;  // descending ids (creation order) instead of ascending
};

class Store {
 public:
  // Opens (creating if needed) `<data_dir>/stoker.db`, checks its integrity
  // and migrates the schema. FailedPrecondition with recovery advice when the
  // file is damaged; Unavailable when another process holds it locked.
  // Times it stamps (create, update, start, end, events) come from `clock`,
  // which must outlive the store.
  static Result<std::unique_ptr<Store>> Open(const std::filesystem::path& data_dir,
                                             const Clock& clock = SystemClock());
  ~Store();

  // Told about a job of CreateJob's transaction around its commit, so that
  // the control loop can start on it while the commit's fsync runs. Both are
  // called with the store's lock held: they must return at once and must
  // not call the store.
  struct CreateWatcher {
    // The row is inserted and its commit is in flight. Any store call about
    // the job waits for the commit (the store's lock) and finds the job
    // only if the commit succeeded.
    std::function<void(const JobRecord&)> inserted;
    // That commit failed: the job does not exist, and its id may be given
    // to a later job.
    std::function<void(int64_t id)> not_committed;
  };

  // Inserts a QUEUED job with its first event. Returns it with its new id.
  // Concurrent calls are committed together (group commit: one transaction
  // and one fsync for a batch); each call still returns only after its own
  // job is durable, and a failing insert fails only its own call.
  // `watcher`, when given, is told before and (on failure) after the commit.
  Result<JobRecord> CreateJob(const NewJob& job, const CreateWatcher* watcher = nullptr);
  Result<JobRecord> GetJob(int64_t id);
  // The job submitted through the legacy API as `legacy_job_id` in `project`.
  Result<JobRecord> GetJobByLegacyId(const std::string& project, const std::string& legacy_job_id);
  Result<std::vector<JobRecord>> ListJobs(const ListOptions& options);
  // Jobs not in a terminal state, oldest first.
  Result<std::vector<JobRecord>> ActiveJobs();
  // Ended jobs (SUCCEEDED, FAILED, CANCELLED) with an allocation, ended at or
  // after `since_us`: a restarted daemon stops replicas they may have left.
  Result<std::vector<JobRecord>> EndedJobsSince(int64_t since_us);

  // Records that the user asked to cancel. FailedPrecondition if the job
  // already ended; NotFound if there is no such job.
  Status RequestCancel(int64_t id);

  // Moves a job from `from` to `to` and appends the event, atomically.
  // FailedPrecondition when the job is not in `from` (a lost race).
  Status Transition(int64_t id, spec::JobState from, spec::JobState to, const std::string& reason,
                    const TransitionUpdate& update = {});
  // Appends an event that does not change the state (a warning, a note).
  Status AddEvent(int64_t id, const std::string& reason);

  // Why queued jobs wait, as one decision of the scheduler sees it: each
  // job's wait reason and, where `event` is not empty, an event with that
  // reason. One transaction (one sync) for all of them, so that a decision
  // over a queue of thousands costs one commit, not thousands. Jobs that no
  // longer exist are skipped.
  struct WaitNote {
    int64_t id = 0;
    std::string reason;
    std::string event;  // "" = no event
  };
  Status RecordWaits(const std::vector<WaitNote>& notes);

  Result<std::vector<Event>> Events(int64_t id);

  // ---- studies (HyperparameterTuningJob) and their trials ----
  // With a `legacy_job_id`: AlreadyExists when a job or study of `project`
  // already has it (one AI Platform jobId names one job of either kind).
  Result<StudyRecord> CreateStudy(const std::string& project, const std::string& location,
                                  const std::string& display_name, const nlohmann::json& spec,
                                  const std::string& user = "",
                                  const std::string& legacy_job_id = "",
                                  const nlohmann::json& legacy_input = nullptr);
  // The tuning job submitted through the legacy API as `legacy_job_id`.
  Result<StudyRecord> GetStudyByLegacyId(const std::string& project,
                                         const std::string& legacy_job_id);
  Result<StudyRecord> GetStudy(int64_t id);
  Result<std::vector<StudyRecord>> ListStudies(const ListOptions& options);
  Result<std::vector<StudyRecord>> ActiveStudies();
  Status RequestStudyCancel(int64_t id);
  // Moves a study between states (control loop only); guarded like Transition.
  Status TransitionStudy(int64_t id, spec::JobState from, spec::JobState to,
                         const TransitionUpdate& update = {});

  // Creates trial `trial.trial_id` and its custom job in one transaction.
  // Returns the job. AlreadyExists if the trial exists (a retried suggestion).
  Result<JobRecord> CreateTrial(const TrialRecord& trial, const NewJob& job);
  // Replaces a trial's mutable fields (state, measurements, final, reason, times).
  Status UpdateTrial(const TrialRecord& trial);
  Result<std::vector<TrialRecord>> Trials(int64_t study_id);

  // ---- the webhook outbox (docs/webhooks.md) ----
  Status Enqueue(const std::vector<OutboxMessage>& messages);
  // The oldest message of each hook (URL): deliveries to one hook keep their order.
  Result<std::vector<OutboxMessage>> OutboxHeads();
  // Delivered or given up: removed.
  Status RemoveMessage(int64_t id);
  // A failed try: the count, when to try again and why it failed.
  Status RescheduleMessage(int64_t id, int attempts, int64_t next_time_us,
                           const std::string& last_error);

  // ---- the usage ledger and budgets (docs/cost.md) ----
  // Writes (or rewrites, same key) the rows, in one transaction.
  Status RecordUsage(const std::vector<UsageRecord>& rows);
  // A job's rows, by attempt and replica.
  Result<std::vector<UsageRecord>> JobUsage(int64_t job_id);
  // The rows of a study's trials.
  Result<std::vector<UsageRecord>> StudyUsage(int64_t study_id);
  // Rows that overlap [from_us, to_us), by start time.
  Result<std::vector<UsageRecord>> UsageBetween(int64_t from_us, int64_t to_us);
  // Jobs RUNNING or CANCELLING (whose attempts use resources now), oldest first.
  // These four reads use a read-only connection of their own (a WAL
  // snapshot), so they never wait for, or hold up, the writes above.
  Result<std::vector<JobRecord>> RunningJobs();
  // Counts by state, kept by triggers in the store (a few rows, not a scan
  // of every job), and the oldest queued job; on the read-only connection.
  Result<StateCounts> CountByState();

  Result<std::vector<Budget>> Budgets();
  // Creates or replaces the budget of `budget.scope`, stamping the update time.
  Status PutBudget(const Budget& budget);
  // NotFound when there is none.
  Status DeleteBudget(const std::string& scope);

  // A consistent copy of the whole database as of one moment, in SQLite's
  // file format: the bytes of a stoker.db to restore (jobs, events, studies
  // and trials, and what the AuthStore keeps in the same file: users, token
  // hashes, the push secret). It reads through a connection of its own in
  // one read transaction (WAL), so submissions and transitions go on while
  // it copies; the copy is made in a private (0700) directory beside the
  // store and removed before it returns. Unavailable when the disk is full.
  // Thread-safe.
  Result<std::string> Backup();

  // ---- Deletion and operations (store_deletion.cc) ----

  // Deletes job `id` and its events, and records `op` (its id and time are
  // filled here) in the same transaction; returns the recorded operation.
  // Its usage rows stay: the ledger keeps what was spent. NotFound when it
  // does not exist; FailedPrecondition while it has not ended, or when it is
  // a trial (its study is deleted as a whole). The caller removes its files
  // first (exec::Executor::RemoveJobFiles, as retention does).
  Result<OperationRecord> DeleteJob(int64_t id, OperationRecord op);
  // Deletes study `id`, its trials and their jobs with their events, and
  // records `op`, likewise. FailedPrecondition while it or a trial's job has
  // not ended.
  Result<OperationRecord> DeleteStudy(int64_t id, OperationRecord op);
  Result<OperationRecord> GetOperation(int64_t id);

 private:
  Store(sqlite3* db, const Clock& clock);
  Status Exec(const char* sql);
  // Inserts a job and its first events; the caller holds mu_ and a transaction.
  Result<JobRecord> InsertJob(const NewJob& job, int64_t now);
  // Whether `table` (jobs or studies) has `legacy_job_id` in `project`; mu_ held.
  Result<bool> LegacyIdTaken(const char* table, const std::string& project,
                             const std::string& legacy_job_id);
  static Status LegacyIdExists(const std::string& project, const std::string& legacy_job_id);
  Status TransitionLocked(int64_t id, spec::JobState from, spec::JobState to,
                          const std::string& reason, const TransitionUpdate& update);
  Status InsertEvent(int64_t id, spec::JobState from, spec::JobState to, const std::string& reason,
                     int64_t time_us);
  // Inserts outbox rows; the caller holds mu_ and a transaction.
  Result<OperationRecord> InsertOperation(OperationRecord op, int64_t now_us);
  Status InsertMessages(const std::vector<OutboxMessage>& messages, int64_t now_us);

  std::mutex mu_;
  sqlite3* db_;
  std::mutex reader_mu_;
  sqlite3* reader_ = nullptr;  // read-only: the ledger's long reads
  // Each connection's prepared statements, kept for reuse (under the
  // connection's mutex); they end before the connections close.
  std::unique_ptr<sqlite_util::StatementCache> db_statements_;
  std::unique_ptr<sqlite_util::StatementCache> reader_statements_;
  const Clock& clock_;

  // Group commit of CreateJob: callers queue; one of them (the leader)
  // commits everything queued so far while the others wait.
  struct PendingCreate {
    const NewJob* job;
    const CreateWatcher* watcher;
    std::optional<Result<JobRecord>> result;
  };
  std::mutex batch_mu_;
  std::condition_variable batch_cv_;
  std::vector<PendingCreate*> batch_;
  bool leader_active_ = false;
};

}  // namespace stoker::store
