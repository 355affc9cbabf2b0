#include "admission/admission.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/json_yaml.h"

namespace stoker::admission {
namespace {

namespace fs = std::filesystem;

spec::CustomJob Job(const std::string& yaml) {
  auto j = ParseYamlOrJson(yaml, "test");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  auto job = spec::ParseCustomJob(*j);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return *job;
}

spec::HyperparameterTuningJob Study(const std::string& yaml) {
  auto j = ParseYamlOrJson(yaml, "test");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  auto job = spec::ParseHyperparameterTuningJob(*j);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return *job;
}

constexpr char kContainerJob[] = R"(
displayName: ok
jobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: e2-standard-4}
    replicaCount: 1
    containerSpec:
      imageUri: local/sh
      command: [/bin/sh, -c, "ls gs://data/train"]
)";

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("admission_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    node_.name = "n";
    node_.cpus = 8;
    node_.memory_bytes = 32ull << 30;
    node_.gpus.push_back({0, "NVIDIA_TESLA_T4", 16ull << 30, ""});
    ASSERT_TRUE(buckets_.Create("data").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  Admission Make(bool executor_places_replicas = false) {
    AdmissionDeps d;
    d.buckets = &buckets_;
    d.environments = &environments_;
    d.node = &node_;
    d.executor_places_replicas = executor_places_replicas;
    return Admission(d);
  }

  fs::path dir_ = fs::temp_directory_path() / ("admission_test_" + std::to_string(getpid()));
  storage::Buckets buckets_{dir_, {}};
  exec::Environments environments_{
      {{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "config.yaml"};
  resources::Node node_;
};

TEST_F(AdmissionTest, AdmitsAJobWithItsCanonicalSpecAndAWarningPerUnhonouredField) {
  spec::CustomJob job =
      Job(std::string(kContainerJob) + "  network: projects/p/global/networks/n\n");
  auto admitted = Make().AdmitJob(job);
  ASSERT_TRUE(admitted.ok()) << admitted.status().ToString();
  EXPECT_EQ(admitted->spec, spec::ToJson(job));
  ASSERT_EQ(admitted->warnings.size(), 1u);
  EXPECT_NE(admitted->warnings[0].find("jobSpec.network"), std::string::npos);
}

TEST_F(AdmissionTest, RefusesAPathToABucketThatDoesNotExistNamingTheField) {
  std::string yaml = kContainerJob;
  yaml.replace(yaml.find("gs://data"), 9, "gs://nowhere");
  auto admitted = Make().AdmitJob(Job(yaml));
  ASSERT_FALSE(admitted.ok());
  EXPECT_EQ(admitted.status().code(), Code::kInvalidArgument);
  EXPECT_NE(admitted.status().message().find("jobSpec.workerPoolSpecs[0].containerSpec.command[2]"),
            std::string::npos)
      << admitted.status().message();
  EXPECT_NE(admitted.status().message().find("stoker storage mb gs://nowhere"), std::string::npos);
}

TEST_F(AdmissionTest, RefusesAnImageNoRuleMaps) {
  std::string yaml = kContainerJob;
  yaml.replace(yaml.find("local/sh"), 8, "gcr.io/p/unknown:1");
  auto admitted = Make().AdmitJob(Job(yaml));
  ASSERT_FALSE(admitted.ok());
  EXPECT_NE(admitted.status().message().find("containerSpec.imageUri"), std::string::npos)
      << admitted.status().message();
}

TEST_F(AdmissionTest, RefusesMoreGpusThanExistUnlessTheExecutorPlacesReplicas) {
  std::string yaml = kContainerJob;
  yaml.replace(yaml.find("{machineType: e2-standard-4}"), 28,
               "{machineType: n1-standard-4, acceleratorType: NVIDIA_TESLA_T4, "
               "acceleratorCount: 2}");
  spec::CustomJob job = Job(yaml);
  auto here = Make().AdmitJob(job);
  ASSERT_FALSE(here.ok());
  EXPECT_NE(here.status().message().find("jobSpec.workerPoolSpecs[0]"), std::string::npos)
      << here.status().message();
  EXPECT_TRUE(Make(/*executor_places_replicas=*/true).AdmitJob(job).ok());
}

TEST_F(AdmissionTest, ATrialIsNotRefusedForAPackageReadAtLaunchButAJobIs) {
  ASSERT_TRUE(buckets_.Put("data", "pkg.tar.gz", "not a tar.gz").ok());
  spec::CustomJob job = Job(R"(
displayName: pkg
jobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: e2-standard-4}
    replicaCount: 1
    pythonPackageSpec:
      executorImageUri: local/py
      packageUris: [gs://data/pkg.tar.gz]
      pythonModule: trainer.task
)");
  auto job_admitted = Make().AdmitJob(job);
  ASSERT_FALSE(job_admitted.ok());
  EXPECT_NE(job_admitted.status().message().find("packageUris[0]"), std::string::npos)
      << job_admitted.status().message();
  EXPECT_TRUE(Make().AdmitTrial(job).ok());
}

constexpr char kStudy[] = R"(
displayName: s
studySpec:
  metrics: [{metricId: accuracy, goal: MAXIMIZE}]
  parameters:
  - parameterId: lr
    doubleValueSpec: {minValue: 0.001, maxValue: 0.1}
maxTrialCount: 4
trialJobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: e2-standard-4}
    replicaCount: 1
    containerSpec: {imageUri: local/sh, command: [/bin/sh, -c, "ls gs://data"]}
)";

TEST_F(AdmissionTest, AStudyIsAdmittedByItsTrialJobSpecWithFieldsNamedSo) {
  EXPECT_TRUE(Make().AdmitStudy(Study(kStudy)).ok());
  std::string yaml = kStudy;
  yaml.replace(yaml.find("gs://data"), 9, "gs://gone");
  Status s = Make().AdmitStudy(Study(yaml));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("trialJobSpec.workerPoolSpecs[0].containerSpec.command[2]", 0), 0u)
      << s.message();
}

TEST_F(AdmissionTest, AGridStudyNeedsAGridOfBoundedSize) {
  std::string yaml = kStudy;
  yaml.replace(
      yaml.find("  - parameterId: lr\n    doubleValueSpec: {minValue: 0.001, maxValue: 0.1}"),
      std::string("  - parameterId: lr\n    doubleValueSpec: {minValue: 0.001, maxValue: 0.1}")
          .size(),
      "  - parameterId: a\n    integerValueSpec: {minValue: 1, maxValue: 5000}\n"
      "  - parameterId: b\n    integerValueSpec: {minValue: 1, maxValue: 5000}");
  yaml.insert(yaml.find("  parameters:"), "  algorithm: GRID_SEARCH\n");
  Status s = Make().AdmitStudy(Study(yaml));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("studySpec.algorithm: ", 0), 0u) << s.message();
}

}  // namespace
}  // namespace stoker::admission
