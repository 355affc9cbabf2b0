#include "spec/enums.h"

namespace stoker::spec {
namespace {

// Reference §1.8 (number = proto tag).
constexpr EnumValue kAcceleratorTypeValues[] = {
    {"ACCELERATOR_TYPE_UNSPECIFIED", 0},
    {"NVIDIA_TESLA_K80", 1},
    {"NVIDIA_TESLA_P100", 2},
    {"NVIDIA_TESLA_V100", 3},
    {"NVIDIA_TESLA_P4", 4},
    {"NVIDIA_TESLA_T4", 5},
    {"TPU_V2", 6},
    {"TPU_V3", 7},
    {"NVIDIA_TESLA_A100", 8},
    {"NVIDIA_A100_80GB", 9},
    {"TPU_V4_POD", 10},
    {"NVIDIA_L4", 11},
    {"TPU_V5_LITEPOD", 12},
    {"NVIDIA_H100_80GB", 13},
    {"NVIDIA_H100_MEGA_80GB", 14},
    {"NVIDIA_H200_141GB", 15},
    {"NVIDIA_B200", 16},
    {"NVIDIA_GB200", 17},
    {"NVIDIA_RTX_PRO_6000", 18},
};

// Reference §1.7; there is no value 5.
constexpr EnumValue kStrategyValues[] = {
    {"STRATEGY_UNSPECIFIED", 0}, {"ON_DEMAND", 1}, {"LOW_COST", 2}, {"STANDARD", 3}, {"SPOT", 4},
    {"FLEX_START", 6},
};

constexpr EnumValue kReservationAffinityTypeValues[] = {
    {"TYPE_UNSPECIFIED", 0},
    {"NO_RESERVATION", 1},
    {"ANY_RESERVATION", 2},
    {"SPECIFIC_RESERVATION", 3},
};

// Reference §2.2.
constexpr EnumValue kGoalTypeValues[] = {
    {"GOAL_TYPE_UNSPECIFIED", 0},
    {"MAXIMIZE", 1},
    {"MINIMIZE", 2},
};

// There is no value 1.
constexpr EnumValue kAlgorithmValues[] = {
    {"ALGORITHM_UNSPECIFIED", 0},
    {"GRID_SEARCH", 2},
    {"RANDOM_SEARCH", 3},
};

constexpr EnumValue kScaleTypeValues[] = {
    {"SCALE_TYPE_UNSPECIFIED", 0},
    {"UNIT_LINEAR_SCALE", 1},
    {"UNIT_LOG_SCALE", 2},
    {"UNIT_REVERSE_LOG_SCALE", 3},
};

constexpr EnumValue kMeasurementSelectionTypeValues[] = {
    {"MEASUREMENT_SELECTION_TYPE_UNSPECIFIED", 0},
    {"LAST_MEASUREMENT", 1},
    {"BEST_MEASUREMENT", 2},
};

constexpr EnumValue kObservationNoiseValues[] = {
    {"OBSERVATION_NOISE_UNSPECIFIED", 0},
    {"LOW", 1},
    {"HIGH", 2},
};

// google.cloud.ml.v1 job_service.proto (reference §6).
constexpr EnumValue kLegacyParameterTypeValues[] = {
    {"PARAMETER_TYPE_UNSPECIFIED", 0},
    {"DOUBLE", 1},
    {"INTEGER", 2},
    {"CATEGORICAL", 3},
    {"DISCRETE", 4},
};

constexpr EnumValue kLegacyScaleTypeValues[] = {
    {"NONE", 0},
    {"UNIT_LINEAR_SCALE", 1},
    {"UNIT_LOG_SCALE", 2},
    {"UNIT_REVERSE_LOG_SCALE", 3},
};

}  // namespace

// constinit: initialised before any dynamic initialiser runs, so that the
// parsers' name lists derived from these (json_fields.cc, study.cc) may read
// them at static-initialisation time.
constinit const EnumType kAcceleratorTypeEnum = {"AcceleratorType", kAcceleratorTypeValues};
constinit const EnumType kStrategyEnum = {"Scheduling.Strategy", kStrategyValues};
constinit const EnumType kReservationAffinityTypeEnum = {"ReservationAffinity.Type",
                                                         kReservationAffinityTypeValues};
constinit const EnumType kGoalTypeEnum = {"GoalType", kGoalTypeValues};
constinit const EnumType kAlgorithmEnum = {"StudySpec.Algorithm", kAlgorithmValues};
constinit const EnumType kScaleTypeEnum = {"ParameterSpec.ScaleType", kScaleTypeValues};
constinit const EnumType kMeasurementSelectionTypeEnum = {"StudySpec.MeasurementSelectionType",
                                                          kMeasurementSelectionTypeValues};
constinit const EnumType kObservationNoiseEnum = {"StudySpec.ObservationNoise",
                                                  kObservationNoiseValues};
constinit const EnumType kLegacyParameterTypeEnum = {"ParameterSpec.ParameterType",
                                                     kLegacyParameterTypeValues};
constinit const EnumType kLegacyScaleTypeEnum = {"ParameterSpec.ScaleType", kLegacyScaleTypeValues};

std::optional<int> EnumNumber(const EnumType& e, std::string_view name) {
  for (const EnumValue& v : e.values) {
    if (v.name == name) return v.number;
  }
  return std::nullopt;
}

std::optional<std::string_view> EnumName(const EnumType& e, int64_t number) {
  for (const EnumValue& v : e.values) {
    if (v.number == number) return v.name;
  }
  return std::nullopt;
}

std::vector<std::string_view> EnumNames(const EnumType& e, bool with_zero) {
  std::vector<std::string_view> out;
  for (const EnumValue& v : e.values) {
    if (with_zero || v.number != 0) out.push_back(v.name);
  }
  return out;
}

std::string DescribeEnum(const EnumType& e) {
  std::string out;
  for (const EnumValue& v : e.values) {
    if (!out.empty()) out += ", ";
    out += std::string(v.name) + " (" + std::to_string(v.number) + ")";
  }
  return out;
}

}  // namespace stoker::spec
