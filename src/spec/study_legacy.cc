// AI Platform Training's `trainingInput.hyperparameters` (HyperparameterSpec,
// reference §6) read into the Vertex study model (study.h).
#include <string_view>
#include <vector>

#include "spec/study_internal.h"

namespace stoker::spec {
namespace {

using internal::At;
using internal::CheckKeys;
using internal::CheckStringList;
using internal::Contains;
using internal::EnumIndex;
using internal::Get;
using internal::GetList;
using internal::Join;
using internal::JoinNames;
using internal::kAlgorithms;
using internal::kGoals;
using internal::kKinds;
using internal::kLegacyScaleTypes;
using internal::kMaxHint;
using internal::kMinHint;
using internal::Names;
using internal::Problems;
using internal::ReadBool;
using internal::ReadCount;
using internal::ReadDiscrete;
using internal::ReadEnum;
using internal::ReadRequiredDouble;
using internal::ReadRequiredInt64;
using internal::ReadString;
using internal::TypeName;
using nlohmann::json;

constexpr const char* kDefaultLegacyMetric = "training/hptuning/metric";
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

}  // namespace

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
  internal::CheckLegacyStudy(out, path, p);
  if (!p.empty()) return p.ToStatus();
  return out;
}

}  // namespace stoker::spec
