#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/json_yaml.h"
#include "spec/custom_job.h"

namespace stoker::spec {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Reference §1.9, verbatim.
constexpr const char* kReferenceExample = R"json(
{
  "displayName": "my-job",
  "labels": {"team": "ml"},
  "jobSpec": {
    "workerPoolSpecs": [
      {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
       "replicaCount": "1",
       "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
       "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1", "command": ["python3", "-m", "trainer.task"],
                          "args": ["--epochs=10"], "env": [{"name": "FOO", "value": "bar"}]}},
      {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
       "replicaCount": "3",
       "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest",
                              "packageUris": ["gs://b/trainer-0.1.tar.gz"], "pythonModule": "trainer.task", "args": ["--epochs=10"]}}
    ],
    "baseOutputDirectory": {"outputUriPrefix": "gs://b/out/"},
    "scheduling": {"timeout": "86400s", "restartJobOnWorkerRestart": false, "strategy": "STANDARD"},
    "serviceAccount": "sa@p.iam.gserviceaccount.com",
    "enableWebAccess": false
  }
}
)json";

// A minimal valid bare CustomJobSpec.
json MinimalSpec() {
  return json::parse(R"({
    "workerPoolSpecs": [
      {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
       "containerSpec": {"imageUri": "trainer:1"}}
    ]
  })");
}

json MinimalJob() { return {{"displayName", "job"}, {"jobSpec", MinimalSpec()}}; }

// The error message of parsing `j`, or "" when it parses.
std::string ErrorOf(const json& j) {
  auto r = ParseCustomJob(j);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

TEST(CustomJobTest, AnImageFieldThatIsNoImageReferenceIsRefusedByPath) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] =
      "containers-storage:[overlay@/tmp/x+/tmp/y]localhost/x:1";
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[0].containerSpec.imageUri: "
                                    "'containers-storage:[overlay@/tmp/x+/tmp/y]localhost/x:1' is "
                                    "not an image reference"));
  j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0].erase("containerSpec");
  j["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"] = {{"executorImageUri", "docker://x"},
                                                             {"packageUris", {"gs://b/p.tar.gz"}},
                                                             {"pythonModule", "t"}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("pythonPackageSpec.executorImageUri: 'docker://x' is not an "
                                    "image reference"));
}

TEST(CustomJobTest, ParsesTheReferenceExample) {
  auto r = ParseCustomJob(json::parse(kReferenceExample));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CustomJob& job = *r;
  EXPECT_EQ(job.display_name, "my-job");
  EXPECT_EQ(job.labels.at("team"), "ml");
  const CustomJobSpec& spec = job.job_spec;
  ASSERT_EQ(spec.worker_pool_specs.size(), 2u);
  const WorkerPoolSpec& chief = spec.worker_pool_specs[0];
  EXPECT_FALSE(chief.empty);
  EXPECT_EQ(chief.machine_spec.machine_type, "n1-standard-8");
  EXPECT_EQ(chief.machine_spec.accelerator_type, "NVIDIA_TESLA_T4");
  EXPECT_EQ(chief.machine_spec.accelerator_count, 1);
  EXPECT_EQ(chief.replica_count, 1);
  ASSERT_TRUE(chief.container_spec.has_value());
  EXPECT_EQ(chief.container_spec->image_uri, "us-docker.pkg.dev/p/r/trainer:1");
  EXPECT_THAT(chief.container_spec->command, ElementsAre("python3", "-m", "trainer.task"));
  EXPECT_THAT(chief.container_spec->args, ElementsAre("--epochs=10"));
  ASSERT_EQ(chief.container_spec->env.size(), 1u);
  EXPECT_EQ(chief.container_spec->env[0], (EnvVar{"FOO", "bar"}));
  EXPECT_EQ(chief.extra["diskSpec"]["bootDiskSizeGb"], 100);
  const WorkerPoolSpec& workers = spec.worker_pool_specs[1];
  EXPECT_EQ(workers.replica_count, 3);
  ASSERT_TRUE(workers.python_package_spec.has_value());
  EXPECT_EQ(workers.python_package_spec->python_module, "trainer.task");
  EXPECT_THAT(workers.python_package_spec->package_uris, ElementsAre("gs://b/trainer-0.1.tar.gz"));
  EXPECT_EQ(spec.base_output_directory, "gs://b/out/");
  EXPECT_EQ(spec.scheduling.timeout_seconds, 86400);
  EXPECT_EQ(spec.scheduling.strategy, "STANDARD");
  EXPECT_EQ(spec.passthrough["serviceAccount"], "sa@p.iam.gserviceaccount.com");
  EXPECT_TRUE(Validate(job).ok());
}

TEST(CustomJobTest, RoundTripsTheReferenceExampleThroughToJson) {
  auto first = ParseCustomJob(json::parse(kReferenceExample));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  json printed = ToJson(*first);
  auto second = ParseCustomJob(printed);
  ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << printed.dump(2);
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(ToJson(*second), printed);
}

TEST(CustomJobTest, PrintsCanonicalVertexJson) {
  auto r = ParseCustomJob(json::parse(kReferenceExample));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json out = ToJson(*r);
  const json& pools = out["jobSpec"]["workerPoolSpecs"];
  EXPECT_EQ(pools[0]["replicaCount"], "1");
  EXPECT_EQ(pools[1]["replicaCount"], "3");
  EXPECT_EQ(pools[0]["machineSpec"]["acceleratorCount"], 1);
  EXPECT_EQ(pools[0]["diskSpec"],
            json::parse(R"({"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100})"));
  EXPECT_EQ(out["jobSpec"]["scheduling"]["timeout"], "86400s");
  EXPECT_EQ(out["jobSpec"]["serviceAccount"], "sa@p.iam.gserviceaccount.com");
  EXPECT_EQ(out["jobSpec"]["enableWebAccess"], false);
  EXPECT_EQ(out["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"], "gs://b/out/");
  EXPECT_EQ(out["labels"]["team"], "ml");
}

TEST(CustomJobTest, OmitsAcceleratorsAndEmptyListsWhenNoneAreGiven) {
  auto r = ParseCustomJob(MinimalJob());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json pool = ToJson(*r)["jobSpec"]["workerPoolSpecs"][0];
  EXPECT_EQ(pool["machineSpec"], json({{"machineType", "n1-standard-4"}}));
  EXPECT_EQ(pool["containerSpec"], json({{"imageUri", "trainer:1"}}));
  EXPECT_FALSE(ToJson(*r).contains("labels"));
  EXPECT_FALSE(ToJson(*r)["jobSpec"].contains("baseOutputDirectory"));
}

TEST(CustomJobTest, DefaultsTheTimeoutToSevenDays) {
  auto r = ParseCustomJob(MinimalJob());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job_spec.scheduling.timeout_seconds, 7 * 24 * 3600);
  EXPECT_EQ(ToJson(*r)["jobSpec"]["scheduling"]["timeout"], "604800s");
}

TEST(CustomJobTest, ParsesTheYamlForm) {
  const char* yaml = R"(
displayName: yaml-job
labels:
  team: ml
jobSpec:
  workerPoolSpecs:
    - machineSpec:
        machineType: n1-standard-4
        acceleratorType: NVIDIA_L4
        acceleratorCount: 2
      replicaCount: 1
      pythonPackageSpec:
        executorImageUri: us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest
        packageUris: [gs://b/trainer-0.1.tar.gz]
        pythonModule: trainer.task
        env:
          - name: LR
            value: "0.1"
  scheduling:
    timeout: 3600s
    maxWaitDuration: 0s
)";
  auto j = ParseYamlOrJson(yaml, "job.yaml");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  auto r = ParseCustomJob(*j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->display_name, "yaml-job");
  EXPECT_EQ(r->job_spec.worker_pool_specs[0].machine_spec.accelerator_count, 2);
  EXPECT_EQ(r->job_spec.worker_pool_specs[0].python_package_spec->env[0].value, "0.1");
  EXPECT_EQ(r->job_spec.scheduling.timeout_seconds, 3600);
  EXPECT_EQ(r->job_spec.scheduling.max_wait_seconds, 0.0);
  auto again = ParseCustomJob(ToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *r);
}

TEST(CustomJobTest, ParsesABareSpecWithoutADisplayName) {
  auto r = ParseCustomJob(MinimalSpec());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->display_name, "");
  EXPECT_EQ(r->job_spec.worker_pool_specs.size(), 1u);
  Status s = Validate(*r);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("displayName: required"));
  r->display_name = "from-flag";
  EXPECT_TRUE(Validate(*r).ok());
}

TEST(CustomJobTest, ReportsBareSpecErrorsWithoutTheJobSpecPrefix) {
  json spec = MinimalSpec();
  spec["workerPoolSpecs"][0]["machineSpec"].erase("machineType");
  std::string e = ErrorOf(spec);
  EXPECT_THAT(e, HasSubstr("workerPoolSpecs[0].machineSpec.machineType: required"));
  EXPECT_THAT(e, Not(HasSubstr("jobSpec.")));
}

TEST(CustomJobTest, AcceptsADisplayNameBesideABareSpec) {
  json spec = MinimalSpec();
  spec["displayName"] = "named";
  auto r = ParseCustomJob(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->display_name, "named");
}

TEST(CustomJobTest, SuggestsDisplayNameForATypoBesideABareSpec) {
  json spec = MinimalSpec();
  spec["displayname"] = "named";
  EXPECT_EQ(ErrorOf(spec), "(top level): unknown field 'displayname'; did you mean 'displayName'?");
}

TEST(CustomJobTest, ParseCustomJobSpecUsesTheGivenPath) {
  json spec = MinimalSpec();
  spec["workerPoolSpecs"][0]["containerSpec"].erase("imageUri");
  auto r = ParseCustomJobSpec(spec, "trialJobSpec");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("trialJobSpec.workerPoolSpecs[0].containerSpec.imageUri: required"));
  EXPECT_TRUE(ParseCustomJobSpec(MinimalSpec(), "trialJobSpec").ok());
}

TEST(CustomJobTest, IgnoresOutputOnlyFieldsSoDescribeOutputCanBeResubmitted) {
  json j = MinimalJob();
  j["name"] = "projects/p/locations/l/customJobs/123";
  j["state"] = "JOB_STATE_SUCCEEDED";
  j["createTime"] = "2024-05-18T00:00:00.123456Z";
  j["startTime"] = "2024-05-18T00:00:00.123456Z";
  j["endTime"] = "2024-05-18T00:00:00.123456Z";
  j["updateTime"] = "2024-05-18T00:00:00.123456Z";
  j["error"] = {{"code", 1}, {"message", "cancelled"}};
  j["webAccessUris"] = json::object();
  j["satisfiesPzs"] = false;
  j["satisfiesPzi"] = false;
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(ToJson(*r).contains("state"));
}

TEST(CustomJobTest, RejectsSnakeCaseKeysWithTheCamelCaseSpelling) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machine_spec"] =
      j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"];
  j["jobSpec"]["workerPoolSpecs"][0].erase("machineSpec");
  std::string e = ErrorOf(j);
  EXPECT_EQ(e,
            "jobSpec.workerPoolSpecs[0]: 'machine_spec' is not a field; use the camelCase "
            "spelling 'machineSpec'");
}

TEST(CustomJobTest, RejectsSnakeCaseKeysAtTheTopToo) {
  json j = {{"display_name", "x"}, {"jobSpec", MinimalSpec()}};
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("'display_name' is not a field; use the camelCase spelling "
                           "'displayName'"));
  EXPECT_THAT(e, Not(HasSubstr("displayName: required")));
}

TEST(CustomJobTest, RejectsUnknownKeysAndSuggestsTheClosestField) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["replicaCont"] = 1;
  std::string e = ErrorOf(j);
  EXPECT_EQ(e,
            "jobSpec.workerPoolSpecs[0]: unknown field 'replicaCont'; did you mean "
            "'replicaCount'?");
}

TEST(CustomJobTest, RejectsUnknownKeysWithNoCloseMatch) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["foo"] = 1;
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0]: unknown field 'foo'"));
  EXPECT_THAT(e, Not(HasSubstr("did you mean")));
}

TEST(CustomJobTest, SaysWhereAMisplacedFieldBelongs) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["imageUri"] = "x";
  EXPECT_THAT(ErrorOf(j), HasSubstr("unknown field 'imageUri'; it belongs in containerSpec"));
}

TEST(CustomJobTest, ChecksTypesWithPaths) {
  json j = MinimalJob();
  json& pool = j["jobSpec"]["workerPoolSpecs"][0];
  pool["containerSpec"]["args"] = "--epochs=10";
  pool["containerSpec"]["command"] = json::array({"python", 3});
  pool["machineSpec"]["machineType"] = 4;
  j["jobSpec"]["enableWebAccess"] = "yes";
  j["jobSpec"]["scheduling"] = {{"restartJobOnWorkerRestart", 1}};
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].containerSpec.args: must be a list of "
                           "strings, got a string"));
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].containerSpec.command[1]: must be a "
                           "string, got a number (quote it in YAML)"));
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.machineType: must be a "
                           "string"));
  EXPECT_THAT(e, Not(HasSubstr("machineType: required")));
  EXPECT_THAT(e, HasSubstr("jobSpec.enableWebAccess: must be true or false"));
  EXPECT_THAT(e, HasSubstr("jobSpec.scheduling.restartJobOnWorkerRestart: must be true or false"));
}

TEST(CustomJobTest, AcceptsReplicaCountAsANumberOrANumericString) {
  for (const json& count : {json(3), json("3")}) {
    json j = MinimalJob();
    j["jobSpec"]["workerPoolSpecs"].push_back(j["jobSpec"]["workerPoolSpecs"][0]);
    j["jobSpec"]["workerPoolSpecs"][1]["replicaCount"] = count;
    auto r = ParseCustomJob(j);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->job_spec.worker_pool_specs[1].replica_count, 3);
    EXPECT_EQ(ToJson(*r)["jobSpec"]["workerPoolSpecs"][1]["replicaCount"], "3");
  }
}

TEST(CustomJobTest, RejectsAReplicaCountThatIsNotAWholeNumber) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "three";
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[0].replicaCount: must be a whole "
                                    "number like 3 or \"3\", got 'three'"));
  j["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = 1.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("replicaCount: must be a whole number, got 1.5"));
}

TEST(CustomJobTest, RejectsANegativeReplicaCount) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"].push_back(j["jobSpec"]["workerPoolSpecs"][0]);
  j["jobSpec"]["workerPoolSpecs"][1]["replicaCount"] = -2;
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[1].replicaCount: must be at least 0"));
}

TEST(CustomJobTest, RequiresThePrimaryPoolToRunExactlyOneReplica) {
  for (const json& count : {json(2), json("0")}) {
    json j = MinimalJob();
    j["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = count;
    EXPECT_EQ(ErrorOf(j),
              "jobSpec.workerPoolSpecs[0].replicaCount: the primary pool runs exactly one "
              "replica; put more replicas in jobSpec.workerPoolSpecs[1]");
  }
}

TEST(CustomJobTest, AcceptsAcceleratorCountAsANumberOrANumericString) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_H100_80GB";
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = "8";
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job_spec.worker_pool_specs[0].machine_spec.accelerator_count, 8);
  EXPECT_EQ(ToJson(*r)["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"], 8);
}

TEST(GcloudFormsTest, ReadsASingleMappingWorkerPoolSpecsAsAOnePoolList) {
  json job = MinimalJob();
  json pool = job["jobSpec"]["workerPoolSpecs"][0];
  job["jobSpec"]["workerPoolSpecs"] = pool;
  std::vector<std::string> warnings = AcceptGcloudForms(job);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("jobSpec.workerPoolSpecs is one mapping; read as a list"));
  EXPECT_EQ(job["jobSpec"]["workerPoolSpecs"], json::array({pool}));
  EXPECT_TRUE(ParseCustomJob(job).ok());

  json bare = {{"workerPoolSpecs", pool}};
  EXPECT_THAT(AcceptGcloudForms(bare).at(0), HasSubstr("workerPoolSpecs is one mapping"));
  json study = {{"trialJobSpec", {{"workerPoolSpecs", pool}}}};
  EXPECT_THAT(AcceptGcloudForms(study).at(0), HasSubstr("trialJobSpec.workerPoolSpecs"));
  EXPECT_TRUE(study["trialJobSpec"]["workerPoolSpecs"].is_array());

  json listed = MinimalJob();
  EXPECT_TRUE(AcceptGcloudForms(listed).empty());
  EXPECT_EQ(listed, MinimalJob());
  json text = {{"jobSpec", {{"workerPoolSpecs", "pool"}}}};  // not a form: the parser refuses it
  EXPECT_TRUE(AcceptGcloudForms(text).empty());
  EXPECT_THAT(ErrorOf(text), HasSubstr("must be a list of worker pools"));
}

TEST(CustomJobTest, ReadsGcloudsLowerCaseAcceleratorNames) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "nvidia-tesla-t4";
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 1;
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ToJson(*r)["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"],
            "NVIDIA_TESLA_T4");
}

TEST(CustomJobTest, RejectsAnUnknownAcceleratorTypeAndListsTheKnownOnes) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "nvidia-tesla-t5";
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 1;
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: "
                           "'nvidia-tesla-t5' is not an accelerator type; use one of "));
  EXPECT_THAT(e, HasSubstr("NVIDIA_TESLA_T4"));
  EXPECT_THAT(e, HasSubstr("NVIDIA_RTX_PRO_6000"));
}

TEST(CustomJobTest, RequiresAnAcceleratorCountWhenATypeIsGiven) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_TESLA_T4";
  EXPECT_EQ(ErrorOf(j),
            "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount: must be at least 1 when "
            "acceleratorType is set");
}

TEST(CustomJobTest, RequiresAnAcceleratorTypeWhenACountIsGiven) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 2;
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: "
                                    "required when acceleratorCount is set; use one of"));
}

TEST(CustomJobTest, RejectsANegativeAcceleratorCount) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = -1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("machineSpec.acceleratorCount: must be at least 0, got -1"));
}

TEST(CustomJobTest, RequiresADisplayNameOfAtMost128Characters) {
  json j = MinimalJob();
  j.erase("displayName");
  EXPECT_THAT(ErrorOf(j), HasSubstr("displayName: required"));
  j["displayName"] = std::string(129, 'a');
  EXPECT_THAT(ErrorOf(j), HasSubstr("displayName: is 129 characters long; at most 128"));
  j["displayName"] = std::string(128, 'a');
  EXPECT_EQ(ErrorOf(j), "");
}

TEST(CustomJobTest, RequiresJobSpec) {
  EXPECT_THAT(ErrorOf({{"displayName", "x"}}), HasSubstr("jobSpec: required"));
}

TEST(CustomJobTest, RequiresWorkerPoolSpecs) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"] = json::array();
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs: required"));
}

TEST(CustomJobTest, RejectsAnEmptyPrimaryPool) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"].insert(j["jobSpec"]["workerPoolSpecs"].begin(), json::object());
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("jobSpec.workerPoolSpecs[0]: the primary pool cannot be empty"));
  j["jobSpec"]["workerPoolSpecs"] = json::array({json::object()});
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("jobSpec.workerPoolSpecs[0]: the primary pool cannot be empty"));
}

TEST(CustomJobTest, RequiresAMachineTypeInEveryNonEmptyPool) {
  json j = MinimalJob();
  json worker = j["jobSpec"]["workerPoolSpecs"][0];
  worker.erase("machineSpec");
  j["jobSpec"]["workerPoolSpecs"].push_back(json::object());
  j["jobSpec"]["workerPoolSpecs"].push_back(worker);
  EXPECT_EQ(ErrorOf(j),
            "jobSpec.workerPoolSpecs[2].machineSpec.machineType: required; give a machine type "
            "such as 'n1-standard-8'");
}

TEST(CustomJobTest, RequiresExactlyOneOfContainerSpecOrPythonPackageSpec) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0].erase("containerSpec");
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[0]: no task is given; set exactly "
                                    "one of containerSpec or pythonPackageSpec"));
  j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"] = {
      {"executorImageUri", "img"}, {"packageUris", {"gs://b/p.tar.gz"}}, {"pythonModule", "m"}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("set exactly one of containerSpec or pythonPackageSpec"));
}

TEST(CustomJobTest, RequiresAnImageUriInAContainerSpec) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"] = json::object();
  EXPECT_EQ(ErrorOf(j),
            "jobSpec.workerPoolSpecs[0].containerSpec.imageUri: required; give the container "
            "image to run");
}

TEST(CustomJobTest, RequiresTheFieldsOfAPythonPackageSpec) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0].erase("containerSpec");
  j["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"] = json::object();
  std::string e = ErrorOf(j);
  std::string py = "jobSpec.workerPoolSpecs[0].pythonPackageSpec.";
  EXPECT_THAT(e, HasSubstr(py + "executorImageUri: required"));
  EXPECT_THAT(e, HasSubstr(py + "packageUris: required"));
  EXPECT_THAT(e, HasSubstr(py + "pythonModule: required"));
}

TEST(CustomJobTest, RequiresGcsPackageUris) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0].erase("containerSpec");
  j["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"] = {
      {"executorImageUri", "img"},
      {"packageUris", {"gs://b/ok.tar.gz", "/tmp/trainer.tar.gz"}},
      {"pythonModule", "m"}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[0].pythonPackageSpec.packageUris[1]: "
                                    "'/tmp/trainer.tar.gz' is not a gs:// URI"));
  json uris = json::array();
  for (int i = 0; i < 101; ++i) uris.push_back("gs://b/p.tar.gz");
  j["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"] = uris;
  EXPECT_THAT(ErrorOf(j), HasSubstr("packageUris: at most 100 URIs are allowed, got 101"));
}

TEST(CustomJobTest, ChecksEnvironmentVariableNames) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] = {{{"name", "A"}, {"value", "1"}},
                                                                {{"name", "1B"}, {"value", "2"}},
                                                                {{"value", "3"}},
                                                                {{"name", "A"}, {"value", "4"}}};
  std::string env = "jobSpec.workerPoolSpecs[0].containerSpec.env";
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr(env + "[1].name: '1B' is not a valid variable name"));
  EXPECT_THAT(e, HasSubstr(env + "[2].name: required"));
  EXPECT_THAT(e, HasSubstr(env + "[3].name: 'A' is already set by " + env + "[0]"));
}

TEST(CustomJobTest, AllowsAtMost100EnvironmentVariables) {
  json j = MinimalJob();
  json env = json::array();
  for (int i = 0; i < 101; ++i) env.push_back({{"name", "V" + std::to_string(i)}, {"value", ""}});
  j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] = env;
  EXPECT_THAT(ErrorOf(j), HasSubstr("containerSpec.env: at most 100 variables are allowed"));
}

TEST(CustomJobTest, RefusesCommandLinesThatExecveWouldRefuse) {
  json j = MinimalJob();
  json& c = j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"];
  c["args"] = {"--ok", std::string(128 * 1024, 'x')};
  std::string pool = "jobSpec.workerPoolSpecs[0].containerSpec";
  EXPECT_THAT(ErrorOf(j), HasSubstr(pool + ".args[1]: is 131072 bytes long; one argument or "
                                           "variable may have at most 131071"));
  c["args"] = {std::string(128 * 1024 - 1, 'x')};  // just fits
  EXPECT_EQ(ErrorOf(j), "");
  // Many strings that each fit but together pass 1 MiB.
  c["args"] = json::array();
  for (int i = 0; i < 9; ++i) c["args"].push_back(std::string(120 * 1024, 'a'));
  EXPECT_THAT(ErrorOf(j), HasSubstr(pool + ": command, args and env take 1105929 bytes; at most "
                                           "1048576 are allowed"));
  c["args"] = json::array();
  c["env"] = {{{"name", "BIG"}, {"value", std::string(200000, 'v')}}};
  // NAME=value counts: 3 + 1 + 200000 bytes.
  EXPECT_THAT(ErrorOf(j), HasSubstr(pool + ".env[0]: BIG=value is 200004 bytes long; one "
                                           "argument or variable may have at most 131071"));
  c["env"] = {{{"name", "BIG"}, {"value", std::string(128 * 1024 - 5, 'v')}}};  // just fits
  EXPECT_EQ(ErrorOf(j), "");
  c["env"] = {{{"name", "BIG"}, {"value", std::string(128 * 1024 - 4, 'v')}}};
  EXPECT_THAT(ErrorOf(j), HasSubstr(pool + ".env[0]: BIG=value is 131072 bytes long"));
}

TEST(CustomJobTest, AsksForQuotesWhenYamlTurnedAStringIntoANumber) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] = {{{"name", "LR"}, {"value", 0.1}}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("containerSpec.env[0].value: must be a string, got a number "
                                    "(quote it in YAML)"));
}

TEST(CustomJobTest, KeepsMiddleEmptyPoolsAndDropsTrailingOnes) {
  json j = MinimalJob();
  json& pools = j["jobSpec"]["workerPoolSpecs"];
  json chief = pools[0];
  pools.push_back(json::object());
  pools.push_back(json::object());
  pools.push_back(chief);  // evaluator at position 3
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->job_spec.worker_pool_specs.size(), 4u);
  EXPECT_TRUE(r->job_spec.worker_pool_specs[1].empty);
  EXPECT_TRUE(r->job_spec.worker_pool_specs[2].empty);
  EXPECT_EQ(ToJson(*r)["jobSpec"]["workerPoolSpecs"][1], json::object());

  pools = json::array({chief, json::object(), json::object()});
  auto trimmed = ParseCustomJob(j);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().ToString();
  EXPECT_EQ(trimmed->job_spec.worker_pool_specs.size(), 1u);
}

TEST(CustomJobTest, RejectsMoreThanFourPools) {
  json j = MinimalJob();
  json chief = j["jobSpec"]["workerPoolSpecs"][0];
  for (int i = 0; i < 4; ++i) j["jobSpec"]["workerPoolSpecs"].push_back(chief);
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs: at most 4 pools are allowed"));
}

TEST(CustomJobTest, ChecksLabels) {
  json j = MinimalJob();
  j["labels"] = {{"Team", "ml"},
                 {"env", "Prod"},
                 {"ok_key-1", "ok_value-1"},
                 {"long", std::string(65, 'a')},
                 {"count", 3},
                 {"stoker-preemptible", "yes"},
                 {"stoker-warm-start", "false"}};
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("labels.stoker-preemptible: must be \"true\" or \"false\", got 'yes'"));
  EXPECT_THAT(e, Not(HasSubstr("labels.stoker-warm-start")));
  EXPECT_THAT(e, HasSubstr("labels.Team: label keys must start with a lowercase letter"));
  EXPECT_THAT(e, HasSubstr("labels.env: value 'Prod' may use only lowercase letters"));
  EXPECT_THAT(e, HasSubstr("labels.long: the value is 65 characters long; at most 64"));
  EXPECT_THAT(e, HasSubstr("labels.count: must be a string, got a number (quote it in YAML)"));
  EXPECT_THAT(e, Not(HasSubstr("labels.ok_key-1")));
}

TEST(CustomJobTest, ChecksDurations) {
  json j = MinimalJob();
  j["jobSpec"]["scheduling"] = {{"timeout", "an hour"}, {"maxWaitDuration", "-5s"}};
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("jobSpec.scheduling.timeout: 'an hour' is not a duration"));
  EXPECT_THAT(e, HasSubstr("jobSpec.scheduling.maxWaitDuration: '-5s' is not a duration"));
  j["jobSpec"]["scheduling"] = {{"timeout", "0s"}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.scheduling.timeout: must be positive"));
}

TEST(CustomJobTest, ChecksTheSchedulingStrategy) {
  json j = MinimalJob();
  j["jobSpec"]["scheduling"] = {{"strategy", "CHEAP"}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.scheduling.strategy: 'CHEAP' is not a scheduling "
                                    "strategy; use one of STANDARD, SPOT, FLEX_START"));
}

TEST(CustomJobTest, ReportsEveryProblemOnePerLine) {
  json j = json::parse(R"({
    "labels": {"Bad": "x"},
    "jobSpec": {
      "workerPoolSpecs": [
        {"machineSpec": {"acceleratorType": "NVIDIA_TESLA_T4"}, "replicaCount": 2,
         "containerSpec": {}},
        {"machine_spec": {"machineType": "n1"}, "containerSpec": {"imageUri": "x"}}
      ],
      "scheduling": {"timeout": "soon"}
    }
  })");
  std::vector<std::string> lines = Lines(ErrorOf(j));
  EXPECT_GE(lines.size(), 8u);
  std::string all;
  for (const auto& l : lines) {
    EXPECT_TRUE(l.rfind("jobSpec.", 0) == 0 || l.rfind("labels.", 0) == 0 ||
                l.rfind("displayName", 0) == 0)
        << l;
    all += l + "\n";
  }
  EXPECT_THAT(all, HasSubstr("displayName: required"));
  EXPECT_THAT(all, HasSubstr("labels.Bad:"));
  EXPECT_THAT(all, HasSubstr("jobSpec.workerPoolSpecs[0].replicaCount:"));
  EXPECT_THAT(all, HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.machineType: required"));
  EXPECT_THAT(all, HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount:"));
  EXPECT_THAT(all, HasSubstr("jobSpec.workerPoolSpecs[0].containerSpec.imageUri: required"));
  EXPECT_THAT(all, HasSubstr("jobSpec.workerPoolSpecs[1]: 'machine_spec' is not a field"));
  EXPECT_THAT(all, HasSubstr("jobSpec.scheduling.timeout:"));
  // The snake_case key explains the missing machineSpec; no second line for it.
  EXPECT_THAT(all, Not(HasSubstr("workerPoolSpecs[1].machineSpec.machineType")));
}

TEST(CustomJobTest, ChecksPassthroughFieldShapes) {
  json j = MinimalJob();
  j["jobSpec"]["reservedIpRanges"] = "vertex-ai-ip-range";
  j["jobSpec"]["workerPoolSpecs"][0]["diskSpec"] = {{"boot_disk_size_gb", 100}};
  j["jobSpec"]["workerPoolSpecs"][0]["nfsMounts"] = {{{"server", "10.0.0.1"}, {"path", "share"}}};
  std::string e = ErrorOf(j);
  EXPECT_THAT(e, HasSubstr("jobSpec.reservedIpRanges: must be a list of strings"));
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].diskSpec: 'boot_disk_size_gb' is not a "
                           "field; use the camelCase spelling 'bootDiskSizeGb'"));
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].nfsMounts[0].mountPoint: required"));
  EXPECT_THAT(e, HasSubstr("jobSpec.workerPoolSpecs[0].nfsMounts[0].path: must start with '/'"));
}

TEST(CustomJobTest, ListsUnhonouredFields) {
  json j = MinimalJob();
  j["encryptionSpec"] = {{"kmsKeyName", "k"}};
  json& spec = j["jobSpec"];
  spec["serviceAccount"] = "sa@p.iam.gserviceaccount.com";
  spec["network"] = "projects/1/global/networks/n";
  spec["enableWebAccess"] = true;
  spec["enableDashboardAccess"] = false;
  spec["scheduling"] = {{"strategy", "FLEX_START"}};
  spec["workerPoolSpecs"][0]["machineSpec"]["tpuTopology"] = "2x2x1";
  spec["workerPoolSpecs"][0]["machineSpec"]["reservationAffinity"] = {
      {"reservationAffinityType", "ANY_RESERVATION"}};
  spec["workerPoolSpecs"][0]["diskSpec"] = {{"bootDiskSizeGb", 200}};
  spec["workerPoolSpecs"][0]["nfsMounts"] = {
      {{"server", "10.0.0.1"}, {"path", "/share"}, {"mountPoint", "data"}}};
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(UnhonouredFields(*r),
              ElementsAre("encryptionSpec", "jobSpec.serviceAccount", "jobSpec.network",
                          "jobSpec.enableWebAccess",
                          "jobSpec.workerPoolSpecs[0].machineSpec.reservationAffinity",
                          "jobSpec.workerPoolSpecs[0].machineSpec.tpuTopology",
                          "jobSpec.workerPoolSpecs[0].diskSpec", "jobSpec.scheduling.strategy"));
  auto again = ParseCustomJob(ToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *r);
}

TEST(CustomJobTest, ListsNothingUnhonouredForAPlainJob) {
  auto r = ParseCustomJob(json::parse(kReferenceExample));
  ASSERT_TRUE(r.ok());
  // The example names a service account and a boot disk; nothing else.
  EXPECT_THAT(UnhonouredFields(*r),
              ElementsAre("jobSpec.serviceAccount", "jobSpec.workerPoolSpecs[0].diskSpec"));
  EXPECT_TRUE(UnhonouredFields(*ParseCustomJob(MinimalJob())).empty());
}

TEST(CustomJobTest, ValidateChecksAJobBuiltInCode) {
  CustomJob job;
  job.display_name = "built";
  WorkerPoolSpec pool;
  pool.machine_spec.machine_type = "n1-standard-4";
  pool.container_spec = ContainerSpec{"trainer:1", {}, {}, {}};
  job.job_spec.worker_pool_specs.push_back(pool);
  EXPECT_TRUE(Validate(job).ok());
  job.job_spec.worker_pool_specs[0].replica_count = 4;
  job.job_spec.worker_pool_specs[0].machine_spec.accelerator_type = "GPU";
  job.job_spec.worker_pool_specs[0].machine_spec.accelerator_count = 1;
  Status s = Validate(job);
  EXPECT_THAT(s.message(), HasSubstr("jobSpec.workerPoolSpecs[0].replicaCount: the primary pool"));
  EXPECT_THAT(s.message(), HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: "
                                     "'GPU' is not an accelerator type"));
}

TEST(CustomJobTest, RoundTripsFractionalDurations) {
  json j = MinimalJob();
  j["jobSpec"]["scheduling"] = {{"timeout", "3600.25s"}, {"maxWaitDuration", "1234567.5s"}};
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json out = ToJson(*r);
  EXPECT_EQ(out["jobSpec"]["scheduling"]["timeout"], "3600.25s");
  EXPECT_EQ(out["jobSpec"]["scheduling"]["maxWaitDuration"], "1234567.5s");
  EXPECT_EQ(*ParseCustomJob(out), *r);
}

TEST(CustomJobTest, AcceptsAShareOfOneGpuAndRoundTripsIt) {
  json j = MinimalJob();
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_TESLA_T4";
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 0.25;
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job_spec.worker_pool_specs[0].machine_spec.accelerator_count, 0.25);
  json out = ToJson(*r);
  EXPECT_EQ(out["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"], 0.25);
  EXPECT_EQ(*ParseCustomJob(out), *r);
  // Whole counts stay integers in the output, also when written as 2.0.
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 2.0;
  out = ToJson(*ParseCustomJob(j));
  EXPECT_TRUE(
      out["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"].is_number_integer());
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = 1.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount: must "
                                    "be a whole number of GPUs, or a share of one GPU"));
  j["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorCount"] = -0.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("acceleratorCount: must be a whole number"));
}

TEST(CustomJobTest, ReadsPriorityAndMaxRetriesWithinTheirRanges) {
  json j = MinimalJob();
  j["jobSpec"]["scheduling"] = {{"priority", 5}, {"maxRetries", "2"}};
  auto r = ParseCustomJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job_spec.scheduling.priority, 5);
  EXPECT_EQ(r->job_spec.scheduling.max_retries, 2);
  json out = ToJson(*r);
  EXPECT_EQ(out["jobSpec"]["scheduling"]["priority"], 5);
  EXPECT_EQ(*ParseCustomJob(out), *r);
  j["jobSpec"]["scheduling"] = {{"priority", 5000}, {"maxRetries", -1}};
  std::string error = ErrorOf(j);
  EXPECT_THAT(error, HasSubstr("jobSpec.scheduling.priority"));
  EXPECT_THAT(error, HasSubstr("jobSpec.scheduling.maxRetries"));
}

TEST(CustomJobTest, RejectsANonObjectDocument) {
  EXPECT_THAT(ErrorOf(json::array()), HasSubstr("must be an object"));
  EXPECT_THAT(ErrorOf(json::object()), HasSubstr("jobSpec: required"));
}

}  // namespace
}  // namespace stoker::spec
