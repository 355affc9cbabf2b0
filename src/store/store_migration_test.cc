// Stores written by every earlier schema open with the current Store: the
// data is intact, new columns hold their defaults, and the store is usable
// (transitions, new jobs, studies, legacy ids, usage rows). The released
// schemas are in store_released_schemas.h.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/store.h"
#include "store/store_released_schemas.h"

namespace stoker::store {
namespace {

using spec::JobState;

using released::kVersion1Legacy;
using released::kVersion1Spine;
using released::kVersion1Studies;
using released::kVersion2;
using released::kVersion3;
using released::kVersion4;

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

// A usage row of the ended job (schemas with the ledger; before version 5
// the ledger did not record the job's location).
constexpr char kUsageRows[] = R"sql(
INSERT INTO usage(job_id, attempt, replica, pool, user, project, labels, study_id, node,
                  start_time, end_time, end_kind, cpus, memory_bytes, gpu_type, gpus,
                  machine_type, accelerator_type, accelerator_count)
  VALUES(1, 1, 'workerpool0-0', 0, 'alice', 'p', '{}', 0, 'box', 2000, 3000, 'succeeded', 4,
         15000000000, 'NVIDIA_TESLA_T4', 1, 'n1-standard-4', 'NVIDIA_TESLA_T4', 1);
)sql";

struct ReleasedSchema {
  const char* name;
  const char* schema;
  bool has_studies;
  bool has_legacy_ids;
  bool has_users;
  bool has_usage;
};

const ReleasedSchema kReleased[] = {
    {"Version1Spine", kVersion1Spine, false, false, false, false},
    {"Version1Studies", kVersion1Studies, true, false, false, false},
    {"Version1Legacy", kVersion1Legacy, true, true, false, false},
    {"Version2", kVersion2, true, true, true, false},
    {"Version3", kVersion3, true, true, true, true},
    {"Version4", kVersion4, true, true, true, true},
};

// The schema version this Store writes.
constexpr int64_t kLatest = 5;

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
    if (r.has_usage) sql += kUsageRows;
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
  EXPECT_EQ(FileVersion(), kLatest);

  // The ledger's old rows: intact, with no location (priced in cost.region).
  auto usage = store.JobUsage(1);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  if (GetParam().has_usage) {
    ASSERT_EQ(usage->size(), 1u);
    EXPECT_EQ((*usage)[0].replica, "workerpool0-0");
    EXPECT_EQ((*usage)[0].machine_type, "n1-standard-4");
    EXPECT_DOUBLE_EQ((*usage)[0].gpus, 1);
    EXPECT_EQ((*usage)[0].end_us, 3000);
    EXPECT_EQ((*usage)[0].location, "");
  } else {
    EXPECT_TRUE(usage->empty());
  }
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

  // New ledger rows keep their job's location.
  UsageRecord u;
  u.job_id = 3;
  u.attempt = 1;
  u.replica = "workerpool0-0";
  u.start_us = 5000;
  u.end_us = 6000;
  u.end = "succeeded";
  u.machine_type = "n1-standard-4";
  u.location = "europe-west4";
  ASSERT_TRUE(store.RecordUsage({u}).ok());
  auto usage = store.JobUsage(3);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].location, "europe-west4");
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
  EXPECT_EQ(FileVersion(), kLatest);
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
