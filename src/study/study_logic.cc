#include "study/study_logic.h"

#include <cmath>
#include <map>

#include "common/time.h"
#include "study/hypertune_report.h"

namespace stoker::study {
namespace {

using nlohmann::json;

tune::Parameter ToTuneParameter(const spec::ParameterSpec& p) {
  tune::Parameter t;
  t.name = p.parameter_id;
  switch (p.kind) {
    case spec::ParameterKind::kDouble:
      t.kind = tune::ParameterKind::kDouble;
      t.min = p.double_min;
      t.max = p.double_max;
      break;
    case spec::ParameterKind::kInteger:
      t.kind = tune::ParameterKind::kInteger;
      t.min = static_cast<double>(p.int_min);
      t.max = static_cast<double>(p.int_max);
      break;
    case spec::ParameterKind::kDiscrete:
      t.kind = tune::ParameterKind::kDiscrete;
      t.values = p.discrete_values;
      break;
    case spec::ParameterKind::kCategorical:
      t.kind = tune::ParameterKind::kCategorical;
      t.categories = p.categories;
      break;
  }
  t.scale = p.scale == spec::ScaleType::kLog          ? tune::ScaleType::kLog
            : p.scale == spec::ScaleType::kReverseLog ? tune::ScaleType::kReverseLog
                                                      : tune::ScaleType::kLinear;
  for (const spec::ConditionalParameter& c : p.children) {
    tune::Conditional tc;
    tc.child = ToTuneParameter(c.spec);
    tc.parent_values = c.parent_discrete_values;
    for (int64_t v : c.parent_int_values) tc.parent_values.push_back(static_cast<double>(v));
    tc.parent_categories = c.parent_categorical_values;
    t.children.push_back(std::move(tc));
  }
  return t;
}

// Every parameter spec, depth first (children after their parent). A name
// that appears twice (children under disjoint conditions) is listed once:
// an assignment holds at most one value per name.
void FlattenInto(const spec::ParameterSpec& p, std::vector<const spec::ParameterSpec*>* out) {
  bool seen = false;
  for (const spec::ParameterSpec* q : *out) seen = seen || q->parameter_id == p.parameter_id;
  if (!seen) out->push_back(&p);
  for (const spec::ConditionalParameter& c : p.children) FlattenInto(c.spec, out);
}

void Flatten(const std::vector<spec::ParameterSpec>& params,
             std::vector<const spec::ParameterSpec*>* out) {
  for (const spec::ParameterSpec& p : params) FlattenInto(p, out);
}

spec::ParameterValue ToSpecValue(const spec::ParameterSpec& p, const tune::Value& v) {
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  double d = std::get<double>(v);
  if (p.kind == spec::ParameterKind::kInteger) return static_cast<int64_t>(std::llround(d));
  return d;
}

}  // namespace

tune::Algorithm ToTuneAlgorithm(spec::Algorithm algorithm) {
  switch (algorithm) {
    case spec::Algorithm::kGridSearch:
      return tune::Algorithm::kGrid;
    case spec::Algorithm::kRandomSearch:
      return tune::Algorithm::kRandom;
    case spec::Algorithm::kUnspecified:
      break;
  }
  return tune::Algorithm::kDefault;
}

tune::Space ToTuneSpace(const spec::StudySpec& study) {
  tune::Space space;
  for (const spec::ParameterSpec& p : study.parameters)
    space.parameters.push_back(ToTuneParameter(p));
  return space;
}

json ParametersJson(const spec::StudySpec& study, const tune::Assignment& assignment) {
  std::vector<const spec::ParameterSpec*> all;
  Flatten(study.parameters, &all);
  json out = json::array();
  for (const spec::ParameterSpec* p : all) {
    auto it = assignment.find(p->parameter_id);
    if (it == assignment.end()) continue;
    spec::ParameterValue v = ToSpecValue(*p, it->second);
    json value;
    if (auto* i = std::get_if<int64_t>(&v)) value = *i;
    if (auto* d = std::get_if<double>(&v)) value = *d;
    if (auto* s = std::get_if<std::string>(&v)) value = *s;
    out.push_back({{"parameterId", p->parameter_id}, {"value", value}});
  }
  return out;
}

tune::Assignment AssignmentFromJson(const json& parameters) {
  tune::Assignment a;
  for (const json& p : parameters) {
    const json& v = p["value"];
    if (v.is_string()) {
      a[p["parameterId"]] = v.get<std::string>();
    } else if (v.is_number()) {
      a[p["parameterId"]] = v.get<double>();
    }
  }
  return a;
}

std::vector<std::string> TrialArgs(const spec::StudySpec& study,
                                   const tune::Assignment& assignment) {
  std::vector<const spec::ParameterSpec*> all;
  Flatten(study.parameters, &all);
  std::vector<std::string> args;
  for (const spec::ParameterSpec* p : all) {
    auto it = assignment.find(p->parameter_id);
    if (it == assignment.end()) continue;
    args.push_back("--" + p->parameter_id + "=" +
                   spec::FormatParameterValue(*p, ToSpecValue(*p, it->second)));
  }
  return args;
}

json ParseMetricsFile(const std::string& text, int64_t trial_start_us) {
  json out = json::array();
  for (const HypertuneReport& r : ParseHypertuneReports(text).reports) {
    json metrics = json::array();
    for (const auto& [key, v] : r.values) {
      if (std::isfinite(v)) metrics.push_back({{"metricId", key}, {"value", v}});
    }
    double elapsed = 0;
    if (r.timestamp && trial_start_us > 0) {
      elapsed = std::max(0.0, *r.timestamp - trial_start_us / 1e6);
    }
    out.push_back({{"stepCount", r.global_step.empty() ? "0" : r.global_step},
                   {"elapsedDuration", FormatDuration(std::round(elapsed * 1000) / 1000)},
                   {"metrics", metrics}});
  }
  return out;
}

std::optional<double> MetricValue(const json& measurement, const std::string& metric_id) {
  for (const json& m : measurement.value("metrics", json::array())) {
    if (m.value("metricId", "") == metric_id && m["value"].is_number()) {
      double v = m["value"].get<double>();
      if (std::isfinite(v)) return v;
    }
  }
  return std::nullopt;
}

json FinalMeasurement(const json& measurements, const spec::MetricSpec& metric,
                      spec::MeasurementSelection selection) {
  json best = nullptr;
  std::optional<double> best_value;
  for (const json& m : measurements) {
    std::optional<double> v = MetricValue(m, metric.metric_id);
    if (!v) continue;
    bool better = !best_value || selection == spec::MeasurementSelection::kLast ||
                  (metric.goal == spec::Goal::kMaximize ? *v > *best_value : *v < *best_value);
    if (better) {
      best = m;
      best_value = v;
    }
  }
  return best;
}

}  // namespace stoker::study
