#include "replica/cluster_env.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace stoker::replica {
namespace {

using nlohmann::json;

// A chief, no workers (an empty `{}` pool), two parameter servers, an evaluator.
const ClusterAddresses kAddresses = {{"h0:1000"}, {}, {"h2:2000", "h2:2001"}, {"h3:3000"}};

TEST(ClusterEnvTest, RanksCountEveryPoolInOrderAndSkipEmptyPools) {
  auto env = ClusterEnv(kAddresses, {2, 1, "", "{}"});
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->at("RANK"), "2");  // chief 0, ps 1 and 2, evaluator 3
  EXPECT_EQ(env->at("WORLD_SIZE"), "4");
  EXPECT_EQ(env->at("MASTER_ADDR"), "h0");
  EXPECT_EQ(env->at("MASTER_PORT"), "1000");
  EXPECT_EQ(env->at("LOCAL_RANK"), "0");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "1");
  json cs = json::parse(env->at("CLUSTER_SPEC"));
  EXPECT_FALSE(cs["cluster"].contains("workerpool1"));
  EXPECT_EQ(cs["cluster"]["workerpool2"], json({"h2:2000", "h2:2001"}));
  EXPECT_EQ(cs["task"], json({{"type", "workerpool2"}, {"index", 1}}));
  EXPECT_EQ(cs["environment"], "cloud");
  EXPECT_EQ(cs["job"], "{}");
}

TEST(ClusterEnvTest, TfConfigNamesRolesAndLeavesEvaluatorsOutOfTheCluster) {
  auto env = ClusterEnv(kAddresses, {3, 0, "7", "{}"});
  ASSERT_TRUE(env.ok());
  json tf = json::parse(env->at("TF_CONFIG"));
  EXPECT_EQ(tf["cluster"], json({{"chief", {"h0:1000"}}, {"ps", {"h2:2000", "h2:2001"}}}));
  EXPECT_EQ(tf["task"], json({{"type", "evaluator"}, {"index", 0}, {"trial", "7"}}));
  EXPECT_EQ(json::parse(env->at("CLUSTER_SPEC"))["task"]["trial"], "7");
  EXPECT_EQ(env->at("RANK"), "3");
}

TEST(ClusterEnvTest, SlurmsNodeLocalValuesAreTheTasks) {
  ClusterTask t{0, 0, "", "{}"};
  t.local_rank = 1;
  t.local_world_size = 2;
  auto env = ClusterEnv(kAddresses, t);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->at("LOCAL_RANK"), "1");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "2");
}

TEST(ClusterEnvTest, RefusesAReplicaOutsideTheJobOrAChiefWithoutAPort) {
  EXPECT_FALSE(ClusterEnv(kAddresses, {1, 0, "", "{}"}).ok());  // pool 1 is empty
  EXPECT_FALSE(ClusterEnv(kAddresses, {4, 0, "", "{}"}).ok());
  EXPECT_FALSE(ClusterEnv(kAddresses, {2, -1, "", "{}"}).ok());
  auto no_port = ClusterEnv({{"h0"}}, {0, 0, "", "{}"});
  ASSERT_FALSE(no_port.ok());
  EXPECT_NE(no_port.status().message().find("host:port"), std::string::npos);
}

TEST(ReplicaNameTest, ParsesOnlyTheCanonicalForm) {
  int pool = -1, index = -1;
  EXPECT_TRUE(ParseReplicaName("workerpool3-12", &pool, &index));
  EXPECT_EQ(pool, 3);
  EXPECT_EQ(index, 12);
  EXPECT_EQ(ReplicaName(pool, index), "workerpool3-12");
  for (const char* bad : {"workerpool1", "workerpool1-0x", "workerpool01-0", "workerpool-1-0",
                          "workerpool1- 0", "pool1-0", ""}) {
    EXPECT_FALSE(ParseReplicaName(bad, &pool, &index)) << bad;
  }
}

}  // namespace
}  // namespace stoker::replica
