#include "exec/replica_env.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace stoker::exec {
namespace {

spec::CustomJobSpec TwoPoolSpec() {
  spec::CustomJobSpec s;
  spec::WorkerPoolSpec chief;
  chief.machine_spec.machine_type = "n1-standard-4";
  chief.python_package_spec = spec::PythonPackageSpec{
      "img",
      {"gs://b/p.tar.gz"},
      "trainer.task",
      {"--data=gs://b/data", "--model-dir=$(AIP_MODEL_DIR)", "--keep=$$(AIP_MODEL_DIR)"},
      {{"A", "x"}, {"B", "$(A)-y"}, {"C", "$(UNDEFINED)"}}};
  spec::WorkerPoolSpec worker = chief;
  worker.replica_count = 2;
  s.worker_pool_specs = {chief, worker};
  return s;
}

ReplicaEnvInput Input(const spec::CustomJobSpec& s, int pool, int index) {
  ReplicaEnvInput in;
  in.job_id = "42";
  in.project = "p";
  in.location = "us-central1";
  in.spec = &s;
  in.place = {pool, index, {1}};
  in.addresses = {{"127.0.0.1:5000"}, {"127.0.0.1:5001", "127.0.0.1:5002"}};
  in.output_dir = "/data/buckets/b/out";
  in.metric_file = "/r/hypertune/output.metrics";
  in.base_env = {{"PATH", "/usr/bin"}};
  in.python = "/usr/bin/python3";
  in.rewrite_uris = [](const std::string& s) {
    std::string out = s;
    size_t at = out.find("gs://b/");
    if (at != std::string::npos) out.replace(at, 7, "/data/buckets/b/");
    return out;
  };
  return in;
}

TEST(ReplicaEnvTest, SetsVertexOutputDirsJobIdsAndGpus) {
  auto s = TwoPoolSpec();
  ReplicaCommand c = BuildReplicaCommand(Input(s, 0, 0));
  EXPECT_EQ(c.env["AIP_MODEL_DIR"], "/data/buckets/b/out/model/");
  EXPECT_EQ(c.env["AIP_CHECKPOINT_DIR"], "/data/buckets/b/out/checkpoints/");
  EXPECT_EQ(c.env["AIP_TENSORBOARD_LOG_DIR"], "/data/buckets/b/out/logs/");
  EXPECT_EQ(c.env["CLOUD_ML_JOB_ID"], "42");
  EXPECT_EQ(c.env["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(c.env["CLOUD_ML_HP_METRIC_FILE"], "/r/hypertune/output.metrics");
  EXPECT_EQ(c.env["PATH"], "/usr/bin");
}

TEST(ReplicaEnvTest, ExpandsSpecEnvInOrderAndLeavesUnknownReferences) {
  auto s = TwoPoolSpec();
  ReplicaCommand c = BuildReplicaCommand(Input(s, 0, 0));
  EXPECT_EQ(c.env["B"], "x-y");
  EXPECT_EQ(c.env["C"], "$(UNDEFINED)");
}

TEST(ReplicaEnvTest, BuildsPythonModuleCommandWithExpandedAndRewrittenArgs) {
  auto s = TwoPoolSpec();
  ReplicaCommand c = BuildReplicaCommand(Input(s, 0, 0));
  std::vector<std::string> want = {"/usr/bin/python3",
                                   "-m",
                                   "trainer.task",
                                   "--data=/data/buckets/b/data",
                                   "--model-dir=/data/buckets/b/out/model/",
                                   "--keep=$(AIP_MODEL_DIR)"};
  EXPECT_EQ(c.argv, want);
}

TEST(ReplicaEnvTest, ClusterSpecAndRanksFollowPoolOrder) {
  auto s = TwoPoolSpec();
  ReplicaCommand c = BuildReplicaCommand(Input(s, 1, 1));
  auto cs = nlohmann::json::parse(c.env["CLUSTER_SPEC"]);
  EXPECT_EQ(cs["cluster"]["workerpool0"][0], "127.0.0.1:5000");
  EXPECT_EQ(cs["cluster"]["workerpool1"].size(), 2u);
  EXPECT_EQ(cs["task"]["type"], "workerpool1");
  EXPECT_EQ(cs["task"]["index"], 1);
  EXPECT_TRUE(cs["job"].is_string());
  auto tf = nlohmann::json::parse(c.env["TF_CONFIG"]);
  EXPECT_EQ(tf["cluster"]["chief"][0], "127.0.0.1:5000");
  EXPECT_EQ(tf["task"]["type"], "worker");
  EXPECT_EQ(c.env["RANK"], "2");
  EXPECT_EQ(c.env["WORLD_SIZE"], "3");
  EXPECT_EQ(c.env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(c.env["MASTER_PORT"], "5000");
}

TEST(ReplicaEnvTest, ContainerCommandAndArgsAreJoined) {
  spec::CustomJobSpec s;
  spec::WorkerPoolSpec chief;
  chief.container_spec =
      spec::ContainerSpec{"img", {"python3", "-c", "print(1)"}, {"--x=$(CLOUD_ML_JOB_ID)"}, {}};
  s.worker_pool_specs = {chief};
  auto in = Input(s, 0, 0);
  in.addresses = {{"127.0.0.1:5000"}};
  ReplicaCommand c = BuildReplicaCommand(in);
  std::vector<std::string> want = {"python3", "-c", "print(1)", "--x=42"};
  EXPECT_EQ(c.argv, want);
}

}  // namespace
}  // namespace stoker::exec
