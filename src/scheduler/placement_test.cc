#include "scheduler/placement.h"

#include <gtest/gtest.h>

namespace stoker::scheduler {
namespace {

std::vector<resources::Node> TwoT4s() {
  resources::Node n{"n", 4, 16ull << 30, {}};
  n.gpus = {{0, "NVIDIA_TESLA_T4", 16ull << 30, ""}, {1, "NVIDIA_TESLA_T4", 16ull << 30, ""}};
  return {n};
}

spec::CustomJobSpec Spec(const std::string& machine, int replicas, double gpus) {
  spec::CustomJobSpec spec;
  spec::WorkerPoolSpec pool;
  pool.machine_spec.machine_type = machine;
  if (gpus > 0) {
    pool.machine_spec.accelerator_type = "NVIDIA_TESLA_T4";
    pool.machine_spec.accelerator_count = gpus;
  }
  spec.worker_pool_specs = {pool};
  if (replicas > 1) {
    pool.replica_count = replicas - 1;
    spec.worker_pool_specs.push_back(pool);
  }
  return spec;
}

TEST(PlacementTest, FlattensPoolsIntoNamedReplicasInLaunchOrder) {
  auto r = RequestsFor(Spec("n1-standard-4", 3, 0.5), TwoT4s(), "jobSpec.");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "workerpool0-0");
  EXPECT_EQ((*r)[2].name, "workerpool1-1");
  EXPECT_EQ((*r)[2].pool, 1);
  EXPECT_EQ((*r)[2].index, 1);
  EXPECT_EQ((*r)[1].ask.gpus, 0.5);
  EXPECT_EQ((*r)[1].ask.gpu_type, "NVIDIA_TESLA_T4");
  EXPECT_EQ(AsksOf(*r).size(), 3u);
}

TEST(PlacementTest, BuiltInGpusOfAMachineTypeAreAsked) {
  auto r = RequestsFor(Spec("a2-highgpu-2g", 1, 0), TwoT4s(), "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].ask.gpus, 2);
  EXPECT_EQ((*r)[0].ask.gpu_type, "NVIDIA_TESLA_A100");
}

TEST(PlacementTest, RefusesAJobThatCanNeverFitWithTheNumbers) {
  auto r = RequestsFor(Spec("n1-standard-4", 1, 3), TwoT4s(), "jobSpec.");
  ASSERT_TRUE(r.ok());
  Status s = CheckCanEverFit(*r, TwoT4s(), {}, "jobSpec.");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("3x NVIDIA_TESLA_T4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2 GPU(s)"), std::string::npos) << s.message();
  auto fits = RequestsFor(Spec("e2-standard-2", 2, 1), TwoT4s(), "jobSpec.");
  EXPECT_TRUE(CheckCanEverFit(*fits, TwoT4s(), {}, "jobSpec.").ok());
}

TEST(PlacementTest, ClampsMachineTypesToTheLargestNode) {
  auto r = RequestsFor(Spec("n1-standard-16", 1, 0), TwoT4s(), "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].ask.cpus, 4);
  EXPECT_EQ((*r)[0].ask.memory_bytes, 16ull << 30);
  EXPECT_TRUE((*r)[0].clamped);
  auto bad = RequestsFor(Spec("n9-bogus", 1, 0), TwoT4s(), "jobSpec.");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("jobSpec.workerPoolSpecs[0].machineSpec.machineType"),
            std::string::npos);
}

TEST(PlacementTest, ConfigMachineTypesComeBeforeTheCatalog) {
  resources::MachineCatalog config = {
      {"lab-box", {"lab-box", 2, 6, "NVIDIA_TESLA_T4", 1}},      // a new name
      {"n1-standard-4", {"n1-standard-4", 1, 2, "", 0}},          // a redefined one
  };
  auto custom = RequestsFor(Spec("lab-box", 1, 0), TwoT4s(), "", config);
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  EXPECT_EQ((*custom)[0].ask.cpus, 2);
  EXPECT_EQ((*custom)[0].ask.memory_bytes, 6ull << 30);
  EXPECT_EQ((*custom)[0].ask.gpus, 1);
  EXPECT_EQ((*custom)[0].ask.gpu_type, "NVIDIA_TESLA_T4");
  auto redefined = RequestsFor(Spec("n1-standard-4", 1, 0), TwoT4s(), "", config);
  ASSERT_TRUE(redefined.ok());
  EXPECT_EQ((*redefined)[0].ask.cpus, 1);
  EXPECT_FALSE((*redefined)[0].clamped);
  // Without the config, the name is unknown and the error says where to define it.
  auto unknown = RequestsFor(Spec("lab-box", 1, 0), TwoT4s(), "jobSpec.");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("machine_types:"), std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace stoker::scheduler
