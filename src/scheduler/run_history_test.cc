#include "scheduler/run_history.h"

#include <gtest/gtest.h>

namespace stoker::scheduler {
namespace {

using nlohmann::json;

json Spec(const std::string& image, const std::string& machine, int gpus = 0) {
  json pool = {{"machineSpec", {{"machineType", machine}}},
               {"replicaCount", 1},
               {"containerSpec", {{"imageUri", image}}}};
  if (gpus) {
    pool["machineSpec"]["acceleratorType"] = "NVIDIA_L4";
    pool["machineSpec"]["acceleratorCount"] = gpus;
  }
  return {{"workerPoolSpecs", {pool}}};
}

TEST(RunHistoryTest, KnowsNothingWithoutHistory) {
  RunHistory h;
  EXPECT_EQ(h.ExpectedSeconds({"alice", "train", ShapeKey(Spec("img", "n1"))}), 0);
}

TEST(RunHistoryTest, TakesTheMedianOfTheLastRunsOfTheSameUserAndName) {
  RunHistory h(3);
  RunKey k{"alice", "train", ShapeKey(Spec("img", "n1"))};
  h.Add(k, 1000);  // falls out: only the last 3 count
  h.Add(k, 4);
  h.Add(k, 6.2);
  h.Add(k, 5);
  EXPECT_EQ(h.ExpectedSeconds(k), 5);
  h.Add(k, 8);                         // 6.2, 5, 8
  EXPECT_EQ(h.ExpectedSeconds(k), 7);  // ceil(6.2)
}

TEST(RunHistoryTest, FallsBackToRunsOfTheSameShape) {
  RunHistory h;
  h.Add({"bob", "other", ShapeKey(Spec("img", "n1", 1))}, 30);
  h.Add({"bob", "other", ShapeKey(Spec("img", "n1", 1))}, 50);
  EXPECT_EQ(h.ExpectedSeconds({"alice", "new", ShapeKey(Spec("img", "n1", 1))}), 40);
  // Another machine shape or image is not similar.
  EXPECT_EQ(h.ExpectedSeconds({"alice", "new", ShapeKey(Spec("img", "n1", 2))}), 0);
  EXPECT_EQ(h.ExpectedSeconds({"alice", "new", ShapeKey(Spec("img2", "n1", 1))}), 0);
  EXPECT_EQ(h.ExpectedSeconds({"alice", "new", ""}), 0);
}

TEST(RunHistoryTest, PrefersTheSameNameOverTheSameShape) {
  RunHistory h;
  std::string shape = ShapeKey(Spec("img", "n1"));
  h.Add({"bob", "long", shape}, 3600);
  h.Add({"alice", "short", shape}, 2);
  EXPECT_EQ(h.ExpectedSeconds({"alice", "short", shape}), 2);
  EXPECT_EQ(h.ExpectedSeconds({"bob", "long", shape}), 3600);
}

TEST(RunHistoryTest, IgnoresRunsWithoutADuration) {
  RunHistory h;
  h.Add({"a", "n", "s"}, 0);
  h.Add({"a", "n", "s"}, -3);
  EXPECT_EQ(h.ExpectedSeconds({"a", "n", "s"}), 0);
  h.Add({"a", "n", "s"}, 0.2);
  EXPECT_EQ(h.ExpectedSeconds({"a", "n", "s"}), 1);  // at least a second
}

TEST(RunHistoryTest, ShapeKeyReadsAJobSpecOrACustomJob) {
  json spec = Spec("img", "n1", 1);
  EXPECT_EQ(ShapeKey(spec), ShapeKey(json{{"jobSpec", spec}}));
  EXPECT_NE(ShapeKey(spec), "");
  EXPECT_EQ(ShapeKey(json::object()), "");
  json pkg = {
      {"workerPoolSpecs",
       {{{"machineSpec", {{"machineType", "n1"}}},
         {"pythonPackageSpec", {{"executorImageUri", "img"}, {"pythonModule", "t.task"}}}}}}};
  json pkg2 = pkg;
  pkg2["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] = "t.other";
  EXPECT_NE(ShapeKey(pkg), ShapeKey(pkg2));
}

}  // namespace
}  // namespace stoker::scheduler
