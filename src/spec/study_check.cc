// The rules on a study model, shared by parsing and Validate, in both
// formats: Dialect names each field as the input wrote it.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "spec/study_internal.h"

namespace stoker::spec::internal {
namespace {

constexpr size_t kMaxDiscreteValues = 1000;
constexpr size_t kMaxCategories = 1000;
// Parameters in a study, conditional ones included, and metrics: bounds that
// keep checking (pairwise id checks) and suggesting cheap; a GP over more
// than 100 dimensions would not learn from a trial budget anyway.
constexpr size_t kMaxParameters = 100;
constexpr size_t kMaxMetrics = 100;
constexpr double kMinDiscreteGap = 1e-10;
constexpr std::string_view kCategoriesHint = "list the categories to try";
constexpr std::string_view kDiscreteHint = "list the values to try, in increasing order";

bool HasSpace(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

std::string FormatDoubles(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ", ") + FormatDouble(v);
  return out;
}

// Where the fields of a study live: Vertex (studySpec.parameters[0].doubleValueSpec.minValue)
// or AI Platform (trainingInput.hyperparameters.params[0].minValue).
struct Dialect {
  bool legacy = false;

  const char* Parameters() const { return legacy ? "params" : "parameters"; }
  const char* Id() const { return legacy ? "parameterName" : "parameterId"; }
  // The object that holds a parameter's values.
  std::string Spec(const std::string& param, ParameterKind kind) const {
    return legacy ? param : Join(param, kValueSpecs[Index(kind)]);
  }
  std::string Min(const std::string& param, ParameterKind kind) const {
    return Join(Spec(param, kind), "minValue");
  }
  std::string Max(const std::string& param, ParameterKind kind) const {
    return Join(Spec(param, kind), "maxValue");
  }
  std::string Values(const std::string& param, ParameterKind kind) const {
    if (!legacy) return Join(Spec(param, kind), "values");
    return Join(param,
                kind == ParameterKind::kCategorical ? "categoricalValues" : "discreteValues");
  }
  std::string MetricId(const std::string& study, size_t i) const {
    return legacy ? Join(study, "hyperparameterMetricTag")
                  : At(Join(study, "metrics"), i) + ".metricId";
  }
  std::string_view ScaleName(ScaleType scale) const {
    return (legacy ? kLegacyScaleTypes : kScaleTypes)[static_cast<size_t>(scale)];
  }
};

bool IsLog(ScaleType s) { return s == ScaleType::kLog || s == ScaleType::kReverseLog; }

void CheckLogRange(const ParameterSpec& s, const std::string& path, const Dialect& d,
                   const std::string& lowest, Problems& p) {
  p.AddUnlessCovered(Join(path, "scaleType"),
                     std::string(d.ScaleName(s.scale)) +
                         " needs a range of values above 0, but the smallest value is " + lowest +
                         "; raise it above 0 or use UNIT_LINEAR_SCALE");
}

void CheckParameter(const ParameterSpec& s, const std::string& path, const Dialect& d, Problems& p);

void CheckChildren(const ParameterSpec& s, const std::string& path, const Dialect& d, Problems& p) {
  if (s.children.empty()) return;
  std::string list = Join(path, "conditionalParameterSpecs");
  std::string parent = Quote(s.parameter_id);
  std::string_view kind = ParameterKindName(s.kind);
  if (s.kind == ParameterKind::kDouble) {
    p.AddUnlessCovered(list, "the DOUBLE parameter " + parent +
                                 " cannot have conditional parameters; make it DISCRETE, "
                                 "INTEGER or CATEGORICAL, or move them to the top level");
    return;
  }
  std::string_view expected = kParentValues[Index(s.kind)];
  for (size_t i = 0; i < s.children.size(); ++i) {
    const ConditionalParameter& c = s.children[i];
    std::string cp = At(list, i);
    bool given[] = {false, !c.parent_int_values.empty(), !c.parent_categorical_values.empty(),
                    !c.parent_discrete_values.empty()};
    bool any_reported = false;
    for (size_t k = 1; k < kParentValues.size(); ++k) {
      any_reported = any_reported || p.Covered(Join(cp, kParentValues[k]));
      if (given[k] && k != Index(s.kind)) {
        p.AddUnlessCovered(Join(cp, kParentValues[k]),
                           "the parent " + parent + " is " + std::string(kind) +
                               "; give the values that activate this parameter as " +
                               std::string(expected) + " {values: [...]}");
      }
    }
    std::string values = Join(Join(cp, expected), "values");
    if (!given[Index(s.kind)]) {
      if (!any_reported && !given[1] && !given[2] && !given[3]) {
        p.AddUnlessCovered(cp, "no parent values are given; set " + std::string(expected) +
                                   " {values: [...]}, the values of " + parent +
                                   " that activate this parameter");
      }
    } else if (s.kind == ParameterKind::kDiscrete) {
      for (size_t k = 0; k < c.parent_discrete_values.size(); ++k) {
        double v = c.parent_discrete_values[k];
        if (std::find(s.discrete_values.begin(), s.discrete_values.end(), v) ==
            s.discrete_values.end()) {
          p.AddUnlessCovered(At(values, k), FormatDouble(v) + " is not a value of " + parent +
                                                " (" + FormatDoubles(s.discrete_values) +
                                                "); list only values the parent can take");
        }
      }
    } else if (s.kind == ParameterKind::kInteger) {
      for (size_t k = 0; k < c.parent_int_values.size(); ++k) {
        int64_t v = c.parent_int_values[k];
        if (v < s.int_min || v > s.int_max) {
          p.AddUnlessCovered(At(values, k), std::to_string(v) + " is outside the range of " +
                                                parent + " [" + std::to_string(s.int_min) + ", " +
                                                std::to_string(s.int_max) +
                                                "]; list only values the parent can take");
        }
      }
    } else {
      for (size_t k = 0; k < c.parent_categorical_values.size(); ++k) {
        const std::string& v = c.parent_categorical_values[k];
        if (std::find(s.categories.begin(), s.categories.end(), v) == s.categories.end()) {
          std::vector<std::string_view> cats(s.categories.begin(), s.categories.end());
          p.AddUnlessCovered(At(values, k), Quote(v) + " is not a category of " + parent + " (" +
                                                JoinNames(cats) +
                                                "); list only values the parent can take");
        }
      }
    }
    CheckParameter(c.spec, Join(cp, "parameterSpec"), d, p);
  }
}

// A CATEGORICAL parameter's values at `values`: non-empty, unique, at most
// kMaxCategories; no scale type.
void CheckCategories(const ParameterSpec& s, const std::string& path, const std::string& values,
                     Problems& p) {
  if (s.categories.empty()) {
    p.AddUnlessCovered(values, "required; " + std::string(kCategoriesHint));
  } else if (s.categories.size() > kMaxCategories) {
    p.AddUnlessCovered(values, "at most " + std::to_string(kMaxCategories) +
                                   " categories are allowed, got " +
                                   std::to_string(s.categories.size()));
    return;
  }
  for (size_t i = 0; i < s.categories.size(); ++i) {
    const std::string& c = s.categories[i];
    auto first = std::find(s.categories.begin(), s.categories.begin() + i, c);
    if (c.empty()) {
      p.AddUnlessCovered(At(values, i), "must not be empty; give the category's text");
    } else if (first != s.categories.begin() + i) {
      p.AddUnlessCovered(At(values, i), Quote(c) + " is already listed at " +
                                            At(values, first - s.categories.begin()) +
                                            "; list each category once");
    }
  }
  if (s.scale != ScaleType::kNone) {
    p.AddUnlessCovered(Join(path, "scaleType"),
                       "does not apply to a CATEGORICAL parameter; remove it");
  }
}

// A DISCRETE parameter's values at `values`: at most kMaxDiscreteValues,
// strictly increasing and at least kMinDiscreteGap apart; above 0 on a log scale.
void CheckDiscreteValues(const ParameterSpec& s, const std::string& path, const Dialect& d,
                         const std::string& values, Problems& p) {
  const std::vector<double>& v = s.discrete_values;
  if (v.empty()) {
    p.AddUnlessCovered(values, "required; " + std::string(kDiscreteHint));
  } else if (v.size() > kMaxDiscreteValues) {
    p.AddUnlessCovered(values, "at most 1000 values are allowed, got " + std::to_string(v.size()) +
                                   "; use an INTEGER or DOUBLE range instead");
  }
  bool increasing = true;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] <= v[i - 1]) {
      increasing = false;
      p.AddUnlessCovered(At(values, i),
                         FormatDouble(v[i]) + " is not above the value before it (" +
                             FormatDouble(v[i - 1]) +
                             "); list discrete values once each, in increasing order");
    } else if (v[i] - v[i - 1] < kMinDiscreteGap) {
      increasing = false;
      p.AddUnlessCovered(At(values, i), FormatDouble(v[i]) + " is less than 1e-10 above " +
                                            FormatDouble(v[i - 1]) +
                                            "; discrete values must be at least 1e-10 apart");
    }
  }
  if (increasing && !v.empty() && !p.Covered(values) && IsLog(s.scale) && v.front() <= 0) {
    CheckLogRange(s, path, d, FormatDouble(v.front()), p);
  }
}

void CheckParameter(const ParameterSpec& s, const std::string& path, const Dialect& d,
                    Problems& p) {
  std::string id = Join(path, d.Id());
  if (s.parameter_id.empty()) {
    p.AddUnlessCovered(id, "required; name the parameter (trials receive it as --NAME=value)");
  } else if (HasSpace(s.parameter_id)) {
    p.AddUnlessCovered(id, Quote(s.parameter_id) +
                               " contains whitespace; use a name without spaces, such as "
                               "'learning_rate'");
  }
  // No value spec or a malformed one; for AI Platform, no type to read the values by.
  if (p.Covered(d.Spec(path, s.kind)) || (d.legacy && p.Covered(Join(path, "type")))) return;
  std::string min = d.Min(path, s.kind);
  std::string max = d.Max(path, s.kind);
  std::string values = d.Values(path, s.kind);
  bool bounds_read = !p.Covered(min) && !p.Covered(max);
  switch (s.kind) {
    case ParameterKind::kDouble:
      if (bounds_read && !(s.double_min < s.double_max)) {
        p.AddUnlessCovered(max, FormatDouble(s.double_max) + " is not above minValue " +
                                    FormatDouble(s.double_min) +
                                    "; a DOUBLE range needs minValue < maxValue (use a DISCRETE "
                                    "parameter for a single value)");
      } else if (bounds_read && IsLog(s.scale) && s.double_min <= 0) {
        CheckLogRange(s, path, d, FormatDouble(s.double_min), p);
      }
      break;
    case ParameterKind::kInteger:
      if (bounds_read && s.int_min > s.int_max) {
        p.AddUnlessCovered(max, std::to_string(s.int_max) + " is below minValue " +
                                    std::to_string(s.int_min) +
                                    "; an INTEGER range needs minValue <= maxValue");
      } else if (bounds_read && IsLog(s.scale) && s.int_min <= 0) {
        CheckLogRange(s, path, d, std::to_string(s.int_min), p);
      }
      break;
    case ParameterKind::kCategorical:
      CheckCategories(s, path, values, p);
      break;
    case ParameterKind::kDiscrete:
      CheckDiscreteValues(s, path, d, values, p);
      break;
  }
  CheckChildren(s, path, d, p);
}

// ---- Unique parameter ids. ----

// One step from a parent parameter down to its conditional child number `child`.
struct Step {
  const ParameterSpec* parent;
  size_t child;
  bool operator==(const Step&) const = default;
};

struct Occurrence {
  const ParameterSpec* spec;
  std::string path;
  std::vector<Step> chain;  // from a top-level parameter down; empty for top-level ones
  const ParameterSpec* root;
};

void Collect(const ParameterSpec& s, const std::string& path, const ParameterSpec* root,
             std::vector<Step>& chain, std::vector<Occurrence>& out) {
  out.push_back({&s, path, chain, root});
  for (size_t i = 0; i < s.children.size(); ++i) {
    chain.push_back({&s, i});
    Collect(s.children[i].spec, At(Join(path, "conditionalParameterSpecs"), i) + ".parameterSpec",
            root, chain, out);
    chain.pop_back();
  }
}

template <typename T>
bool Intersect(const std::vector<T>& a, const std::vector<T>& b) {
  return std::any_of(a.begin(), a.end(),
                     [&](const T& x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}

// Whether two occurrences can be active in the same trial. They cannot only when they
// descend from different conditional entries of one parent whose parent values are disjoint.
bool CanCoexist(const Occurrence& a, const Occurrence& b) {
  if (a.root != b.root || a.chain.empty() || b.chain.empty()) return true;
  size_t k = 0;
  while (k < a.chain.size() && k < b.chain.size() && a.chain[k] == b.chain[k]) ++k;
  if (k == a.chain.size() || k == b.chain.size()) return true;  // one is under the other
  const ParameterSpec& parent = *a.chain[k].parent;
  const ConditionalParameter& x = parent.children[a.chain[k].child];
  const ConditionalParameter& y = parent.children[b.chain[k].child];
  return Intersect(x.parent_discrete_values, y.parent_discrete_values) ||
         Intersect(x.parent_int_values, y.parent_int_values) ||
         Intersect(x.parent_categorical_values, y.parent_categorical_values);
}

void CheckUniqueIds(const StudySpec& s, const std::string& path, const Dialect& d, Problems& p) {
  std::vector<Occurrence> all;
  std::vector<Step> chain;
  std::string list = Join(path, d.Parameters());
  for (size_t i = 0; i < s.parameters.size(); ++i) {
    Collect(s.parameters[i], At(list, i), &s.parameters[i], chain, all);
  }
  for (size_t j = 0; j < all.size(); ++j) {
    const std::string& id = all[j].spec->parameter_id;
    if (id.empty()) continue;
    for (size_t i = 0; i < j; ++i) {
      if (all[i].spec->parameter_id == id && CanCoexist(all[i], all[j])) {
        p.AddUnlessCovered(Join(all[j].path, d.Id()),
                           Quote(id) + " is already used by " + all[i].path +
                               "; give each parameter a unique id (a conditional parameter may "
                               "reuse one only under the same parent, for disjoint parent "
                               "values)");
        break;
      }
    }
  }
}

void CheckGrid(const StudySpec& s, const std::string& path, const Dialect& d, Problems& p) {
  if (s.algorithm != Algorithm::kGridSearch) return;
  std::vector<Occurrence> all;
  std::vector<Step> chain;
  std::string list = Join(path, d.Parameters());
  for (size_t i = 0; i < s.parameters.size(); ++i) {
    Collect(s.parameters[i], At(list, i), &s.parameters[i], chain, all);
  }
  for (const auto& o : all) {
    if (o.spec->kind != ParameterKind::kDouble) continue;
    std::string field = d.legacy ? Join(o.path, "type") : d.Spec(o.path, ParameterKind::kDouble);
    p.AddUnlessCovered(
        field, Join(path, "algorithm") +
                   " is GRID_SEARCH, which cannot search the DOUBLE parameter " +
                   Quote(o.spec->parameter_id) + "; " +
                   (d.legacy ? "make it DISCRETE with the discreteValues to try"
                             : "replace doubleValueSpec with a discreteValueSpec listing the "
                               "values to try") +
                   ", or use RANDOM_SEARCH");
  }
}

size_t CountParameters(const ParameterSpec& s) {
  size_t n = 1;
  for (const auto& child : s.children) n += CountParameters(child.spec);
  return n;
}

void CheckStudy(const StudySpec& s, const std::string& path, const Dialect& d, Problems& p) {
  std::string metrics = Join(path, "metrics");
  if (!d.legacy && s.metrics.empty()) {
    p.AddUnlessCovered(metrics,
                       "required; give at least one {metricId, goal}, the metric the "
                       "trials report through cloudml-hypertune");
  }
  if (s.metrics.size() > kMaxMetrics) {
    p.AddUnlessCovered(metrics, "at most " + std::to_string(kMaxMetrics) +
                                    " metrics are allowed, got " +
                                    std::to_string(s.metrics.size()));
    return;
  }
  size_t parameters = 0;
  for (const ParameterSpec& parameter : s.parameters) parameters += CountParameters(parameter);
  if (parameters > kMaxParameters) {
    p.AddUnlessCovered(Join(path, d.Parameters()),
                       "at most " + std::to_string(kMaxParameters) +
                           " parameters (conditional ones included) are allowed, got " +
                           std::to_string(parameters));
    return;
  }
  for (size_t i = 0; i < s.metrics.size(); ++i) {
    const std::string& id = s.metrics[i].metric_id;
    std::string field = d.MetricId(path, i);
    if (id.empty()) {
      p.AddUnlessCovered(field,
                         "required; give the metric's name as the trial code reports it "
                         "(its hyperparameter_metric_tag)");
    } else if (HasSpace(id)) {
      p.AddUnlessCovered(field, Quote(id) +
                                    " contains whitespace; use a name without spaces, "
                                    "such as 'accuracy'");
    } else {
      for (size_t k = 0; k < i; ++k) {
        if (s.metrics[k].metric_id == id) {
          p.AddUnlessCovered(field, Quote(id) + " is already used by " + d.MetricId(path, k) +
                                        "; give each metric once");
          break;
        }
      }
    }
  }
  std::string list = Join(path, d.Parameters());
  if (s.parameters.empty()) {
    p.AddUnlessCovered(list, "required; give at least one parameter to tune");
  }
  for (size_t i = 0; i < s.parameters.size(); ++i) {
    CheckParameter(s.parameters[i], At(list, i), d, p);
  }
  CheckUniqueIds(s, path, d, p);
  CheckGrid(s, path, d, p);
}

struct CountNames {
  const char* max;
  const char* parallel;
  const char* failed;
};

void CheckCounts(int32_t max, int32_t parallel, int32_t failed, const std::string& path,
                 const CountNames& names, Problems& p) {
  if (max < 1) {
    p.AddUnlessCovered(Join(path, names.max), "must be at least 1, got " + std::to_string(max) +
                                                  "; give how many trials to run in all");
  }
  if (parallel < 1) {
    p.AddUnlessCovered(Join(path, names.parallel), "must be at least 1, got " +
                                                       std::to_string(parallel) +
                                                       "; give how many trials may run at once");
  }
  if (failed < 0) {
    p.AddUnlessCovered(Join(path, names.failed),
                       "must be at least 0, got " + std::to_string(failed) +
                           "; give how many failed trials to tolerate (0 lets Stoker decide)");
  }
}

constexpr CountNames kVertexCounts = {"maxTrialCount", "parallelTrialCount", "maxFailedTrialCount"};
constexpr CountNames kLegacyCounts = {"maxTrials", "maxParallelTrials", "maxFailedTrials"};

}  // namespace

void CheckJob(const HyperparameterTuningJob& job, Problems& p) {
  CheckDisplayName(job.display_name, p);
  CheckLabels(job.labels, p);
  CheckStudy(job.study_spec, "studySpec", Dialect{}, p);
  CheckCounts(job.max_trial_count, job.parallel_trial_count, job.max_failed_trial_count, "",
              kVertexCounts, p);
}

void CheckLegacyStudy(const StudyFromLegacy& study, const std::string& path, Problems& p) {
  CheckStudy(study.study_spec, path, Dialect{.legacy = true}, p);
  CheckCounts(study.max_trial_count, study.parallel_trial_count, study.max_failed_trial_count, path,
              kLegacyCounts, p);
}

}  // namespace stoker::spec::internal
