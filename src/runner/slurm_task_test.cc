#include "runner/slurm_task.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/files.h"

namespace stoker::runner {
namespace {

using nlohmann::json;

const std::vector<std::string> kReplicas = {"workerpool0-0", "workerpool1-0", "workerpool1-1"};

// The env and cluster the daemon wrote for a replica, with placeholder
// addresses (built as the daemon builds them).
struct Daemon {
  std::map<std::string, std::string> env;
  replica::ClusterTask cluster;
};
Daemon DaemonLaunch(int pool, int index) {
  Daemon d;
  d.cluster = {pool, index, "", R"({"python_module":"trainer.task"})"};
  d.env = replica::ClusterEnv({{"127.0.0.1:0"}, {"127.0.0.1:0", "127.0.0.1:0"}}, d.cluster).value();
  d.env["CUDA_VISIBLE_DEVICES"] = "";
  d.env["OTHER"] = "kept";
  return d;
}
Result<std::map<std::string, std::string>> TaskEnv(int pool, int index, const SlurmTask& task) {
  Daemon d = DaemonLaunch(pool, index);
  return SlurmTaskEnv(d.env, d.cluster, kReplicas, task);
}

SlurmTask Task(int procid, int localid) {
  SlurmTask t;
  t.job_id = 20007;
  t.procid = procid;
  t.localid = localid;
  t.ntasks = 3;
  t.hosts = {"n1", "n2"};
  t.tasks_per_node = {2, 1};
  t.ports = {41001, 41777, 40002};  // as exchanged: one per task, in no order
  return t;
}

TEST(SlurmTaskEnvTest, RewritesAddressesForBlockDistributionAcrossNodes) {
  auto env = TaskEnv(1, 1, Task(2, 0));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  json cs = json::parse(env->at("CLUSTER_SPEC"));
  // Task t's address is its node and the port it reserved.
  EXPECT_EQ(cs["cluster"]["workerpool0"], json({"n1:41001"}));
  EXPECT_EQ(cs["cluster"]["workerpool1"], json({"n1:41777", "n2:40002"}));
  EXPECT_EQ(cs["task"]["type"], "workerpool1");  // the replica's own place
  EXPECT_EQ(cs["task"]["index"], 1);
  EXPECT_EQ(cs["job"], R"({"python_module":"trainer.task"})");
  json tf = json::parse(env->at("TF_CONFIG"));
  EXPECT_EQ(tf["cluster"]["chief"], json({"n1:41001"}));
  EXPECT_EQ(tf["cluster"]["worker"], json({"n1:41777", "n2:40002"}));
  EXPECT_EQ(env->at("MASTER_ADDR"), "n1");
  EXPECT_EQ(env->at("MASTER_PORT"), "41001");  // task 0's, in every task
  EXPECT_EQ(env->at("LOCAL_RANK"), "0");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "1");  // n2 runs one task
  EXPECT_EQ(env->at("RANK"), "2");
  EXPECT_EQ(env->at("WORLD_SIZE"), "3");
  EXPECT_EQ(env->at("OTHER"), "kept");
  EXPECT_EQ(env->at("SLURM_JOB_ID"), "20007");
  EXPECT_EQ(env->at("SLURM_PROCID"), "2");
  EXPECT_EQ(env->at("SLURM_NODEID"), "1");
  EXPECT_EQ(env->at("SLURM_NTASKS"), "3");
}

TEST(SlurmTaskEnvTest, LocalRankAndWorldSizeComeFromTheNode) {
  SlurmTask t = Task(1, 1);
  t.gpus = "1";
  auto env = TaskEnv(1, 0, t);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->at("LOCAL_RANK"), "1");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env->at("CUDA_VISIBLE_DEVICES"), "1");
}

TEST(SlurmTaskEnvTest, RefusesAStepWithAnotherTaskCountOrRank) {
  SlurmTask t = Task(0, 0);
  t.ntasks = 2;
  auto env = TaskEnv(0, 0, t);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("SLURM_STEP_NUM_TASKS"), std::string::npos);
  // launch.json says workerpool0-0 but task 1 is workerpool1-0.
  auto wrong_rank = TaskEnv(0, 0, Task(1, 1));
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_NE(wrong_rank.status().message().find("workerpool1-0"), std::string::npos);
  // slurm.json out of rank order.
  Daemon d = DaemonLaunch(1, 0);
  auto swapped = SlurmTaskEnv(d.env, d.cluster, {"workerpool1-0", "workerpool0-0", "workerpool1-1"},
                              Task(0, 0));
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("rank order"), std::string::npos);
  // An older stokerd's launch.json, without "cluster".
  auto old = SlurmTaskEnv(d.env, std::nullopt, kReplicas, Task(1, 1));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("\"cluster\""), std::string::npos);
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

TEST(SlurmTaskEnvTest, EveryTaskSeesTheSameMasterPortAndCluster) {
  std::vector<json> clusters;
  for (int t = 0; t < 3; ++t) {
    int pool = t == 0 ? 0 : 1, index = t == 0 ? 0 : t - 1;
    auto env = TaskEnv(pool, index, Task(t, t == 2 ? 0 : t));
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    EXPECT_EQ(env->at("MASTER_PORT"), "41001");
    clusters.push_back(json::parse(env->at("CLUSTER_SPEC"))["cluster"]);
  }
  EXPECT_EQ(clusters[0], clusters[1]);
  EXPECT_EQ(clusters[0], clusters[2]);
}

TEST(SlurmTaskEnvTest, RefusesWithoutOnePortPerTask) {
  SlurmTask t = Task(0, 0);
  t.ports = {41001};
  auto env = TaskEnv(0, 0, t);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("ports"), std::string::npos);
}

// A fresh directory under TMPDIR, removed at the end of the test.
class PortExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "slurm-ports-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(PortExchangeTest, AReservedPortIsHeldUntilReleased) {
  auto r = PortReservation::Bind();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GT(r->port(), 0);
  // While held, a plain bind (no SO_REUSEADDR, as an unrelated program
  // would do) of the port fails; after the release it succeeds.
  auto plain_bind = [](int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  };
  EXPECT_FALSE(plain_bind(r->port()));
  // A listening socket with SO_REUSEADDR (torch's TCPStore, gRPC) can take
  // the port even while it is held.
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(r->port());
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
    EXPECT_EQ(::listen(fd, 1), 0) << strerror(errno);
    ::close(fd);
  }
  auto other = PortReservation::Bind();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->port(), r->port());
  int port = r->port();
  r->Release();
  EXPECT_TRUE(plain_bind(port));
}

TEST_F(PortExchangeTest, PortDirIsPerSlurmJob) {
  EXPECT_EQ(SlurmPortDir("/s/jobs/7", 1234), std::filesystem::path("/s/jobs/7/slurm-1234-ports"));
}

TEST_F(PortExchangeTest, EveryTaskReadsEveryPublishedPort) {
  std::filesystem::path ports = dir_ / "slurm-9-ports";
  // Task 1 publishes later, from another thread, as another node would.
  ASSERT_TRUE(PublishPort(ports, 0, 41001).ok());
  ASSERT_TRUE(PublishPort(ports, 2, 40002).ok());
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(PublishPort(ports, 1, 41777).ok());
  });
  auto got = AwaitPorts(ports, 3, 10, [] { return false; });
  late.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<int>{41001, 41777, 40002}));
}

TEST_F(PortExchangeTest, AMissingTaskEndsTheWaitWithAClearError) {
  std::filesystem::path ports = dir_ / "slurm-9-ports";
  ASSERT_TRUE(PublishPort(ports, 0, 41001).ok());
  auto got = AwaitPorts(ports, 3, 0.2, [] { return false; });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("task(s) 1, 2 of 3"), std::string::npos)
      << got.status().message();
}

TEST_F(PortExchangeTest, AStopEndsTheWaitAtOnce) {
  auto got = AwaitPorts(dir_ / "slurm-9-ports", 2, 60, [] { return true; });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kCancelled);
}

TEST_F(PortExchangeTest, AFileWithoutAPortIsAnError) {
  std::filesystem::path ports = dir_ / "slurm-9-ports";
  ASSERT_TRUE(MakeDirs(ports).ok());
  ASSERT_TRUE(WriteFileAtomic(ports / "0", "http\n").ok());
  auto got = AwaitPorts(ports, 1, 1, [] { return false; });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace stoker::runner
