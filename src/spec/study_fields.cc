#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "spec/study_internal.h"

// The tables and value readers that the study parsers share (study_internal.h).
namespace stoker::spec::internal {

using nlohmann::json;

const Names kValueSpecs = {"doubleValueSpec", "integerValueSpec", "categoricalValueSpec",
                           "discreteValueSpec"};
const Names kParentValues = {"", "parentIntValues", "parentCategoricalValues",
                             "parentDiscreteValues"};

const Names kGoals = EnumNames(kGoalTypeEnum, /*with_zero=*/false);
const Names kAlgorithms = EnumNames(kAlgorithmEnum, /*with_zero=*/true);
const Names kScaleTypes = EnumNames(kScaleTypeEnum, /*with_zero=*/true);
const Names kLegacyScaleTypes = EnumNames(kLegacyScaleTypeEnum, /*with_zero=*/true);
const Names kMeasurementSelections = EnumNames(kMeasurementSelectionTypeEnum, /*with_zero=*/false);
const Names kKinds = EnumNames(kLegacyParameterTypeEnum, /*with_zero=*/false);

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string FormatDouble(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(d);
}

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

namespace {

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

}  // namespace

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
    if (auto n = ReadInteger(*v, Join(path, key), kInt32Min, kInt32Max, p)) {
      *out = static_cast<int32_t>(*n);
    }
  }
}

}  // namespace stoker::spec::internal
