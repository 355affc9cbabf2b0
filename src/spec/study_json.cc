// Printing the study model as canonical Vertex JSON, and a trial's parameter values.
#include <algorithm>
#include <cmath>
#include <string>

#include "spec/study_internal.h"

namespace stoker::spec {
namespace {

using internal::FormatDouble;
using internal::Index;
using internal::kAlgorithms;
using internal::kMeasurementSelections;
using internal::kScaleTypes;
using internal::kValueSpecs;
using nlohmann::json;

json ParameterToJson(const ParameterSpec& s) {
  json out = {{"parameterId", s.parameter_id}};
  json spec = json::object();
  switch (s.kind) {
    case ParameterKind::kDouble:
      spec = {{"minValue", s.double_min}, {"maxValue", s.double_max}};
      break;
    case ParameterKind::kInteger:
      spec = {{"minValue", std::to_string(s.int_min)}, {"maxValue", std::to_string(s.int_max)}};
      break;
    case ParameterKind::kCategorical:
      spec = {{"values", s.categories}};
      break;
    case ParameterKind::kDiscrete: {
      json values = json::array();
      bool texts = s.discrete_texts.size() == s.discrete_values.size();
      for (size_t i = 0; i < s.discrete_values.size(); ++i) {
        json v = texts ? json::parse(s.discrete_texts[i], nullptr, false) : json();
        values.push_back(v.is_number() ? v : json(s.discrete_values[i]));
      }
      spec = {{"values", values}};
      break;
    }
  }
  if (!s.default_value.is_null()) spec["defaultValue"] = s.default_value;
  out[std::string(kValueSpecs[Index(s.kind)])] = spec;
  if (s.scale != ScaleType::kNone) out["scaleType"] = kScaleTypes[static_cast<size_t>(s.scale)];
  if (!s.children.empty()) {
    json children = json::array();
    for (const auto& c : s.children) {
      json cj = {{"parameterSpec", ParameterToJson(c.spec)}};
      if (!c.parent_discrete_values.empty()) {
        cj["parentDiscreteValues"] = {{"values", c.parent_discrete_values}};
      }
      if (!c.parent_int_values.empty()) {
        json ints = json::array();
        for (int64_t v : c.parent_int_values) ints.push_back(std::to_string(v));
        cj["parentIntValues"] = {{"values", ints}};
      }
      if (!c.parent_categorical_values.empty()) {
        cj["parentCategoricalValues"] = {{"values", c.parent_categorical_values}};
      }
      children.push_back(cj);
    }
    out["conditionalParameterSpecs"] = children;
  }
  return out;
}

}  // namespace

json ToJson(const StudySpec& spec) {
  json out = json::object();
  json metrics = json::array();
  for (const auto& m : spec.metrics) {
    json mj = {{"metricId", m.metric_id},
               {"goal", m.goal == Goal::kMinimize ? "MINIMIZE" : "MAXIMIZE"}};
    if (!m.safety_config.is_null()) mj["safetyConfig"] = m.safety_config;
    metrics.push_back(mj);
  }
  out["metrics"] = metrics;
  json params = json::array();
  for (const auto& s : spec.parameters) params.push_back(ParameterToJson(s));
  out["parameters"] = params;
  out["algorithm"] = kAlgorithms[static_cast<size_t>(spec.algorithm)];
  out["measurementSelectionType"] =
      kMeasurementSelections[static_cast<size_t>(spec.measurement_selection)];
  switch (spec.stopping.kind) {
    case StoppingSpec::Kind::kNone:
      break;
    case StoppingSpec::Kind::kMedian:
      out["medianAutomatedStoppingSpec"] = {
          {"useElapsedDuration", spec.stopping.use_elapsed_duration}};
      break;
    case StoppingSpec::Kind::kDecayCurve:
      out["decayCurveStoppingSpec"] = {{"useElapsedDuration", spec.stopping.use_elapsed_duration}};
      break;
    case StoppingSpec::Kind::kConvex:
      out["convexAutomatedStoppingSpec"] =
          spec.stopping.convex.is_object() ? spec.stopping.convex : json::object();
      break;
  }
  if (!spec.observation_noise.empty()) out["observationNoise"] = spec.observation_noise;
  if (!spec.study_stopping_config.is_null()) {
    out["studyStoppingConfig"] = spec.study_stopping_config;
  }
  return out;
}

json ToJson(const HyperparameterTuningJob& job) {
  json out = job.passthrough.is_object() ? job.passthrough : json::object();
  out["displayName"] = job.display_name;
  if (!job.labels.empty()) out["labels"] = job.labels;
  out["studySpec"] = ToJson(job.study_spec);
  out["maxTrialCount"] = job.max_trial_count;
  out["parallelTrialCount"] = job.parallel_trial_count;
  out["maxFailedTrialCount"] = job.max_failed_trial_count;
  out["trialJobSpec"] = ToJson(job.trial_job_spec);
  return out;
}

std::string FormatParameterValue(const ParameterSpec& spec, const ParameterValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  double d = 0;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    if (spec.kind != ParameterKind::kDiscrete) return std::to_string(*i);
    d = static_cast<double>(*i);
  } else {
    d = std::get<double>(value);
  }
  if (spec.kind == ParameterKind::kInteger && std::isfinite(d) && d == std::floor(d) &&
      std::fabs(d) < 9e18) {
    return std::to_string(static_cast<int64_t>(d));
  }
  if (spec.kind == ParameterKind::kDiscrete &&
      spec.discrete_texts.size() == spec.discrete_values.size()) {
    for (size_t i = 0; i < spec.discrete_values.size(); ++i) {
      double v = spec.discrete_values[i];
      if (v == d || std::fabs(v - d) <= 1e-12 * std::max(1.0, std::fabs(v))) {
        return spec.discrete_texts[i];
      }
    }
  }
  return FormatDouble(d);
}

}  // namespace stoker::spec
