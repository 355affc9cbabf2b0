#include "runner/slurm_task.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace stoker::runner {
namespace {

using nlohmann::json;

const std::vector<std::string> kReplicas = {"workerpool0-0", "workerpool1-0", "workerpool1-1"};

// The env the daemon built for `rank` with placeholder addresses.
std::map<std::string, std::string> DaemonEnv(int pool, int index, int rank) {
  json cluster = {{"workerpool0", {"127.0.0.1:0"}},
                  {"workerpool1", {"127.0.0.1:0", "127.0.0.1:0"}}};
  json tf = {{"chief", {"127.0.0.1:0"}}, {"worker", {"127.0.0.1:0", "127.0.0.1:0"}}};
  json task = {{"type", "workerpool" + std::to_string(pool)}, {"index", index}};
  return {{"CLUSTER_SPEC", json{{"cluster", cluster}, {"task", task}}.dump()},
          {"TF_CONFIG", json{{"cluster", tf}, {"task", task}}.dump()},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "0"},
          {"RANK", std::to_string(rank)},
          {"WORLD_SIZE", "3"},
          {"LOCAL_RANK", "0"},
          {"CUDA_VISIBLE_DEVICES", ""},
          {"OTHER", "kept"}};
}

SlurmTask Task(int procid, int localid) {
  SlurmTask t;
  t.job_id = 20007;
  t.procid = procid;
  t.localid = localid;
  t.ntasks = 3;
  t.hosts = {"n1", "n2"};
  t.tasks_per_node = {2, 1};
  return t;
}

TEST(SlurmTaskEnvTest, RewritesAddressesForBlockDistributionAcrossNodes) {
  auto env = SlurmTaskEnv(DaemonEnv(1, 1, 2), kReplicas, Task(2, 0));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  json cs = json::parse(env->at("CLUSTER_SPEC"));
  // Base port 20000 + 20007 % 20000 = 20007; task t listens on base + t.
  EXPECT_EQ(cs["cluster"]["workerpool0"], json({"n1:20007"}));
  EXPECT_EQ(cs["cluster"]["workerpool1"], json({"n1:20008", "n2:20009"}));
  EXPECT_EQ(cs["task"]["index"], 1);  // untouched
  json tf = json::parse(env->at("TF_CONFIG"));
  EXPECT_EQ(tf["cluster"]["chief"], json({"n1:20007"}));
  EXPECT_EQ(tf["cluster"]["worker"], json({"n1:20008", "n2:20009"}));
  EXPECT_EQ(env->at("MASTER_ADDR"), "n1");
  EXPECT_EQ(env->at("MASTER_PORT"), "20007");
  EXPECT_EQ(env->at("LOCAL_RANK"), "0");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "1");  // n2 runs one task
  EXPECT_EQ(env->at("RANK"), "2");
  EXPECT_EQ(env->at("OTHER"), "kept");
  EXPECT_EQ(env->at("SLURM_JOB_ID"), "20007");
  EXPECT_EQ(env->at("SLURM_PROCID"), "2");
  EXPECT_EQ(env->at("SLURM_NODEID"), "1");
  EXPECT_EQ(env->at("SLURM_NTASKS"), "3");
}

TEST(SlurmTaskEnvTest, LocalRankAndWorldSizeComeFromTheNode) {
  SlurmTask t = Task(1, 1);
  t.gpus = "1";
  auto env = SlurmTaskEnv(DaemonEnv(1, 0, 1), kReplicas, t);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->at("LOCAL_RANK"), "1");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env->at("CUDA_VISIBLE_DEVICES"), "1");
}

TEST(SlurmTaskEnvTest, RefusesAStepWithAnotherTaskCountOrRank) {
  SlurmTask t = Task(0, 0);
  t.ntasks = 2;
  auto env = SlurmTaskEnv(DaemonEnv(0, 0, 0), kReplicas, t);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("SLURM_STEP_NUM_TASKS"), std::string::npos);
  auto wrong_rank = SlurmTaskEnv(DaemonEnv(0, 0, 0), kReplicas, Task(1, 1));
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_NE(wrong_rank.status().message().find("RANK"), std::string::npos);
}

TEST(SlurmTaskEnvTest, TaskIsTheReplicaAtItsPosition) {
  auto r = SlurmReplica(Task(1, 1), kReplicas);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "workerpool1-0");
}

TEST(ParseTasksPerNodeTest, ExpandsRepeats) {
  auto n = ParseTasksPerNode("2(x3),1");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*ParseTasksPerNode("4"), std::vector<int>{4});
  EXPECT_FALSE(ParseTasksPerNode("2(x").ok());
  EXPECT_FALSE(ParseTasksPerNode("").ok());
}

TEST(SlurmBasePortTest, StaysInItsRange) {
  EXPECT_EQ(SlurmBasePort(1), 20001);
  EXPECT_EQ(SlurmBasePort(40000), 20000);
  EXPECT_EQ(SlurmBasePort(59999), 39999);
}

}  // namespace
}  // namespace stoker::runner
