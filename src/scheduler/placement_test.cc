#include "scheduler/placement.h"

#include <gtest/gtest.h>

namespace stoker::scheduler {
namespace {

resources::Node TwoT4s() {
  resources::Node n{"n", 4, 16ull << 30, {}};
  n.gpus = {{0, "NVIDIA_TESLA_T4", 16ull << 30, ""}, {1, "NVIDIA_TESLA_T4", 16ull << 30, ""}};
  return n;
}

ReplicaRequest Req(const std::string& name, double cpus, int gpus) {
  ReplicaRequest r;
  r.name = name;
  r.cpus = cpus;
  r.memory_bytes = 1ull << 30;
  r.gpus = gpus;
  r.gpu_type = gpus ? "NVIDIA_TESLA_T4" : "";
  return r;
}

TEST(PlacementTest, PlacesWholeGangOnDistinctGpus) {
  std::string why;
  auto p = PlaceGang({Req("a", 1, 1), Req("b", 1, 1)}, TwoT4s(), {}, {}, &why);
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)[0].gpus, std::vector<int>{0});
  EXPECT_EQ((*p)[1].gpus, std::vector<int>{1});
}

TEST(PlacementTest, PlacesNothingWhenOnlyPartOfTheGangFits) {
  Booked booked;
  booked.gpus = {0};
  std::string why;
  auto p = PlaceGang({Req("a", 1, 1), Req("b", 1, 1)}, TwoT4s(), booked, {}, &why);
  EXPECT_FALSE(p);
  EXPECT_NE(why.find("1 free"), std::string::npos) << why;
}

TEST(PlacementTest, NeverBooksCpusBeyondOversubscription) {
  Booked booked;
  booked.cpus = 3;
  std::string why;
  EXPECT_FALSE(PlaceGang({Req("a", 2, 0)}, TwoT4s(), booked, {}, &why));
  EXPECT_TRUE(PlaceGang({Req("a", 2, 0)}, TwoT4s(), booked, {.cpu_oversubscription = 2}, &why));
}

TEST(PlacementTest, SubstitutesALargerGpuOnlyWhenAllowed) {
  resources::Node n{"n", 4, 16ull << 30, {{0, "NVIDIA_L4", 24ull << 30, ""}}};
  std::string why;
  auto p = PlaceGang({Req("a", 1, 1)}, n, {}, {}, &why);
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)[0].substitutions.size(), 1u);
  EXPECT_FALSE(PlaceGang({Req("a", 1, 1)}, n, {}, {.accelerator_substitution = false}, &why));
}

TEST(PlacementTest, RefusesAJobThatCanNeverFitWithTheNumbers) {
  Status s = CheckCanEverFit({Req("a", 1, 3)}, TwoT4s(), {}, "jobSpec.");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("needs 3x NVIDIA_TESLA_T4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2 GPU(s)"), std::string::npos) << s.message();
}

TEST(PlacementTest, ClampsMachineTypesToTheNode) {
  spec::CustomJobSpec spec;
  spec::WorkerPoolSpec pool;
  pool.machine_spec.machine_type = "n1-standard-16";
  pool.replica_count = 1;
  spec.worker_pool_specs = {pool};
  auto r = RequestsFor(spec, TwoT4s(), "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].cpus, 4);
  EXPECT_TRUE((*r)[0].clamped);
  spec.worker_pool_specs[0].machine_spec.machine_type = "n9-bogus";
  auto bad = RequestsFor(spec, TwoT4s(), "jobSpec.");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("jobSpec.workerPoolSpecs[0].machineSpec.machineType"),
            std::string::npos);
}

}  // namespace
}  // namespace stoker::scheduler
