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

}  // namespace
}  // namespace stoker::scheduler
