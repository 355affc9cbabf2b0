#include "exec/executor_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "exec/fake_executor.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

TEST(ExecutorRegistryTest, BuildsTheKindTheConfigNames) {
  ExecutorRegistry r = ExecutorRegistry::WithBuiltins();
  EXPECT_EQ(r.Kinds(), (std::vector<std::string>{"local", "slurm"}));
  ExecutorConfig c;
  c.data_dir = fs::temp_directory_path() / ("stoker-registry-" + std::to_string(::getpid()));
  c.runner = "/bin/false";
  auto local = r.Create(c);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_FALSE((*local)->PlacesReplicas());

  c.kind = "slurm";
  c.slurm.instance = "inst";
  auto slurm = r.Create(c);
  ASSERT_TRUE(slurm.ok()) << slurm.status().ToString();
  EXPECT_TRUE((*slurm)->PlacesReplicas());
  EXPECT_EQ((*slurm)->ReplicaDir(3, 0, "workerpool0-0"), c.data_dir / "jobs/3/workerpool0-0");
  fs::remove_all(c.data_dir);
}

TEST(ExecutorRegistryTest, AnUnknownKindNamesTheKnownOnes) {
  ExecutorRegistry r = ExecutorRegistry::WithBuiltins();
  ExecutorConfig c;
  c.kind = "kubernetes";
  auto e = r.Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
  EXPECT_NE(e.status().message().find("known kinds: local, slurm"), std::string::npos)
      << e.status().message();
}

TEST(ExecutorRegistryTest, AFactoryGetsTheWholeConfig) {
  ExecutorRegistry r;
  r.Register("fake", [](const ExecutorConfig& c) -> Result<std::unique_ptr<Executor>> {
    return std::unique_ptr<Executor>(std::make_unique<FakeExecutor>(c.data_dir));
  });
  ExecutorConfig c;
  c.kind = "fake";
  c.data_dir = "/x";
  auto e = r.Create(c);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->ReplicaDir(1, 0, "r"), "/x/jobs/1/r");
}

}  // namespace
}  // namespace stoker::exec
