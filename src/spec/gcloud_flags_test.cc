#include "spec/gcloud_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/custom_job.h"

namespace stoker::spec {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The error message of parsing one --worker-pool-spec value, or "" when it parses.
std::string SpecError(const std::string& value, int index = 0, bool autopackaging = false) {
  auto r = ParseWorkerPoolSpecFlag(value, index, autopackaging);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

json Pool(const std::string& value, int index = 0) {
  auto r = ParseWorkerPoolSpecFlag(value, index);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->pool : json();
}

std::string MergeError(const json& config, const GcloudJobFlags& flags) {
  auto r = MergeGcloudFlags(config, flags);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

json ContainerConfig() {
  return json::parse(R"({
    "workerPoolSpecs": [
      {"machineSpec": {"machineType": "n1-highmem-2"}, "replicaCount": 1,
       "containerSpec": {"imageUri": "gcr.io/x/y", "args": ["port=8500"], "command": ["start"]}},
      {},
      {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 2,
       "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                             "packageUris": ["gs://b/p.tar.gz"], "pythonModule": "trainer.task",
                             "args": ["--old"]}}
    ],
    "network": "projects/1/global/networks/old"
  })");
}

// ---- SplitGcloudList ----

TEST(SplitGcloudListTest, SplitsOnCommasAndDropsOneTrailingDelimiter) {
  EXPECT_THAT(SplitGcloudList("--epochs=10,--lr=0.01"), ElementsAre("--epochs=10", "--lr=0.01"));
  EXPECT_THAT(SplitGcloudList("a,b,"), ElementsAre("a", "b"));
  EXPECT_THAT(SplitGcloudList("a,,b"), ElementsAre("a", "", "b"));
  EXPECT_THAT(SplitGcloudList("single"), ElementsAre("single"));
  EXPECT_THAT(SplitGcloudList(""), IsEmpty());
}

TEST(SplitGcloudListTest, UsesTheDelimiterBetweenCaretsAsGcloudEscaping) {
  EXPECT_THAT(SplitGcloudList("^:^--tags=a,b:--lr=0.1"), ElementsAre("--tags=a,b", "--lr=0.1"));
  EXPECT_THAT(SplitGcloudList("^::^a,b::c"), ElementsAre("a,b", "c"));
  EXPECT_THAT(SplitGcloudList("^|^x"), ElementsAre("x"));
}

TEST(SplitGcloudListTest, TreatsAnEmptyEscapeDelimiterAsPlainText) {
  EXPECT_THAT(SplitGcloudList("^^a,b"), ElementsAre("^^a", "b"));
  EXPECT_THAT(SplitGcloudList("^a,b"), ElementsAre("^a", "b"));
}

// ---- ParseWorkerPoolSpecFlag ----

TEST(WorkerPoolSpecFlagTest, ParsesAContainerPoolWithOneReplicaByDefault) {
  EXPECT_EQ(Pool("machine-type=n1-standard-4,container-image-uri=gcr.io/p/trainer:1"),
            json::parse(R"({"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                            "containerSpec": {"imageUri": "gcr.io/p/trainer:1"}})"));
}

TEST(WorkerPoolSpecFlagTest, AnImageThatIsNoImageReferenceIsRefusedByKey) {
  EXPECT_THAT(SpecError("machine-type=n1-standard-4,container-image-uri=oci-archive:/tmp/x"),
              HasSubstr("'container-image-uri': 'oci-archive:/tmp/x' is not an image reference"));
  EXPECT_THAT(SpecError("machine-type=n1-standard-4,executor-image-uri=-v,python-module=t"),
              HasSubstr("'executor-image-uri': '-v' is not an image reference"));
  EXPECT_THAT(SpecError("machine-type=n1-standard-4,executor-image-uri=A/b,"
                        "local-package-path=/p,script=t.py"),
              HasSubstr("'executor-image-uri': 'A/b' is not an image reference"));
}

TEST(WorkerPoolSpecFlagTest, ParsesAPythonPoolWithAcceleratorsAndReplicas) {
  json pool = Pool(
      "machine-type=n1-standard-8,replica-count=3,accelerator-type=NVIDIA_TESLA_T4,"
      "accelerator-count=2,executor-image-uri=us-docker.pkg.dev/vertex-ai/training/"
      "tf-gpu.2-11.py310:latest,python-module=trainer.task",
      1);
  EXPECT_EQ(pool, json::parse(R"({
    "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                    "acceleratorCount": 2},
    "replicaCount": 3,
    "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11.py310:latest",
                          "pythonModule": "trainer.task"}})"));
}

TEST(WorkerPoolSpecFlagTest, GivesOneAcceleratorWhenOnlyTheTypeIsGiven) {
  json pool = Pool("machine-type=g2-standard-4,accelerator-type=NVIDIA_L4,container-image-uri=i");
  EXPECT_EQ(pool["machineSpec"]["acceleratorCount"], 1);
}

TEST(WorkerPoolSpecFlagTest, AcceptsPythonImageUriAsTheOldNameOfExecutorImageUri) {
  json pool = Pool("machine-type=n1-standard-4,python-image-uri=img,python-module=m");
  EXPECT_EQ(pool["pythonPackageSpec"]["executorImageUri"], "img");
  EXPECT_THAT(SpecError("machine-type=m,python-image-uri=a,executor-image-uri=b,python-module=x"),
              HasSubstr("given twice"));
}

TEST(WorkerPoolSpecFlagTest, RefusesAnEmptyFirstSpec) {
  EXPECT_THAT(SpecError("", 0), HasSubstr("--worker-pool-spec[0]: the first --worker-pool-spec"));
}

TEST(WorkerPoolSpecFlagTest, TurnsAnEmptyLaterSpecIntoAnEmptyPool) {
  EXPECT_EQ(Pool("", 2), json::object());
}

TEST(WorkerPoolSpecFlagTest, RequiresMachineType) {
  EXPECT_THAT(SpecError("container-image-uri=i"),
              HasSubstr("--worker-pool-spec[0]: 'machine-type' is required"));
}

TEST(WorkerPoolSpecFlagTest, RefusesAcceleratorCountWithoutAcceleratorType) {
  EXPECT_THAT(SpecError("machine-type=m,accelerator-count=2,container-image-uri=i", 1),
              HasSubstr("--worker-pool-spec[1]: 'accelerator-count' needs 'accelerator-type'"));
}

TEST(WorkerPoolSpecFlagTest, TakesGcloudSpellingsOfTheAcceleratorTypeAndRefusesOthers) {
  for (const char* t : {"nvidia-tesla-t4", "nvidia_tesla_t4", "NVIDIA_TESLA_T4"}) {
    json pool =
        Pool(std::string("machine-type=m,accelerator-type=") + t + ",container-image-uri=i");
    EXPECT_EQ(pool["machineSpec"]["acceleratorType"], "NVIDIA_TESLA_T4") << t;
  }
  EXPECT_THAT(SpecError("machine-type=m,accelerator-type=T4,container-image-uri=i"),
              HasSubstr("starting with NVIDIA or TPU"));
  EXPECT_THAT(SpecError("machine-type=m,accelerator-type=NVIDIA_FOO,container-image-uri=i"),
              HasSubstr("'NVIDIA_FOO' is not an accelerator type"));
}

TEST(WorkerPoolSpecFlagTest, RequiresCountsToBeWholeNumbersOfAtLeastOne) {
  EXPECT_THAT(SpecError("machine-type=m,replica-count=two,container-image-uri=i", 1),
              HasSubstr("'replica-count' must be a whole number, got 'two'"));
  EXPECT_THAT(SpecError("machine-type=m,accelerator-type=NVIDIA_L4,accelerator-count=0,"
                        "container-image-uri=i"),
              HasSubstr("'accelerator-count' must be at least 1"));
}

TEST(WorkerPoolSpecFlagTest, RefusesMoreThanOneReplicaInThePrimaryPool) {
  EXPECT_THAT(SpecError("machine-type=m,replica-count=2,container-image-uri=i", 0),
              HasSubstr("--worker-pool-spec[0]: 'replica-count' of the primary pool must be 1"));
  EXPECT_EQ(SpecError("machine-type=m,replica-count=2,container-image-uri=i", 1), "");
}

TEST(WorkerPoolSpecFlagTest, RefusesPythonModuleWithAContainerImage) {
  EXPECT_THAT(SpecError("machine-type=m,container-image-uri=i,python-module=t", 1),
              HasSubstr("--worker-pool-spec[1]: 'python-module' cannot be used with "
                        "'container-image-uri'"));
}

TEST(WorkerPoolSpecFlagTest, RequiresPythonModuleWithAnExecutorImage) {
  EXPECT_THAT(SpecError("machine-type=m,executor-image-uri=i"),
              HasSubstr("'python-module' is required with 'executor-image-uri'"));
}

TEST(WorkerPoolSpecFlagTest, RequiresExactlyOneOfTheTwoImages) {
  EXPECT_THAT(SpecError("machine-type=m"),
              HasSubstr("exactly one of 'container-image-uri' or 'executor-image-uri'"));
  EXPECT_THAT(SpecError("machine-type=m,container-image-uri=a,executor-image-uri=b"),
              HasSubstr("cannot both be given"));
}

TEST(WorkerPoolSpecFlagTest, RefusesAnUnknownKeyAndListsTheValidOnes) {
  std::string e = SpecError("machine-type=m,container-image-uri=i,disk-size=100");
  EXPECT_THAT(e, HasSubstr("unknown key 'disk-size'"));
  EXPECT_THAT(e, HasSubstr("machine-type, replica-count, accelerator-type"));
  EXPECT_THAT(SpecError("machine_type=m,container-image-uri=i"),
              HasSubstr("did you mean 'machine-type'?"));
}

TEST(WorkerPoolSpecFlagTest, RefusesAnItemThatIsNotKeyEqualsValue) {
  EXPECT_THAT(SpecError("machine-type=m,container-image-uri=i,oops"),
              HasSubstr("'oops' is not key=value"));
}

TEST(WorkerPoolSpecFlagTest, AcceptsGcloudsAlternativeDelimiter) {
  json pool = Pool("^|^machine-type=n1-standard-4|container-image-uri=gcr.io/p/t:1");
  EXPECT_EQ(pool["containerSpec"]["imageUri"], "gcr.io/p/t:1");
}

TEST(WorkerPoolSpecFlagTest, RefusesLocalPackageKeysWithoutLocalPackagePath) {
  EXPECT_THAT(SpecError("machine-type=m,container-image-uri=i,script=train.py"),
              HasSubstr("'script' is only allowed with 'local-package-path'"));
  EXPECT_THAT(SpecError("machine-type=m,container-image-uri=i,requirements=a;b", 1),
              HasSubstr("'requirements' is only allowed with 'local-package-path', in the first"));
  EXPECT_THAT(SpecError("machine-type=m,executor-image-uri=i,python-module=x,"
                        "local-package-path=.",
                        1),
              HasSubstr("'local-package-path' is only allowed in the first --worker-pool-spec"));
}

TEST(WorkerPoolSpecFlagTest, ReturnsTheLocalPackageRequestApart) {
  auto r = ParseWorkerPoolSpecFlag(
      "machine-type=n1-standard-4,executor-image-uri=us-docker.pkg.dev/vertex-ai/training/"
      "pytorch-cpu.2-1.py310:latest,local-package-path=./src,script=task.py,requirements=torch;"
      "numpy==1.26,extra-packages=a.whl;b.tar.gz,extra-dirs=data;conf,output-image-uri=gcr.io/p/o",
      0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->local.has_value());
  EXPECT_EQ(r->local->path, "./src");
  EXPECT_EQ(r->local->script, "task.py");
  EXPECT_EQ(r->local->python_module, "");
  EXPECT_THAT(r->local->requirements, ElementsAre("torch", "numpy==1.26"));
  EXPECT_THAT(r->local->extra_packages, ElementsAre("a.whl", "b.tar.gz"));
  EXPECT_THAT(r->local->extra_dirs, ElementsAre("data", "conf"));
  EXPECT_EQ(r->local->output_image_uri, "gcr.io/p/o");
  EXPECT_EQ(r->local->executor_image_uri,
            "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest");
  // The pool holds only its hardware; the CLI adds the containerSpec of the built image.
  EXPECT_EQ(r->pool, json::parse(R"({"machineSpec": {"machineType": "n1-standard-4"},
                                     "replicaCount": 1})"));
}

TEST(WorkerPoolSpecFlagTest, LocalPackageNeedsAnExecutorImageAndOneOfModuleOrScript) {
  std::string e = SpecError("machine-type=m,local-package-path=.");
  EXPECT_THAT(e, HasSubstr("'executor-image-uri' is required with 'local-package-path'"));
  EXPECT_THAT(e, HasSubstr("exactly one of 'python-module' or 'script'"));
  EXPECT_THAT(SpecError("machine-type=m,local-package-path=.,executor-image-uri=i,"
                        "python-module=a,script=b.py"),
              HasSubstr("exactly one of 'python-module' or 'script'"));
  EXPECT_THAT(SpecError("machine-type=m,local-package-path=.,container-image-uri=i,script=b.py"),
              HasSubstr("'container-image-uri' cannot be used with 'local-package-path'"));
}

TEST(WorkerPoolSpecFlagTest, LaterSpecsCarryOnlyHardwareWhenTheFirstIsAutopackaged) {
  auto ok = ParseWorkerPoolSpecFlags(
      {"machine-type=n1-standard-4,local-package-path=.,executor-image-uri=i,python-module=t",
       "machine-type=n1-standard-8,replica-count=3,accelerator-type=NVIDIA_TESLA_T4", ""});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->pools.size(), 3u);
  EXPECT_EQ(ok->pools[1]["replicaCount"], 3);
  EXPECT_EQ(ok->pools[2], json::object());
  ASSERT_TRUE(ok->local.has_value());
  EXPECT_EQ(ok->local->python_module, "t");

  auto bad = ParseWorkerPoolSpecFlags(
      {"machine-type=n1-standard-4,local-package-path=.,executor-image-uri=i,script=t.sh",
       "machine-type=n1-standard-8,container-image-uri=other"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("--worker-pool-spec[1]: 'container-image-uri' is not allowed: the first "
                        "--worker-pool-spec has 'local-package-path'"));
}

TEST(WorkerPoolSpecFlagTest, ReportsTheProblemsOfEverySpecTogether) {
  auto r = ParseWorkerPoolSpecFlags({"machine-type=m", "container-image-uri=i"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--worker-pool-spec[0]: exactly one of"));
  EXPECT_THAT(r.status().message(), HasSubstr("--worker-pool-spec[1]: 'machine-type' is required"));
}

TEST(ScriptCommandTest, RunsPythonScriptsWithPython3AndOthersWithBash) {
  EXPECT_THAT(ScriptCommand("trainer/task.py"), ElementsAre("python3", "trainer/task.py"));
  EXPECT_THAT(ScriptCommand("run.sh"), ElementsAre("bash", "run.sh"));
  EXPECT_THAT(ScriptCommand("py"), ElementsAre("bash", "py"));
}

// ---- MergeGcloudFlags ----

TEST(MergeGcloudFlagsTest, KeepsTheConfigWhenNoFlagIsGiven) {
  auto r = MergeGcloudFlags(ContainerConfig(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, ContainerConfig());
}

TEST(MergeGcloudFlagsTest, ReplacesTheWholePoolListWithPoolsFromFlags) {
  GcloudJobFlags flags;
  flags.worker_pools = {Pool("machine-type=n1-standard-4,container-image-uri=new")};
  auto r = MergeGcloudFlags(ContainerConfig(), flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)["workerPoolSpecs"].size(), 1u);
  EXPECT_EQ((*r)["workerPoolSpecs"][0]["containerSpec"]["imageUri"], "new");
  EXPECT_EQ((*r)["network"], "projects/1/global/networks/old");
}

TEST(MergeGcloudFlagsTest, ReplacesArgsOfEveryContainerAndPythonPool) {
  GcloudJobFlags flags;
  flags.args = SplitGcloudList("--epochs=10,--lr=0.01");
  auto r = MergeGcloudFlags(ContainerConfig(), flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json want = json::array({"--epochs=10", "--lr=0.01"});
  EXPECT_EQ((*r)["workerPoolSpecs"][0]["containerSpec"]["args"], want);
  EXPECT_EQ((*r)["workerPoolSpecs"][2]["pythonPackageSpec"]["args"], want);
  EXPECT_EQ((*r)["workerPoolSpecs"][0]["containerSpec"]["command"], json::array({"start"}));
}

TEST(MergeGcloudFlagsTest, ReplacesTheCommandOfContainerPoolsOnly) {
  GcloudJobFlags flags;
  flags.command = std::vector<std::string>{"python3", "-m", "t"};
  auto r = MergeGcloudFlags(ContainerConfig(), flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["workerPoolSpecs"][0]["containerSpec"]["command"],
            json::array({"python3", "-m", "t"}));
  EXPECT_FALSE((*r)["workerPoolSpecs"][2]["pythonPackageSpec"].contains("command"));
}

TEST(MergeGcloudFlagsTest, RefusesACommandWhenNoPoolRunsAContainer) {
  GcloudJobFlags flags;
  flags.worker_pools = {Pool("machine-type=m,executor-image-uri=i,python-module=t")};
  flags.python_package_uris = std::vector<std::string>{"gs://b/p.tar.gz"};
  flags.command = std::vector<std::string>{"x"};
  EXPECT_THAT(MergeError(nullptr, flags), HasSubstr("--command: no worker pool runs a container"));
}

TEST(MergeGcloudFlagsTest, GivesPythonPackageUrisToEveryPythonPool) {
  GcloudJobFlags flags;
  flags.worker_pools = {
      Pool("machine-type=m,executor-image-uri=i,python-module=t"), json::object(),
      Pool("machine-type=m,replica-count=2,executor-image-uri=i,python-module=t", 2)};
  flags.python_package_uris = SplitGcloudList("gs://b/a.tar.gz,gs://b/b.tar.gz");
  auto r = MergeGcloudFlags(nullptr, flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json want = json::array({"gs://b/a.tar.gz", "gs://b/b.tar.gz"});
  EXPECT_EQ((*r)["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"], want);
  EXPECT_EQ((*r)["workerPoolSpecs"][1], json::object());
  EXPECT_EQ((*r)["workerPoolSpecs"][2]["pythonPackageSpec"]["packageUris"], want);
}

TEST(MergeGcloudFlagsTest, RefusesPythonPackageUrisWithoutAPythonPool) {
  GcloudJobFlags flags;
  flags.worker_pools = {Pool("machine-type=m,container-image-uri=i")};
  flags.python_package_uris = std::vector<std::string>{"gs://b/p.tar.gz"};
  EXPECT_THAT(MergeError(nullptr, flags),
              HasSubstr("--python-package-uris: no worker pool is a python pool"));
}

TEST(MergeGcloudFlagsTest, RequiresPythonPackageUrisForPythonPoolsFromFlags) {
  GcloudJobFlags flags;
  flags.worker_pools = {Pool("machine-type=m,executor-image-uri=i,python-module=t")};
  EXPECT_THAT(
      MergeError(nullptr, flags),
      HasSubstr("--python-package-uris: required: --worker-pool-spec[0] runs python-module"));
}

TEST(MergeGcloudFlagsTest, OverridesTheOtherSpecFields) {
  GcloudJobFlags flags;
  flags.network = "projects/1/global/networks/new";
  flags.service_account = "sa@p.iam.gserviceaccount.com";
  flags.enable_web_access = true;
  flags.enable_dashboard_access = true;
  flags.persistent_resource_id = "pr-1";
  auto r = MergeGcloudFlags(ContainerConfig(), flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["network"], "projects/1/global/networks/new");
  EXPECT_EQ((*r)["serviceAccount"], "sa@p.iam.gserviceaccount.com");
  EXPECT_EQ((*r)["enableWebAccess"], true);
  EXPECT_EQ((*r)["enableDashboardAccess"], true);
  EXPECT_EQ((*r)["persistentResourceId"], "pr-1");
}

TEST(MergeGcloudFlagsTest, RefusesAJobWithoutAnyPool) {
  EXPECT_THAT(MergeError(nullptr, {}), HasSubstr("give --config or --worker-pool-spec"));
  EXPECT_THAT(MergeError(json::parse(R"({"workerPoolSpecs": []})"), {}),
              HasSubstr("give --config or --worker-pool-spec"));
  EXPECT_THAT(MergeError(json::array(), {}), HasSubstr("--config: must hold a CustomJobSpec"));
}

TEST(MergeGcloudFlagsTest, MergesInsideTheJobSpecOfAWholeCustomJob) {
  json whole = {{"displayName", "j"}, {"jobSpec", ContainerConfig()}};
  GcloudJobFlags flags;
  flags.service_account = "sa@p";
  auto r = MergeGcloudFlags(whole, flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["displayName"], "j");
  EXPECT_EQ((*r)["jobSpec"]["serviceAccount"], "sa@p");
}

TEST(MergeGcloudFlagsTest, ProducesASpecThatParsesAndRoundTrips) {
  auto pools = ParseWorkerPoolSpecFlags(
      {"machine-type=n1-standard-8,accelerator-type=NVIDIA_TESLA_T4,executor-image-uri="
       "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest,python-module=t.task",
       "", "machine-type=n1-standard-4,replica-count=2,container-image-uri=gcr.io/p/ps:1"});
  ASSERT_TRUE(pools.ok()) << pools.status().ToString();
  GcloudJobFlags flags;
  flags.worker_pools = pools->pools;
  flags.args = SplitGcloudList("--epochs=3");
  flags.command = SplitGcloudList("^ ^python3 -m ps");
  flags.python_package_uris = std::vector<std::string>{"gs://b/t-0.1.tar.gz"};
  auto merged = MergeGcloudFlags(nullptr, flags);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  json body = *merged;
  body["displayName"] = "from-flags";
  auto job = ParseCustomJob(body);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(Validate(*job).ok());
  ASSERT_EQ(job->job_spec.worker_pool_specs.size(), 3u);
  EXPECT_TRUE(job->job_spec.worker_pool_specs[1].empty);
  EXPECT_THAT(job->job_spec.worker_pool_specs[2].container_spec->command,
              ElementsAre("python3", "-m", "ps"));
  EXPECT_EQ(job->job_spec.worker_pool_specs[0].machine_spec.accelerator_count, 1);
  auto again = ParseCustomJob(ToJson(*job));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *job);
}

}  // namespace
}  // namespace stoker::spec
