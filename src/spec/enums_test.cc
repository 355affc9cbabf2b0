// Enums as proto numbers: every enum field takes the name or the number,
// answers with the name, and refuses an unknown number naming the enum.
#include "spec/enums.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "spec/custom_job.h"
#include "spec/study.h"

namespace stoker::spec {
namespace {

using nlohmann::json;

TEST(EnumsTest, NamesAndNumbersAreOneTable) {
  for (const EnumType* e :
       {&kAcceleratorTypeEnum, &kStrategyEnum, &kReservationAffinityTypeEnum, &kGoalTypeEnum,
        &kAlgorithmEnum, &kScaleTypeEnum, &kMeasurementSelectionTypeEnum, &kObservationNoiseEnum,
        &kLegacyParameterTypeEnum, &kLegacyScaleTypeEnum}) {
    std::set<int> numbers;
    std::set<std::string_view> names;
    for (const EnumValue& v : e->values) {
      EXPECT_TRUE(numbers.insert(v.number).second) << e->name << " repeats " << v.number;
      EXPECT_TRUE(names.insert(v.name).second) << e->name << " repeats " << v.name;
      EXPECT_EQ(EnumNumber(*e, v.name), v.number);
      EXPECT_EQ(EnumName(*e, v.number), v.name);
    }
    EXPECT_EQ(EnumName(*e, 0).has_value(), true) << e->name << " has no value 0";
  }
}

TEST(EnumsTest, ProtoNumbers) {
  // Reference §1.8, §1.7, §2.2: the numbers the client libraries send.
  EXPECT_EQ(EnumName(kAcceleratorTypeEnum, 5), "NVIDIA_TESLA_T4");
  EXPECT_EQ(EnumName(kAcceleratorTypeEnum, 8), "NVIDIA_TESLA_A100");
  EXPECT_EQ(EnumName(kAcceleratorTypeEnum, 9), "NVIDIA_A100_80GB");
  EXPECT_EQ(EnumName(kAcceleratorTypeEnum, 11), "NVIDIA_L4");
  EXPECT_EQ(EnumName(kAcceleratorTypeEnum, 13), "NVIDIA_H100_80GB");
  EXPECT_EQ(EnumName(kAcceleratorTypeEnum, 18), "NVIDIA_RTX_PRO_6000");
  EXPECT_EQ(EnumName(kStrategyEnum, 4), "SPOT");
  EXPECT_EQ(EnumName(kStrategyEnum, 6), "FLEX_START");
  EXPECT_FALSE(EnumName(kStrategyEnum, 5).has_value());
  EXPECT_EQ(EnumName(kGoalTypeEnum, 2), "MINIMIZE");
  EXPECT_EQ(EnumName(kAlgorithmEnum, 3), "RANDOM_SEARCH");
  EXPECT_FALSE(EnumName(kAlgorithmEnum, 1).has_value());
  EXPECT_EQ(EnumName(kScaleTypeEnum, 2), "UNIT_LOG_SCALE");
  EXPECT_EQ(EnumName(kMeasurementSelectionTypeEnum, 2), "BEST_MEASUREMENT");
  EXPECT_EQ(EnumName(kReservationAffinityTypeEnum, 3), "SPECIFIC_RESERVATION");
}

json Job(const json& machine, const json& scheduling = nullptr) {
  json j = {{"displayName", "d"},
            {"jobSpec",
             {{"workerPoolSpecs",
               {{{"machineSpec", machine},
                 {"replicaCount", 1},
                 {"containerSpec", {{"imageUri", "gcr.io/p/i:1"}}}}}}}}};
  if (!scheduling.is_null()) j["jobSpec"]["scheduling"] = scheduling;
  return j;
}

TEST(EnumsTest, CustomJobTakesNumbersAndAnswersNames) {
  auto job = ParseCustomJob(Job({{"machineType", "n1-standard-4"},
                                 {"acceleratorType", 5},
                                 {"acceleratorCount", 1},
                                 {"reservationAffinity", {{"reservationAffinityType", 1}}}},
                                {{"strategy", 4}}));
  ASSERT_TRUE(job.ok()) << job.status().message();
  json out = ToJson(*job);
  const json& machine = out["jobSpec"]["workerPoolSpecs"][0]["machineSpec"];
  EXPECT_EQ(machine["acceleratorType"], "NVIDIA_TESLA_T4");
  EXPECT_EQ(machine["reservationAffinity"]["reservationAffinityType"], "NO_RESERVATION");
  EXPECT_EQ(out["jobSpec"]["scheduling"]["strategy"], "SPOT");
  // The answer reads back to the same job.
  auto again = ParseCustomJob(out);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ToJson(*again), out);
}

TEST(EnumsTest, ZeroIsUnspecified) {
  auto job = ParseCustomJob(
      Job({{"machineType", "n1-standard-4"}, {"acceleratorType", 0}}, {{"strategy", 0}}));
  ASSERT_TRUE(job.ok()) << job.status().message();
  json out = ToJson(*job);
  EXPECT_FALSE(out["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].contains("acceleratorType"));
}

TEST(EnumsTest, UnknownNumbersNameTheFieldTheEnumAndItsValues) {
  auto job = ParseCustomJob(
      Job({{"machineType", "n1-standard-4"}, {"acceleratorType", 99}, {"acceleratorCount", 1}},
          {{"strategy", 5}}));
  ASSERT_FALSE(job.ok());
  const std::string& m = job.status().message();
  EXPECT_NE(m.find("jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: 99 is not a number "
                   "of enum AcceleratorType; use one of ACCELERATOR_TYPE_UNSPECIFIED (0), "
                   "NVIDIA_TESLA_K80 (1)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("jobSpec.scheduling.strategy: 5 is not a number of enum Scheduling.Strategy"),
            std::string::npos)
      << m;
  // One problem per field: no follow-on "required" line.
  EXPECT_EQ(m.find("acceleratorType: required"), std::string::npos) << m;

  auto reservation =
      ParseCustomJob(Job({{"machineType", "n1-standard-4"},
                          {"reservationAffinity", {{"reservationAffinityType", 7}}}}));
  ASSERT_FALSE(reservation.ok());
  EXPECT_NE(reservation.status().message().find(
                "reservationAffinity.reservationAffinityType: 7 is not a number of enum "
                "ReservationAffinity.Type"),
            std::string::npos)
      << reservation.status().message();
}

TEST(EnumsTest, OtherTypesNameTheEnum) {
  auto job = ParseCustomJob(Job({{"machineType", "n1-standard-4"}, {"acceleratorType", true}}));
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("acceleratorType: must be a AcceleratorType name or "
                                        "number (one of ACCELERATOR_TYPE_UNSPECIFIED (0)"),
            std::string::npos)
      << job.status().message();
}

json Study(const json& metric, const json& parameter, const json& study_extra) {
  json study = {{"metrics", {metric}}, {"parameters", {parameter}}};
  study.update(study_extra);
  return {{"displayName", "s"},
          {"studySpec", study},
          {"maxTrialCount", 2},
          {"parallelTrialCount", 1},
          {"trialJobSpec",
           {{"workerPoolSpecs",
             {{{"machineSpec", {{"machineType", "n1-standard-4"}}},
               {"replicaCount", 1},
               {"containerSpec", {{"imageUri", "gcr.io/p/i:1"}}}}}}}}};
}

TEST(EnumsTest, StudyTakesNumbersAndAnswersNames) {
  auto job = ParseHyperparameterTuningJob(
      Study({{"metricId", "acc"}, {"goal", 2}},
            {{"parameterId", "lr"},
             {"doubleValueSpec", {{"minValue", 0.001}, {"maxValue", 0.1}}},
             {"scaleType", 2}},
            {{"algorithm", 3}, {"measurementSelectionType", 2}, {"observationNoise", 1}}));
  ASSERT_TRUE(job.ok()) << job.status().message();
  json out = ToJson(*job);
  const json& s = out["studySpec"];
  EXPECT_EQ(s["metrics"][0]["goal"], "MINIMIZE");
  EXPECT_EQ(s["parameters"][0]["scaleType"], "UNIT_LOG_SCALE");
  EXPECT_EQ(s["algorithm"], "RANDOM_SEARCH");
  EXPECT_EQ(s["measurementSelectionType"], "BEST_MEASUREMENT");
  EXPECT_EQ(s["observationNoise"], "LOW");
}

TEST(EnumsTest, StudyRefusesUnknownNumbers) {
  auto job = ParseHyperparameterTuningJob(
      Study({{"metricId", "acc"}, {"goal", 3}},
            {{"parameterId", "lr"}, {"doubleValueSpec", {{"minValue", 0.1}, {"maxValue", 1}}}},
            {{"algorithm", 1}}));
  ASSERT_FALSE(job.ok());
  const std::string& m = job.status().message();
  EXPECT_NE(m.find("studySpec.metrics[0].goal: 3 is not a number of enum GoalType; use one of "
                   "GOAL_TYPE_UNSPECIFIED (0), MAXIMIZE (1), MINIMIZE (2)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("studySpec.algorithm: 1 is not a number of enum StudySpec.Algorithm; use one "
                   "of ALGORITHM_UNSPECIFIED (0), GRID_SEARCH (2), RANDOM_SEARCH (3)"),
            std::string::npos)
      << m;
}

TEST(EnumsTest, LegacyHyperparametersTakeNumbers) {
  json h = {{"goal", 2},
            {"maxTrials", 2},
            {"params",
             {{{"parameterName", "lr"},
               {"type", 1},
               {"minValue", 0.01},
               {"maxValue", 0.1},
               {"scaleType", 2}}}}};
  auto parsed = ParseLegacyHyperparameters(h, "trainingInput.hyperparameters");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  json out = ToJson(parsed->study_spec);
  EXPECT_EQ(out["metrics"][0]["goal"], "MINIMIZE");
  EXPECT_EQ(out["parameters"][0]["scaleType"], "UNIT_LOG_SCALE");
  EXPECT_TRUE(out["parameters"][0].contains("doubleValueSpec"));
}

}  // namespace
}  // namespace stoker::spec
