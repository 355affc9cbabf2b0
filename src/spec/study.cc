// Parsing the Vertex HyperparameterTuningJob and its StudySpec (study.h).
// The rules on the parsed model are in study_check.cc, printing in
// study_json.cc, AI Platform's HyperparameterSpec in study_legacy.cc.
#include "spec/study.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "spec/study_internal.h"

namespace stoker::spec {
namespace {

using internal::At;
using internal::CheckKeys;
using internal::CheckShape;
using internal::CheckStringList;
using internal::EnumIndex;
using internal::Get;
using internal::GetList;
using internal::Index;
using internal::JobVerbatim;
using internal::Join;
using internal::kAlgorithms;
using internal::kGoals;
using internal::Kind;
using internal::kInt64Max;
using internal::kInt64Min;
using internal::kKinds;
using internal::kMaxHint;
using internal::kMeasurementSelections;
using internal::kMinHint;
using internal::kParentValues;
using internal::kScaleTypes;
using internal::kValueSpecs;
using internal::Misplaced;
using internal::Names;
using internal::ParseLabels;
using internal::Problems;
using internal::ReadBool;
using internal::ReadCount;
using internal::ReadDiscrete;
using internal::ReadDouble;
using internal::ReadEnum;
using internal::ReadInteger;
using internal::ReadRequiredDouble;
using internal::ReadRequiredInt64;
using internal::ReadString;
using internal::ReadVerbatim;
using internal::Shape;
using internal::TypeName;
using nlohmann::json;

const Names kStudyJobFields = {
    "displayName",  "studySpec",           "maxTrialCount", "parallelTrialCount",
    "trialJobSpec", "maxFailedTrialCount", "labels",        "encryptionSpec"};
// Output-only fields: accepted and dropped, so `describe` output can be resubmitted.
const Names kStudyJobOutputOnly = {"name",         "state",       "trials",     "createTime",
                                   "startTime",    "endTime",     "updateTime", "error",
                                   "satisfiesPzs", "satisfiesPzi"};
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
const Names kConditionalFields = {"parameterSpec", "parentDiscreteValues", "parentIntValues",
                                  "parentCategoricalValues"};
const Names kObservationNoises = EnumNames(kObservationNoiseEnum, /*with_zero=*/false);

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

// "a and b", "a, b and c".
std::string Listed(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

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

// The value spec of the parameter object `v` at `path`: exactly one of
// doubleValueSpec, integerValueSpec, categoricalValueSpec or
// discreteValueSpec, which sets s->kind and the values. With none or several,
// every value spec path is covered so that no check reads values that were
// not given.
void ParseValueSpec(const json& v, const std::string& path, Problems& p, ParameterSpec* s) {
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
    s->kind = static_cast<ParameterKind>(given[0]);
    std::string key(kValueSpecs[given[0]]);
    std::string sp = Join(path, key);
    const json& spec = v[key];
    if (!spec.is_object()) {
      p.Add(sp, "must be an object, got " + TypeName(spec));
    } else {
      bool range = s->kind == ParameterKind::kDouble || s->kind == ParameterKind::kInteger;
      CheckKeys(
          spec, sp,
          range ? Names{"minValue", "maxValue", "defaultValue"} : Names{"values", "defaultValue"},
          p,
          range ? Misplaced{{"values", "a range is given by minValue and maxValue"}}
                : Misplaced{{"minValue", "list the values under 'values'"},
                            {"maxValue", "list the values under 'values'"}});
      switch (s->kind) {
        case ParameterKind::kDouble:
          ReadRequiredDouble(spec, "minValue", sp, kMinHint, p, &s->double_min);
          ReadRequiredDouble(spec, "maxValue", sp, kMaxHint, p, &s->double_max);
          break;
        case ParameterKind::kInteger:
          ReadRequiredInt64(spec, "minValue", sp, kMinHint, p, &s->int_min);
          ReadRequiredInt64(spec, "maxValue", sp, kMaxHint, p, &s->int_max);
          break;
        case ParameterKind::kCategorical:
          if (const json* list = Get(spec, "values")) {
            CheckStringList(*list, Join(sp, "values"), p, &s->categories);
          }
          break;
        case ParameterKind::kDiscrete:
          ReadDiscrete(spec, "values", sp, p, s);
          break;
      }
      if (const json* d = Get(spec, "defaultValue")) {
        bool ok = s->kind == ParameterKind::kCategorical ? d->is_string()
                                                         : (d->is_number() || d->is_string());
        if (!ok) {
          p.Add(Join(sp, "defaultValue"),
                "must be a " +
                    std::string(s->kind == ParameterKind::kCategorical ? "string" : "number") +
                    ", got " + TypeName(*d));
        } else {
          s->default_value = *d;
        }
      }
    }
  }
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

  ParseValueSpec(v, path, p, &s);
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
  CheckKeys(j, "", kStudyJobFields, p, misplaced, kStudyJobOutputOnly);
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
  internal::CheckJob(job, p);
  if (!p.empty()) return p.ToStatus();
  return job;
}

Status Validate(const HyperparameterTuningJob& job) {
  Problems p;
  internal::CheckJob(job, p);
  // The CustomJobSpec rules live in custom_job.cc; its parser applies them to the canonical form.
  Result<CustomJobSpec> spec = ParseCustomJobSpec(ToJson(job.trial_job_spec), "trialJobSpec");
  if (!spec.ok()) p.AddStatus("trialJobSpec", spec.status());
  return p.empty() ? OkStatus() : p.ToStatus();
}

}  // namespace stoker::spec
