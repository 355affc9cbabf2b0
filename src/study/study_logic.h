// Pure pieces of the tuning-study driver: the bridge from a Vertex StudySpec
// to the tuner's search space, trial arguments, and the cloudml-hypertune
// metrics file read as Vertex measurements. No I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/study.h"
#include "tune/sampler.h"
#include "tune/space.h"

namespace stoker::study {

// The tuner's Space for a study's parameters (conditionals included).
tune::Space ToTuneSpace(const spec::StudySpec& study);

// The tuner's algorithm for a study's (tune::MakeSampler builds the sampler;
// ALGORITHM_UNSPECIFIED is Bayesian optimisation, as on Vertex).
tune::Algorithm ToTuneAlgorithm(spec::Algorithm algorithm);

// Trial.parameters JSON: [{"parameterId": id, "value": number|string}] in the
// study's parameter order, active parameters only.
nlohmann::json ParametersJson(const spec::StudySpec& study, const tune::Assignment& assignment);
// The inverse, for observations of stored trials.
tune::Assignment AssignmentFromJson(const nlohmann::json& parameters);

// `--<parameterId>=<value>` for every active parameter, values formatted as
// spec::FormatParameterValue does (integers without a decimal point,
// discrete values as the spec wrote them).
std::vector<std::string> TrialArgs(const spec::StudySpec& study,
                                   const tune::Assignment& assignment);

// Measurements from the text of a hypertune metrics file
// (hypertune_report.h): one per report, in file order: {"stepCount": "<global_step>",
// "elapsedDuration":
// "<s since trial start>s", "metrics": [{"metricId": tag, "value": v}, ...]}.
// Non-finite values are left out; a report without global_step is step "0".
nlohmann::json ParseMetricsFile(const std::string& text, int64_t trial_start_us);

// The value of `metric_id` in one measurement, if present and finite.
std::optional<double> MetricValue(const nlohmann::json& measurement, const std::string& metric_id);

// The trial's final measurement: the last one that has the metric (LAST) or
// the best by the goal (BEST). Null when none has it.
nlohmann::json FinalMeasurement(const nlohmann::json& measurements, const spec::MetricSpec& metric,
                                spec::MeasurementSelection selection);

}  // namespace stoker::study
