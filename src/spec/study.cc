#include "spec/study.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "spec/json_fields.h"

namespace stoker::spec {
namespace {

using internal::At;
using internal::CheckDisplayName;
using internal::CheckKeys;
using internal::CheckLabels;
using internal::CheckShape;
using internal::CheckStringList;
using internal::Contains;
using internal::EnumValueName;
using internal::Get;
using internal::JobVerbatim;
using internal::Join;
using internal::JoinNames;
using internal::Kind;
using internal::kInt32Max;
using internal::Misplaced;
using internal::Names;
using internal::ParseLabels;
using internal::Problems;
using internal::ReadBool;
using internal::ReadInteger;
using internal::ReadString;
using internal::ReadVerbatim;
using internal::Shape;
using internal::TypeName;
using nlohmann::json;

constexpr size_t kMaxDiscreteValues = 1000;
constexpr size_t kMaxCategories = 1000;
// Parameters in a study, conditional ones included, and metrics: bounds that
// keep checking (pairwise id checks) and suggesting cheap; a GP over more
// than 100 dimensions would not learn from a trial budget anyway.
constexpr size_t kMaxParameters = 100;
constexpr size_t kMaxMetrics = 100;
constexpr double kMinDiscreteGap = 1e-10;
constexpr const char* kDefaultLegacyMetric = "training/hptuning/metric";
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

const Names kJobFields = {
    "displayName",  "studySpec",           "maxTrialCount", "parallelTrialCount",
    "trialJobSpec", "maxFailedTrialCount", "labels",        "encryptionSpec"};
// Output-only fields: accepted and dropped, so `describe` output can be resubmitted.
const Names kJobOutputOnly = {"name",    "state",      "trials", "createTime",   "startTime",
                              "endTime", "updateTime", "error",  "satisfiesPzs", "satisfiesPzi"};
const Names kStudyFields = {"metrics",
                            "parameters",
                            "algorithm",
                            "observationNoise",
                            "measurementSelectionType",
                            "decayCurveStoppingSpec",
                            "medianAutomatedStoppingSpec",
                            "convexAutomatedStoppingSpec",
                            "studyStoppingConfig"};
const Names kStoppingSpecs = {"medianAutomatedStoppingSpec", "decayCurveStoppingSpec",
                              "convexAutomatedStoppingSpec"};
const Names kMetricFields = {"metricId", "goal", "safetyConfig"};
const Names kParameterFields = {
    "parameterId",       "doubleValueSpec", "integerValueSpec",         "categoricalValueSpec",
    "discreteValueSpec", "scaleType",       "conditionalParameterSpecs"};
// The value specs in ParameterKind order.
const Names kValueSpecs = {"doubleValueSpec", "integerValueSpec", "categoricalValueSpec",
                           "discreteValueSpec"};
const Names kConditionalFields = {"parameterSpec", "parentDiscreteValues", "parentIntValues",
                                  "parentCategoricalValues"};
// The parent value lists in ParameterKind order (a DOUBLE parent has none).
const Names kParentValues = {"", "parentIntValues", "parentCategoricalValues",
                             "parentDiscreteValues"};
const Names kLegacyFields = {"goal",
                             "hyperparameterMetricTag",
                             "maxTrials",
                             "maxParallelTrials",
                             "maxFailedTrials",
                             "params",
                             "algorithm",
                             "enableTrialEarlyStopping",
                             "resumePreviousJobId"};
const Names kLegacyParamFields = {"parameterName",     "type",           "minValue", "maxValue",
                                  "categoricalValues", "discreteValues", "scaleType"};

// Enum names Stoker takes, in the order of its own enums (study.h), from the
// one table of each enum (enums.h).
const Names kGoals = EnumNames(kGoalTypeEnum, /*with_zero=*/false);
const Names kAlgorithms = EnumNames(kAlgorithmEnum, /*with_zero=*/true);
const Names kScaleTypes = EnumNames(kScaleTypeEnum, /*with_zero=*/true);
const Names kLegacyScaleTypes = EnumNames(kLegacyScaleTypeEnum, /*with_zero=*/true);
const Names kMeasurementSelections = EnumNames(kMeasurementSelectionTypeEnum, /*with_zero=*/false);
const Names kObservationNoises = EnumNames(kObservationNoiseEnum, /*with_zero=*/false);
const Names kKinds = EnumNames(kLegacyParameterTypeEnum, /*with_zero=*/false);

const std::vector<Shape>& MetricVerbatim() {
  static const std::vector<Shape> shapes = {
      {"safetyConfig",
       Kind::kObject,
       {{"safetyThreshold", Kind::kDouble}, {"desiredMinSafeTrialsFraction", Kind::kDouble}}},
  };
  return shapes;
}

const Shape& ConvexShape() {
  static const Shape shape = {"convexAutomatedStoppingSpec",
                              Kind::kObject,
                              {{"maxStepCount", Kind::kInt64},
                               {"minStepCount", Kind::kInt64},
                               {"minMeasurementCount", Kind::kInt64},
                               {"learningRateParameterName", Kind::kString},
                               {"useElapsedDuration", Kind::kBool},
                               {"updateAllStoppedTrials", Kind::kBool}}};
  return shape;
}

const std::vector<Shape>& StudyVerbatim() {
  static const std::vector<Shape> shapes = {
      {"studyStoppingConfig",
       Kind::kObject,
       {{"shouldStopAsap", Kind::kBool},
        {"minimumRuntimeConstraint",
         Kind::kObject,
         {{"maxDuration", Kind::kString}, {"endTime", Kind::kString}}},
        {"maximumRuntimeConstraint",
         Kind::kObject,
         {{"maxDuration", Kind::kString}, {"endTime", Kind::kString}}},
        {"minNumTrials", Kind::kInt32},
        {"maxNumTrials", Kind::kInt32},
        {"maxNumTrialsNoProgress", Kind::kInt32},
        {"maxDurationNoProgress", Kind::kString}}},
  };
  return shapes;
}

size_t Index(ParameterKind kind) { return static_cast<size_t>(kind); }

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

bool HasSpace(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

// Shortest text that reads back as the same double ("0.001", "1e-05", "64").
std::string FormatDouble(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(d);
}

// "a and b", "a, b and c".
std::string Listed(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

std::string FormatDoubles(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ", ") + FormatDouble(v);
  return out;
}

// ---- Reading values. ----

// Reads an enum at obj[key], given as a name or as its number in `e` (null: names only);
// accepts `unspecified` (when not empty) as the default, reported as "". Returns the name,
// "" for the default, or nullopt when absent or wrong.
std::optional<std::string> ReadEnum(const json& obj, const char* key, const std::string& path,
                                    const EnumType* e, const Names& names,
                                    std::string_view unspecified, std::string_view what,
                                    Problems& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  std::string field = Join(path, key);
  std::optional<std::string> given;
  if (e != nullptr) {
    given = EnumValueName(*v, field, *e, p);
    if (!given) return std::nullopt;
  } else if (v->is_string()) {
    given = v->get<std::string>();
  } else {
    p.Add(field, "must be " + std::string(what) + " name (one of " + JoinNames(names) + "), got " +
                     TypeName(*v));
    return std::nullopt;
  }
  const std::string& s = *given;
  if (!unspecified.empty() && s == unspecified) return std::string();
  if (Contains(names, s)) return s;
  std::string upper = s;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != s && (Contains(names, upper) || upper == unspecified)) {
    p.Add(field, Quote(s) + " is not " + std::string(what) +
                     "; enum names are upper case: " + Quote(upper));
  } else {
    p.Add(field, Quote(s) + " is not " + std::string(what) + "; use one of " + JoinNames(names));
  }
  return std::nullopt;
}

size_t EnumIndex(const Names& names, const std::string& s) {
  return static_cast<size_t>(std::find(names.begin(), names.end(), s) - names.begin());
}

// A double given as a JSON number or a decimal string (proto JSON accepts both).
std::optional<double> ReadDouble(const json& v, const std::string& path, Problems& p) {
  if (v.is_number()) {
    double d = v.get<double>();
    if (std::isfinite(d)) return d;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    double d = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size() && std::isfinite(d)) {
      return d;
    }
    p.Add(path, "must be a finite number like 0.5, got '" + s + "'");
    return std::nullopt;
  }
  p.Add(path, "must be a number, got " + TypeName(v));
  return std::nullopt;
}

// The text of a number that ReadDouble accepted, as the spec wrote it but normalised so
// that it reads back the same: integers as digits ("32"), others in nlohmann's shortest
// form ("0.5", "128.0"). A string is read as JSON would read it, so "32" gives "32".
std::string NumberText(const json& v) {
  if (!v.is_string()) return v.dump();
  const std::string& s = v.get_ref<const std::string&>();
  json n = json::parse(s, nullptr, false);
  if (n.is_number()) return n.dump();
  double d = 0;  // forms JSON lacks, such as ".5" and "1."
  std::from_chars(s.data(), s.data() + s.size(), d);
  return json(d).dump();
}

// obj[key] as a list, or nullptr (reported) when given but not a list, or absent.
const json* GetList(const json& obj, const char* key, const std::string& path, std::string_view of,
                    Problems& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    p.Add(Join(path, key), "must be a list of " + std::string(of) + ", got " + TypeName(*v));
    return nullptr;
  }
  return v;
}

void ReadDiscrete(const json& obj, const char* key, const std::string& path, Problems& p,
                  ParameterSpec* s) {
  const json* list = GetList(obj, key, path, "numbers", p);
  if (list == nullptr) return;
  std::string field = Join(path, key);
  for (size_t i = 0; i < list->size(); ++i) {
    const json& e = (*list)[i];
    if (auto d = ReadDouble(e, At(field, i), p)) {
      s->discrete_values.push_back(*d);
      s->discrete_texts.push_back(NumberText(e));
    } else {
      p.Cover(field);  // later indices no longer match the input; check no further
    }
  }
}

// Reads obj[key] into *out when given; reports a missing one as required with `hint`.
void ReadRequiredDouble(const json& obj, const char* key, const std::string& path,
                        std::string_view hint, Problems& p, double* out) {
  if (const json* v = Get(obj, key)) {
    if (auto d = ReadDouble(*v, Join(path, key), p)) *out = *d;
  } else {
    p.AddUnlessCovered(Join(path, key), "required; " + std::string(hint));
  }
}

void ReadRequiredInt64(const json& obj, const char* key, const std::string& path,
                       std::string_view hint, Problems& p, int64_t* out) {
  if (const json* v = Get(obj, key)) {
    if (auto n = ReadInteger(*v, Join(path, key), kInt64Min, kInt64Max, p)) *out = *n;
  } else {
    p.AddUnlessCovered(Join(path, key), "required; " + std::string(hint));
  }
}

void ReadCount(const json& obj, const char* key, const std::string& path, Problems& p,
               int32_t* out) {
  if (const json* v = Get(obj, key)) {
    // Below-range values are read so that the check names the rule, not the int32 range.
    if (auto n = ReadInteger(*v, Join(path, key), internal::kInt32Min, kInt32Max, p)) {
      *out = static_cast<int32_t>(*n);
    }
  }
}

constexpr std::string_view kMinHint = "give the smallest value to try";
constexpr std::string_view kMaxHint = "give the largest value to try";
constexpr std::string_view kCategoriesHint = "list the categories to try";
constexpr std::string_view kDiscreteHint = "list the values to try, in increasing order";

// ---- Parsing the Vertex StudySpec. ----

ParameterSpec ParseParameter(const json& v, const std::string& path, Problems& p);

ConditionalParameter ParseConditional(const json& v, const std::string& path, Problems& p) {
  ConditionalParameter c;
  if (!v.is_object()) {
    p.Add(path,
          "must be an object {parameterSpec, parentDiscreteValues | parentIntValues | "
          "parentCategoricalValues}, got " +
              TypeName(v));
    return c;
  }
  CheckKeys(v, path, kConditionalFields, p,
            {{"parameterId", "it belongs in parameterSpec"},
             {"doubleValueSpec", "it belongs in parameterSpec"},
             {"integerValueSpec", "it belongs in parameterSpec"},
             {"categoricalValueSpec", "it belongs in parameterSpec"},
             {"discreteValueSpec", "it belongs in parameterSpec"},
             {"scaleType", "it belongs in parameterSpec"}});
  if (const json* s = Get(v, "parameterSpec")) {
    c.spec = ParseParameter(*s, Join(path, "parameterSpec"), p);
  } else {
    p.AddUnlessCovered(Join(path, "parameterSpec"),
                       "required; give the conditional parameter as {parameterId, "
                       "<type>ValueSpec}");
  }
  for (size_t k = 1; k < kParentValues.size(); ++k) {
    std::string key(kParentValues[k]);
    const json* pv = Get(v, key.c_str());
    if (pv == nullptr) continue;
    std::string field = Join(path, key);
    if (!pv->is_object()) {
      p.Add(field, "must be an object {values: [...]}, got " + TypeName(*pv));
      continue;
    }
    CheckKeys(*pv, field, {"values"}, p);
    const json* list = GetList(*pv, "values", field, "parent values", p);
    if (list == nullptr || list->empty()) {
      p.AddUnlessCovered(Join(field, "values"),
                         "required; list the parent's values that activate this parameter");
      continue;
    }
    std::string values = Join(field, "values");
    bool read_all = true;
    for (size_t i = 0; i < list->size() && read_all; ++i) {
      const json& e = (*list)[i];
      switch (static_cast<ParameterKind>(k)) {
        case ParameterKind::kInteger:
          if (auto n = ReadInteger(e, At(values, i), kInt64Min, kInt64Max, p)) {
            c.parent_int_values.push_back(*n);
          } else {
            read_all = false;
          }
          break;
        case ParameterKind::kCategorical:
          if (!e.is_string()) {
            p.Add(At(values, i), "must be a string, got " + TypeName(e) + internal::QuoteHint(e));
            read_all = false;
          } else {
            c.parent_categorical_values.push_back(e.get<std::string>());
          }
          break;
        default:
          if (auto d = ReadDouble(e, At(values, i), p)) {
            c.parent_discrete_values.push_back(*d);
          } else {
            read_all = false;
          }
          break;
      }
    }
    // After a bad value the indices no longer match the input; check this list no further.
    if (!read_all) p.Cover(field);
  }
  return c;
}

ParameterSpec ParseParameter(const json& v, const std::string& path, Problems& p) {
  ParameterSpec s;
  if (!v.is_object()) {
    p.Add(path,
          "must be an object {parameterId, doubleValueSpec | integerValueSpec | "
          "categoricalValueSpec | discreteValueSpec, scaleType}, got " +
              TypeName(v));
    return s;
  }
  constexpr std::string_view kValueSpecAdvice =
      "Vertex gives the type by the value spec: set one of doubleValueSpec, integerValueSpec, "
      "categoricalValueSpec or discreteValueSpec";
  CheckKeys(v, path, kParameterFields, p,
            {{"parameterName", "Vertex names a parameter with 'parameterId'"},
             {"type", kValueSpecAdvice},
             {"minValue", "it belongs in doubleValueSpec or integerValueSpec"},
             {"maxValue", "it belongs in doubleValueSpec or integerValueSpec"},
             {"values", "it belongs in categoricalValueSpec or discreteValueSpec"},
             {"categoricalValues", "write categoricalValueSpec: {values: [...]}"},
             {"discreteValues", "write discreteValueSpec: {values: [...]}"},
             {"parentDiscreteValues", "it belongs in a conditionalParameterSpecs entry"},
             {"parentIntValues", "it belongs in a conditionalParameterSpecs entry"},
             {"parentCategoricalValues", "it belongs in a conditionalParameterSpecs entry"}});
  ReadString(v, "parameterId", path, p, &s.parameter_id);

  std::vector<size_t> given;
  for (size_t k = 0; k < kValueSpecs.size(); ++k) {
    if (Get(v, std::string(kValueSpecs[k]).c_str()) != nullptr) given.push_back(k);
  }
  if (given.empty()) {
    bool hinted = std::any_of(kValueSpecs.begin(), kValueSpecs.end(),
                              [&](std::string_view k) { return p.Covered(Join(path, k)); });
    if (!hinted && !p.Covered(path)) {
      p.Note(path,
             "no value spec is given; set exactly one of doubleValueSpec {minValue, maxValue}, "
             "integerValueSpec {minValue, maxValue}, categoricalValueSpec {values} or "
             "discreteValueSpec {values}");
    }
  } else if (given.size() > 1) {
    std::vector<std::string_view> names;
    for (size_t k : given) names.push_back(kValueSpecs[k]);
    p.Note(path, Listed(names) + " are given; set exactly one value spec");
  }
  if (given.size() != 1) {
    // Covering the value specs (not the parameter) keeps the checks on parameterId.
    for (auto k : kValueSpecs) p.Cover(Join(path, k));
  } else {
    s.kind = static_cast<ParameterKind>(given[0]);
    std::string key(kValueSpecs[given[0]]);
    std::string sp = Join(path, key);
    const json& spec = v[key];
    if (!spec.is_object()) {
      p.Add(sp, "must be an object, got " + TypeName(spec));
    } else {
      bool range = s.kind == ParameterKind::kDouble || s.kind == ParameterKind::kInteger;
      CheckKeys(
          spec, sp,
          range ? Names{"minValue", "maxValue", "defaultValue"} : Names{"values", "defaultValue"},
          p,
          range ? Misplaced{{"values", "a range is given by minValue and maxValue"}}
                : Misplaced{{"minValue", "list the values under 'values'"},
                            {"maxValue", "list the values under 'values'"}});
      switch (s.kind) {
        case ParameterKind::kDouble:
          ReadRequiredDouble(spec, "minValue", sp, kMinHint, p, &s.double_min);
          ReadRequiredDouble(spec, "maxValue", sp, kMaxHint, p, &s.double_max);
          break;
        case ParameterKind::kInteger:
          ReadRequiredInt64(spec, "minValue", sp, kMinHint, p, &s.int_min);
          ReadRequiredInt64(spec, "maxValue", sp, kMaxHint, p, &s.int_max);
          break;
        case ParameterKind::kCategorical:
          if (const json* list = Get(spec, "values")) {
            CheckStringList(*list, Join(sp, "values"), p, &s.categories);
          }
          break;
        case ParameterKind::kDiscrete:
          ReadDiscrete(spec, "values", sp, p, &s);
          break;
      }
      if (const json* d = Get(spec, "defaultValue")) {
        bool ok = s.kind == ParameterKind::kCategorical ? d->is_string()
                                                        : (d->is_number() || d->is_string());
        if (!ok) {
          p.Add(Join(sp, "defaultValue"),
                "must be a " +
                    std::string(s.kind == ParameterKind::kCategorical ? "string" : "number") +
                    ", got " + TypeName(*d));
        } else {
          s.default_value = *d;
        }
      }
    }
  }
  if (auto scale = ReadEnum(v, "scaleType", path, &kScaleTypeEnum, kScaleTypes,
                            "SCALE_TYPE_UNSPECIFIED", "a scale type", p)) {
    s.scale =
        scale->empty() ? ScaleType::kNone : static_cast<ScaleType>(EnumIndex(kScaleTypes, *scale));
  }
  if (const json* list = GetList(v, "conditionalParameterSpecs", path,
                                 "{parameterSpec, parent...Values} objects", p)) {
    std::string cp = Join(path, "conditionalParameterSpecs");
    for (size_t i = 0; i < list->size(); ++i) {
      s.children.push_back(ParseConditional((*list)[i], At(cp, i), p));
    }
  }
  return s;
}

MetricSpec ParseMetric(const json& v, const std::string& path, Problems& p) {
  MetricSpec m;
  if (!v.is_object()) {
    p.Add(path, "must be an object {metricId, goal}, got " + TypeName(v));
    return m;
  }
  CheckKeys(v, path, kMetricFields, p,
            {{"hyperparameterMetricTag", "Vertex names the metric with 'metricId'"}});
  ReadString(v, "metricId", path, p, &m.metric_id);
  if (auto goal =
          ReadEnum(v, "goal", path, &kGoalTypeEnum, kGoals, "GOAL_TYPE_UNSPECIFIED", "a goal", p)) {
    m.goal = *goal == "MINIMIZE" ? Goal::kMinimize : Goal::kMaximize;
  }
  json extra = json::object();
  ReadVerbatim(v, path, MetricVerbatim(), p, &extra);
  if (extra.contains("safetyConfig")) m.safety_config = extra["safetyConfig"];
  return m;
}

StudySpec ParseStudy(const json& v, const std::string& path, Problems& p) {
  StudySpec s;
  if (!v.is_object()) {
    p.Add(path,
          "must be an object {metrics: [...], parameters: [...], algorithm}, got " + TypeName(v));
    return s;
  }
  CheckKeys(v, path, kStudyFields, p,
            {{"params", "Vertex lists parameters under 'parameters'"},
             {"goal", "it belongs in each metrics entry"},
             {"metricId", "it belongs in a metrics entry"},
             {"parameterId", "it belongs in a parameters entry"},
             {"hyperparameterMetricTag", "Vertex names metrics as metrics: [{metricId, goal}]"}});
  if (const json* list = GetList(v, "metrics", path, "{metricId, goal} objects", p)) {
    for (size_t i = 0; i < list->size(); ++i) {
      s.metrics.push_back(ParseMetric((*list)[i], At(Join(path, "metrics"), i), p));
    }
  }
  if (const json* list = GetList(v, "parameters", path, "parameter specs", p)) {
    for (size_t i = 0; i < list->size(); ++i) {
      s.parameters.push_back(ParseParameter((*list)[i], At(Join(path, "parameters"), i), p));
    }
  }
  if (auto a =
          ReadEnum(v, "algorithm", path, &kAlgorithmEnum, kAlgorithms, "", "an algorithm", p)) {
    s.algorithm = static_cast<Algorithm>(EnumIndex(kAlgorithms, *a));
  }
  if (auto m = ReadEnum(v, "measurementSelectionType", path, &kMeasurementSelectionTypeEnum,
                        kMeasurementSelections, "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED",
                        "a measurement selection type", p)) {
    s.measurement_selection =
        *m == "BEST_MEASUREMENT" ? MeasurementSelection::kBest : MeasurementSelection::kLast;
  }
  if (auto n = ReadEnum(v, "observationNoise", path, &kObservationNoiseEnum, kObservationNoises,
                        "OBSERVATION_NOISE_UNSPECIFIED", "an observation noise", p)) {
    s.observation_noise = *n;
  }
  std::vector<std::string_view> stopping;
  for (auto key : kStoppingSpecs) {
    if (Get(v, std::string(key).c_str()) != nullptr) stopping.push_back(key);
  }
  if (stopping.size() > 1) {
    p.Note(path, Listed(stopping) + " are given; set at most one automated stopping spec");
    for (auto key : stopping) p.Cover(Join(path, key));
  } else if (stopping.size() == 1) {
    std::string key(stopping[0]);
    std::string field = Join(path, key);
    const json& spec = v[key];
    if (key == "convexAutomatedStoppingSpec") {
      CheckShape(spec, ConvexShape(), field, p);
      s.stopping.kind = StoppingSpec::Kind::kConvex;
      s.stopping.convex = spec;
    } else if (!spec.is_object()) {
      p.Add(field, "must be an object {useElapsedDuration: true|false}, got " + TypeName(spec));
    } else {
      CheckKeys(spec, field, {"useElapsedDuration"}, p);
      ReadBool(spec, "useElapsedDuration", field, p, &s.stopping.use_elapsed_duration);
      s.stopping.kind = key == "medianAutomatedStoppingSpec" ? StoppingSpec::Kind::kMedian
                                                             : StoppingSpec::Kind::kDecayCurve;
    }
  }
  json extra = json::object();
  ReadVerbatim(v, path, StudyVerbatim(), p, &extra);
  if (extra.contains("studyStoppingConfig")) s.study_stopping_config = extra["studyStoppingConfig"];
  return s;
}

// ---- Checks on the model (shared by parsing and Validate). ----

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
      if (s.categories.empty()) {
        p.AddUnlessCovered(values, "required; " + std::string(kCategoriesHint));
      } else if (s.categories.size() > kMaxCategories) {
        p.AddUnlessCovered(values, "at most " + std::to_string(kMaxCategories) +
                                       " categories are allowed, got " +
                                       std::to_string(s.categories.size()));
        break;
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
      break;
    case ParameterKind::kDiscrete: {
      const std::vector<double>& v = s.discrete_values;
      if (v.empty()) {
        p.AddUnlessCovered(values, "required; " + std::string(kDiscreteHint));
      } else if (v.size() > kMaxDiscreteValues) {
        p.AddUnlessCovered(values, "at most 1000 values are allowed, got " +
                                       std::to_string(v.size()) +
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
      break;
    }
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

void CheckJob(const HyperparameterTuningJob& job, Problems& p) {
  CheckDisplayName(job.display_name, p);
  CheckLabels(job.labels, p);
  CheckStudy(job.study_spec, "studySpec", Dialect{}, p);
  CheckCounts(job.max_trial_count, job.parallel_trial_count, job.max_failed_trial_count, "",
              kVertexCounts, p);
}

// ---- Parsing AI Platform's HyperparameterSpec. ----

ParameterSpec ParseLegacyParam(const json& v, const std::string& path, Problems& p) {
  ParameterSpec s;
  if (!v.is_object()) {
    p.Add(path,
          "must be an object {parameterName, type, minValue, maxValue, ...}, got " + TypeName(v));
    return s;
  }
  constexpr std::string_view kTypeAdvice =
      "AI Platform gives the type as 'type' with minValue/maxValue, categoricalValues or "
      "discreteValues beside it";
  CheckKeys(v, path, kLegacyParamFields, p,
            {{"parameterId", "AI Platform names a parameter with 'parameterName'"},
             {"doubleValueSpec", kTypeAdvice},
             {"integerValueSpec", kTypeAdvice},
             {"categoricalValueSpec", kTypeAdvice},
             {"discreteValueSpec", kTypeAdvice},
             {"values", kTypeAdvice}});
  ReadString(v, "parameterName", path, p, &s.parameter_id);
  std::string type_path = Join(path, "type");
  auto type = ReadEnum(v, "type", path, &kLegacyParameterTypeEnum, kKinds,
                       "PARAMETER_TYPE_UNSPECIFIED", "a parameter type", p);
  if (type && !type->empty()) {
    s.kind = static_cast<ParameterKind>(EnumIndex(kKinds, *type));
  } else {
    p.AddUnlessCovered(type_path, "required; use one of " + JoinNames(kKinds));
  }
  if (auto scale = ReadEnum(v, "scaleType", path, &kLegacyScaleTypeEnum, kLegacyScaleTypes, "",
                            "a scale type", p)) {
    s.scale = static_cast<ScaleType>(EnumIndex(kLegacyScaleTypes, *scale));
  }
  if (!type || type->empty()) return s;
  // Value fields that the type does not use.
  std::vector<std::string_view> used;
  switch (s.kind) {
    case ParameterKind::kDouble:
      ReadRequiredDouble(v, "minValue", path, kMinHint, p, &s.double_min);
      ReadRequiredDouble(v, "maxValue", path, kMaxHint, p, &s.double_max);
      used = {"minValue", "maxValue"};
      break;
    case ParameterKind::kInteger:
      // minValue/maxValue are doubles in AI Platform; an INTEGER's must be whole.
      ReadRequiredInt64(v, "minValue", path, kMinHint, p, &s.int_min);
      ReadRequiredInt64(v, "maxValue", path, kMaxHint, p, &s.int_max);
      used = {"minValue", "maxValue"};
      break;
    case ParameterKind::kCategorical:
      if (const json* list = Get(v, "categoricalValues")) {
        CheckStringList(*list, Join(path, "categoricalValues"), p, &s.categories);
      }
      used = {"categoricalValues"};
      break;
    case ParameterKind::kDiscrete:
      ReadDiscrete(v, "discreteValues", path, p, &s);
      used = {"discreteValues"};
      break;
  }
  for (const char* key : {"minValue", "maxValue", "categoricalValues", "discreteValues"}) {
    if (Get(v, key) != nullptr && !Contains(used, key)) {
      p.Add(Join(path, key), "is not used by a " + *type + " parameter; remove it or change type");
    }
  }
  return s;
}

// ---- Printing. ----

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

std::string_view ParameterKindName(ParameterKind kind) { return kKinds[Index(kind)]; }

Result<HyperparameterTuningJob> ParseHyperparameterTuningJob(const json& j) {
  if (!j.is_object()) {
    return InvalidArgument(
        "(top level): must be an object: a HyperparameterTuningJob {displayName, studySpec, "
        "maxTrialCount, parallelTrialCount, trialJobSpec}, got " +
        TypeName(j));
  }
  Problems p;
  HyperparameterTuningJob job;
  Misplaced misplaced = {
      {"jobSpec", "a HyperparameterTuningJob names the spec every trial runs 'trialJobSpec'"},
      {"maxTrials", "the Vertex field is 'maxTrialCount'"},
      {"maxParallelTrials", "the Vertex field is 'parallelTrialCount'"},
      {"maxFailedTrials", "the Vertex field is 'maxFailedTrialCount'"},
      {"trainingInput",
       "that is AI Platform Training's format; submit it as an AI Platform training job, or "
       "write the Vertex fields (studySpec, maxTrialCount, trialJobSpec)"},
      {"hyperparameters",
       "that is AI Platform Training's format; write the Vertex studySpec instead"}};
  for (auto f : kStudyFields) misplaced.emplace_back(f, "it belongs in studySpec");
  for (auto f : {"workerPoolSpecs", "scheduling", "baseOutputDirectory", "serviceAccount",
                 "network", "enableWebAccess"}) {
    misplaced.emplace_back(f, "it belongs in trialJobSpec");
  }
  CheckKeys(j, "", kJobFields, p, misplaced, kJobOutputOnly);
  ReadString(j, "displayName", "", p, &job.display_name);
  ParseLabels(j, p, &job.labels);
  if (const json* s = Get(j, "studySpec")) {
    job.study_spec = ParseStudy(*s, "studySpec", p);
  } else {
    p.AddUnlessCovered("studySpec",
                       "required; give {metrics: [{metricId, goal}], parameters: [...]}");
  }
  // Missing counts stay 1 (gcloud's default), though the API marks them required.
  ReadCount(j, "maxTrialCount", "", p, &job.max_trial_count);
  ReadCount(j, "parallelTrialCount", "", p, &job.parallel_trial_count);
  ReadCount(j, "maxFailedTrialCount", "", p, &job.max_failed_trial_count);
  if (const json* t = Get(j, "trialJobSpec")) {
    Result<CustomJobSpec> spec = ParseCustomJobSpec(*t, "trialJobSpec");
    if (spec.ok()) {
      job.trial_job_spec = std::move(spec).value();
    } else {
      p.AddStatus("trialJobSpec", spec.status());
    }
  } else {
    p.AddUnlessCovered("trialJobSpec",
                       "required; give the CustomJobSpec every trial runs: {workerPoolSpecs: "
                       "[{machineSpec, replicaCount, containerSpec}]}");
  }
  ReadVerbatim(j, "", JobVerbatim(), p, &job.passthrough);
  CheckJob(job, p);
  if (!p.empty()) return p.ToStatus();
  return job;
}

Status Validate(const HyperparameterTuningJob& job) {
  Problems p;
  CheckJob(job, p);
  // The CustomJobSpec rules live in custom_job.cc; its parser applies them to the canonical form.
  Result<CustomJobSpec> spec = ParseCustomJobSpec(ToJson(job.trial_job_spec), "trialJobSpec");
  if (!spec.ok()) p.AddStatus("trialJobSpec", spec.status());
  return p.empty() ? OkStatus() : p.ToStatus();
}

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

Result<StudyFromLegacy> ParseLegacyHyperparameters(const json& h, const std::string& path) {
  if (!h.is_object()) {
    return InvalidArgument((path.empty() ? std::string("(top level)") : path) +
                           ": must be an object {goal, hyperparameterMetricTag, maxTrials, "
                           "params: [...]}, got " +
                           TypeName(h));
  }
  Problems p;
  StudyFromLegacy out;
  StudySpec& s = out.study_spec;
  CheckKeys(h, path, kLegacyFields, p,
            {{"metrics", "AI Platform names its one metric with hyperparameterMetricTag and goal"},
             {"parameters", "AI Platform lists parameters under 'params'"},
             {"maxTrialCount", "the AI Platform field is 'maxTrials'"},
             {"parallelTrialCount", "the AI Platform field is 'maxParallelTrials'"},
             {"maxFailedTrialCount", "the AI Platform field is 'maxFailedTrials'"},
             {"studySpec", "that is Vertex's format; submit a HyperparameterTuningJob instead"}});
  MetricSpec metric;
  metric.metric_id = kDefaultLegacyMetric;
  if (ReadString(h, "hyperparameterMetricTag", path, p, &metric.metric_id) &&
      metric.metric_id.empty() && !p.Covered(Join(path, "hyperparameterMetricTag"))) {
    p.Add(Join(path, "hyperparameterMetricTag"),
          std::string("must not be empty; omit it to use ") + kDefaultLegacyMetric);
  }
  if (auto goal =
          ReadEnum(h, "goal", path, &kGoalTypeEnum, kGoals, "GOAL_TYPE_UNSPECIFIED", "a goal", p)) {
    metric.goal = *goal == "MINIMIZE" ? Goal::kMinimize : Goal::kMaximize;
  }
  s.metrics.push_back(metric);
  ReadCount(h, "maxTrials", path, p, &out.max_trial_count);
  ReadCount(h, "maxParallelTrials", path, p, &out.parallel_trial_count);
  ReadCount(h, "maxFailedTrials", path, p, &out.max_failed_trial_count);
  if (const json* list = GetList(h, "params", path, "parameter specs", p)) {
    for (size_t i = 0; i < list->size(); ++i) {
      s.parameters.push_back(ParseLegacyParam((*list)[i], At(Join(path, "params"), i), p));
    }
  }
  if (auto a = ReadEnum(h, "algorithm", path, nullptr, kAlgorithms, "", "an algorithm", p)) {
    s.algorithm = static_cast<Algorithm>(EnumIndex(kAlgorithms, *a));
  }
  bool early_stopping = false;
  ReadBool(h, "enableTrialEarlyStopping", path, p, &early_stopping);
  if (early_stopping) s.stopping.kind = StoppingSpec::Kind::kMedian;
  ReadString(h, "resumePreviousJobId", path, p, &out.resume_previous_job_id);
  CheckStudy(s, path, Dialect{.legacy = true}, p);
  CheckCounts(out.max_trial_count, out.parallel_trial_count, out.max_failed_trial_count, path,
              kLegacyCounts, p);
  if (!p.empty()) return p.ToStatus();
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
