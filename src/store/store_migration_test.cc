// Stores written by every earlier schema open with the current Store: the
// data is intact, new columns hold their defaults, and the store is usable
// (transitions, new jobs, studies, legacy ids). Each schema below is the
// kSchema text of the commit named above it, verbatim; all three version 1
// shapes were released with user_version 1.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/store.h"

namespace stoker::store {
namespace {

using spec::JobState;

// 2da4607 (the first release): jobs and events.
constexpr char kVersion1Spine[] = R"sql(
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
  wait_reason TEXT NOT NULL DEFAULT ''
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
PRAGMA user_version = 1;
)sql";

// e48ee48: studies and trials; jobs.study_id and jobs.trial_id.
constexpr char kVersion1Studies[] = R"sql(
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
  trial_id TEXT NOT NULL DEFAULT ''
);
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
  cancel_requested INTEGER NOT NULL DEFAULT 0
);
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
PRAGMA user_version = 1;
)sql";

// 34a1319: jobs.legacy_job_id and jobs.legacy_input (AI Platform job ids).
constexpr char kVersion1Legacy[] = R"sql(
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
  legacy_input TEXT
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
  cancel_requested INTEGER NOT NULL DEFAULT 0
);
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
PRAGMA user_version = 1;
)sql";

// 29e9238: the submitting user on jobs and studies.
constexpr char kVersion2[] = R"sql(
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
  user TEXT NOT NULL DEFAULT ''
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
  user TEXT NOT NULL DEFAULT ''
);
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
PRAGMA user_version = 2;
)sql";

// 7e8e7f3 (the schema before studies.legacy_job_id): preemptions, restart reasons, state counts.
constexpr char kVersion3[] = R"sql(
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
  user TEXT NOT NULL DEFAULT ''
);
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
PRAGMA user_version = 3;
)sql";

// Rows every released schema can hold: an ended job with its events, a
// running job with an allocation, a queued job with a wait reason, a failed
// job with its error.
constexpr char kJobRows[] = R"sql(
INSERT INTO jobs(id, project, location, display_name, state, spec, create_time, start_time,
                 end_time, update_time, allocation)
  VALUES(1, 'p', 'l', 'done', 4, '{"displayName":"done"}', 1000, 2000, 3000, 3000,
         '{"cpus":2}');
INSERT INTO jobs(id, project, location, display_name, state, spec, create_time, start_time,
                 update_time, attempt, allocation)
  VALUES(2, 'p', 'l', 'running', 3, '{"displayName":"running"}', 1100, 2100, 2100, 1,
         '{"replicas":[{"name":"workerpool0-0","cpus":4}]}');
INSERT INTO jobs(id, project, location, display_name, state, spec, create_time, update_time,
                 wait_reason)
  VALUES(3, 'p', 'l', 'queued', 1, '{"displayName":"queued"}', 1200, 1200,
         'waiting: needs 1x NVIDIA_L4, 0 free');
INSERT INTO jobs(id, project, location, display_name, state, spec, create_time, start_time,
                 end_time, update_time, error_code, error_message)
  VALUES(4, 'p', 'l', 'failed', 5, '{"displayName":"failed"}', 1300, 1400, 1500, 1500, 9,
         'workerpool0-0 exited with code 3');
INSERT INTO events(job_id, time, from_state, to_state, reason) VALUES
  (1, 1000, 0, 1, 'submitted'), (1, 2000, 2, 3, 'started'), (1, 3000, 3, 4, 'exit code 0'),
  (2, 1100, 0, 1, 'submitted'), (2, 2100, 2, 3, 'started'),
  (3, 1200, 0, 1, 'submitted'),
  (4, 1300, 0, 1, 'submitted'), (4, 1500, 3, 5, 'exit code 3');
)sql";

// A study with one trial and the trial's job (schemas with studies).
constexpr char kStudyRows[] = R"sql(
INSERT INTO studies(id, project, location, display_name, state, spec, create_time, start_time,
                    update_time)
  VALUES(1, 'p', 'l', 'study', 3, '{"displayName":"study","maxTrialCount":4}', 1600, 1700, 1700);
INSERT INTO jobs(id, project, location, display_name, state, spec, create_time, update_time,
                 study_id, trial_id)
  VALUES(5, 'p', 'l', 'study-trial-1', 1, '{"displayName":"study-trial-1"}', 1700, 1700, 1, '1');
INSERT INTO trials(study_id, trial_id, job_id, state, parameters, measurements)
  VALUES(1, 1, 5, 2, '[{"parameterId":"lr","value":0.1}]', '[]');
INSERT INTO events(job_id, time, from_state, to_state, reason) VALUES (5, 1700, 0, 1, 'submitted');
)sql";

// A job submitted through the AI Platform routes (schemas with legacy ids).
constexpr char kLegacyRows[] = R"sql(
INSERT INTO jobs(id, project, location, display_name, state, spec, create_time, update_time,
                 legacy_job_id, legacy_input)
  VALUES(6, 'p', 'l', 'census_1', 1, '{"displayName":"census_1"}', 1800, 1800, 'census_1',
         '{"scaleTier":"BASIC"}');
INSERT INTO events(job_id, time, from_state, to_state, reason) VALUES (6, 1800, 0, 1, 'submitted');
)sql";

struct ReleasedSchema {
  const char* name;
  const char* schema;
  bool has_studies;
  bool has_legacy_ids;
  bool has_users;
};

const ReleasedSchema kReleased[] = {
    {"Version1Spine", kVersion1Spine, false, false, false},
    {"Version1Studies", kVersion1Studies, true, false, false},
    {"Version1Legacy", kVersion1Legacy, true, true, false},
    {"Version2", kVersion2, true, true, true},
    {"Version3", kVersion3, true, true, true},
};

class StoreMigrationTest : public ::testing::TestWithParam<ReleasedSchema> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker_migration_" + std::to_string(::getpid()) + "_" + GetParam().name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes stoker.db as the released version did: its schema, then its rows.
  void WriteReleasedStore() {
    const ReleasedSchema& r = GetParam();
    std::string sql = std::string(r.schema) + kJobRows;
    if (r.has_studies) sql += kStudyRows;
    if (r.has_legacy_ids) sql += kLegacyRows;
    if (r.has_users) sql += "UPDATE jobs SET user = 'alice' WHERE id = 1;";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "stoker.db").c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string message = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ::chmod((dir_ / "stoker.db").c_str(), 0600);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }

  // PRAGMA user_version of the file, read with a connection of its own.
  int64_t FileVersion() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir_ / "stoker.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr);
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
  }

  std::filesystem::path dir_;
};

TEST_P(StoreMigrationTest, OpensWithEveryJobIntactAndNewColumnsDefaulted) {
  WriteReleasedStore();
  auto opened = Store::Open(dir_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;

  auto done = store.GetJob(1);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->display_name, "done");
  EXPECT_EQ(done->state, JobState::kSucceeded);
  EXPECT_EQ(done->spec["displayName"], "done");
  EXPECT_EQ(done->create_time_us, 1000);
  EXPECT_EQ(done->start_time_us, 2000);
  EXPECT_EQ(done->end_time_us, 3000);
  EXPECT_EQ(done->allocation["cpus"], 2);
  EXPECT_EQ(done->user, GetParam().has_users ? "alice" : "");
  EXPECT_EQ(done->study_id, 0);
  EXPECT_EQ(done->trial_id, "");
  EXPECT_EQ(done->legacy_job_id, "");
  EXPECT_TRUE(done->legacy_input.is_null());

  auto running = store.GetJob(2);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->state, JobState::kRunning);
  EXPECT_EQ(running->attempt, 1);
  EXPECT_EQ(running->allocation["replicas"][0]["name"], "workerpool0-0");
  auto queued = store.GetJob(3);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->wait_reason, "waiting: needs 1x NVIDIA_L4, 0 free");
  auto failed = store.GetJob(4);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->error_code, 9);
  EXPECT_EQ(failed->error_message, "workerpool0-0 exited with code 3");

  auto events = store.Events(1);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[2].to, JobState::kSucceeded);
  EXPECT_EQ((*events)[2].reason, "exit code 0");

  // The daemon's start-up reads: active jobs (the running one is adopted,
  // the queued ones wait) and ended jobs with allocations.
  auto active = store.ActiveJobs();
  ASSERT_TRUE(active.ok());
  std::vector<int64_t> active_ids;
  for (const JobRecord& j : *active) active_ids.push_back(j.id);
  std::vector<int64_t> want = {2, 3};
  if (GetParam().has_studies) want.push_back(5);
  if (GetParam().has_legacy_ids) want.push_back(6);
  EXPECT_EQ(active_ids, want);
  auto ended = store.EndedJobsSince(0);
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].id, 1);

  auto page = store.ListJobs({.state = JobState::kFailed});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, 4);
  // Columns added since: the old jobs had no preemption and no restart.
  EXPECT_EQ((*page)[0].preemptions, 0);
  EXPECT_EQ((*page)[0].restart_reason, "");
  EXPECT_EQ(FileVersion(), 4);
}

TEST_P(StoreMigrationTest, MigratedStoreTakesTransitionsAndNewWork) {
  WriteReleasedStore();
  auto opened = Store::Open(dir_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;

  // The queued job of the old daemon is placed and finishes.
  ASSERT_TRUE(store
                  .Transition(3, JobState::kQueued, JobState::kPending, "placed",
                              {.allocation = nlohmann::json{{"cpus", 1}}})
                  .ok());
  ASSERT_TRUE(
      store
          .Transition(3, JobState::kPending, JobState::kRunning, "started", {.start_time_us = 5000})
          .ok());
  ASSERT_TRUE(store
                  .Transition(3, JobState::kRunning, JobState::kSucceeded, "exit code 0",
                              {.end_time_us = 6000})
                  .ok());
  EXPECT_EQ(store.GetJob(3)->state, JobState::kSucceeded);
  EXPECT_EQ(store.GetJob(3)->wait_reason, "");
  ASSERT_TRUE(store.RequestCancel(2).ok());
  EXPECT_TRUE(store.GetJob(2)->cancel_requested);

  // New jobs continue the old ids and carry their user.
  NewJob nj{"p", "l", "new", nlohmann::json{{"displayName", "new"}}, {}};
  nj.user = "bob";
  auto created = store.CreateJob(nj);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_GT(created->id, GetParam().has_legacy_ids ? 6 : GetParam().has_studies ? 5 : 4);
  EXPECT_EQ(store.GetJob(created->id)->user, "bob");

  // Legacy job ids: the old one is found, a new one is unique per project.
  if (GetParam().has_legacy_ids) {
    auto old = store.GetJobByLegacyId("p", "census_1");
    ASSERT_TRUE(old.ok()) << old.status().ToString();
    EXPECT_EQ(old->id, 6);
    EXPECT_EQ(old->legacy_input["scaleTier"], "BASIC");
  }
  NewJob legacy{"p", "l", "census_2", nlohmann::json::object(), {}};
  legacy.legacy_job_id = "census_2";
  ASSERT_TRUE(store.CreateJob(legacy).ok());
  EXPECT_EQ(store.CreateJob(legacy).status().code(), Code::kAlreadyExists);

  // Studies: the old one and its trial are read; a new one is made.
  if (GetParam().has_studies) {
    auto study = store.GetStudy(1);
    ASSERT_TRUE(study.ok()) << study.status().ToString();
    EXPECT_EQ(study->state, JobState::kRunning);
    EXPECT_EQ(study->spec["maxTrialCount"], 4);
    EXPECT_EQ(study->user, "");
    EXPECT_EQ(study->legacy_job_id, "");  // added in version 4
    EXPECT_TRUE(study->legacy_input.is_null());
    auto trials = store.Trials(1);
    ASSERT_TRUE(trials.ok());
    ASSERT_EQ(trials->size(), 1u);
    EXPECT_EQ((*trials)[0].job_id, 5);
    EXPECT_EQ((*trials)[0].parameters[0]["parameterId"], "lr");
    EXPECT_EQ(store.GetJob(5)->study_id, 1);
    EXPECT_EQ(store.GetJob(5)->trial_id, "1");
  }
  auto study = store.CreateStudy("p", "l", "s2", nlohmann::json::object(), "carol");
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  EXPECT_EQ(store.GetStudy(study->id)->user, "carol");
  // A tuning job with an AI Platform jobId: unique across jobs and studies.
  auto hp = store.CreateStudy("p", "l", "hp_1", nlohmann::json::object(), "carol", "hp_1",
                              nlohmann::json{{"scaleTier", "BASIC"}});
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(store.GetStudyByLegacyId("p", "hp_1")->id, hp->id);
  EXPECT_EQ(store.CreateStudy("p", "l", "x", nlohmann::json::object(), "carol", "census_2")
                .status()
                .code(),
            Code::kAlreadyExists);
}

TEST_P(StoreMigrationTest, MigrationHappensOnceAndReopensUnchanged) {
  WriteReleasedStore();
  int64_t id = 0;
  {
    auto first = Store::Open(dir_);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    NewJob nj{"p", "l", "after", nlohmann::json::object(), {}};
    id = (*first)->CreateJob(nj)->id;
  }
  auto again = Store::Open(dir_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->GetJob(1)->display_name, "done");
  EXPECT_EQ((*again)->GetJob(id)->display_name, "after");
  EXPECT_EQ(FileVersion(), 4);
}

INSTANTIATE_TEST_SUITE_P(ReleasedSchemas, StoreMigrationTest, ::testing::ValuesIn(kReleased),
                         [](const ::testing::TestParamInfo<ReleasedSchema>& info) {
                           return std::string(info.param.name);
                         });

TEST(StoreVersionTest, RefusesAStoreFromANewerStokerd) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("stoker_migration_newer_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "stoker.db").c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE jobs(id INTEGER); PRAGMA user_version = 99;", nullptr, nullptr,
               nullptr);
  sqlite3_close(db);
  ::chmod((dir / "stoker.db").c_str(), 0600);
  auto store = Store::Open(dir);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer than this stokerd"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::store
