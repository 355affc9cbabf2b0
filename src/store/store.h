// The durable record of jobs and their events, in SQLite.
//
// Every write is one transaction, committed with WAL and synchronous=FULL
// before the call returns: once CreateJob or Transition returns ok, the
// change survives a crash of the process or the machine.
//
// Ownership of writes (DESIGN.md §2): API handlers call CreateJob and
// RequestCancel (intents); only the control loop calls Transition and
// SetWaitReason. Reads may come from any thread.
//
// Thread-safe: one connection guarded by a mutex.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "spec/job_state.h"

struct sqlite3;

namespace stoker::store {

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
};

// What a state change writes besides the state itself.
struct TransitionUpdate {
  std::optional<int64_t> start_time_us;
  std::optional<int64_t> end_time_us;
  std::optional<int> error_code;
  std::optional<std::string> error_message;
  std::optional<nlohmann::json> allocation;  // null json clears it
};

struct ListOptions {
  std::optional<spec::JobState> state;
  int64_t after_id = 0;  // page token: list ids greater than this
  int limit = 100;
};

class Store {
 public:
  // Opens (creating if needed) `<data_dir>/stoker.db`, checks its integrity
  // and migrates the schema. FailedPrecondition with recovery advice when the
  // file is damaged; Unavailable when another process holds it locked.
  static Result<std::unique_ptr<Store>> Open(const std::filesystem::path& data_dir);
  ~Store();

  // Inserts a QUEUED job with its first event. Returns it with its new id.
  Result<JobRecord> CreateJob(const NewJob& job);
  Result<JobRecord> GetJob(int64_t id);
  Result<std::vector<JobRecord>> ListJobs(const ListOptions& options);
  // Jobs not in a terminal state, oldest first.
  Result<std::vector<JobRecord>> ActiveJobs();

  // Records that the user asked to cancel. FailedPrecondition if the job
  // already ended; NotFound if there is no such job.
  Status RequestCancel(int64_t id);

  // Moves a job from `from` to `to` and appends the event, atomically.
  // FailedPrecondition when the job is not in `from` (a lost race).
  Status Transition(int64_t id, spec::JobState from, spec::JobState to, const std::string& reason,
                    const TransitionUpdate& update = {});
  // Appends an event that does not change the state (a warning, a note).
  Status AddEvent(int64_t id, const std::string& reason);
  Status SetWaitReason(int64_t id, const std::string& reason);

  Result<std::vector<Event>> Events(int64_t id);

 private:
  explicit Store(sqlite3* db);
  Status Exec(const char* sql);
  Status InsertEvent(int64_t id, spec::JobState from, spec::JobState to, const std::string& reason,
                     int64_t time_us);

  std::mutex mu_;
  sqlite3* db_;
};

}  // namespace stoker::store
