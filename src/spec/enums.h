// The Vertex (and AI Platform) enums that Stoker reads, each as one table of
// {name, proto number} (reference: shared/reference/vertex.md and the
// google/cloud/aiplatform/v1 protos). Both directions of every lookup read
// the same table, so a name and its number cannot drift apart.
//
// Why numbers: the official client libraries' REST transports send enums as
// their numbers (`"acceleratorType": 5`, `"goal": 1`); proto JSON accepts
// either form on input and prints names. Stoker does the same: every enum
// field accepts the name or the number, and every answer carries the name.
//
// Pure data and lookups; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::spec {

struct EnumValue {
  std::string_view name;
  int number;
};

struct EnumType {
  std::string_view name;  // the proto's name, for messages ("AcceleratorType")
  std::span<const EnumValue> values;
};

// google.cloud.aiplatform.v1: MachineSpec.acceleratorType.
extern const EnumType kAcceleratorTypeEnum;
// Scheduling.strategy.
extern const EnumType kStrategyEnum;
// ReservationAffinity.reservationAffinityType.
extern const EnumType kReservationAffinityTypeEnum;
// StudySpec.MetricSpec.goal; also AI Platform's HyperparameterSpec.goal (same numbers).
extern const EnumType kGoalTypeEnum;
// StudySpec.algorithm.
extern const EnumType kAlgorithmEnum;
// StudySpec.ParameterSpec.scaleType.
extern const EnumType kScaleTypeEnum;
// StudySpec.measurementSelectionType.
extern const EnumType kMeasurementSelectionTypeEnum;
// StudySpec.observationNoise.
extern const EnumType kObservationNoiseEnum;
// AI Platform (google.cloud.ml.v1) ParameterSpec.type and ParameterSpec.scaleType.
extern const EnumType kLegacyParameterTypeEnum;
extern const EnumType kLegacyScaleTypeEnum;

// The number of `name` in `e`, nullopt when `name` is not one of its names.
std::optional<int> EnumNumber(const EnumType& e, std::string_view name);
// The name of `number` in `e`, nullopt when no value of `e` has it.
std::optional<std::string_view> EnumName(const EnumType& e, int64_t number);
// The names of `e` in table order; without its value 0 (the *_UNSPECIFIED
// one) unless `with_zero`.
std::vector<std::string_view> EnumNames(const EnumType& e, bool with_zero);
// "NAME (0), NAME (1), ..." for messages.
std::string DescribeEnum(const EnumType& e);

}  // namespace stoker::spec
