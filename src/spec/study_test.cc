#include "spec/study.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/json_yaml.h"

namespace stoker::spec {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Reference §2.5, verbatim.
constexpr const char* kReferenceYaml = R"yaml(
displayName: TestHpTuningJob
maxTrialCount: 8
parallelTrialCount: 2
maxFailedTrialCount: 0
studySpec:
  metrics:
  - metricId: accuracy
    goal: MAXIMIZE
  parameters:
  - parameterId: learning_rate
    doubleValueSpec: {minValue: 0.0001, maxValue: 0.1}
    scaleType: UNIT_LOG_SCALE
  - parameterId: batch_size
    discreteValueSpec: {values: [32, 64, 128]}
    scaleType: UNIT_LINEAR_SCALE
  - parameterId: optimizer
    categoricalValueSpec: {values: [adam, sgd]}
  algorithm: RANDOM_SEARCH
  measurementSelectionType: BEST_MEASUREMENT
trialJobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-4}
    replicaCount: 1
    containerSpec:
      imageUri: gcr.io/p/trainer:latest
  baseOutputDirectory: {outputUriPrefix: gs://b/hp/}
)yaml";

// Reference §6, verbatim.
constexpr const char* kLegacyYaml = R"yaml(
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

json Yaml(const std::string& text) {
  auto r = ParseYamlOrJson(text, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : json();
}

json ReferenceJob() { return Yaml(kReferenceYaml); }

json LegacyHyperparameters() { return Yaml(kLegacyYaml)["trainingInput"]["hyperparameters"]; }

// The error message of parsing `j`, or "" when it parses.
std::string ErrorOf(const json& j) {
  auto r = ParseHyperparameterTuningJob(j);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

std::string LegacyErrorOf(const json& h) {
  auto r = ParseLegacyHyperparameters(h, "trainingInput.hyperparameters");
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

// The reference job with its studySpec.parameters replaced.
json WithParameters(const json& parameters) {
  json j = ReferenceJob();
  j["studySpec"]["parameters"] = parameters;
  return j;
}

json Param(const std::string& json_text) { return json::parse(json_text); }

// ---- The reference examples. ----

TEST(StudyTest, ParsesTheReferenceYamlExample) {
  auto r = ParseHyperparameterTuningJob(ReferenceJob());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const HyperparameterTuningJob& job = *r;
  EXPECT_EQ(job.display_name, "TestHpTuningJob");
  EXPECT_EQ(job.max_trial_count, 8);
  EXPECT_EQ(job.parallel_trial_count, 2);
  EXPECT_EQ(job.max_failed_trial_count, 0);
  const StudySpec& s = job.study_spec;
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_EQ(s.metrics[0].metric_id, "accuracy");
  EXPECT_EQ(s.metrics[0].goal, Goal::kMaximize);
  EXPECT_EQ(s.algorithm, Algorithm::kRandomSearch);
  EXPECT_EQ(s.measurement_selection, MeasurementSelection::kBest);
  EXPECT_EQ(s.stopping.kind, StoppingSpec::Kind::kNone);
  ASSERT_EQ(s.parameters.size(), 3u);
  const ParameterSpec& lr = s.parameters[0];
  EXPECT_EQ(lr.parameter_id, "learning_rate");
  EXPECT_EQ(lr.kind, ParameterKind::kDouble);
  EXPECT_DOUBLE_EQ(lr.double_min, 0.0001);
  EXPECT_DOUBLE_EQ(lr.double_max, 0.1);
  EXPECT_EQ(lr.scale, ScaleType::kLog);
  const ParameterSpec& bs = s.parameters[1];
  EXPECT_EQ(bs.kind, ParameterKind::kDiscrete);
  EXPECT_THAT(bs.discrete_values, ElementsAre(32, 64, 128));
  EXPECT_THAT(bs.discrete_texts, ElementsAre("32", "64", "128"));
  EXPECT_EQ(bs.scale, ScaleType::kLinear);
  const ParameterSpec& opt = s.parameters[2];
  EXPECT_EQ(opt.kind, ParameterKind::kCategorical);
  EXPECT_THAT(opt.categories, ElementsAre("adam", "sgd"));
  EXPECT_EQ(opt.scale, ScaleType::kNone);
  ASSERT_EQ(job.trial_job_spec.worker_pool_specs.size(), 1u);
  EXPECT_EQ(job.trial_job_spec.worker_pool_specs[0].container_spec->image_uri,
            "gcr.io/p/trainer:latest");
  EXPECT_EQ(job.trial_job_spec.base_output_directory, "gs://b/hp/");
}

TEST(StudyTest, ReferenceExampleRoundTripsThroughCanonicalJson) {
  auto r = ParseHyperparameterTuningJob(ReferenceJob());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json out = ToJson(*r);
  auto again = ParseHyperparameterTuningJob(out);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << out.dump(2);
  EXPECT_EQ(*again, *r);
  EXPECT_EQ(ToJson(*again), out);
  EXPECT_TRUE(Validate(*r).ok()) << Validate(*r).ToString();
}

TEST(StudyTest, CanonicalJsonWritesInt64AsStringsAndInt32AsNumbers) {
  json j = WithParameters(json::array({Param(
      R"({"parameterId": "units", "integerValueSpec": {"minValue": 1, "maxValue": "64"}})")}));
  auto r = ParseHyperparameterTuningJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json out = ToJson(*r);
  EXPECT_EQ(out["studySpec"]["parameters"][0]["integerValueSpec"],
            json::parse(R"({"minValue": "1", "maxValue": "64"})"));
  EXPECT_EQ(out["maxTrialCount"], 8);
  EXPECT_EQ(out["parallelTrialCount"], 2);
  EXPECT_EQ(out["studySpec"]["algorithm"], "RANDOM_SEARCH");
  EXPECT_EQ(out["studySpec"]["metrics"][0]["goal"], "MAXIMIZE");
  EXPECT_EQ(out["trialJobSpec"]["workerPoolSpecs"][0]["replicaCount"], "1");
}

TEST(StudyTest, DescribeOutputWithOutputOnlyFieldsCanBeResubmitted) {
  json j = ReferenceJob();
  j["name"] = "projects/p/locations/l/hyperparameterTuningJobs/123";
  j["state"] = "JOB_STATE_SUCCEEDED";
  j["trials"] = json::array({{{"id", "1"}, {"state", "SUCCEEDED"}}});
  j["createTime"] = "2024-05-18T00:00:00Z";
  j["startTime"] = "2024-05-18T00:00:00Z";
  j["endTime"] = "2024-05-18T00:00:00Z";
  j["updateTime"] = "2024-05-18T00:00:00Z";
  j["error"] = {{"code", 3}, {"message", "x"}};
  auto r = ParseHyperparameterTuningJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, *ParseHyperparameterTuningJob(ReferenceJob()));
}

TEST(StudyTest, MissingTrialCountsDefaultToOneAsGcloudDoes) {
  json j = ReferenceJob();
  j.erase("maxTrialCount");
  j.erase("parallelTrialCount");
  j.erase("maxFailedTrialCount");
  auto r = ParseHyperparameterTuningJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_trial_count, 1);
  EXPECT_EQ(r->parallel_trial_count, 1);
  EXPECT_EQ(r->max_failed_trial_count, 0);
}

TEST(StudyTest, ParallelAboveMaxIsAccepted) {
  json j = ReferenceJob();
  j["maxTrialCount"] = 2;
  j["parallelTrialCount"] = 5;
  EXPECT_EQ(ErrorOf(j), "");
}

TEST(StudyTest, UnspecifiedEnumsReadAsTheirDefaults) {
  json j = ReferenceJob();
  j["studySpec"]["metrics"][0]["goal"] = "GOAL_TYPE_UNSPECIFIED";
  j["studySpec"]["measurementSelectionType"] = "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED";
  j["studySpec"]["algorithm"] = "ALGORITHM_UNSPECIFIED";
  j["studySpec"]["parameters"][0]["scaleType"] = "SCALE_TYPE_UNSPECIFIED";
  auto r = ParseHyperparameterTuningJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->study_spec.metrics[0].goal, Goal::kMaximize);
  EXPECT_EQ(r->study_spec.measurement_selection, MeasurementSelection::kLast);
  EXPECT_EQ(r->study_spec.algorithm, Algorithm::kUnspecified);
  EXPECT_EQ(r->study_spec.parameters[0].scale, ScaleType::kNone);
}

TEST(StudyTest, StoppingSpecsAndVerbatimFieldsRoundTrip) {
  json j = ReferenceJob();
  j["studySpec"]["medianAutomatedStoppingSpec"] = {{"useElapsedDuration", true}};
  j["studySpec"]["observationNoise"] = "HIGH";
  j["studySpec"]["studyStoppingConfig"] =
      json::parse(R"({"maxNumTrialsNoProgress": 5, "maxDurationNoProgress": "3600s"})");
  j["studySpec"]["metrics"][0]["safetyConfig"] = {{"safetyThreshold", 0.5}};
  j["labels"] = {{"team", "ml"}};
  j["encryptionSpec"] = {{"kmsKeyName", "k"}};
  auto r = ParseHyperparameterTuningJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->study_spec.stopping.kind, StoppingSpec::Kind::kMedian);
  EXPECT_TRUE(r->study_spec.stopping.use_elapsed_duration);
  EXPECT_EQ(r->study_spec.observation_noise, "HIGH");
  auto again = ParseHyperparameterTuningJob(ToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *r);

  j["studySpec"].erase("medianAutomatedStoppingSpec");
  j["studySpec"]["convexAutomatedStoppingSpec"] = {{"maxStepCount", "100"},
                                                   {"minMeasurementCount", 5}};
  r = ParseHyperparameterTuningJob(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->study_spec.stopping.kind, StoppingSpec::Kind::kConvex);
  EXPECT_EQ(*ParseHyperparameterTuningJob(ToJson(*r)), *r);
}

TEST(StudyTest, AtMostOneAutomatedStoppingSpecIsAllowed) {
  json j = ReferenceJob();
  j["studySpec"]["medianAutomatedStoppingSpec"] = json::object();
  j["studySpec"]["decayCurveStoppingSpec"] = {{"useElapsedDuration", false}};
  EXPECT_THAT(Lines(ErrorOf(j)),
              ElementsAre("studySpec: medianAutomatedStoppingSpec and decayCurveStoppingSpec are "
                          "given; set at most one automated stopping spec"));
}

// ---- The legacy AI Platform HyperparameterSpec. ----

TEST(StudyTest, LegacyReferenceExampleParsesIntoTheSameKinds) {
  auto r = ParseLegacyHyperparameters(LegacyHyperparameters(), "trainingInput.hyperparameters");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const StudyFromLegacy& legacy = *r;
  EXPECT_EQ(legacy.max_trial_count, 10);
  EXPECT_EQ(legacy.parallel_trial_count, 2);
  EXPECT_EQ(legacy.max_failed_trial_count, 0);
  const StudySpec& s = legacy.study_spec;
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_EQ(s.metrics[0].metric_id, "accuracy");
  EXPECT_EQ(s.metrics[0].goal, Goal::kMaximize);
  EXPECT_EQ(s.stopping.kind, StoppingSpec::Kind::kMedian);
  EXPECT_EQ(s.measurement_selection, MeasurementSelection::kLast);
  ASSERT_EQ(s.parameters.size(), 3u);
  EXPECT_EQ(s.parameters[0].kind, ParameterKind::kDouble);
  EXPECT_EQ(s.parameters[0].scale, ScaleType::kLog);
  EXPECT_EQ(s.parameters[1].kind, ParameterKind::kDiscrete);
  EXPECT_EQ(s.parameters[2].kind, ParameterKind::kCategorical);
  EXPECT_THAT(s.parameters[2].categories, ElementsAre("64,16", "128,32"));

  // The Vertex example describes the same first two parameters.
  auto vertex = ParseHyperparameterTuningJob(ReferenceJob());
  ASSERT_TRUE(vertex.ok());
  EXPECT_EQ(s.parameters[0], vertex->study_spec.parameters[0]);
  EXPECT_EQ(s.parameters[1].discrete_values, vertex->study_spec.parameters[1].discrete_values);
  EXPECT_EQ(s.parameters[1].discrete_texts, vertex->study_spec.parameters[1].discrete_texts);
}

TEST(StudyTest, LegacyDefaultsAreTheDocumentedOnes) {
  json h = json::parse(R"({"params": [{"parameterName": "x", "type": "INTEGER",
                                       "minValue": 1, "maxValue": 4, "scaleType": "NONE"}],
                          "resumePreviousJobId": "job_1"})");
  auto r = ParseLegacyHyperparameters(h, "trainingInput.hyperparameters");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->study_spec.metrics[0].metric_id, "training/hptuning/metric");
  EXPECT_EQ(r->study_spec.metrics[0].goal, Goal::kMaximize);
  EXPECT_EQ(r->max_trial_count, 1);
  EXPECT_EQ(r->parallel_trial_count, 1);
  EXPECT_EQ(r->study_spec.stopping.kind, StoppingSpec::Kind::kNone);
  EXPECT_EQ(r->study_spec.parameters[0].int_min, 1);
  EXPECT_EQ(r->study_spec.parameters[0].int_max, 4);
  EXPECT_EQ(r->study_spec.parameters[0].scale, ScaleType::kNone);
  EXPECT_EQ(r->resume_previous_job_id, "job_1");
}

TEST(StudyTest, LegacyProblemsUseLegacyFieldPaths) {
  json h = json::parse(R"({"maxTrials": 0, "algorithm": "GRID_SEARCH", "params": [
      {"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": 1,
       "scaleType": "UNIT_LOG_SCALE"},
      {"parameterName": "units", "type": "INTEGER", "minValue": 1.5, "maxValue": 4},
      {"parameterName": "act", "type": "CATEGORICAL", "minValue": 1},
      {"parameterName": "bs", "discreteValues": [1, 2]}]})");
  std::string m = LegacyErrorOf(h);
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.maxTrials: must be at least 1, got 0"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[0].scaleType: UNIT_LOG_SCALE "
                           "needs a range of values above 0"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[0].type: "
                           "trainingInput.hyperparameters.algorithm is GRID_SEARCH, which "
                           "cannot search the DOUBLE parameter 'lr'"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[1].minValue: must be a whole "
                           "number"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[2].minValue: is not used by a "
                           "CATEGORICAL parameter"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[2].categoricalValues: "
                           "required; list the categories to try"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[3].type: required; use one of "
                           "DOUBLE, INTEGER, CATEGORICAL, DISCRETE"));
}

TEST(StudyTest, LegacyVertexKeysGetTheLegacySpelling) {
  json h = json::parse(R"({"maxTrialCount": 3, "params": [
      {"parameterId": "x", "parameterName": "x", "type": "DISCRETE", "discreteValues": [1]}]})");
  std::string m = LegacyErrorOf(h);
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters: unknown field 'maxTrialCount'; the "
                           "AI Platform field is 'maxTrials'"));
  EXPECT_THAT(m, HasSubstr("trainingInput.hyperparameters.params[0]: unknown field "
                           "'parameterId'; AI Platform names a parameter with 'parameterName'"));
}

// ---- Validation: every problem with its path and the fix. ----

TEST(StudyTest, ReportsEveryProblemOnItsOwnLine) {
  json j = ReferenceJob();
  j.erase("displayName");
  j["maxTrialCount"] = 0;
  j["parallelTrialCount"] = 0;
  j["maxFailedTrialCount"] = -1;
  j.erase("trialJobSpec");
  EXPECT_THAT(Lines(ErrorOf(j)),
              ElementsAre("trialJobSpec: required; give the CustomJobSpec every trial runs: "
                          "{workerPoolSpecs: [{machineSpec, replicaCount, containerSpec}]}",
                          "displayName: required; name the job in at most 128 characters",
                          "maxTrialCount: must be at least 1, got 0; give how many trials to "
                          "run in all",
                          "parallelTrialCount: must be at least 1, got 0; give how many trials "
                          "may run at once",
                          "maxFailedTrialCount: must be at least 0, got -1; give how many "
                          "failed trials to tolerate (0 lets Stoker decide)"));
}

TEST(StudyTest, DisplayNameLongerThan128CharactersIsRejected) {
  json j = ReferenceJob();
  j["displayName"] = std::string(129, 'x');
  EXPECT_THAT(ErrorOf(j), HasSubstr("displayName: is 129 characters long; at most 128"));
}

TEST(StudyTest, TrialJobSpecProblemsCarryTheTrialJobSpecPath) {
  json j = ReferenceJob();
  j["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"].erase("imageUri");
  EXPECT_THAT(ErrorOf(j), HasSubstr("trialJobSpec.workerPoolSpecs[0].containerSpec.imageUri: "
                                    "required"));
}

TEST(StudyTest, MetricsAreRequiredNamedWithoutWhitespaceAndUnique) {
  json j = ReferenceJob();
  j["studySpec"]["metrics"] = json::array();
  EXPECT_THAT(ErrorOf(j), HasSubstr("studySpec.metrics: required; give at least one {metricId, "
                                    "goal}"));
  j["studySpec"]["metrics"] = json::parse(R"([{"goal": "MINIMIZE"}, {"metricId": "my loss"},
      {"metricId": "acc"}, {"metricId": "acc", "goal": "maximize"}])");
  std::string m = ErrorOf(j);
  EXPECT_THAT(m, HasSubstr("studySpec.metrics[0].metricId: required; give the metric's name"));
  EXPECT_THAT(m, HasSubstr("studySpec.metrics[1].metricId: 'my loss' contains whitespace; use a "
                           "name without spaces"));
  EXPECT_THAT(m, HasSubstr("studySpec.metrics[3].metricId: 'acc' is already used by "
                           "studySpec.metrics[2].metricId; give each metric once"));
  EXPECT_THAT(m, HasSubstr("studySpec.metrics[3].goal: 'maximize' is not a goal; enum names are "
                           "upper case: 'MAXIMIZE'"));
}

TEST(StudyTest, ParametersAreRequiredNamedWithoutWhitespaceAndUnique) {
  EXPECT_THAT(ErrorOf(WithParameters(json::array())),
              HasSubstr("studySpec.parameters: required; give at least one parameter to tune"));
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"integerValueSpec": {"minValue": 1, "maxValue": 2}})"),
      Param(R"({"parameterId": "a b", "integerValueSpec": {"minValue": 1, "maxValue": 2}})"),
      Param(R"({"parameterId": "x", "integerValueSpec": {"minValue": 1, "maxValue": 2}})"),
      Param(R"({"parameterId": "x", "integerValueSpec": {"minValue": 1, "maxValue": 2}})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].parameterId: required; name the parameter"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].parameterId: 'a b' contains whitespace"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[3].parameterId: 'x' is already used by "
                           "studySpec.parameters[2]; give each parameter a unique id"));
}

TEST(StudyTest, ExactlyOneValueSpecIsRequired) {
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"parameterId": "a"})"),
      Param(R"({"parameterId": "b", "integerValueSpec": {"minValue": 1, "maxValue": 2},
                "discreteValueSpec": {"values": [1]}})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0]: no value spec is given; set exactly one of "
                           "doubleValueSpec"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1]: integerValueSpec and discreteValueSpec are "
                           "given; set exactly one value spec"));
}

TEST(StudyTest, RangesNeedMinBelowMaxForDoubleAndMinAtMostMaxForInteger) {
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"parameterId": "a", "doubleValueSpec": {"minValue": 1, "maxValue": 1}})"),
      Param(R"({"parameterId": "b", "integerValueSpec": {"minValue": 3, "maxValue": 3}})"),
      Param(R"({"parameterId": "c", "integerValueSpec": {"minValue": 4, "maxValue": "3"}})"),
      Param(R"({"parameterId": "d", "doubleValueSpec": {"minValue": 0.5}})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].doubleValueSpec.maxValue: 1 is not above "
                           "minValue 1; a DOUBLE range needs minValue < maxValue"));
  EXPECT_THAT(m, Not(HasSubstr("parameters[1]")));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[2].integerValueSpec.maxValue: 3 is below "
                           "minValue 4; an INTEGER range needs minValue <= maxValue"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[3].doubleValueSpec.maxValue: required; give the "
                           "largest value to try"));
}

TEST(StudyTest, LogScaleOverARangeWithZeroIsRejected) {
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"parameterId": "a", "doubleValueSpec": {"minValue": 0, "maxValue": 1},
                "scaleType": "UNIT_LOG_SCALE"})"),
      Param(R"({"parameterId": "b", "integerValueSpec": {"minValue": -2, "maxValue": 8},
                "scaleType": "UNIT_REVERSE_LOG_SCALE"})"),
      Param(R"({"parameterId": "c", "discreteValueSpec": {"values": [0, 1, 2]},
                "scaleType": "UNIT_LOG_SCALE"})"),
      Param(R"({"parameterId": "d", "doubleValueSpec": {"minValue": 1e-9, "maxValue": 1},
                "scaleType": "UNIT_LOG_SCALE"})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].scaleType: UNIT_LOG_SCALE needs a range of "
                           "values above 0, but the smallest value is 0; raise it above 0 or use "
                           "UNIT_LINEAR_SCALE"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].scaleType: UNIT_REVERSE_LOG_SCALE needs a "
                           "range of values above 0, but the smallest value is -2"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[2].scaleType: UNIT_LOG_SCALE needs"));
  EXPECT_THAT(m, Not(HasSubstr("parameters[3]")));
}

TEST(StudyTest, DiscreteValuesMustIncreaseStrictlyAndStayApart) {
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"parameterId": "a", "discreteValueSpec": {"values": [1, 4, 2]}})"),
      Param(R"({"parameterId": "b", "discreteValueSpec": {"values": [1, 1]}})"),
      Param(R"({"parameterId": "c", "discreteValueSpec": {"values": [1, 1.00000000000001]}})"),
      Param(R"({"parameterId": "d", "discreteValueSpec": {"values": []}})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].discreteValueSpec.values[2]: 2 is not above "
                           "the value before it (4); list discrete values once each, in "
                           "increasing order"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].discreteValueSpec.values[1]: 1 is not above"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[2].discreteValueSpec.values[1]: "
                           "1.00000000000001 is less than 1e-10 above 1; discrete values must be "
                           "at least 1e-10 apart"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[3].discreteValueSpec.values: required; list the "
                           "values to try, in increasing order"));
}

TEST(StudyTest, AtMostAThousandDiscreteValuesAreAllowed) {
  json values = json::array();
  for (int i = 0; i < 1001; ++i) values.push_back(i);
  json p = {{"parameterId", "a"}, {"discreteValueSpec", {{"values", values}}}};
  EXPECT_THAT(ErrorOf(WithParameters(json::array({p}))),
              HasSubstr("studySpec.parameters[0].discreteValueSpec.values: at most 1000 values "
                        "are allowed, got 1001"));
  values.erase(values.size() - 1);
  p["discreteValueSpec"]["values"] = values;
  EXPECT_EQ(ErrorOf(WithParameters(json::array({p}))), "");
}

TEST(StudyTest, AtMostAThousandCategoriesAndAHundredParametersAreAllowed) {
  json categories = json::array();
  for (int i = 0; i < 1001; ++i) categories.push_back("c" + std::to_string(i));
  json c = {{"parameterId", "a"}, {"categoricalValueSpec", {{"values", categories}}}};
  EXPECT_THAT(ErrorOf(WithParameters(json::array({c}))),
              HasSubstr("studySpec.parameters[0].categoricalValueSpec.values: at most 1000 "
                        "categories are allowed, got 1001"));
  json many = json::array();
  for (int i = 0; i < 100; ++i) {
    many.push_back({{"parameterId", "p" + std::to_string(i)},
                    {"doubleValueSpec", {{"minValue", 0}, {"maxValue", 1}}}});
  }
  EXPECT_EQ(ErrorOf(WithParameters(many)), "");
  many.push_back({{"parameterId", "one_more"}, {"doubleValueSpec", {{"minValue", 0}, {"maxValue", 1}}}});
  EXPECT_THAT(ErrorOf(WithParameters(many)),
              HasSubstr("studySpec.parameters: at most 100 parameters (conditional ones "
                        "included) are allowed, got 101"));
}

TEST(StudyTest, CategoricalValuesMustBeNonEmptyUniqueAndUnscaled) {
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"parameterId": "a", "categoricalValueSpec": {"values": []}})"),
      Param(R"({"parameterId": "b", "categoricalValueSpec": {"values": ["x", "y", "x"]}})"),
      Param(R"({"parameterId": "c", "categoricalValueSpec": {"values": ["x"]},
                "scaleType": "UNIT_LINEAR_SCALE"})"),
      Param(R"({"parameterId": "d", "categoricalValueSpec": {"values": [1, "2"]}})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].categoricalValueSpec.values: required; list "
                           "the categories to try"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].categoricalValueSpec.values[2]: 'x' is "
                           "already listed at studySpec.parameters[1].categoricalValueSpec."
                           "values[0]; list each category once"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[2].scaleType: does not apply to a CATEGORICAL "
                           "parameter; remove it"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[3].categoricalValueSpec.values[0]: must be a "
                           "string, got a number (quote it in YAML)"));
}

TEST(StudyTest, GridSearchRejectionNamesTheDoubleParameter) {
  json j = ReferenceJob();
  j["studySpec"]["algorithm"] = "GRID_SEARCH";
  EXPECT_THAT(Lines(ErrorOf(j)),
              ElementsAre("studySpec.parameters[0].doubleValueSpec: studySpec.algorithm is "
                          "GRID_SEARCH, which cannot search the DOUBLE parameter "
                          "'learning_rate'; replace doubleValueSpec with a discreteValueSpec "
                          "listing the values to try, or use RANDOM_SEARCH"));
  j["studySpec"]["parameters"][0] =
      Param(R"({"parameterId": "learning_rate", "discreteValueSpec": {"values": [0.001, 0.01]}})");
  EXPECT_EQ(ErrorOf(j), "");
}

TEST(StudyTest, GridSearchAlsoChecksConditionalChildren) {
  json j = WithParameters(json::array({Param(R"({
      "parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]},
      "conditionalParameterSpecs": [{
        "parameterSpec": {"parameterId": "momentum",
                          "doubleValueSpec": {"minValue": 0, "maxValue": 1}},
        "parentCategoricalValues": {"values": ["sgd"]}}]})")}));
  j["studySpec"]["algorithm"] = "GRID_SEARCH";
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("studySpec.parameters[0].conditionalParameterSpecs[0].parameterSpec."
                        "doubleValueSpec: studySpec.algorithm is GRID_SEARCH, which cannot "
                        "search the DOUBLE parameter 'momentum'"));
}

TEST(StudyTest, UnknownAndSnakeCaseKeysGetHints) {
  json j = ReferenceJob();
  j["studySpec"]["parameters"][0]["scale_type"] = "UNIT_LOG_SCALE";
  j["studySpec"]["parameters"][0].erase("scaleType");
  j["studySpec"]["algoritm"] = "GRID_SEARCH";
  j["maxTrials"] = 3;
  j["metrics"] = json::array();
  std::string m = ErrorOf(j);
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0]: 'scale_type' is not a field; use the "
                           "camelCase spelling 'scaleType'"));
  EXPECT_THAT(m, HasSubstr("studySpec: unknown field 'algoritm'; did you mean 'algorithm'?"));
  EXPECT_THAT(m, HasSubstr("(top level): unknown field 'maxTrials'; the Vertex field is "
                           "'maxTrialCount'"));
  EXPECT_THAT(m, HasSubstr("(top level): unknown field 'metrics'; it belongs in studySpec"));
}

// ---- Conditional parameters. ----

json ConditionalStudy() {
  return WithParameters(json::array({Param(R"({
      "parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]},
      "conditionalParameterSpecs": [
        {"parameterSpec": {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1},
                           "scaleType": "UNIT_LOG_SCALE"},
         "parentCategoricalValues": {"values": ["adam"]}},
        {"parameterSpec": {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.01, "maxValue": 1}},
         "parentCategoricalValues": {"values": ["sgd"]}}]})"),
                                     Param(R"({
      "parameterId": "layers", "integerValueSpec": {"minValue": 1, "maxValue": 4},
      "conditionalParameterSpecs": [
        {"parameterSpec": {"parameterId": "width",
                           "discreteValueSpec": {"values": [32, 64]},
                           "conditionalParameterSpecs": [
                             {"parameterSpec": {"parameterId": "dropout",
                                                "doubleValueSpec": {"minValue": 0, "maxValue": 0.5}},
                              "parentDiscreteValues": {"values": [64]}}]},
         "parentIntValues": {"values": ["2", 3]}}]})")}));
}

TEST(StudyTest, ConditionalChildrenParseAndRoundTrip) {
  auto r = ParseHyperparameterTuningJob(ConditionalStudy());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& params = r->study_spec.parameters;
  ASSERT_EQ(params.size(), 2u);
  ASSERT_EQ(params[0].children.size(), 2u);
  EXPECT_EQ(params[0].children[0].spec.parameter_id, "lr");
  EXPECT_THAT(params[0].children[0].parent_categorical_values, ElementsAre("adam"));
  EXPECT_THAT(params[0].children[1].parent_categorical_values, ElementsAre("sgd"));
  ASSERT_EQ(params[1].children.size(), 1u);
  EXPECT_THAT(params[1].children[0].parent_int_values, ElementsAre(2, 3));
  const ParameterSpec& width = params[1].children[0].spec;
  EXPECT_EQ(width.kind, ParameterKind::kDiscrete);
  ASSERT_EQ(width.children.size(), 1u);
  EXPECT_THAT(width.children[0].parent_discrete_values, ElementsAre(64));
  json out = ToJson(*r);
  EXPECT_EQ(out["studySpec"]["parameters"][1]["conditionalParameterSpecs"][0]["parentIntValues"],
            json::parse(R"({"values": ["2", "3"]})"));
  auto again = ParseHyperparameterTuningJob(out);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *r);
}

TEST(StudyTest, SameNamedChildrenNeedDisjointConditionsUnderOneParent) {
  json j = ConditionalStudy();
  j["studySpec"]["parameters"][0]["conditionalParameterSpecs"][1]["parentCategoricalValues"]
   ["values"] = {"sgd", "adam"};
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("studySpec.parameters[0].conditionalParameterSpecs[1].parameterSpec."
                        "parameterId: 'lr' is already used by studySpec.parameters[0]."
                        "conditionalParameterSpecs[0].parameterSpec"));
  // A child may not reuse the id of a top-level parameter, which is always active.
  j = ConditionalStudy();
  j["studySpec"]["parameters"][1]["parameterId"] = "lr";
  EXPECT_THAT(ErrorOf(j), HasSubstr("studySpec.parameters[1].parameterId: 'lr' is already used"));
}

TEST(StudyTest, MismatchedParentValueKindsAreRejected) {
  json j = ConditionalStudy();
  json& opt = j["studySpec"]["parameters"][0]["conditionalParameterSpecs"][0];
  opt.erase("parentCategoricalValues");
  opt["parentIntValues"] = {{"values", {1}}};
  json& layers = j["studySpec"]["parameters"][1]["conditionalParameterSpecs"][0];
  layers.erase("parentIntValues");
  layers["parentDiscreteValues"] = {{"values", {2}}};
  std::string m = ErrorOf(j);
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].conditionalParameterSpecs[0].parentIntValues: "
                           "the parent 'optimizer' is CATEGORICAL; give the values that activate "
                           "this parameter as parentCategoricalValues {values: [...]}"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].conditionalParameterSpecs[0]."
                           "parentDiscreteValues: the parent 'layers' is INTEGER; give the values "
                           "that activate this parameter as parentIntValues"));
}

TEST(StudyTest, ParentValuesMustBeValuesTheParentCanTake) {
  json j = ConditionalStudy();
  j["studySpec"]["parameters"][0]["conditionalParameterSpecs"][0]["parentCategoricalValues"]
   ["values"] = {"rmsprop"};
  j["studySpec"]["parameters"][1]["conditionalParameterSpecs"][0]["parentIntValues"]["values"] = {
      5};
  j["studySpec"]["parameters"][1]["conditionalParameterSpecs"][0]["parameterSpec"]
   ["conditionalParameterSpecs"][0]["parentDiscreteValues"]["values"] = {48};
  std::string m = ErrorOf(j);
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].conditionalParameterSpecs[0]."
                           "parentCategoricalValues.values[0]: 'rmsprop' is not a category of "
                           "'optimizer' (adam, sgd); list only values the parent can take"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].conditionalParameterSpecs[0].parentIntValues."
                           "values[0]: 5 is outside the range of 'layers' [1, 4]"));
  EXPECT_THAT(m, HasSubstr("parameterSpec.conditionalParameterSpecs[0].parentDiscreteValues."
                           "values[0]: 48 is not a value of 'width' (32, 64)"));
}

TEST(StudyTest, DoubleParametersCannotHaveChildrenAndChildrenNeedParentValues) {
  std::string m = ErrorOf(WithParameters(json::array({
      Param(R"({"parameterId": "a", "doubleValueSpec": {"minValue": 0, "maxValue": 1},
                "conditionalParameterSpecs": [{"parameterSpec": {"parameterId": "b",
                    "discreteValueSpec": {"values": [1]}}, "parentDiscreteValues": {"values": [1]}}]})"),
      Param(R"({"parameterId": "c", "discreteValueSpec": {"values": [1, 2]},
                "conditionalParameterSpecs": [{"parameterSpec": {"parameterId": "d",
                    "discreteValueSpec": {"values": [1]}}}]})"),
  })));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[0].conditionalParameterSpecs: the DOUBLE "
                           "parameter 'a' cannot have conditional parameters"));
  EXPECT_THAT(m, HasSubstr("studySpec.parameters[1].conditionalParameterSpecs[0]: no parent "
                           "values are given; set parentDiscreteValues {values: [...]}"));
}

TEST(StudyTest, ValidateRechecksAModelEditedAfterParsing) {
  auto r = ParseHyperparameterTuningJob(ReferenceJob());
  ASSERT_TRUE(r.ok());
  HyperparameterTuningJob job = *r;
  job.study_spec.algorithm = Algorithm::kGridSearch;  // as --algorithm=grid-search would
  job.display_name.clear();
  job.trial_job_spec.worker_pool_specs.clear();
  std::string m = Validate(job).message();
  EXPECT_THAT(m, HasSubstr("displayName: required"));
  EXPECT_THAT(m, HasSubstr("cannot search the DOUBLE parameter 'learning_rate'"));
  EXPECT_THAT(m, HasSubstr("trialJobSpec.workerPoolSpecs: required"));
}

// ---- FormatParameterValue. ----

TEST(StudyTest, FormatsIntegersWithoutADecimalPoint) {
  ParameterSpec s;
  s.kind = ParameterKind::kInteger;
  EXPECT_EQ(FormatParameterValue(s, int64_t{64}), "64");
  EXPECT_EQ(FormatParameterValue(s, 64.0), "64");
  EXPECT_EQ(FormatParameterValue(s, int64_t{-3}), "-3");
}

TEST(StudyTest, FormatsDiscreteValuesAsTheSpecWroteThem) {
  auto r = ParseHyperparameterTuningJob(WithParameters(json::parse(R"([
      {"parameterId": "bs", "discreteValueSpec": {"values": [32, 64.0, "128"]}},
      {"parameterId": "frac", "discreteValueSpec": {"values": [0.25, 0.5]}}])")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ParameterSpec& bs = r->study_spec.parameters[0];
  EXPECT_EQ(FormatParameterValue(bs, 32.0), "32");
  EXPECT_EQ(FormatParameterValue(bs, int64_t{32}), "32");
  EXPECT_EQ(FormatParameterValue(bs, 64.0), "64.0");
  EXPECT_EQ(FormatParameterValue(bs, 128.0), "128");
  EXPECT_EQ(FormatParameterValue(r->study_spec.parameters[1], 0.5), "0.5");
}

TEST(StudyTest, FormatsDoublesInTheirShortestRoundTripForm) {
  ParameterSpec s;
  s.kind = ParameterKind::kDouble;
  EXPECT_EQ(FormatParameterValue(s, 0.001), "0.001");
  EXPECT_EQ(FormatParameterValue(s, 0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatParameterValue(s, 1e-5), "1e-05");
  EXPECT_EQ(FormatParameterValue(s, 2.0), "2");
}

TEST(StudyTest, FormatsCategoriesVerbatim) {
  ParameterSpec s;
  s.kind = ParameterKind::kCategorical;
  s.categories = {"64,16"};
  EXPECT_EQ(FormatParameterValue(s, std::string("64,16")), "64,16");
}

}  // namespace
}  // namespace stoker::spec
