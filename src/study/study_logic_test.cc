#include "study/study_logic.h"

#include <gtest/gtest.h>

#include "common/json_yaml.h"

namespace stoker::study {
namespace {

using nlohmann::json;

spec::StudySpec Study() {
  auto j = ParseYamlOrJson(R"(
displayName: s
studySpec:
  metrics: [{metricId: accuracy, goal: MAXIMIZE}]
  parameters:
  - parameterId: lr
    doubleValueSpec: {minValue: 0.0001, maxValue: 0.1}
    scaleType: UNIT_LOG_SCALE
  - parameterId: batch_size
    discreteValueSpec: {values: [32, 64, 128]}
  - parameterId: units
    integerValueSpec: {minValue: 8, maxValue: 64}
  - parameterId: optimizer
    categoricalValueSpec: {values: [adam, sgd]}
    conditionalParameterSpecs:
    - parameterSpec: {parameterId: momentum, doubleValueSpec: {minValue: 0, maxValue: 0.99}}
      parentCategoricalValues: {values: [sgd]}
trialJobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-4}
    containerSpec: {imageUri: x, command: ["true"]}
)",
                           "s.yaml");
  auto job = spec::ParseHyperparameterTuningJob(*j);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job->study_spec;
}

TEST(StudyLogicTest, ConvertsEveryParameterKindToTheTunerSpace) {
  tune::Space space = ToTuneSpace(Study());
  ASSERT_EQ(space.parameters.size(), 4u);
  EXPECT_EQ(space.parameters[0].scale, tune::ScaleType::kLog);
  EXPECT_EQ(space.parameters[1].values, (std::vector<double>{32, 64, 128}));
  EXPECT_EQ(space.parameters[2].kind, tune::ParameterKind::kInteger);
  ASSERT_EQ(space.parameters[3].children.size(), 1u);
  EXPECT_EQ(space.parameters[3].children[0].parent_categories, std::vector<std::string>{"sgd"});
  EXPECT_TRUE(tune::ValidateSpace(space).ok());
}

TEST(StudyLogicTest, TrialArgsFormatValuesAsTheSpecWritesThem) {
  tune::Assignment a = {{"lr", 0.001},
                        {"batch_size", 64.0},
                        {"units", 17.0},
                        {"optimizer", std::string("sgd")},
                        {"momentum", 0.5}};
  std::vector<std::string> want = {"--lr=0.001", "--batch_size=64", "--units=17", "--optimizer=sgd",
                                   "--momentum=0.5"};
  EXPECT_EQ(TrialArgs(Study(), a), want);
  json params = ParametersJson(Study(), a);
  EXPECT_EQ(params[2]["value"], 17);
  EXPECT_TRUE(params[2]["value"].is_number_integer());
  EXPECT_EQ(params[3]["value"], "sgd");
  EXPECT_EQ(AssignmentFromJson(params).size(), 5u);
}

TEST(StudyLogicTest, ReadsTheHypertuneFileAsMeasurements) {
  std::string text =
      R"({"accuracy": "0.5", "checkpoint_path": "", "global_step": "1", "timestamp": 1000.5, "trial": "3"})"
      "\n"
      R"({"accuracy": "0.75", "checkpoint_path": "", "global_step": "2", "timestamp": 1002.0, "trial": "3"})"
      "\n{torn";
  json m = ParseMetricsFile(text, 1000'000'000);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1]["stepCount"], "2");
  EXPECT_EQ(m[1]["elapsedDuration"], "2s");
  EXPECT_EQ(MetricValue(m[1], "accuracy"), 0.75);
  EXPECT_FALSE(MetricValue(m[1], "loss"));
}

TEST(StudyLogicTest, FinalMeasurementIsTheLastOrTheBestByGoal) {
  json m = json::array();
  for (double v : {0.5, 0.9, 0.7}) {
    m.push_back({{"stepCount", "1"}, {"metrics", {{{"metricId", "acc"}, {"value", v}}}}});
  }
  spec::MetricSpec max{"acc", spec::Goal::kMaximize, nullptr};
  spec::MetricSpec min{"acc", spec::Goal::kMinimize, nullptr};
  EXPECT_EQ(MetricValue(FinalMeasurement(m, max, spec::MeasurementSelection::kLast), "acc"), 0.7);
  EXPECT_EQ(MetricValue(FinalMeasurement(m, max, spec::MeasurementSelection::kBest), "acc"), 0.9);
  EXPECT_EQ(MetricValue(FinalMeasurement(m, min, spec::MeasurementSelection::kBest), "acc"), 0.5);
  spec::MetricSpec other{"loss", spec::Goal::kMinimize, nullptr};
  EXPECT_TRUE(FinalMeasurement(m, other, spec::MeasurementSelection::kLast).is_null());
}

}  // namespace
}  // namespace stoker::study
