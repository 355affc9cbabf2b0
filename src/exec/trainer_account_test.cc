// PrepareReplicaDir and HandOverReplicaDir: who owns which directory of a
// job, and that no link a trainer plants makes root hand over anything else.
#include "exec/trainer_account.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "exec/replica_files.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

// Root hands directories to nobody; anyone else can only hand them to itself.
RunAs Trainer() {
  if (::geteuid() == 0) return {"nobody", 65534, 65534};
  return {"me", static_cast<uint32_t>(::geteuid()), static_cast<uint32_t>(::getegid())};
}

struct stat Stat(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

class TrainerAccountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("stoker-trainer-account-" + std::to_string(::getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_ / "data");
  }
  void TearDown() override { fs::remove_all(tmp_); }
  fs::path data() const { return tmp_ / "data"; }
  fs::path jobs() const { return tmp_ / "data/jobs"; }
  fs::path tmp_;
};

TEST_F(TrainerAccountTest, EveryDirectoryUpToTheReplicaDirStaysTheDaemons) {
  RunAs who = Trainer();
  fs::path dir = jobs() / "7/attempt-2/workerpool0-0";
  ASSERT_TRUE(HandOverReplicaDir(data(), jobs(), dir, who, {}).ok());
  // The supervisor's control files live here: the trainer's group may read,
  // not write (it writes only in work/ and hypertune/, made by stoker-run).
  EXPECT_EQ(Stat(dir).st_uid, ::geteuid());
  EXPECT_EQ(Stat(dir).st_gid, who.gid);
  EXPECT_EQ(Stat(dir).st_mode & 07777, 0750u);
  // Without an account of its own the trainer is the daemon: private.
  fs::path mine = jobs() / "8/workerpool0-0";
  ASSERT_TRUE(HandOverReplicaDir(data(), jobs(), mine, std::nullopt, {}).ok());
  EXPECT_EQ(Stat(mine).st_uid, ::geteuid());
  EXPECT_EQ(Stat(mine).st_mode & 07777, 0700u);
  for (const fs::path& p : {jobs(), jobs() / "7", jobs() / "7/attempt-2"}) {
    EXPECT_EQ(Stat(p).st_uid, ::geteuid()) << p;
    EXPECT_EQ(Stat(p).st_mode & 07777, 0711u) << p;
  }
}

TEST_F(TrainerAccountTest, TakesBackAJobDirThatAnEarlierDaemonGaveToTheTrainer) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to nobody";
  ASSERT_TRUE(MakeDirs(jobs() / "7").ok());
  ASSERT_EQ(::chown((jobs() / "7").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod((jobs() / "7").c_str(), 0700), 0);
  ASSERT_TRUE(HandOverReplicaDir(data(), jobs(), jobs() / "7/workerpool0-0", Trainer(), {}).ok());
  EXPECT_EQ(Stat(jobs() / "7").st_uid, 0u);
  EXPECT_EQ(Stat(jobs() / "7").st_mode & 07777, 0711u);
}

TEST_F(TrainerAccountTest, RefusesASymlinkedAttemptDirAndTouchesNothingBehindIt) {
  // A trainer that owned jobs/7 could leave attempt-1 -> /etc for the retry.
  fs::path victim = tmp_ / "victim";
  fs::create_directories(victim);
  ::chmod(victim.c_str(), 0755);
  ASSERT_TRUE(MakeDirs(jobs() / "7").ok());
  fs::create_directory_symlink(victim, jobs() / "7/attempt-1");
  Status s =
      HandOverReplicaDir(data(), jobs(), jobs() / "7/attempt-1/workerpool0-0", Trainer(), {});
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.message();
  EXPECT_NE(s.message().find((jobs() / "7/attempt-1").string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(victim / "workerpool0-0"));
  EXPECT_EQ(Stat(victim).st_uid, ::geteuid());
  EXPECT_EQ(Stat(victim).st_mode & 07777, 0755u);
  // The job dir itself stays the daemon's.
  EXPECT_EQ(Stat(jobs() / "7").st_uid, ::geteuid());

  // A link in place of the replica dir is refused the same way.
  fs::create_directories(jobs() / "8");
  fs::create_directory_symlink(victim, jobs() / "8/workerpool0-0");
  s = HandOverReplicaDir(data(), jobs(), jobs() / "8/workerpool0-0", Trainer(), {});
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.message();
  EXPECT_EQ(Stat(victim).st_uid, ::geteuid());
  EXPECT_EQ(Stat(victim).st_mode & 07777, 0755u);
}

TEST_F(TrainerAccountTest, HandsOverTheOutputDirInTheDataDirEvenWithJobsElsewhere) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to nobody";
  fs::path shared_jobs = tmp_ / "shared/jobs";  // slurm.shared_dir != data dir
  fs::path out = data() / "buckets/stoker-default/7";
  fs::path outside = tmp_ / "elsewhere/7";
  fs::create_directories(out);
  fs::create_directories(outside);
  ASSERT_TRUE(HandOverReplicaDir(data(), shared_jobs, shared_jobs / "7/workerpool0-0", Trainer(),
                                 {{"AIP_MODEL_DIR", (out / "model/").string()}})
                  .ok());
  EXPECT_EQ(Stat(out).st_uid, 65534u);
  // Only inside the data dir.
  ASSERT_TRUE(HandOverReplicaDir(data(), shared_jobs, shared_jobs / "8/workerpool0-0", Trainer(),
                                 {{"AIP_MODEL_DIR", (outside / "model/").string()}})
                  .ok());
  EXPECT_EQ(Stat(outside).st_uid, 0u);
}

TEST_F(TrainerAccountTest, PrepareWritesLaunchJsonWithTheAccountAndTheReadOnlyJobDir) {
  ReplicaDirPlan plan{data(), jobs(), Trainer(), {}};
  plan.isolation.mode = IsolationMode::kAuto;
  ReplicaLaunch r;
  r.name = "workerpool0-0";
  r.argv = {"true"};
  fs::path dir = jobs() / "7/workerpool0-0";
  auto prepared = PrepareReplicaDir(plan, 7, dir, r);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_TRUE(*prepared);
  auto spec = ReadJsonObject(dir, "launch.json");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ((*spec)["run_as"]["uid"], plan.run_as->uid);
  EXPECT_EQ((*spec)["isolation"]["keep_read_only"],
            nlohmann::json::array({(jobs() / "7").string()}));
  EXPECT_EQ((*spec)["isolation"]["keep"],
            nlohmann::json::array({(dir / "work").string(), (dir / "hypertune").string()}));
  EXPECT_EQ(Stat(dir).st_uid, ::geteuid());
  EXPECT_EQ(Stat(dir).st_gid, plan.run_as->gid);
  EXPECT_EQ(Stat(jobs() / "7").st_uid, ::geteuid());
  // Claimed (launched before a crash): left alone.
  ASSERT_TRUE(ClaimAsCancelled(dir).ok());
  fs::remove(dir / "launch.json");
  prepared = PrepareReplicaDir(plan, 7, dir, r);
  ASSERT_TRUE(prepared.ok());
  EXPECT_FALSE(*prepared);
  EXPECT_FALSE(fs::exists(dir / "launch.json"));
}

}  // namespace
}  // namespace stoker::exec
