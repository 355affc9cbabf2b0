#include "spec/ai_platform.h"

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
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Reference §6, verbatim.
constexpr const char* kLegacyExample = R"yaml(
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-8
  masterConfig: {acceleratorConfig: {count: 1, type: NVIDIA_TESLA_T4}}
  workerType: n1-standard-8
  workerCount: 2
  parameterServerType: n1-standard-4
  parameterServerCount: 1
  scheduling: {maxRunningTime: 7200s}
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: accuracy
    maxTrials: 10
    maxParallelTrials: 2
    enableTrialEarlyStopping: true
    params:
    - {parameterName: learning_rate, type: DOUBLE, minValue: 0.0001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}
    - {parameterName: batch_size, type: DISCRETE, discreteValues: [32, 64, 128]}
    - {parameterName: hidden_units, type: CATEGORICAL, categoricalValues: ["64,16", "128,32"]}
)yaml";

// A python-package trainingInput with the given extra fields.
json PythonInput(const json& extra = json::object()) {
  json ti = {{"packageUris", {"gs://b/trainer-0.1.tar.gz"}},
             {"pythonModule", "trainer.task"},
             {"region", "us-central1"}};
  ti.update(extra);
  return ti;
}

LegacyTraining Convert(const json& ti, const std::string& id = "job_1") {
  auto r = FromTrainingInput(id, ti);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : LegacyTraining{};
}

std::string ErrorOf(const json& ti, const std::string& id = "job_1") {
  auto r = FromTrainingInput(id, ti);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

std::string FlagError(const LegacyFlags& flags, const json& config = nullptr) {
  auto r = TrainingInputFromFlags(flags, config);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

const WorkerPoolSpec& PoolOf(const LegacyTraining& t, size_t i) {
  return t.job.job_spec.worker_pool_specs.at(i);
}

void ExpectRoundTrip(const CustomJob& job) {
  auto again = ParseCustomJob(ToJson(job));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, job);
}

// ---- FromTrainingInput ----

TEST(FromTrainingInputTest, ConvertsTheReferenceExampleSubmittedWithFlags) {
  auto config = ParseYamlOrJson(kLegacyExample, "config.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  LegacyFlags flags;
  flags.job_dir = "gs://b/jobs/j1";
  flags.package_uris = std::vector<std::string>{"gs://b/staging/trainer-0.1.tar.gz"};
  flags.module_name = "trainer.task";
  flags.region = "us-central1";
  flags.user_args = std::vector<std::string>{"--epochs=5"};
  auto ti = TrainingInputFromFlags(flags, (*config)["trainingInput"]);
  ASSERT_TRUE(ti.ok()) << ti.status().ToString();
  LegacyTraining t = Convert(*ti, "hp_job");

  EXPECT_EQ(t.job.display_name, "hp_job");
  EXPECT_EQ(t.region, "us-central1");
  ASSERT_EQ(t.job.job_spec.worker_pool_specs.size(), 3u);
  const WorkerPoolSpec& master = PoolOf(t, 0);
  EXPECT_EQ(master.replica_count, 1);
  EXPECT_EQ(master.machine_spec.machine_type, "n1-standard-8");
  EXPECT_EQ(master.machine_spec.accelerator_type, "NVIDIA_TESLA_T4");
  EXPECT_EQ(master.machine_spec.accelerator_count, 1);
  ASSERT_TRUE(master.python_package_spec.has_value());
  EXPECT_EQ(master.python_package_spec->executor_image_uri,
            "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11.py310:latest");
  EXPECT_THAT(master.python_package_spec->package_uris,
              ElementsAre("gs://b/staging/trainer-0.1.tar.gz"));
  EXPECT_EQ(master.python_package_spec->python_module, "trainer.task");
  EXPECT_THAT(master.python_package_spec->args,
              ElementsAre("--epochs=5", "--job-dir=gs://b/jobs/j1"));

  EXPECT_EQ(PoolOf(t, 1).replica_count, 2);
  EXPECT_EQ(PoolOf(t, 1).machine_spec.machine_type, "n1-standard-8");
  EXPECT_EQ(PoolOf(t, 1).machine_spec.accelerator_type, "");
  EXPECT_EQ(PoolOf(t, 1).python_package_spec->executor_image_uri,
            "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest");
  EXPECT_THAT(PoolOf(t, 1).python_package_spec->args,
              ElementsAre("--epochs=5", "--job-dir=gs://b/jobs/j1"));
  EXPECT_EQ(PoolOf(t, 2).replica_count, 1);
  EXPECT_EQ(PoolOf(t, 2).machine_spec.machine_type, "n1-standard-4");
  EXPECT_THAT(PoolOf(t, 2).python_package_spec->args, Contains("--job-dir=gs://b/jobs/j1"));

  EXPECT_EQ(t.job.job_spec.base_output_directory, "gs://b/jobs/j1");
  EXPECT_EQ(t.job.job_spec.scheduling.timeout_seconds, 7200);
  EXPECT_EQ(t.hyperparameters["hyperparameterMetricTag"], "accuracy");
  EXPECT_EQ(t.hyperparameters["params"].size(), 3u);
  ExpectRoundTrip(t.job);
}

TEST(FromTrainingInputTest, ExpandsStandard1IntoMasterWorkersAndParameterServers) {
  LegacyTraining t = Convert(PythonInput({{"scaleTier", "STANDARD_1"}}));
  ASSERT_EQ(t.job.job_spec.worker_pool_specs.size(), 3u);
  EXPECT_EQ(PoolOf(t, 0).machine_spec.machine_type, "n1-highcpu-8");
  EXPECT_EQ(PoolOf(t, 0).replica_count, 1);
  EXPECT_EQ(PoolOf(t, 1).machine_spec.machine_type, "n1-highcpu-8");
  EXPECT_EQ(PoolOf(t, 1).replica_count, 4);
  EXPECT_EQ(PoolOf(t, 2).machine_spec.machine_type, "n1-standard-4");
  EXPECT_EQ(PoolOf(t, 2).replica_count, 3);
  ExpectRoundTrip(t.job);
}

TEST(FromTrainingInputTest, ExpandsBasicByDefaultAndTheOtherPredefinedTiers) {
  LegacyTraining basic = Convert(PythonInput());
  ASSERT_EQ(basic.job.job_spec.worker_pool_specs.size(), 1u);
  EXPECT_EQ(PoolOf(basic, 0).machine_spec.machine_type, "n1-standard-4");

  LegacyTraining gpu = Convert(PythonInput({{"scaleTier", "BASIC_GPU"}}));
  ASSERT_EQ(gpu.job.job_spec.worker_pool_specs.size(), 1u);
  EXPECT_EQ(PoolOf(gpu, 0).machine_spec.machine_type, "n1-standard-8");
  EXPECT_EQ(PoolOf(gpu, 0).machine_spec.accelerator_type, "NVIDIA_TESLA_K80");
  EXPECT_EQ(PoolOf(gpu, 0).machine_spec.accelerator_count, 1);
  EXPECT_THAT(PoolOf(gpu, 0).python_package_spec->executor_image_uri, HasSubstr("/tf-gpu."));

  LegacyTraining premium = Convert(PythonInput({{"scaleTier", "PREMIUM_1"}}));
  EXPECT_EQ(PoolOf(premium, 0).machine_spec.machine_type, "n1-highcpu-16");
  EXPECT_EQ(PoolOf(premium, 1).replica_count, 19);
  EXPECT_EQ(PoolOf(premium, 2).machine_spec.machine_type, "n1-highmem-8");
  EXPECT_EQ(PoolOf(premium, 2).replica_count, 11);
}

TEST(FromTrainingInputTest, RefusesBasicTpuBecauseStokerRunsNoTpus) {
  std::string e = ErrorOf(PythonInput({{"scaleTier", "BASIC_TPU"}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.scaleTier: BASIC_TPU runs on a Cloud TPU"));
  EXPECT_THAT(e, HasSubstr("TPUs are not supported on Stoker"));
}

TEST(FromTrainingInputTest, RefusesTpuMachinesAndAccelerators) {
  EXPECT_THAT(ErrorOf(PythonInput({{"scaleTier", "CUSTOM"}, {"masterType", "cloud_tpu"}})),
              HasSubstr("trainingInput.masterType: TPUs are not supported"));
  EXPECT_THAT(ErrorOf(PythonInput(
                  {{"scaleTier", "CUSTOM"},
                   {"masterType", "n1-standard-8"},
                   {"masterConfig", {{"acceleratorConfig", {{"type", "TPU_V3"}, {"count", 8}}}}}})),
              HasSubstr("trainingInput.masterConfig.acceleratorConfig.type: TPUs are not"));
}

TEST(FromTrainingInputTest, RefusesAnUnknownScaleTier) {
  EXPECT_THAT(ErrorOf(PythonInput({{"scaleTier", "standard-1"}})),
              HasSubstr("trainingInput.scaleTier: 'standard-1' is not a scale tier; use one of "
                        "BASIC, STANDARD_1"));
}

TEST(FromTrainingInputTest, CustomTierRequiresAMachineTypeForEveryRoleItRuns) {
  std::string e = ErrorOf(PythonInput({{"scaleTier", "CUSTOM"},
                                       {"workerCount", 2},
                                       {"parameterServerCount", "1"},
                                       {"evaluatorCount", 1}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.masterType: required when scaleTier is CUSTOM"));
  EXPECT_THAT(e, HasSubstr("trainingInput.workerType: required when workerCount is 2"));
  EXPECT_THAT(e, HasSubstr("trainingInput.parameterServerType: required when "
                           "parameterServerCount is 1"));
  EXPECT_THAT(e, HasSubstr("trainingInput.evaluatorType: required when evaluatorCount is 1"));
}

TEST(FromTrainingInputTest, KeepsEmptyPlaceholdersForAbsentMiddlePools) {
  LegacyTraining t = Convert(PythonInput({{"scaleTier", "CUSTOM"},
                                          {"masterType", "n1-standard-4"},
                                          {"workerType", "n1-standard-4"},
                                          {"workerCount", 0},
                                          {"evaluatorType", "n1-standard-4"},
                                          {"evaluatorCount", 1}}));
  ASSERT_EQ(t.job.job_spec.worker_pool_specs.size(), 4u);
  EXPECT_TRUE(PoolOf(t, 1).empty);
  EXPECT_TRUE(PoolOf(t, 2).empty);
  EXPECT_EQ(PoolOf(t, 3).replica_count, 1);
  ExpectRoundTrip(t.job);
}

TEST(FromTrainingInputTest, RefusesMachineChoicesOutsideTheCustomTier) {
  std::string e = ErrorOf(PythonInput(
      {{"scaleTier", "STANDARD_1"}, {"masterType", "n1-standard-8"}, {"workerCount", 9}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.masterType: only allowed with scaleTier CUSTOM"));
  EXPECT_THAT(e, HasSubstr("trainingInput.workerCount: only allowed with scaleTier CUSTOM"));
}

TEST(FromTrainingInputTest, PassesLegacyAndComputeEngineMachineNamesThrough) {
  LegacyTraining t = Convert(PythonInput({{"scaleTier", "CUSTOM"},
                                          {"masterType", "complex_model_m_gpu"},
                                          {"workerType", "large_model"},
                                          {"workerCount", 1},
                                          {"parameterServerType", "e2-standard-4"},
                                          {"parameterServerCount", 1}}));
  EXPECT_EQ(PoolOf(t, 0).machine_spec.machine_type, "complex_model_m_gpu");
  EXPECT_EQ(PoolOf(t, 0).machine_spec.accelerator_type, "");  // the catalog knows its GPUs
  EXPECT_THAT(PoolOf(t, 0).python_package_spec->executor_image_uri, HasSubstr("/tf-gpu."));
  EXPECT_EQ(PoolOf(t, 1).machine_spec.machine_type, "large_model");
  EXPECT_EQ(PoolOf(t, 2).machine_spec.machine_type, "e2-standard-4");
}

TEST(FromTrainingInputTest, MapsP100AndV100LegacyNamesToTheirMachineAndGpus) {
  LegacyTraining t = Convert(PythonInput({{"scaleTier", "CUSTOM"},
                                          {"masterType", "standard_p100"},
                                          {"workerType", "complex_model_m_v100"},
                                          {"workerCount", 2}}));
  EXPECT_EQ(PoolOf(t, 0).machine_spec.machine_type, "n1-standard-8");
  EXPECT_EQ(PoolOf(t, 0).machine_spec.accelerator_type, "NVIDIA_TESLA_P100");
  EXPECT_EQ(PoolOf(t, 0).machine_spec.accelerator_count, 1);
  EXPECT_EQ(PoolOf(t, 1).machine_spec.machine_type, "n1-standard-16");
  EXPECT_EQ(PoolOf(t, 1).machine_spec.accelerator_type, "NVIDIA_TESLA_V100");
  EXPECT_EQ(PoolOf(t, 1).machine_spec.accelerator_count, 4);
  EXPECT_EQ(PoolOf(t, 1).replica_count, 2);
}

TEST(FromTrainingInputTest, ChecksAcceleratorConfigs) {
  json base = PythonInput({{"scaleTier", "CUSTOM"}, {"masterType", "n1-standard-8"}});
  json bad_type = base;
  bad_type["masterConfig"] = {{"acceleratorConfig", {{"type", "GTX_1080"}, {"count", 1}}}};
  EXPECT_THAT(ErrorOf(bad_type),
              HasSubstr("trainingInput.masterConfig.acceleratorConfig.type: 'GTX_1080' is not"));
  json no_type = base;
  no_type["masterConfig"] = {{"acceleratorConfig", {{"count", "2"}}}};
  EXPECT_THAT(ErrorOf(no_type),
              HasSubstr("trainingInput.masterConfig.acceleratorConfig.type: required when count"));
  json zero = base;
  zero["masterConfig"] = {{"acceleratorConfig", {{"type", "NVIDIA_TESLA_T4"}, {"count", 0}}}};
  EXPECT_THAT(ErrorOf(zero),
              HasSubstr("trainingInput.masterConfig.acceleratorConfig.count: must be at least 1"));
  json string_count = base;
  string_count["masterConfig"] = {
      {"acceleratorConfig", {{"type", "NVIDIA_TESLA_V100"}, {"count", "2"}}}};
  LegacyTraining t = Convert(string_count);
  EXPECT_EQ(PoolOf(t, 0).machine_spec.accelerator_count, 2);
}

TEST(FromTrainingInputTest, RunsCustomContainersWithTheirCommandAndArgs) {
  json ti = json::parse(R"({
    "scaleTier": "CUSTOM", "masterType": "n1-standard-8", "workerType": "n1-standard-8",
    "workerCount": 2, "parameterServerType": "n1-standard-4", "parameterServerCount": 1,
    "masterConfig": {"imageUri": "gcr.io/p/trainer:1", "containerCommand": ["python3", "-m", "t"],
                     "containerArgs": ["--a=1"]},
    "parameterServerConfig": {"imageUri": "gcr.io/p/ps:1"},
    "jobDir": "gs://b/out"
  })");
  LegacyTraining t = Convert(ti);
  const ContainerSpec& m = *PoolOf(t, 0).container_spec;
  EXPECT_EQ(m.image_uri, "gcr.io/p/trainer:1");
  EXPECT_THAT(m.command, ElementsAre("python3", "-m", "t"));
  EXPECT_THAT(m.args, ElementsAre("--a=1", "--job-dir=gs://b/out"));
  // Workers give no imageUri: they run the master's container.
  EXPECT_EQ(PoolOf(t, 1).container_spec->image_uri, "gcr.io/p/trainer:1");
  EXPECT_THAT(PoolOf(t, 1).container_spec->command, ElementsAre("python3", "-m", "t"));
  EXPECT_EQ(PoolOf(t, 2).container_spec->image_uri, "gcr.io/p/ps:1");
  EXPECT_THAT(PoolOf(t, 2).container_spec->command, IsEmpty());
  EXPECT_THAT(PoolOf(t, 2).container_spec->args, ElementsAre("--job-dir=gs://b/out"));
  EXPECT_FALSE(PoolOf(t, 0).python_package_spec.has_value());
  ExpectRoundTrip(t.job);
}

TEST(FromTrainingInputTest, LetsAPoolOnTheMastersImageGiveItsOwnArgs) {
  LegacyTraining t = Convert({{"scaleTier", "CUSTOM"},
                              {"masterType", "n1-standard-4"},
                              {"workerType", "n1-standard-4"},
                              {"workerCount", 1},
                              {"masterConfig", {{"imageUri", "i:1"}, {"containerArgs", {"--m"}}}},
                              {"workerConfig", {{"containerArgs", {"--w"}}}}});
  EXPECT_EQ(PoolOf(t, 1).container_spec->image_uri, "i:1");
  EXPECT_THAT(PoolOf(t, 1).container_spec->args, ElementsAre("--w"));
}

TEST(FromTrainingInputTest, GivesTrainingInputArgsToCustomContainersWithoutContainerArgs) {
  LegacyTraining t =
      Convert({{"masterConfig", {{"imageUri", "gcr.io/p/t:1"}}}, {"args", {"--epochs=2"}}});
  EXPECT_THAT(PoolOf(t, 0).container_spec->args, ElementsAre("--epochs=2"));
}

TEST(FromTrainingInputTest, RefusesContainerArgsTogetherWithArgs) {
  EXPECT_THAT(ErrorOf({{"masterConfig", {{"imageUri", "i"}, {"containerArgs", {"--a"}}}},
                       {"args", {"--b"}}}),
              HasSubstr("trainingInput.masterConfig.containerArgs: cannot be used with "
                        "trainingInput.args"));
}

TEST(FromTrainingInputTest, RefusesContainerFieldsWithoutAnImage) {
  EXPECT_THAT(ErrorOf(PythonInput({{"masterConfig", {{"containerCommand", {"x"}}}}})),
              HasSubstr("trainingInput.masterConfig.containerCommand: only allowed with imageUri"));
  // Reported even when another problem keeps the pool from being built.
  EXPECT_THAT(ErrorOf(PythonInput(
                  {{"scaleTier", "CUSTOM"}, {"evaluatorConfig", {{"containerArgs", {"x"}}}}})),
              HasSubstr("trainingInput.evaluatorConfig.containerArgs: only allowed with imageUri"));
}

TEST(FromTrainingInputTest, RequiresThePackageAndModuleOfPythonPools) {
  std::string e = ErrorOf({{"region", "us-central1"}});
  EXPECT_THAT(e, HasSubstr("trainingInput.packageUris: required"));
  EXPECT_THAT(e, HasSubstr("trainingInput.pythonModule: required"));
}

TEST(FromTrainingInputTest, ChoosesTheTensorFlowImageFromTheRuntimeVersion) {
  auto image = [](const char* runtime) {
    LegacyTraining t = Convert(PythonInput({{"runtimeVersion", runtime}}));
    return PoolOf(t, 0).python_package_spec->executor_image_uri;
  };
  EXPECT_EQ(image("1.15"), "us-docker.pkg.dev/vertex-ai/training/tf-cpu.1-15:latest");
  EXPECT_EQ(image("1.4"), "us-docker.pkg.dev/vertex-ai/training/tf-cpu.1-15:latest");
  EXPECT_EQ(image("2.8"), "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-8:latest");
  EXPECT_EQ(image("2.12"), "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-12.py310:latest");
  EXPECT_THAT(ErrorOf(PythonInput({{"runtimeVersion", "latest"}})),
              HasSubstr("trainingInput.runtimeVersion: 'latest' is not a runtime version"));
}

TEST(FromTrainingInputTest, RefusesUnknownFieldsAndListsTheKnownOnes) {
  std::string e = ErrorOf(PythonInput({{"masterMachine", "x"}}));
  EXPECT_THAT(e, HasSubstr("trainingInput: unknown field 'masterMachine'"));
  EXPECT_THAT(e, HasSubstr("scaleTier, masterType, masterConfig"));
  EXPECT_THAT(ErrorOf(PythonInput({{"scale_tier", "BASIC"}})),
              HasSubstr("use the camelCase spelling 'scaleTier'"));
}

TEST(FromTrainingInputTest, NamesFieldsUnderTheGivenPrefix) {
  auto r = FromTrainingInput("j", json::object(), "job.trainingInput");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("job.trainingInput.packageUris: required"));
}

TEST(FromTrainingInputTest, MapsSchedulingToVertexScheduling) {
  LegacyTraining t = Convert(PythonInput(
      {{"scheduling", {{"maxRunningTime", "3600s"}, {"maxWaitTime", "7200s"}, {"priority", 5}}}}));
  EXPECT_EQ(t.job.job_spec.scheduling.timeout_seconds, 3600);
  EXPECT_EQ(t.job.job_spec.scheduling.max_wait_seconds, 7200);
  EXPECT_EQ(t.job.job_spec.scheduling.priority, 5);  // Stoker's extension honours it
  EXPECT_THAT(ErrorOf(PythonInput({{"scheduling", {{"maxWaitTime", "60s"}}}})),
              HasSubstr("trainingInput.scheduling.maxWaitTime: must be at least 1800s"));
  EXPECT_THAT(ErrorOf(PythonInput({{"scheduling", {{"maxRunningTime", "soon"}}}})),
              HasSubstr("trainingInput.scheduling.maxRunningTime"));
}

TEST(FromTrainingInputTest, RefusesANegativeDurationNamingTheField) {
  std::string e = ErrorOf(PythonInput({{"scheduling", {{"maxRunningTime", -5}}}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.scheduling.maxRunningTime: -5 is not a duration; write "
                           "non-negative seconds like \"3600s\""));
  EXPECT_THAT(e, Not(HasSubstr("must be positive")));  // one line for one mistake
  EXPECT_THAT(ErrorOf(PythonInput({{"scheduling", {{"maxWaitTime", -3600}}}})),
              HasSubstr("trainingInput.scheduling.maxWaitTime: -3600 is not a duration"));
}

TEST(FromTrainingInputTest, RefusesANegativeCountNamingTheField) {
  EXPECT_THAT(ErrorOf(PythonInput({{"scaleTier", "CUSTOM"},
                                   {"masterType", "n1-standard-4"},
                                   {"workerType", "n1-standard-4"},
                                   {"workerCount", -1}})),
              HasSubstr("trainingInput.workerCount: must be at least 0, got -1"));
  EXPECT_THAT(ErrorOf(PythonInput({{"masterConfig", {{"acceleratorConfig", {{"count", "x"}}}}}})),
              HasSubstr("trainingInput.masterConfig.acceleratorConfig.count: must be a whole "
                        "number"));
}

TEST(FromTrainingInputTest, NamesTheBadElementOfAStringList) {
  std::string e = ErrorOf(PythonInput({{"args", {"--epochs", 2}}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.args[1]: must be a string, got a number"));
  // A bad containerCommand is not taken as given: no follow-on about imageUri.
  e = ErrorOf(PythonInput({{"masterConfig", {{"containerCommand", "python3"}}}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.masterConfig.containerCommand: must be a list of "
                           "strings, got a string"));
  EXPECT_THAT(e, Not(HasSubstr("only allowed with imageUri")));
}

TEST(FromTrainingInputTest, SaysNothingMoreAboutAFieldOfTheWrongType) {
  std::string e = ErrorOf(PythonInput({{"runtimeVersion", 2.11}}));
  EXPECT_THAT(e, HasSubstr("trainingInput.runtimeVersion: must be a string, got a number (quote "
                           "it in YAML)"));
  EXPECT_THAT(e, Not(HasSubstr("is not a runtime version")));
}

TEST(FromTrainingInputTest, KeepsFieldsItDoesNotActOnAndListsThem) {
  LegacyTraining t = Convert(PythonInput({{"network", "projects/1/global/networks/n"},
                                          {"serviceAccount", "sa@p"},
                                          {"encryptionConfig", {{"kmsKeyName", "k"}}},
                                          {"enableWebAccess", true},
                                          {"pythonVersion", "3.7"},
                                          {"runtimeVersion", "2.11"},
                                          {"useChiefInTfConfig", true}}));
  EXPECT_TRUE(t.use_chief_in_tf_config);
  EXPECT_EQ(t.job.job_spec.passthrough["network"], "projects/1/global/networks/n");
  EXPECT_EQ(t.job.job_spec.passthrough["serviceAccount"], "sa@p");
  EXPECT_EQ(t.job.passthrough["encryptionSpec"]["kmsKeyName"], "k");
  for (const char* f : {"network", "serviceAccount", "encryptionConfig", "enableWebAccess",
                        "pythonVersion", "runtimeVersion"}) {
    EXPECT_THAT(t.unhonoured, Contains(std::string("trainingInput.") + f));
  }
  EXPECT_THAT(UnhonouredFields(t.job), Contains("jobSpec.network"));
  ExpectRoundTrip(t.job);
}

TEST(FromTrainingInputTest, TurnsDiskConfigIntoDiskSpec) {
  LegacyTraining t = Convert(PythonInput(
      {{"masterConfig",
        {{"diskConfig", {{"bootDiskType", "pd-standard"}, {"bootDiskSizeGb", 200}}}}}}));
  EXPECT_EQ(PoolOf(t, 0).extra["diskSpec"]["bootDiskSizeGb"], 200);
}

TEST(FromTrainingInputTest, RefusesABadJobId) {
  EXPECT_THAT(ErrorOf(PythonInput(), "9lives"),
              HasSubstr("jobId: '9lives' must start with a letter"));
  EXPECT_THAT(ErrorOf(PythonInput(), "my-job"), HasSubstr("jobId: 'my-job'"));
  EXPECT_THAT(ErrorOf(PythonInput(), ""), HasSubstr("jobId: required"));
}

TEST(FromTrainingInputTest, KeepsLabels) {
  auto r = FromTrainingInput("j", PythonInput(), "trainingInput", {{"team", "ml"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.labels.at("team"), "ml");
  auto bad = FromTrainingInput("j", PythonInput(), "trainingInput", {{"Team", "ml"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("trainingInput (as the CustomJob field labels.Team"));
}

// ---- FromLegacyJob ----

TEST(FromLegacyJobTest, DropsOutputOnlyFieldsSoDescribeOutputCanBeResubmitted) {
  json job = {{"jobId", "j1"},
              {"trainingInput", PythonInput()},
              {"labels", {{"team", "ml"}}},
              {"state", "SUCCEEDED"},
              {"createTime", "2024-01-01T00:00:00Z"},
              {"trainingOutput", json::object()},
              {"etag", "abc"}};
  auto r = FromLegacyJob(job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job.display_name, "j1");
  EXPECT_EQ(r->job.labels.at("team"), "ml");
}

TEST(FromLegacyJobTest, NamesTheTopLevelForAnUnknownField) {
  EXPECT_THAT(FromLegacyJob({{"jobId", "j"}, {"trainingInput", PythonInput()}, {"x", 1}})
                  .status()
                  .message(),
              HasSubstr("(top level): unknown field 'x'; the fields here are jobId, "
                        "trainingInput, labels, etag"));
}

TEST(FromLegacyJobTest, RefusesPredictionJobsAndUnknownFields) {
  EXPECT_THAT(
      FromLegacyJob({{"jobId", "j"}, {"predictionInput", json::object()}}).status().message(),
      HasSubstr("predictionInput: prediction jobs are not supported"));
  EXPECT_THAT(FromLegacyJob({{"jobId", "j"}, {"trainingInput", PythonInput()}, {"x", 1}})
                  .status()
                  .message(),
              HasSubstr("unknown field 'x'"));
  EXPECT_THAT(FromLegacyJob({{"jobId", "j"}}).status().message(),
              HasSubstr("trainingInput: required"));
}

// ---- Legacy Job output ----

TEST(LegacyStateNameTest, MapsEveryVertexStateToALegacyOne) {
  EXPECT_EQ(LegacyStateName("JOB_STATE_QUEUED"), "QUEUED");
  EXPECT_EQ(LegacyStateName("JOB_STATE_PENDING"), "PREPARING");
  EXPECT_EQ(LegacyStateName("JOB_STATE_RUNNING"), "RUNNING");
  EXPECT_EQ(LegacyStateName("JOB_STATE_SUCCEEDED"), "SUCCEEDED");
  EXPECT_EQ(LegacyStateName("JOB_STATE_FAILED"), "FAILED");
  EXPECT_EQ(LegacyStateName("JOB_STATE_CANCELLING"), "CANCELLING");
  EXPECT_EQ(LegacyStateName("JOB_STATE_CANCELLED"), "CANCELLED");
  EXPECT_EQ(LegacyStateName("PENDING"), "PREPARING");
  EXPECT_EQ(LegacyStateName("JOB_STATE_UNSPECIFIED"), "STATE_UNSPECIFIED");
  EXPECT_EQ(LegacyStateName("JOB_STATE_EXPIRED"), "FAILED");
  EXPECT_EQ(LegacyStateName("nonsense"), "STATE_UNSPECIFIED");
}

TEST(ToLegacyJobTest, ShowsTheJobInTheLegacyShape) {
  json ti = PythonInput();
  json j = ToLegacyJob("j1", ti, "JOB_STATE_FAILED", "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z",
                       "2024-01-01T00:02:00Z", "exit code 3");
  EXPECT_EQ(j, json({{"jobId", "j1"},
                     {"trainingInput", ti},
                     {"createTime", "2024-01-01T00:00:00Z"},
                     {"startTime", "2024-01-01T00:01:00Z"},
                     {"endTime", "2024-01-01T00:02:00Z"},
                     {"state", "FAILED"},
                     {"errorMessage", "exit code 3"},
                     {"trainingOutput", json::object()}}));
}

TEST(ToLegacyJobTest, LeavesOutUnsetTimesAndAddsLabelsAndEtag) {
  LegacyJobStatus s;
  s.vertex_state = "JOB_STATE_PENDING";
  s.create_time = "2024-01-01T00:00:00Z";
  s.labels = {{"team", "ml"}};
  s.etag = "e1";
  json j = ToLegacyJob("j1", PythonInput(), s);
  EXPECT_EQ(j["state"], "PREPARING");
  EXPECT_FALSE(j.contains("startTime"));
  EXPECT_FALSE(j.contains("endTime"));
  EXPECT_FALSE(j.contains("errorMessage"));
  EXPECT_EQ(j["labels"]["team"], "ml");
  EXPECT_EQ(j["etag"], "e1");
  EXPECT_EQ(j["trainingOutput"], json::object());
}

// ---- TrainingInputFromFlags ----

LegacyFlags PythonFlags() {
  LegacyFlags f;
  f.module_name = "trainer.task";
  f.package_uris = std::vector<std::string>{"gs://b/p.tar.gz"};
  f.region = "us-central1";
  return f;
}

TEST(TrainingInputFromFlagsTest, TranslatesTheCliSpellingOfScaleTiers) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"basic", "BASIC"},
                                                                  {"standard-1", "STANDARD_1"},
                                                                  {"premium-1", "PREMIUM_1"},
                                                                  {"basic-gpu", "BASIC_GPU"},
                                                                  {"STANDARD_1", "STANDARD_1"}};
  for (const auto& [cli, name] : cases) {
    LegacyFlags f = PythonFlags();
    f.scale_tier = cli;
    auto r = TrainingInputFromFlags(f, nullptr);
    ASSERT_TRUE(r.ok()) << cli << ": " << r.status().ToString();
    EXPECT_EQ((*r)["scaleTier"], name);
  }
  LegacyFlags bad = PythonFlags();
  bad.scale_tier = "huge";
  EXPECT_THAT(FlagError(bad), HasSubstr("--scale-tier: 'huge' is not a scale tier; use one of "
                                        "basic, standard-1, premium-1, basic-gpu"));
  bad.scale_tier = "basic-tpu";
  EXPECT_THAT(FlagError(bad), HasSubstr("--scale-tier: basic-tpu runs on a Cloud TPU"));
}

TEST(TrainingInputFromFlagsTest, RequiresAMasterMachineTypeForTheCustomTier) {
  LegacyFlags f = PythonFlags();
  f.scale_tier = "custom";
  EXPECT_THAT(FlagError(f),
              HasSubstr("--master-machine-type: required when --scale-tier is custom"));
  // The config may give it instead.
  EXPECT_EQ(FlagError(f, {{"masterType", "n1-standard-4"}}), "");
}

TEST(TrainingInputFromFlagsTest, OverridesTheConfigWithEachFlagGiven) {
  json config = {{"scaleTier", "CUSTOM"},
                 {"masterType", "n1-standard-4"},
                 {"workerType", "n1-standard-4"},
                 {"workerCount", 1},
                 {"args", {"--from-config"}},
                 {"pythonModule", "old.task"},
                 {"packageUris", {"gs://b/old.tar.gz"}}};
  LegacyFlags f;
  f.master_machine_type = "n1-standard-16";
  f.worker_count = 3;
  f.module_name = "new.task";
  f.user_args = std::vector<std::string>{"--from-flags"};
  f.job_dir = "gs://b/out";
  f.master_accelerator = "type=NVIDIA_TESLA_T4,count=2";
  f.worker_image_uri = "gcr.io/p/w:1";
  f.use_chief_in_tf_config = true;
  auto r = TrainingInputFromFlags(f, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["masterType"], "n1-standard-16");
  EXPECT_EQ((*r)["workerType"], "n1-standard-4");
  EXPECT_EQ((*r)["workerCount"], "3");
  EXPECT_EQ((*r)["pythonModule"], "new.task");
  EXPECT_EQ((*r)["packageUris"], json::array({"gs://b/old.tar.gz"}));
  EXPECT_EQ((*r)["args"], json::array({"--from-flags"}));
  EXPECT_EQ((*r)["jobDir"], "gs://b/out");
  EXPECT_EQ((*r)["masterConfig"]["acceleratorConfig"],
            json({{"type", "NVIDIA_TESLA_T4"}, {"count", "2"}}));
  EXPECT_EQ((*r)["workerConfig"]["imageUri"], "gcr.io/p/w:1");
  EXPECT_EQ((*r)["useChiefInTfConfig"], true);

  auto t = FromTrainingInput("j", *r);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->use_chief_in_tf_config);
  EXPECT_EQ(t->job.job_spec.worker_pool_specs[0].machine_spec.accelerator_count, 2);
  EXPECT_EQ(t->job.job_spec.worker_pool_specs[1].replica_count, 3);
  EXPECT_EQ(t->job.job_spec.worker_pool_specs[1].container_spec->image_uri, "gcr.io/p/w:1");
}

TEST(TrainingInputFromFlagsTest, ChecksAcceleratorFlags) {
  LegacyFlags f = PythonFlags();
  f.scale_tier = "custom";
  f.master_machine_type = "n1-standard-8";
  f.master_accelerator = "type=NVIDIA_TESLA_T4";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-accelerator: 'count' is required"));
  f.master_accelerator = "count=1";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-accelerator: 'type' is required"));
  f.master_accelerator = "type=NVIDIA_TESLA_T4,count=0";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-accelerator: 'count' must be at least 1, got 0"));
  f.master_accelerator = "type=NVIDIA_TESLA_T4,count=1,size=2";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-accelerator: unknown key 'size'"));
  f.master_accelerator = "type=TPU_V2,count=8";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-accelerator: TPUs are not supported"));
  f.master_accelerator = "count=8,type=tpu-v2";  // gcloud's spelling
  EXPECT_THAT(FlagError(f), HasSubstr("--master-accelerator: TPUs are not supported"));
  f.master_accelerator = std::nullopt;
  f.worker_accelerator = "type=K80,count=1";
  EXPECT_THAT(FlagError(f), HasSubstr("--worker-accelerator: 'K80' is not an accelerator type"));
}

TEST(TrainingInputFromFlagsTest, RequiresWorkerAndServerMachineTypesForTheirCounts) {
  LegacyFlags f = PythonFlags();
  f.scale_tier = "custom";
  f.master_machine_type = "n1-standard-8";
  f.worker_count = 2;
  f.parameter_server_count = 1;
  std::string e = FlagError(f);
  EXPECT_THAT(e, HasSubstr("--worker-machine-type: required when --worker-count is 2"));
  EXPECT_THAT(e, HasSubstr("--parameter-server-machine-type: required when "
                           "--parameter-server-count is 1"));
}

TEST(TrainingInputFromFlagsTest, RefusesMasterImageUriWithRuntimeVersion) {
  LegacyFlags f;
  f.master_image_uri = "gcr.io/p/t:1";
  f.runtime_version = "2.11";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-image-uri: cannot be used with --runtime-version"));
}

TEST(TrainingInputFromFlagsTest, RequiresAModuleUnlessTheMasterRunsACustomContainer) {
  LegacyFlags f;
  f.region = "us-central1";
  std::string e = FlagError(f);
  EXPECT_THAT(e, HasSubstr("--module-name: required unless --master-image-uri"));
  EXPECT_THAT(e, HasSubstr("--package-path: give --package-path or --packages"));
  f.master_image_uri = "gcr.io/p/t:1";
  EXPECT_EQ(FlagError(f), "");
  LegacyFlags from_config;
  EXPECT_EQ(FlagError(from_config, {{"masterConfig", {{"imageUri", "gcr.io/p/t:1"}}}}), "");
}

TEST(TrainingInputFromFlagsTest, ImpliesTheCustomTierFromMachineTypeFlags) {
  LegacyFlags f = PythonFlags();
  f.master_machine_type = "n1-standard-8";
  auto r = TrainingInputFromFlags(f, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["scaleTier"], "CUSTOM");
  f.scale_tier = "basic";
  EXPECT_THAT(FlagError(f), HasSubstr("--master-machine-type: only allowed with "
                                      "--scale-tier=custom (the scale tier is BASIC)"));
}

TEST(TrainingInputFromFlagsTest, RefusesAConfigTrainingInputThatIsNotAnObject) {
  EXPECT_THAT(FlagError(PythonFlags(), json::array()), HasSubstr("--config: trainingInput must"));
}

}  // namespace
}  // namespace stoker::spec
