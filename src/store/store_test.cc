#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <thread>

namespace stoker::store {
namespace {

using spec::JobState;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker_store_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  NewJob Job(const std::string& name) {
    return NewJob{"p", "l", name, nlohmann::json{{"displayName", name}}, {}};
  }
  std::filesystem::path dir_;
};

TEST_F(StoreTest, CreatedJobIsQueuedWithAnEventAndSurvivesReopen) {
  int64_t id;
  {
    auto store = Store::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto job = (*store)->CreateJob(Job("a"));
    ASSERT_TRUE(job.ok());
    id = job->id;
    EXPECT_EQ(job->state, JobState::kQueued);
  }
  auto store = Store::Open(dir_);
  ASSERT_TRUE(store.ok());
  auto job = (*store)->GetJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->display_name, "a");
  EXPECT_EQ(job->spec["displayName"], "a");
  auto events = (*store)->Events(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].to, JobState::kQueued);
}

// How many rows of `jobs` have `id`, as another connection (another
// process) sees the database: only what is committed.
int CommittedRows(const std::filesystem::path& dir, int64_t id) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2((dir / "stoker.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT count(*) FROM jobs WHERE id = ?", -1, &s, nullptr);
  sqlite3_bind_int64(s, 1, id);
  int n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return n;
}

TEST_F(StoreTest, TheWatcherIsToldOfAJobBeforeItsCommitAndCreateJobReturnsAfterIt) {
  auto store = std::move(Store::Open(dir_)).value();
  int64_t told = 0;
  int committed_when_told = -1;
  Store::CreateWatcher watcher{[&](const JobRecord& r) {
                                 told = r.id;
                                 committed_when_told = CommittedRows(dir_, r.id);
                               },
                               [](int64_t) { ADD_FAILURE() << "the commit did not fail"; }};
  JobRecord job = store->CreateJob(Job("a"), &watcher).value();
  EXPECT_EQ(told, job.id);
  EXPECT_EQ(committed_when_told, 0);  // told while the commit was in flight
  EXPECT_EQ(CommittedRows(dir_, job.id), 1);
}

TEST_F(StoreTest, AFailedCommitIsToldAndLeavesNoJobAndAUsableStore) {
  auto store = std::move(Store::Open(dir_)).value();
  int64_t before = store->CreateJob(Job("before")).value().id;
  // The commit writes the WAL: a file size limit of one byte makes that
  // write fail (EFBIG, as a full disk would), after the row was inserted.
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  int64_t inserted = 0, not_committed = 0;
  Store::CreateWatcher watcher{[&](const JobRecord& r) {
                                 inserted = r.id;
                                 struct rlimit one = {1, saved.rlim_max};
                                 ::setrlimit(RLIMIT_FSIZE, &one);
                               },
                               [&](int64_t id) { not_committed = id; }};
  auto failed = store->CreateJob(Job("lost"), &watcher);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(inserted, before + 1);
  EXPECT_EQ(not_committed, inserted);
  EXPECT_EQ(store->GetJob(inserted).status().code(), Code::kNotFound);
  // The store goes on; the id comes again with the next job.
  JobRecord next = store->CreateJob(Job("next")).value();
  EXPECT_EQ(next.id, inserted);
  EXPECT_EQ(store->GetJob(next.id).value().display_name, "next");
  EXPECT_EQ(store->GetJob(before).value().display_name, "before");
}

TEST_F(StoreTest, TransitionRequiresTheExpectedFromState) {
  auto store = std::move(Store::Open(dir_)).value();
  auto job = store->CreateJob(Job("a")).value();
  ASSERT_TRUE(store
                  ->Transition(job.id, JobState::kQueued, JobState::kPending, "placed",
                               {.allocation = nlohmann::json{{"cpus", 2}}})
                  .ok());
  Status lost = store->Transition(job.id, JobState::kQueued, JobState::kPending, "again");
  EXPECT_EQ(lost.code(), Code::kFailedPrecondition);
  auto got = store->GetJob(job.id).value();
  EXPECT_EQ(got.state, JobState::kPending);
  EXPECT_EQ(got.allocation["cpus"], 2);
  EXPECT_EQ(store->Events(job.id)->size(), 2u);
}

// A local launch's PENDING is committed without an fsync (synced = false):
// it must still survive a crash of the process that wrote it, and a lost
// race must still be refused.
TEST_F(StoreTest, AnUnsyncedTransitionSurvivesACrashOfTheProcess) {
  int64_t id = std::move(Store::Open(dir_)).value()->CreateJob(Job("a")).value().id;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = Store::Open(dir_);
    if (!store.ok()) ::_exit(2);
    store::TransitionUpdate unsynced{.allocation = nlohmann::json{{"cpus", 2}}, .synced = false};
    if (!(*store)->Transition(id, JobState::kQueued, JobState::kPending, "placed", unsynced).ok())
      ::_exit(3);
    Status lost = (*store)->Transition(id, JobState::kQueued, JobState::kPending, "x", unsynced);
    if (lost.code() != Code::kFailedPrecondition) ::_exit(4);
    // The next commit is synced again, and works.
    if (!(*store)->CreateJob(Job("b")).ok()) ::_exit(5);
    ::_exit(0);  // no destructor, no close: as a crash leaves the files
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto store = std::move(Store::Open(dir_)).value();
  auto got = store->GetJob(id).value();
  EXPECT_EQ(got.state, JobState::kPending);
  EXPECT_EQ(got.allocation["cpus"], 2);
  EXPECT_EQ(store->Events(id)->size(), 2u);
}

TEST_F(StoreTest, APreemptionIsCountedAndTheRestartReasonKeptAcrossReopen) {
  int64_t id = 0;
  {
    auto store = std::move(Store::Open(dir_)).value();
    id = store->CreateJob(Job("a")).value().id;
    ASSERT_TRUE(store->Transition(id, JobState::kQueued, JobState::kRunning, "started").ok());
    ASSERT_TRUE(store
                    ->Transition(id, JobState::kRunning, JobState::kQueued, "PREEMPTED by job 9",
                                 {.attempt = 1, .preemptions = 1, .restart_reason = "preemption"})
                    .ok());
  }
  auto store = std::move(Store::Open(dir_)).value();
  auto got = store->GetJob(id).value();
  EXPECT_EQ(got.attempt, 1);
  EXPECT_EQ(got.preemptions, 1);
  EXPECT_EQ(got.restart_reason, "preemption");
  EXPECT_EQ(store->Events(id)->back().reason, "PREEMPTED by job 9");
}

TEST_F(StoreTest, RecordsWaitReasonsAndEventsOfADecisionTogether) {
  auto store = std::move(Store::Open(dir_)).value();
  auto a = store->CreateJob(Job("a")).value();
  auto b = store->CreateJob(Job("b")).value();
  ASSERT_TRUE(
      store
          ->RecordWaits({{a.id, "needs 1x NVIDIA_L4, 0 free", "waiting: needs 1x NVIDIA_L4"},
                         {b.id, "1 job ahead in the queue", ""},
                         {999, "no such job", "waiting: nothing"}})
          .ok());
  EXPECT_EQ(store->GetJob(a.id)->wait_reason, "needs 1x NVIDIA_L4, 0 free");
  EXPECT_EQ(store->GetJob(b.id)->wait_reason, "1 job ahead in the queue");
  auto ea = store->Events(a.id).value();
  ASSERT_EQ(ea.size(), 2u);  // submitted, then the wait
  EXPECT_EQ(ea[1].reason, "waiting: needs 1x NVIDIA_L4");
  EXPECT_EQ(ea[1].from, JobState::kQueued);
  EXPECT_EQ(ea[1].to, JobState::kQueued);
  EXPECT_EQ(store->Events(b.id)->size(), 1u);  // no event asked for
  EXPECT_TRUE(store->Events(999)->empty());
  EXPECT_TRUE(store->RecordWaits({}).ok());
}

TEST_F(StoreTest, ActiveJobsLeaveOutEndedOnes) {
  auto store = std::move(Store::Open(dir_)).value();
  auto a = store->CreateJob(Job("a")).value();
  auto b = store->CreateJob(Job("b")).value();
  ASSERT_TRUE(store->Transition(a.id, JobState::kQueued, JobState::kCancelled, "cancelled").ok());
  auto active = store->ActiveJobs().value();
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].id, b.id);
}

TEST_F(StoreTest, CancelOfAnEndedJobIsRefusedAndOfAMissingJobIsNotFound) {
  auto store = std::move(Store::Open(dir_)).value();
  auto a = store->CreateJob(Job("a")).value();
  ASSERT_TRUE(store->RequestCancel(a.id).ok());
  ASSERT_TRUE(store->RequestCancel(a.id).ok());  // idempotent
  EXPECT_TRUE(store->GetJob(a.id)->cancel_requested);
  ASSERT_TRUE(store->Transition(a.id, JobState::kQueued, JobState::kCancelled, "cancelled").ok());
  EXPECT_EQ(store->RequestCancel(a.id).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store->RequestCancel(999).code(), Code::kNotFound);
}

TEST_F(StoreTest, ListPagesByIdAndFiltersByState) {
  auto store = std::move(Store::Open(dir_)).value();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->CreateJob(Job("j" + std::to_string(i))).ok());
  auto page = store->ListJobs({.after_id = 0, .limit = 2}).value();
  ASSERT_EQ(page.size(), 2u);
  auto next = store->ListJobs({.after_id = page.back().id, .limit = 10}).value();
  EXPECT_EQ(next.size(), 3u);
  ASSERT_TRUE(store->Transition(1, JobState::kQueued, JobState::kFailed, "x").ok());
  auto failed = store->ListJobs({.state = JobState::kFailed}).value();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].id, 1);
}

TEST_F(StoreTest, RefusesADamagedDatabaseWithRecoveryAdvice) {
  std::filesystem::create_directories(dir_);
  {
    std::ofstream f(dir_ / "stoker.db", std::ios::binary);
    f << "SQLite format 3" << std::string(1, '\0') << std::string(5000, 'x');
  }
  auto store = Store::Open(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("recovery"), std::string::npos);
}

TEST_F(StoreTest, UserIsStoredAndAVersion1StoreIsMigrated) {
  std::filesystem::create_directories(dir_);
  // A store as version 1 made it: no user columns.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "stoker.db").c_str(), &db), SQLITE_OK);
    const char* v1 =
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT NULL, "
        "location TEXT NOT NULL, display_name TEXT NOT NULL, state INTEGER NOT NULL, spec TEXT NOT "
        "NULL, create_time INTEGER NOT NULL, start_time INTEGER NOT NULL DEFAULT 0, end_time "
        "INTEGER NOT NULL DEFAULT 0, update_time INTEGER NOT NULL, error_code INTEGER NOT NULL "
        "DEFAULT 0, error_message TEXT NOT NULL DEFAULT '', attempt INTEGER NOT NULL DEFAULT 0, "
        "allocation TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, wait_reason TEXT NOT NULL "
        "DEFAULT '', study_id INTEGER NOT NULL DEFAULT 0, trial_id TEXT NOT NULL DEFAULT '', "
        "legacy_job_id TEXT NOT NULL DEFAULT '', legacy_input TEXT);"
        "CREATE TABLE studies(id INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT NULL, "
        "location TEXT NOT NULL, display_name TEXT NOT NULL, state INTEGER NOT NULL, spec TEXT NOT "
        "NULL, create_time INTEGER NOT NULL, start_time INTEGER NOT NULL DEFAULT 0, end_time "
        "INTEGER NOT NULL DEFAULT 0, update_time INTEGER NOT NULL, error_code INTEGER NOT NULL "
        "DEFAULT 0, error_message TEXT NOT NULL DEFAULT '', cancel_requested INTEGER NOT NULL "
        "DEFAULT 0);"
        "INSERT INTO jobs(project, location, display_name, state, spec, create_time, update_time) "
        "VALUES('p', 'l', 'old', 1, '{}', 1, 1);"
        "PRAGMA user_version = 1;";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = Store::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto old = (*store)->GetJob(1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->display_name, "old");
  EXPECT_EQ(old->user, "");
  NewJob nj = Job("new");
  nj.user = "alice";
  auto created = (*store)->CreateJob(nj);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->user, "alice");
  EXPECT_EQ((*store)->GetJob(created->id)->user, "alice");
  auto study = (*store)->CreateStudy("p", "l", "s", nlohmann::json::object(), "bob");
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  EXPECT_EQ((*store)->GetStudy(study->id)->user, "bob");
}

TEST_F(StoreTest, BackupIsAnOpenableCopyOfEveryJobTakenWhileWritesGoOn) {
  auto store = std::move(Store::Open(dir_)).value();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->CreateJob(Job("before" + std::to_string(i))).ok());
  // Submissions keep landing while the copy is taken.
  std::atomic<bool> stop = false;
  std::thread writer([&] {
    for (int i = 0; !stop; ++i)
      ASSERT_TRUE(store->CreateJob(Job("during" + std::to_string(i))).ok());
  });
  auto bytes = store->Backup();
  stop = true;
  writer.join();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->rfind("SQLite format 3", 0), 0u);
  // Nothing of the copy is left beside the store.
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find("backup"), std::string::npos) << e.path();
  }

  std::filesystem::path restored = dir_ / "restored";
  std::filesystem::create_directories(restored);
  {
    std::ofstream out(restored / "stoker.db", std::ios::binary);
    out << *bytes;
  }
  std::filesystem::permissions(restored / "stoker.db", std::filesystem::perms::owner_read |
                                                           std::filesystem::perms::owner_write);
  auto copy = Store::Open(restored);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto jobs = (*copy)->ListJobs({.limit = 1000});
  ASSERT_TRUE(jobs.ok());
  ASSERT_GE(jobs->size(), 5u);
  // A prefix of the ids, each whole: a consistent moment, not a torn read.
  for (size_t i = 0; i < jobs->size(); ++i) {
    EXPECT_EQ((*jobs)[i].id, static_cast<int64_t>(i + 1));
    EXPECT_EQ((*copy)->Events((*jobs)[i].id)->size(), 1u);
  }
  EXPECT_EQ((*jobs)[0].display_name, "before0");
}

}  // namespace
}  // namespace stoker::store

namespace stoker::store {
namespace {

class StudyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoker_study_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = std::move(Store::Open(dir_)).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(StudyStoreTest, TrialAndItsJobAreCreatedTogetherAndOnlyOnce) {
  auto study = store_->CreateStudy("p", "l", "s", nlohmann::json{{"displayName", "s"}}).value();
  TrialRecord t;
  t.study_id = study.id;
  t.trial_id = 1;
  t.parameters = nlohmann::json::array({{{"parameterId", "lr"}, {"value", 0.1}}});
  NewJob job{"p", "l", "s-trial-1", nlohmann::json{{"displayName", "x"}}, {}, study.id, "1"};
  auto rec = store_->CreateTrial(t, job);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->trial_id, "1");
  EXPECT_EQ(store_->GetJob(rec->id)->study_id, study.id);
  auto again = store_->CreateTrial(t, job);
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  // The failed second insert left no orphan job behind.
  EXPECT_EQ(store_->ListJobs({}).value().size(), 1u);
  t.state = TrialState::kSucceeded;
  t.final_measurement = {{"stepCount", "3"}};
  ASSERT_TRUE(store_->UpdateTrial(t).ok());
  auto trials = store_->Trials(study.id).value();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kSucceeded);
  EXPECT_EQ(trials[0].job_id, rec->id);
  EXPECT_EQ(trials[0].parameters[0]["parameterId"], "lr");
}

TEST_F(StudyStoreTest, StudiesTransitionAndCancelLikeJobs) {
  auto study = store_->CreateStudy("p", "l", "s", nlohmann::json::object()).value();
  EXPECT_EQ(store_->ActiveStudies().value().size(), 1u);
  ASSERT_TRUE(
      store_->TransitionStudy(study.id, JobState::kQueued, JobState::kRunning, {.start_time_us = 5})
          .ok());
  EXPECT_EQ(store_->TransitionStudy(study.id, JobState::kQueued, JobState::kRunning).code(),
            Code::kFailedPrecondition);
  ASSERT_TRUE(store_->RequestStudyCancel(study.id).ok());
  EXPECT_TRUE(store_->GetStudy(study.id)->cancel_requested);
  ASSERT_TRUE(store_->TransitionStudy(study.id, JobState::kRunning, JobState::kCancelled).ok());
  EXPECT_EQ(store_->RequestStudyCancel(study.id).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(store_->ActiveStudies().value().empty());
  EXPECT_EQ(store_->GetStudy(99).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace stoker::store

namespace stoker::store {
namespace {

TEST(LegacyStoreTest, LegacyJobIdsAreUniquePerProjectAndFindable) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_legacy_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = std::move(Store::Open(dir)).value();
  NewJob j{"p",
           "l",
           "census_1",
           nlohmann::json::object(),
           {},
           0,
           "",
           "census_1",
           nlohmann::json{{"scaleTier", "BASIC"}}};
  auto a = store->CreateJob(j);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(store->CreateJob(j).status().code(), Code::kAlreadyExists);
  j.project = "other";
  EXPECT_TRUE(store->CreateJob(j).ok());
  auto found = store->GetJobByLegacyId("p", "census_1");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->id, a->id);
  EXPECT_EQ(found->legacy_input["scaleTier"], "BASIC");
  EXPECT_EQ(store->GetJobByLegacyId("p", "nope").status().code(), Code::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(LegacyStoreTest, TuningJobsShareTheJobIdsOfCustomJobs) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_legacy_hp_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = std::move(Store::Open(dir)).value();
  nlohmann::json input = {{"hyperparameters", {{"maxTrials", 2}}}};
  auto study = store->CreateStudy("p", "l", "hp_1", nlohmann::json::object(), "u", "hp_1", input);
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  auto found = store->GetStudyByLegacyId("p", "hp_1");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->id, study->id);
  EXPECT_EQ(found->legacy_input["hyperparameters"]["maxTrials"], 2);
  EXPECT_EQ(store->GetStudy(study->id)->legacy_job_id, "hp_1");
  EXPECT_EQ(store->GetStudyByLegacyId("other", "hp_1").status().code(), Code::kNotFound);
  // The same jobId again, as a study or as a custom job: taken.
  EXPECT_EQ(store->CreateStudy("p", "l", "x", nlohmann::json::object(), "u", "hp_1", input)
                .status()
                .code(),
            Code::kAlreadyExists);
  NewJob j{"p", "l", "hp_1", nlohmann::json::object(), {}, 0, "", "hp_1", nlohmann::json::object()};
  EXPECT_EQ(store->CreateJob(j).status().code(), Code::kAlreadyExists);
  ASSERT_TRUE(
      store
          ->CreateJob(NewJob{
              "p", "l", "c", nlohmann::json::object(), {}, 0, "", "c_1", nlohmann::json::object()})
          .ok());
  EXPECT_EQ(store->CreateStudy("p", "l", "x", nlohmann::json::object(), "u", "c_1", input)
                .status()
                .code(),
            Code::kAlreadyExists);
  // Studies without a jobId never collide.
  EXPECT_TRUE(store->CreateStudy("p", "l", "a", nlohmann::json::object()).ok());
  EXPECT_TRUE(store->CreateStudy("p", "l", "b", nlohmann::json::object()).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::store

namespace stoker::store {
namespace {

TEST(GroupCommitTest, ConcurrentCreatesAllLandWithDistinctIds) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_group_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = std::move(Store::Open(dir)).value();
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::vector<int64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        NewJob j{"p", "l", "j", nlohmann::json::object(), {}};
        // Every fifth job reuses a legacy id: only that call may fail.
        if (i % 5 == 0) j.legacy_job_id = "dup";
        auto r = store->CreateJob(j);
        if (r.ok()) ids[t].push_back(r->id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (auto& v : ids) all.insert(v.begin(), v.end());
  size_t created = 0;
  for (auto& v : ids) created += v.size();
  EXPECT_EQ(all.size(), created);  // distinct
  EXPECT_EQ(created, static_cast<size_t>(kThreads * kEach - (kThreads * kEach / 5) + 1));
  store.reset();
  auto reopened = std::move(Store::Open(dir)).value();
  EXPECT_EQ(reopened->ListJobs({.limit = 1000}).value().size(), created);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::store

namespace stoker::store {
namespace {

TEST(StateCountsTest, FollowCreatesTransitionsAndAStoreMadeBeforeThem) {
  auto dir =
      std::filesystem::temp_directory_path() / ("stoker_counts_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  FakeClock clock(1'000'000);
  {
    auto store = std::move(Store::Open(dir, clock)).value();
    EXPECT_TRUE(store->CountByState().value().jobs.empty());
    EXPECT_EQ(store->CountByState().value().oldest_queued_create_us, 0);
    std::vector<int64_t> ids;
    for (int i = 0; i < 4; ++i) {
      ids.push_back(store->CreateJob({"p", "l", "j", nlohmann::json::object(), {}}).value().id);
      clock.Advance(1'000'000);
    }
    ASSERT_TRUE(store->Transition(ids[0], JobState::kQueued, JobState::kPending, "placed").ok());
    ASSERT_TRUE(store->Transition(ids[0], JobState::kPending, JobState::kRunning, "ran").ok());
    ASSERT_TRUE(store->Transition(ids[1], JobState::kQueued, JobState::kCancelled, "x").ok());
    // A refused transition changes nothing.
    EXPECT_FALSE(store->Transition(ids[1], JobState::kQueued, JobState::kRunning, "x").ok());
    auto study = store->CreateStudy("p", "l", "s", nlohmann::json::object()).value();
    ASSERT_TRUE(store->TransitionStudy(study.id, JobState::kQueued, JobState::kRunning).ok());

    StateCounts c = store->CountByState().value();
    EXPECT_EQ(c.jobs,
              (std::map<JobState, int64_t>{
                  {JobState::kQueued, 2}, {JobState::kRunning, 1}, {JobState::kCancelled, 1}}));
    EXPECT_EQ(c.studies, (std::map<JobState, int64_t>{{JobState::kRunning, 1}}));
    EXPECT_EQ(c.oldest_queued_create_us, 3'000'000);  // ids[2], submitted third
  }
  // A store written before the counts existed: Open counts it once.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "stoker.db").c_str(), &db), SQLITE_OK);
    for (const char* sql :
         {"DROP TRIGGER jobs_count_insert", "DROP TRIGGER jobs_count_update",
          "DROP TRIGGER jobs_count_delete", "DROP TRIGGER studies_count_insert",
          "DROP TRIGGER studies_count_update", "DROP TRIGGER studies_count_delete",
          "DROP TABLE state_counts", "UPDATE jobs SET state = 4 WHERE state = 3"}) {
      ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    }
    sqlite3_close(db);
  }
  auto store = std::move(Store::Open(dir, clock)).value();
  StateCounts c = store->CountByState().value();
  EXPECT_EQ(c.jobs,
            (std::map<JobState, int64_t>{
                {JobState::kQueued, 2}, {JobState::kSucceeded, 1}, {JobState::kCancelled, 1}}));
  EXPECT_EQ(c.studies, (std::map<JobState, int64_t>{{JobState::kRunning, 1}}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker::store
