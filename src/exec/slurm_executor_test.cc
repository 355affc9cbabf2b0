// Pure parts of the Slurm executor: the batch script and squeue parsing; its
// logic against a fake Slurm is slurm_executor_fake_test.cc, the executor
// against a real Slurm tests/e2e/test_executor_contract.py.
#include "exec/slurm_executor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "exec/replica_files.h"

namespace stoker::exec {
namespace {

JobLaunch TwoReplicas() {
  JobLaunch l;
  l.job_id = 12;
  l.attempt = 1;
  l.user = "ann";
  ReplicaLaunch chief;
  chief.name = "workerpool0-0";
  chief.cpus = 4;
  chief.memory_bytes = 15ull << 30;
  chief.timeout_seconds = 3600;
  chief.grace_seconds = 10;
  ReplicaLaunch worker = chief;
  worker.name = "workerpool1-0";
  worker.cpus = 2;
  worker.memory_bytes = 8ull << 30;
  l.replicas = {chief, worker};
  return l;
}

SlurmOptions Options() {
  SlurmOptions o;
  o.runner = "/opt/stoker/bin/stoker-run";
  o.partition = "batch";
  o.instance = "abcd1234";
  return o;
}

TEST(SlurmBatchScriptTest, OneTaskPerReplicaWithTheLargestShapeNameCommentAndTime) {
  auto s = SlurmBatchScript(TwoReplicas(), Options(), "/shared/jobs/12/attempt-1");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NE(s->find("#SBATCH --job-name=stoker-12-1\n"), std::string::npos) << *s;
  EXPECT_NE(s->find("#SBATCH --comment=stoker:12:1:abcd1234\n"), std::string::npos);
  EXPECT_NE(s->find("#SBATCH --ntasks=2\n"), std::string::npos);
  EXPECT_NE(s->find("#SBATCH --cpus-per-task=4\n"), std::string::npos);
  EXPECT_NE(s->find("#SBATCH --mem-per-cpu=3840M\n"), std::string::npos);  // 15 GiB / 4
  EXPECT_NE(s->find("#SBATCH --time=63\n"), std::string::npos);            // 3600 + 10 + 120 s
  EXPECT_NE(s->find("#SBATCH --partition=batch\n"), std::string::npos);
  EXPECT_EQ(s->find("--gres"), std::string::npos);
  EXPECT_EQ(s->find("--account"), std::string::npos);
  EXPECT_NE(s->find("#SBATCH --output=/shared/jobs/12/attempt-1/slurm-%j.out\n"),
            std::string::npos);
  EXPECT_NE(s->find("exec srun --ntasks=2 --cpus-per-task=4 --distribution=block "
                    "--kill-on-bad-exit=0 '/opt/stoker/bin/stoker-run' --slurm --job-dir "
                    "'/shared/jobs/12/attempt-1'\n"),
            std::string::npos);
}

TEST(SlurmBatchScriptTest, GpuReplicasGetANodeEachAndGres) {
  JobLaunch l = TwoReplicas();
  l.replicas[1].gpus = 2;
  auto s = SlurmBatchScript(l, Options(), "/j");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:2\n"),
            std::string::npos)
      << *s;
}

TEST(SlurmBatchScriptTest, LabelsOverrideTheConfigAndAreChecked) {
  JobLaunch l = TwoReplicas();
  l.labels = {{"slurm-partition", "gpu"}, {"slurm-qos", "high"}, {"slurm-account", "ml"}};
  auto s = SlurmBatchScript(l, Options(), "/j");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("--partition=gpu\n"), std::string::npos);
  EXPECT_NE(s->find("--qos=high\n"), std::string::npos);
  EXPECT_NE(s->find("--account=ml\n"), std::string::npos);
  l.labels = {{"slurm-partition", "gpu\n#SBATCH --uid=0"}};
  auto bad = SlurmBatchScript(l, Options(), "/j");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("labels.slurm-partition"), std::string::npos)
      << bad.status().message();
}

TEST(SlurmBatchScriptTest, SlurmNeverRequeuesAnAttempt) {
  auto s = SlurmBatchScript(TwoReplicas(), Options(), "/j");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("#SBATCH --no-requeue\n"), std::string::npos) << *s;
  EXPECT_EQ(s->find("--requeue\n"), std::string::npos);
}

TEST(SlurmBatchScriptTest, PreemptibleJobsGoToThePreemptiblePartitionAndQosAndNeverRequeue) {
  SlurmOptions o = Options();
  o.qos = "normal";
  o.preemptible_partition = "low";
  o.preemptible_qos = "scavenger";
  JobLaunch l = TwoReplicas();
  auto plain = SlurmBatchScript(l, o, "/j");
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->find("#SBATCH --partition=batch\n"), std::string::npos) << *plain;
  EXPECT_NE(plain->find("#SBATCH --qos=normal\n"), std::string::npos) << *plain;

  l.preemptible = true;
  auto s = SlurmBatchScript(l, o, "/j");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("#SBATCH --partition=low\n"), std::string::npos) << *s;
  EXPECT_NE(s->find("#SBATCH --qos=scavenger\n"), std::string::npos) << *s;
  // Slurm kills a preempted job rather than requeue it (even under
  // PreemptMode=REQUEUE); Stoker submits the next attempt itself.
  EXPECT_NE(s->find("#SBATCH --no-requeue\n"), std::string::npos) << *s;
  EXPECT_EQ(s->find("--requeue\n"), std::string::npos) << *s;

  // A label still says where; unset preemptible keys fall back to the defaults.
  l.labels = {{"slurm-partition", "gpu"}};
  o.preemptible_qos = "";
  s = SlurmBatchScript(l, o, "/j");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->find("#SBATCH --partition=gpu\n"), std::string::npos) << *s;
  EXPECT_NE(s->find("#SBATCH --qos=normal\n"), std::string::npos) << *s;

  // A bad configured name is named by its key.
  l.labels.clear();
  o.preemptible_partition = "low;rm";
  auto bad = SlurmBatchScript(l, o, "/j");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("slurm.preemptible_partition"), std::string::npos)
      << bad.status().message();
  l.preemptible = false;  // not used for jobs that are not preemptible
  EXPECT_TRUE(SlurmBatchScript(l, o, "/j").ok());
}

TEST(SlurmBatchScriptTest, PriorityBecomesNiceBelowTheBase) {
  JobLaunch l = TwoReplicas();
  SlurmOptions o = Options();
  o.nice_base = 1000;  // an unprivileged stokerd: nice never negative
  l.priority = 0;
  EXPECT_NE(SlurmBatchScript(l, o, "/j")->find("#SBATCH --nice=1000\n"), std::string::npos);
  l.priority = 250;
  EXPECT_NE(SlurmBatchScript(l, o, "/j")->find("#SBATCH --nice=750\n"), std::string::npos);
  l.priority = 1000;  // the highest priority asks nothing of Slurm
  EXPECT_EQ(SlurmBatchScript(l, o, "/j")->find("--nice"), std::string::npos);
  l.priority = -1000;
  EXPECT_NE(SlurmBatchScript(l, o, "/j")->find("#SBATCH --nice=2000\n"), std::string::npos);

  o.nice_base = 0;  // stokerd as root: higher priority, lower (negative) nice
  l.priority = 10;
  EXPECT_NE(SlurmBatchScript(l, o, "/j")->find("#SBATCH --nice=-10\n"), std::string::npos);
  l.priority = 0;
  EXPECT_EQ(SlurmBatchScript(l, o, "/j")->find("--nice"), std::string::npos);
  // Higher Stoker priority, never a higher nice (Slurm: lower nice first).
  for (int p = -1000; p < 1000; p += 125) {
    EXPECT_GT(SlurmNice(p, o), SlurmNice(p + 125, o));
  }
}

TEST(SlurmBatchScriptTest, NoTimeoutMeansNoTimeLimit) {
  JobLaunch l = TwoReplicas();
  for (ReplicaLaunch& r : l.replicas) r.timeout_seconds = 0;
  auto s = SlurmBatchScript(l, Options(), "/j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->find("--time"), std::string::npos);
}

TEST(ParseSqueueTest, ReadsStatesReasonsAndNodesAndSkipsOddLines) {
  auto jobs = ParseSqueue(
      "17|PENDING|Resources|\n18|RUNNING|None|vm\n19_2|RUNNING|None|vm\ngarbage\n"
      "20|FAILED|NonZeroExitCode|vm\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[17].state, "PENDING");
  EXPECT_EQ(jobs[17].reason, "Resources");
  EXPECT_EQ(jobs[18].nodes, "vm");
  EXPECT_EQ(jobs[20].reason, "NonZeroExitCode");
  EXPECT_TRUE(SlurmStateIsFinal(jobs[20].state));
  EXPECT_FALSE(SlurmStateIsFinal(jobs[18].state));
  EXPECT_TRUE(SlurmStateIsFinal("CANCELLED+"));
  EXPECT_FALSE(SlurmPreempted(jobs[20]));
}

TEST(ParseSqueueTest, ReadsPreemptTimeAndPartitionAndTellsPreemptedJobs) {
  // kSqueueFormat: id|state|reason|nodes|preempt time|partition. Slurm 22.05
  // ends a job whose steps exit within the GraceTime COMPLETED, with a
  // PreemptTime; one killed at the end of the GraceTime PREEMPTED.
  auto jobs = ParseSqueue(
      "30|RUNNING|None|vm|N/A|debug\n31|COMPLETED|None|vm|2026-11-26T10:14:45|low\n"
      "32|PREEMPTED|None|vm|2026-11-26T10:17:06|low\n33|RUNNING|None|vm|2026-11-26T10:20:00|low\n"
      "34|PENDING|Priority||None|low\n");
  ASSERT_EQ(jobs.size(), 5u);
  EXPECT_EQ(jobs[30].preempt_time, "");
  EXPECT_EQ(jobs[30].partition, "debug");
  EXPECT_FALSE(SlurmPreempted(jobs[30]));
  EXPECT_EQ(jobs[31].preempt_time, "2026-11-26T10:14:45");
  EXPECT_TRUE(SlurmPreempted(jobs[31]));
  EXPECT_TRUE(SlurmPreempted(jobs[32]));
  EXPECT_TRUE(SlurmPreempted(jobs[33]));  // within its GraceTime
  EXPECT_FALSE(SlurmPreempted(jobs[34]));
  EXPECT_TRUE(SlurmPreempted({"PREEMPTED", "None", "vm", "", ""}));
  EXPECT_STREQ(kSqueueFormat, "JobID:0|,State:0|,Reason:0|,NodeList:0|,PreemptTime:0|,Partition:0");
}

TEST(SlurmExecutorTest, ReplicaDirsLiveUnderTheSharedDirLikeLocalOnes) {
  SlurmOptions o = Options();
  o.shared_dir = "/shared";
  SlurmExecutor e(o);
  EXPECT_EQ(e.ReplicaDir(3, 0, "workerpool0-0"), "/shared/jobs/3/workerpool0-0");
  EXPECT_EQ(e.ReplicaDir(3, 2, "workerpool1-1"), "/shared/jobs/3/attempt-2/workerpool1-1");
  EXPECT_TRUE(e.PlacesReplicas());
}

TEST(SlurmExecutorTest, CancelBeforeSubmissionClaimsEveryReplicaSoNoneStarts) {
  std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("stoker-slurm-test-" + std::to_string(::getpid()));
  SlurmOptions o = Options();
  o.shared_dir = tmp;
  SlurmExecutor e(o);
  ASSERT_TRUE(e.Cancel(5, 0, {"workerpool0-0", "workerpool1-0"}).ok());
  auto st = e.Poll(5, 0, {"workerpool0-0", "workerpool1-0"});
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  for (const ReplicaStatus& r : *st) {
    EXPECT_EQ(r.phase, ReplicaPhase::kEnded);
    EXPECT_EQ(r.end_state, EndState::kCancelled);
  }
  std::filesystem::remove_all(tmp);
}

// Launch with no Slurm client in PATH: everything up to sbatch happens, then
// the launch fails saying so.
class SlurmLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::filesystem::temp_directory_path() /
           ("stoker-slurm-launch-" + std::to_string(::getpid()));
    std::filesystem::remove_all(tmp_);
    if (const char* p = std::getenv("PATH")) path_ = p;
    ::setenv("PATH", (tmp_ / "no-bin").c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", path_.c_str(), 1);
    std::filesystem::remove_all(tmp_);
  }
  SlurmOptions Opts() {
    SlurmOptions o = Options();
    o.shared_dir = tmp_;
    return o;
  }
  std::filesystem::path tmp_;
  std::string path_;
};

TEST_F(SlurmLaunchTest, TheTrainerAccountGoesIntoLaunchJsonAsLocally) {
  RunAs me{"me", static_cast<uint32_t>(::geteuid()), static_cast<uint32_t>(::getegid())};
  SlurmOptions o = Opts();
  o.trainer_accounts = [&](const std::string& user) -> Result<std::optional<RunAs>> {
    EXPECT_EQ(user, "ann");
    return std::optional<RunAs>(me);
  };
  SlurmExecutor e(o);
  Status s = e.Launch(TwoReplicas());
  ASSERT_FALSE(s.ok());  // no sbatch here
  EXPECT_NE(s.message().find("sbatch"), std::string::npos) << s.message();
  for (const char* r : {"workerpool0-0", "workerpool1-0"}) {
    auto spec = ReadJsonObject(e.ReplicaDir(12, 1, r), "launch.json");
    ASSERT_TRUE(spec.has_value()) << r;
    ASSERT_TRUE(spec->contains("run_as")) << spec->dump();
    EXPECT_EQ((*spec)["run_as"]["uid"], ::geteuid());
  }
  // The replica directories stay the daemon's, open to the account's group
  // only (the trainer writes in work/, which stoker-run makes); the job dir,
  // which holds the batch script, is the daemon's too.
  struct stat st;
  ASSERT_EQ(::stat(e.ReplicaDir(12, 1, "workerpool0-0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  for (const char* d : {"jobs/12", "jobs/12/attempt-1"}) {
    ASSERT_EQ(::stat((tmp_ / d).c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0711u) << d;
    EXPECT_EQ(st.st_uid, ::geteuid()) << d;
  }
  ASSERT_EQ(::stat((tmp_ / "jobs/12/attempt-1/slurm.sbatch").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

TEST_F(SlurmLaunchTest, HandsOverTheOutputDirInTheDataDirWhenSharedDirIsElsewhere) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to nobody";
  SlurmOptions o = Opts();
  o.shared_dir = tmp_ / "shared";
  o.data_dir = tmp_ / "data";
  std::filesystem::path out = o.data_dir / "buckets/stoker-default/12";
  std::filesystem::create_directories(out);
  o.trainer_accounts = [](const std::string&) -> Result<std::optional<RunAs>> {
    return std::optional<RunAs>(RunAs{"nobody", 65534, 65534});
  };
  SlurmExecutor e(o);
  JobLaunch l = TwoReplicas();
  for (ReplicaLaunch& r : l.replicas) r.env["AIP_MODEL_DIR"] = (out / "model/").string();
  ASSERT_FALSE(e.Launch(l).ok());  // no sbatch here
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  ASSERT_EQ(::stat(e.ReplicaDir(12, 1, "workerpool1-0").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 65534u);
  ASSERT_EQ(::stat((o.shared_dir / "jobs/12").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(SlurmLaunchTest, TheIsolationPlanKeepsTheJobReadOnlyAndTheWorkDirWritable) {
  SlurmOptions o = Opts();
  o.isolation.mode = IsolationMode::kAuto;
  o.isolation.hide = {tmp_};
  o.isolation.keep = {tmp_ / "buckets"};
  SlurmExecutor e(o);
  ASSERT_FALSE(e.Launch(TwoReplicas()).ok());  // no sbatch here
  for (const char* r : {"workerpool0-0", "workerpool1-0"}) {
    auto spec = ReadJsonObject(e.ReplicaDir(12, 1, r), "launch.json");
    ASSERT_TRUE(spec.has_value()) << r;
    ASSERT_TRUE(spec->contains("isolation")) << spec->dump();
    const nlohmann::json& iso = (*spec)["isolation"];
    EXPECT_EQ(iso["mode"], "auto");
    EXPECT_EQ(iso["hide"], nlohmann::json::array({tmp_.string()}));
    std::filesystem::path replica = e.ReplicaDir(12, 1, r);
    EXPECT_EQ(iso["keep"],
              nlohmann::json::array({(tmp_ / "buckets").string(), (replica / "work").string(),
                                     (replica / "hypertune").string()}));
    EXPECT_EQ(iso["keep_read_only"], nlohmann::json::array({(tmp_ / "jobs" / "12").string()}));
  }
}

TEST_F(SlurmLaunchTest, ARefusedAccountFailsTheLaunchBeforeSlurmIsAsked) {
  SlurmOptions o = Opts();
  o.trainer_accounts = [](const std::string&) -> Result<std::optional<RunAs>> {
    return PermissionDenied("replicas would run as 'root', which has uid 0");
  };
  SlurmExecutor e(o);
  Status s = e.Launch(TwoReplicas());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  std::error_code ec;
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "jobs/12/attempt-1/slurm.json", ec));
}

}  // namespace
}  // namespace stoker::exec
