// Pure parts of the Slurm executor: the batch script and squeue parsing. The
// executor against a real Slurm is tests/e2e/test_executor_contract.py.
#include "exec/slurm_executor.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "exec/replica_files.h"

namespace stoker::exec {
namespace {

JobLaunch TwoReplicas() {
  JobLaunch l;
  l.job_id = 12;
  l.attempt = 1;
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
    EXPECT_EQ(r.end_state, "cancelled");
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace stoker::exec
