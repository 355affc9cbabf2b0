// The study model: what a hyperparameter tuning job searches and how.
//
// One model for both formats Stoker accepts (../shared/reference/vertex.md):
// - Vertex AI `HyperparameterTuningJob` with its `StudySpec` (§2), parsed by
//   ParseHyperparameterTuningJob from the JSON form of a job file or REST body
//   (YAML goes through common/json_yaml.h first);
// - AI Platform Training `trainingInput.hyperparameters` (`HyperparameterSpec`,
//   §6), parsed by ParseLegacyHyperparameters into the same StudySpec.
// Keys are camelCase; snake_case and unknown keys are errors with a hint, as
// in custom_job.h. Every problem is reported at once: one InvalidArgument
// whose message has one line per problem, each starting with the full field
// path and saying what to do.
//
// gcloud flags that override the config (--display-name, --max-trial-count,
// --parallel-trial-count, --algorithm) are applied by the caller to the JSON
// before parsing, or to the model followed by Validate().
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "spec/custom_job.h"

namespace stoker::spec {

// The type of a parameter; Vertex names it by its value spec
// (doubleValueSpec, ...), AI Platform by `type`.
enum class ParameterKind { kDouble, kInteger, kCategorical, kDiscrete };

// How the tuner maps a numeric parameter's range onto [0, 1].
// kNone is Vertex SCALE_TYPE_UNSPECIFIED and AI Platform NONE.
enum class ScaleType { kNone, kLinear, kLog, kReverseLog };

struct ConditionalParameter;

struct ParameterSpec {
  // Required, no whitespace, unique in the study; also the name of the
  // command-line flag a trial receives (`--<parameter_id>=<value>`).
  std::string parameter_id;
  ParameterKind kind = ParameterKind::kDouble;
  // kDouble: inclusive bounds, min < max.
  double double_min = 0;
  double double_max = 0;
  // kInteger: inclusive bounds, min <= max.
  int64_t int_min = 0;
  int64_t int_max = 0;
  // kCategorical: the values, non-empty and unique.
  std::vector<std::string> categories;
  // kDiscrete: strictly increasing values, and beside them each value's text
  // as the spec wrote it ("32", "0.5", "128.0"), which trial arguments repeat.
  // Code that builds a spec may leave discrete_texts empty; values then print
  // in their shortest form.
  std::vector<double> discrete_values;
  std::vector<std::string> discrete_texts;
  ScaleType scale = ScaleType::kNone;
  // The value spec's `defaultValue`, verbatim (null when absent). Vertex uses
  // it only for Vizier studies; tuning jobs ignore it, and so does Stoker.
  nlohmann::json default_value;
  // Parameters that exist only while this one takes certain values.
  std::vector<ConditionalParameter> children;

  bool operator==(const ParameterSpec&) const;
};

// A parameter that is active when its parent takes one of the listed values.
// Exactly one list is non-empty, the one matching the parent's kind:
// discrete for a DISCRETE parent, ints for INTEGER, categories for
// CATEGORICAL. DOUBLE parameters have no children.
struct ConditionalParameter {
  ParameterSpec spec;
  std::vector<double> parent_discrete_values;
  std::vector<int64_t> parent_int_values;
  std::vector<std::string> parent_categorical_values;

  bool operator==(const ConditionalParameter&) const = default;
};

// Written out (clang 14 cannot default it here, where ConditionalParameter
// becomes complete).
inline bool ParameterSpec::operator==(const ParameterSpec& o) const {
  return parameter_id == o.parameter_id && kind == o.kind && double_min == o.double_min &&
         double_max == o.double_max && int_min == o.int_min && int_max == o.int_max &&
         categories == o.categories && discrete_values == o.discrete_values &&
         discrete_texts == o.discrete_texts && scale == o.scale &&
         default_value == o.default_value && children == o.children;
}

enum class Goal { kMaximize, kMinimize };  // GOAL_TYPE_UNSPECIFIED reads as kMaximize

struct MetricSpec {
  // Required, no whitespace, unique; the hyperparameter_metric_tag that the
  // trial code reports through cloudml-hypertune.
  std::string metric_id;
  Goal goal = Goal::kMaximize;
  // safetyConfig, verbatim (null when absent); not acted on.
  nlohmann::json safety_config;

  bool operator==(const MetricSpec&) const = default;
};

// kUnspecified is Vertex's default (Bayesian optimization on the service).
enum class Algorithm { kUnspecified, kGridSearch, kRandomSearch };

// Which measurement of a trial is its result. Unspecified reads as kLast.
enum class MeasurementSelection { kLast, kBest };

// StudySpec's automated_stopping_spec oneof.
struct StoppingSpec {
  enum class Kind { kNone, kMedian, kDecayCurve, kConvex };
  Kind kind = Kind::kNone;
  // kMedian and kDecayCurve: compare by elapsed time rather than by step.
  bool use_elapsed_duration = false;
  // kConvex: convexAutomatedStoppingSpec, verbatim (shape-checked).
  nlohmann::json convex;

  bool operator==(const StoppingSpec&) const = default;
};

struct StudySpec {
  std::vector<MetricSpec> metrics;        // required, non-empty
  std::vector<ParameterSpec> parameters;  // required, non-empty
  Algorithm algorithm = Algorithm::kUnspecified;
  MeasurementSelection measurement_selection = MeasurementSelection::kLast;
  StoppingSpec stopping;
  // observationNoise enum name ("LOW", "HIGH"); "" = unspecified. Vizier only.
  std::string observation_noise;
  // studyStoppingConfig, verbatim (shape-checked; null when absent).
  nlohmann::json study_stopping_config;

  bool operator==(const StudySpec&) const = default;
};

struct HyperparameterTuningJob {
  std::string display_name;  // required, <= 128 characters
  std::map<std::string, std::string> labels;
  StudySpec study_spec;
  // The reference marks max and parallel trial counts required, but gcloud
  // defaults both to 1, so a missing count reads as 1. parallel_trial_count
  // may exceed max_trial_count (the tuner clamps it).
  int32_t max_trial_count = 1;         // >= 1
  int32_t parallel_trial_count = 1;    // >= 1
  int32_t max_failed_trial_count = 0;  // >= 0; 0 = the service decides
  CustomJobSpec trial_job_spec;        // required; every trial runs it
  // Other known input fields (encryptionSpec), verbatim.
  nlohmann::json passthrough = nlohmann::json::object();

  bool operator==(const HyperparameterTuningJob&) const = default;
};

// Parses and validates a Vertex HyperparameterTuningJob. Output-only fields
// (name, state, trials, createTime, ..., error) are dropped, so `describe`
// output can be resubmitted. The trialJobSpec is parsed by ParseCustomJobSpec
// and its problems carry "trialJobSpec." paths.
Result<HyperparameterTuningJob> ParseHyperparameterTuningJob(const nlohmann::json& j);

// Checks every rule on a model built or edited in code (after flag overrides).
// ParseHyperparameterTuningJob already applies them.
Status Validate(const HyperparameterTuningJob& job);

// Canonical Vertex JSON: enums by name, integerValueSpec bounds and
// parentIntValues as strings (int64), trial counts as numbers (int32),
// discrete values as written. ParseHyperparameterTuningJob(ToJson(job)) == job.
nlohmann::json ToJson(const HyperparameterTuningJob& job);
nlohmann::json ToJson(const StudySpec& spec);

// What an AI Platform HyperparameterSpec says, in the Vertex model.
struct StudyFromLegacy {
  // One metric (hyperparameterMetricTag, default "training/hptuning/metric",
  // with goal); parameters from params[]; enableTrialEarlyStopping becomes
  // median stopping; measurement selection is LAST.
  StudySpec study_spec;
  int32_t max_trial_count = 1;         // maxTrials, default 1
  int32_t parallel_trial_count = 1;    // maxParallelTrials, default 1
  int32_t max_failed_trial_count = 0;  // maxFailedTrials; 0 = the service decides
  std::string resume_previous_job_id;  // "" = none; kept, not acted on

  bool operator==(const StudyFromLegacy&) const = default;
};

// Parses and validates `trainingInput.hyperparameters` found at `path`
// (e.g. "trainingInput.hyperparameters"); problems carry paths under it in
// the legacy names (params[0].minValue, maxTrials, ...).
Result<StudyFromLegacy> ParseLegacyHyperparameters(const nlohmann::json& hyperparameters,
                                                   const std::string& path);

// A value of one parameter in one trial: int64_t for INTEGER, double for
// DOUBLE and DISCRETE, a string for CATEGORICAL.
using ParameterValue = std::variant<int64_t, double, std::string>;

// The text of `value` in a trial's `--<parameter_id>=<text>` argument:
// integers without a decimal point ("64"), doubles in their shortest
// round-trip form ("0.001", "1e-05"), discrete values as the spec wrote them
// ("32", "0.5"), categories verbatim.
std::string FormatParameterValue(const ParameterSpec& spec, const ParameterValue& value);

// "DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE".
std::string_view ParameterKindName(ParameterKind kind);

}  // namespace stoker::spec
