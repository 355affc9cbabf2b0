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
  ReplicaCommand c = BuildReplicaCommand(Input(s, 0, 0)).value();
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
  ReplicaCommand c = BuildReplicaCommand(Input(s, 0, 0)).value();
  EXPECT_EQ(c.env["B"], "x-y");
  EXPECT_EQ(c.env["C"], "$(UNDEFINED)");
}

TEST(ReplicaEnvTest, BuildsPythonModuleCommandWithExpandedAndRewrittenArgs) {
  auto s = TwoPoolSpec();
  ReplicaCommand c = BuildReplicaCommand(Input(s, 0, 0)).value();
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
  ReplicaCommand c = BuildReplicaCommand(Input(s, 1, 1)).value();
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

// Chief, 2 workers, 1 parameter server, 2 evaluators: ranks follow pool order.
spec::CustomJobSpec FourPoolSpec() {
  spec::CustomJobSpec s = TwoPoolSpec();
  spec::WorkerPoolSpec server = s.worker_pool_specs[0];
  spec::WorkerPoolSpec evaluator = s.worker_pool_specs[0];
  evaluator.replica_count = 2;
  s.worker_pool_specs.push_back(server);
  s.worker_pool_specs.push_back(evaluator);
  return s;
}

ReplicaEnvInput FourPoolInput(const spec::CustomJobSpec& s, int pool, int index) {
  ReplicaEnvInput in = Input(s, pool, index);
  in.addresses = {{"127.0.0.1:5000"},
                  {"127.0.0.1:5001", "127.0.0.1:5002"},
                  {"127.0.0.1:5003"},
                  {"127.0.0.1:5004", "127.0.0.1:5005"}};
  return in;
}

TEST(ReplicaEnvTest, RanksAreChiefThenWorkersThenServersThenEvaluators) {
  auto s = FourPoolSpec();
  std::vector<std::pair<int, int>> places = {{0, 0}, {1, 0}, {1, 1}, {2, 0}, {3, 0}, {3, 1}};
  for (size_t rank = 0; rank < places.size(); ++rank) {
    auto [pool, index] = places[rank];
    ReplicaCommand c = BuildReplicaCommand(FourPoolInput(s, pool, index)).value();
    SCOPED_TRACE(ReplicaName(pool, index));
    EXPECT_EQ(c.env["RANK"], std::to_string(rank));
    EXPECT_EQ(c.env["WORLD_SIZE"], "6");
    EXPECT_EQ(c.env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(c.env["MASTER_PORT"], "5000");
    auto cs = nlohmann::json::parse(c.env["CLUSTER_SPEC"]);
    EXPECT_EQ(cs["task"]["type"], "workerpool" + std::to_string(pool));
    EXPECT_EQ(cs["task"]["index"], index);
    EXPECT_EQ(cs["environment"], "cloud");
    EXPECT_FALSE(cs["task"].contains("trial"));
  }
}

TEST(ReplicaEnvTest, EveryReplicaIsOneProcessWithLocalRankZero) {
  auto s = FourPoolSpec();
  for (auto [pool, index] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {3, 1}}) {
    ReplicaCommand c = BuildReplicaCommand(FourPoolInput(s, pool, index)).value();
    EXPECT_EQ(c.env["LOCAL_RANK"], "0");
    EXPECT_EQ(c.env["LOCAL_WORLD_SIZE"], "1");
  }
}

TEST(ReplicaEnvTest, ClusterSpecListsAllPoolsButTfConfigLeavesOutEvaluators) {
  auto s = FourPoolSpec();
  ReplicaCommand c = BuildReplicaCommand(FourPoolInput(s, 3, 1)).value();
  auto cs = nlohmann::json::parse(c.env["CLUSTER_SPEC"]);
  EXPECT_EQ(cs["cluster"]["workerpool2"], nlohmann::json({"127.0.0.1:5003"}));
  EXPECT_EQ(cs["cluster"]["workerpool3"], nlohmann::json({"127.0.0.1:5004", "127.0.0.1:5005"}));
  auto tf = nlohmann::json::parse(c.env["TF_CONFIG"]);
  EXPECT_EQ(tf["cluster"]["chief"], nlohmann::json({"127.0.0.1:5000"}));
  EXPECT_EQ(tf["cluster"]["worker"].size(), 2u);
  EXPECT_EQ(tf["cluster"]["ps"], nlohmann::json({"127.0.0.1:5003"}));
  EXPECT_FALSE(tf["cluster"].contains("evaluator"));
  EXPECT_EQ(tf["task"]["type"], "evaluator");
  EXPECT_EQ(tf["task"]["index"], 1);
  ReplicaCommand ps = BuildReplicaCommand(FourPoolInput(s, 2, 0)).value();
  EXPECT_EQ(nlohmann::json::parse(ps.env["TF_CONFIG"])["task"]["type"], "ps");
}

TEST(ReplicaEnvTest, EmptyMiddlePoolTakesNoRanksAndIsNotListed) {
  auto s = FourPoolSpec();
  s.worker_pool_specs[2] = spec::WorkerPoolSpec{};
  s.worker_pool_specs[2].empty = true;
  ReplicaEnvInput in = FourPoolInput(s, 3, 0);
  in.addresses[2].clear();
  ReplicaCommand c = BuildReplicaCommand(in).value();
  EXPECT_EQ(c.env["RANK"], "3");  // after the chief and two workers
  EXPECT_EQ(c.env["WORLD_SIZE"], "5");
  auto cs = nlohmann::json::parse(c.env["CLUSTER_SPEC"]);
  EXPECT_FALSE(cs["cluster"].contains("workerpool2"));
  EXPECT_FALSE(nlohmann::json::parse(c.env["TF_CONFIG"])["cluster"].contains("ps"));
}

TEST(ReplicaEnvTest, CudaVisibleDevicesHoldsOnlyTheReplicasOwnGpus) {
  auto s = TwoPoolSpec();
  ReplicaEnvInput in = Input(s, 1, 0);
  in.place.gpus = {2, 3};
  EXPECT_EQ(BuildReplicaCommand(in).value().env["CUDA_VISIBLE_DEVICES"], "2,3");
  in.place.gpus = {};
  // Set but empty: CUDA then sees no device, rather than every device.
  ReplicaCommand none = BuildReplicaCommand(in).value();
  ASSERT_TRUE(none.env.count("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(none.env["CUDA_VISIBLE_DEVICES"], "");
}

TEST(ReplicaEnvTest, TrialIdReachesClusterSpecTfConfigAndEnv) {
  auto s = TwoPoolSpec();
  ReplicaEnvInput in = Input(s, 1, 0);
  in.trial_id = "7";
  ReplicaCommand c = BuildReplicaCommand(in).value();
  EXPECT_EQ(nlohmann::json::parse(c.env["CLUSTER_SPEC"])["task"]["trial"], "7");
  EXPECT_EQ(nlohmann::json::parse(c.env["TF_CONFIG"])["task"]["trial"], "7");
  EXPECT_EQ(c.env["CLOUD_ML_TRIAL_ID"], "7");
}

TEST(ReplicaEnvTest, ContainerCommandAndArgsAreJoined) {
  spec::CustomJobSpec s;
  spec::WorkerPoolSpec chief;
  chief.container_spec =
      spec::ContainerSpec{"img", {"python3", "-c", "print(1)"}, {"--x=$(CLOUD_ML_JOB_ID)"}, {}};
  s.worker_pool_specs = {chief};
  auto in = Input(s, 0, 0);
  in.addresses = {{"127.0.0.1:5000"}};
  ReplicaCommand c = BuildReplicaCommand(in).value();
  std::vector<std::string> want = {"python3", "-c", "print(1)", "--x=42"};
  EXPECT_EQ(c.argv, want);
}

TEST(ReplicaEnvTest, ExpansionIsBoundedWhileItIsBuilt) {
  // Ten variables, each ten references to the one before: 10^10 bytes if
  // built. The daemon must stop at the limit and name the variable.
  spec::CustomJobSpec s;
  spec::WorkerPoolSpec chief;
  std::vector<spec::EnvVar> env = {{"V0", "0123456789"}};
  for (int i = 1; i < 10; ++i) {
    std::string refs;
    for (int k = 0; k < 10; ++k) refs += "$(V" + std::to_string(i - 1) + ")";
    env.push_back({"V" + std::to_string(i), refs});
  }
  chief.container_spec = spec::ContainerSpec{"img", {"true"}, {}, env};
  s.worker_pool_specs = {chief};
  auto in = Input(s, 0, 0);
  in.addresses = {{"127.0.0.1:5000"}};
  Result<ReplicaCommand> c = BuildReplicaCommand(in);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  // V5 is 10^6 bytes: the first past 131071.
  EXPECT_NE(c.status().message().find("containerSpec.env[5] (V5)"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("after $(VAR) expansion"), std::string::npos);

  EXPECT_EQ(ExpandVars("$(A)$(A)", {{"A", "xyz"}}, 5), std::nullopt);
  EXPECT_EQ(ExpandVars("$(A)$(A)", {{"A", "xyz"}}, 6), "xyzxyz");
}

}  // namespace
}  // namespace stoker::exec
