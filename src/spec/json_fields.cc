#include "spec/json_fields.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/image_reference.h"
#include "common/time.h"

namespace stoker::spec::internal {

using nlohmann::json;

const Names kAcceleratorTypes = EnumNames(kAcceleratorTypeEnum, /*with_zero=*/false);

bool Contains(const Names& names, std::string_view s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

std::string JoinNames(const Names& names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::string Join(const std::string& base, std::string_view key) {
  return base.empty() ? std::string(key) : base + "." + std::string(key);
}

std::string At(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "an object";
    case json::value_t::null:
      return "null";
    default:
      return "an unsupported value";
  }
}

// Where a string was expected: YAML turns unquoted 1, 1.5 and true into non-strings.
std::string QuoteHint(const json& v) {
  return (v.is_number() || v.is_boolean()) ? " (quote it in YAML)" : "";
}

// UTF-8 code points, as Vertex counts length limits.
size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string SnakeToCamel(std::string_view key) {
  std::string out;
  bool upper = false;
  for (char c : key) {
    if (c == '_' && !out.empty()) {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Reports every key of `obj` (at `path`) that is not in `known` or `ignored`.
void CheckKeys(const json& obj, const std::string& path, const Names& known, Problems& p,
               const Misplaced& misplaced, const Names& ignored) {
  for (const auto& [key, value] : obj.items()) {
    if (Contains(known, key) || Contains(ignored, key)) continue;
    std::string camel = SnakeToCamel(key);
    if (camel != key && (Contains(known, camel) || Contains(ignored, camel))) {
      p.Note(path, "'" + key + "' is not a field; use the camelCase spelling '" + camel + "'");
      p.Cover(Join(path, camel));
      continue;
    }
    std::string msg = "unknown field '" + key + "'";
    auto m = std::find_if(misplaced.begin(), misplaced.end(), [&, &key = key](const auto& e) {
      return e.first == key || e.first == camel;
    });
    if (m != misplaced.end()) {
      p.Note(path, msg + "; " + std::string(m->second));
      continue;
    }
    std::string_view best;
    size_t best_distance = 3;
    for (auto name : known) {
      size_t d = EditDistance(camel, name);
      if (d < best_distance) {
        best = name;
        best_distance = d;
      }
    }
    if (!best.empty()) {
      p.Note(path, msg + "; did you mean '" + std::string(best) + "'?");
      p.Cover(Join(path, best));
    } else {
      p.Note(path, msg + "; the fields here are " + JoinNames(known));
    }
  }
}

// The value of `key` in `obj`, or nullptr when absent or null (proto JSON reads null as unset).
const json* Get(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Returns whether `key` was given.
bool ReadString(const json& obj, const char* key, const std::string& path, Problems& p,
                std::string* out) {
  const json* v = Get(obj, key);
  if (v == nullptr) return false;
  if (!v->is_string()) {
    p.Add(Join(path, key), "must be a string, got " + TypeName(*v) + QuoteHint(*v));
  } else {
    *out = v->get<std::string>();
  }
  return true;
}

bool ReadImageReference(const json& obj, const char* key, const std::string& path, Problems& p,
                        std::string* out) {
  if (!ReadString(obj, key, path, p, out)) return false;
  if (!out->empty()) {
    if (auto ref = ParseImageReference(*out, ""); !ref.ok()) {
      p.Add(Join(path, key), ref.status().message());
    }
  }
  return true;
}

bool CheckStringList(const json& v, const std::string& path, Problems& p,
                     std::vector<std::string>* out) {
  if (!v.is_array()) {
    p.Add(path, "must be a list of strings, got " + TypeName(v));
    return false;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      p.Add(At(path, i), "must be a string, got " + TypeName(v[i]) + QuoteHint(v[i]));
      if (out != nullptr) out->emplace_back();  // keeps indices aligned with the input
    } else if (out != nullptr) {
      out->push_back(v[i].get<std::string>());
    }
  }
  return true;
}

void ReadStringList(const json& obj, const char* key, const std::string& path, Problems& p,
                    std::vector<std::string>* out) {
  if (const json* v = Get(obj, key)) CheckStringList(*v, Join(path, key), p, out);
}

std::optional<std::vector<std::string>> ReadOptionalStringList(const json& obj, const char* key,
                                                               const std::string& path,
                                                               Problems& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (!CheckStringList(*v, Join(path, key), p, &out) ||
      !std::all_of(v->begin(), v->end(), [](const json& e) { return e.is_string(); })) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> EnumValueName(const json& v, const std::string& path, const EnumType& e,
                                         Problems& p) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) {
    int64_t n = v.get<int64_t>();
    if (auto name = EnumName(e, n)) return std::string(*name);
    p.Add(path, std::to_string(n) + " is not a number of enum " + std::string(e.name) +
                    "; use one of " + DescribeEnum(e) + " (the name or the number)");
    return std::nullopt;
  }
  p.Add(path, "must be a " + std::string(e.name) + " name or number (one of " + DescribeEnum(e) +
                  "), got " + TypeName(v));
  return std::nullopt;
}

bool ReadEnumName(const json& obj, const char* key, const std::string& path, const EnumType& e,
                  Problems& p, std::string* out) {
  const json* v = Get(obj, key);
  if (v == nullptr) return false;
  auto name = EnumValueName(*v, Join(path, key), e, p);
  if (!name) return false;
  *out = std::move(*name);
  return true;
}

void ReadBool(const json& obj, const char* key, const std::string& path, Problems& p, bool* out) {
  const json* v = Get(obj, key);
  if (v == nullptr) return;
  if (!v->is_boolean()) {
    p.Add(Join(path, key), "must be true or false, got " + TypeName(*v));
  } else {
    *out = v->get<bool>();
  }
}

// An integer given as a JSON number or a decimal string (proto JSON accepts both).
std::optional<int64_t> ReadInteger(const json& v, const std::string& path, int64_t lo, int64_t hi,
                                   Problems& p) {
  // `below`: under lo, else over hi. A range open above (a count) names only its lower bound.
  auto out_of_range = [&](bool below) {
    std::string rule = below && hi == std::numeric_limits<int64_t>::max()
                           ? "must be at least " + std::to_string(lo)
                           : "must be between " + std::to_string(lo) + " and " + std::to_string(hi);
    p.Add(path, rule + ", got " + v.dump());
    return std::nullopt;
  };
  int64_t n = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return out_of_range(false);
    n = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      p.Add(path, "must be a whole number, got " + v.dump());
      return std::nullopt;
    }
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      return out_of_range(d < static_cast<double>(lo));
    }
    n = static_cast<int64_t>(d);
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc::result_out_of_range) return out_of_range(s[0] == '-');
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      p.Add(path, "must be a whole number like 3 or \"3\", got '" + s + "'");
      return std::nullopt;
    }
  } else {
    p.Add(path, "must be a whole number like 3 or \"3\", got " + TypeName(v));
    return std::nullopt;
  }
  if (n < lo || n > hi) return out_of_range(n < lo);
  return n;
}

// A protobuf Duration ("3600s"); a bare number of seconds is accepted too.
std::optional<double> ReadDuration(const json& obj, const char* key, const std::string& path,
                                   Problems& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  std::string field = Join(path, key);
  if (v->is_number()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d >= 0) return d;
    p.Add(field, v->dump() + " is not a duration; write non-negative seconds like \"3600s\"");
    return std::nullopt;
  }
  if (!v->is_string()) {
    p.Add(field, "must be a duration like \"3600s\", got " + TypeName(*v));
    return std::nullopt;
  }
  Result<double> d = ParseDuration(v->get<std::string>(), field);
  if (!d.ok()) {
    std::string m = d.status().message();
    if (m.rfind(field + ": ", 0) == 0) m = m.substr(field.size() + 2);
    p.Add(field, m);
    return std::nullopt;
  }
  return *d;
}

// Exact decimal seconds ("3600s", "0.25s"); proto Durations have nanosecond precision.
std::string FormatSeconds(double seconds) {
  char buf[64];
  if (seconds == std::floor(seconds) && std::fabs(seconds) < 1e15) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(seconds));
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.9f", seconds);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + "s";
}

// ---- Fields kept verbatim: checked for shape, then copied as given. ----

namespace {

// `v` (checked against `s`) with each enum number replaced by its name.
json WithEnumNames(const json& v, const Shape& s) {
  if (s.kind == Kind::kEnum && v.is_number_integer()) {
    if (auto name = EnumName(*s.enum_type, v.get<int64_t>())) return std::string(*name);
    return v;
  }
  if (s.kind != Kind::kObject && s.kind != Kind::kObjects) return v;
  json out = v;
  auto fix = [&s](json& obj) {
    if (!obj.is_object()) return;
    for (const auto& f : s.fields) {
      std::string key(f.name);
      if (obj.contains(key)) obj[key] = WithEnumNames(obj[key], f);
    }
  };
  if (s.kind == Kind::kObject) {
    fix(out);
  } else if (out.is_array()) {
    for (json& e : out) fix(e);
  }
  return out;
}

void CheckObjectShape(const json& v, const Shape& s, const std::string& path, Problems& p) {
  if (!v.is_object()) {
    p.Add(path, "must be an object, got " + TypeName(v));
    return;
  }
  Names known;
  for (const auto& f : s.fields) known.push_back(f.name);
  CheckKeys(v, path, known, p);
  for (const auto& f : s.fields) {
    std::string key(f.name);
    if (const json* fv = Get(v, key.c_str())) {
      CheckShape(*fv, f, Join(path, key), p);
    } else if (Contains(s.required, f.name)) {
      p.AddUnlessCovered(Join(path, key), "required");
    }
  }
}

}  // namespace

void CheckShape(const json& v, const Shape& s, const std::string& path, Problems& p) {
  switch (s.kind) {
    case Kind::kEnum:
      if (auto name = EnumValueName(v, path, *s.enum_type, p);
          name && !EnumNumber(*s.enum_type, *name)) {
        p.Add(path, "'" + *name + "' is not a " + std::string(s.enum_type->name) + "; use one of " +
                        DescribeEnum(*s.enum_type));
      }
      break;
    case Kind::kString:
      if (!v.is_string()) p.Add(path, "must be a string, got " + TypeName(v) + QuoteHint(v));
      break;
    case Kind::kStrings:
      CheckStringList(v, path, p, nullptr);
      break;
    case Kind::kBool:
      if (!v.is_boolean()) p.Add(path, "must be true or false, got " + TypeName(v));
      break;
    case Kind::kInt32:
      (void)ReadInteger(v, path, kInt32Min, kInt32Max, p);
      break;
    case Kind::kInt64:
      (void)ReadInteger(v, path, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), p);
      break;
    case Kind::kDouble:
      if (!v.is_number()) p.Add(path, "must be a number, got " + TypeName(v));
      break;
    case Kind::kObject:
      CheckObjectShape(v, s, path, p);
      break;
    case Kind::kObjects:
      if (!v.is_array()) {
        p.Add(path, "must be a list of objects, got " + TypeName(v));
        break;
      }
      for (size_t i = 0; i < v.size(); ++i) CheckObjectShape(v[i], s, At(path, i), p);
      break;
  }
}

const std::vector<Shape>& JobVerbatim() {
  static const std::vector<Shape> shapes = {
      {"encryptionSpec", Kind::kObject, {{"kmsKeyName", Kind::kString}}},
  };
  return shapes;
}

// Checks and copies into `out` each field of `shapes` present in `obj`.
void ReadVerbatim(const json& obj, const std::string& path, const std::vector<Shape>& shapes,
                  Problems& p, json* out) {
  for (const auto& s : shapes) {
    std::string key(s.name);
    if (const json* v = Get(obj, key.c_str())) {
      // Deep values never get here: the API and ParseYamlOrJson refuse
      // documents nested deeper than 64 levels before parsing.
      CheckShape(*v, s, Join(path, key), p);
      (*out)[key] = WithEnumNames(*v, s);
    }
  }
}

// ---- Fields shared by the job resources. ----

void CheckDisplayName(const std::string& name, Problems& p) {
  if (name.empty()) {
    p.AddUnlessCovered("displayName", "required; name the job in at most 128 characters");
  } else if (size_t n = Utf8Length(name); n > kMaxDisplayName) {
    p.AddUnlessCovered("displayName",
                       "is " + std::to_string(n) + " characters long; at most 128 are allowed");
  } else if (std::any_of(name.begin(), name.end(), [](char c) {
               auto u = static_cast<unsigned char>(c);
               return u < 0x20 || u == 0x7f;
             })) {
    // A newline or an escape sequence would forge rows in `jobs list`.
    p.AddUnlessCovered("displayName",
                       "must not contain control characters (newlines, tabs, escapes); use "
                       "printable text");
  }
}

namespace {

// Lowercase letters, digits, '_' and '-'; bytes of non-ASCII characters pass (Vertex allows
// international characters).
bool IsLabelChar(unsigned char c) {
  return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

void CheckLabels(const std::map<std::string, std::string>& labels, Problems& p) {
  constexpr size_t kMaxLabels = 64;  // Vertex's limit
  if (labels.size() > kMaxLabels) {
    p.Add("labels", "at most " + std::to_string(kMaxLabels) + " labels, got " +
                        std::to_string(labels.size()));
    return;
  }
  for (const auto& [key, value] : labels) {
    std::string path = "labels." + key;
    if (key.empty()) {
      p.AddUnlessCovered(path, "label keys cannot be empty");
      continue;
    }
    unsigned char first = static_cast<unsigned char>(key[0]);
    if (!(first >= 0x80 || (first >= 'a' && first <= 'z')) ||
        !std::all_of(key.begin(), key.end(), [](char c) { return IsLabelChar(c); })) {
      p.AddUnlessCovered(path,
                         "label keys must start with a lowercase letter and use only lowercase "
                         "letters, digits, '_' and '-'");
    } else if (Utf8Length(key) > kMaxLabelLength) {
      p.AddUnlessCovered(path, "the key is " + std::to_string(Utf8Length(key)) +
                                   " characters long; at most 64 are allowed");
    }
    // Stoker's own switches (docs/preemption.md, docs/warm-starts.md).
    if ((key == "stoker-preemptible" || key == "stoker-warm-start") && value != "true" &&
        value != "false") {
      p.AddUnlessCovered(path, "must be \"true\" or \"false\", got '" + value + "'");
    } else if (!std::all_of(value.begin(), value.end(), [](char c) { return IsLabelChar(c); })) {
      p.AddUnlessCovered(
          path, "value '" + value + "' may use only lowercase letters, digits, '_' and '-'");
    } else if (Utf8Length(value) > kMaxLabelLength) {
      p.AddUnlessCovered(path, "the value is " + std::to_string(Utf8Length(value)) +
                                   " characters long; at most 64 are allowed");
    }
  }
}

void ParseLabels(const json& obj, Problems& p, std::map<std::string, std::string>* labels) {
  const json* v = Get(obj, "labels");
  if (v == nullptr) return;
  if (!v->is_object()) {
    p.Add("labels", "must be an object of key: value strings, got " + TypeName(*v));
    return;
  }
  for (const auto& [key, value] : v->items()) {
    if (!value.is_string()) {
      p.Add("labels." + key, "must be a string, got " + TypeName(value) + QuoteHint(value));
    } else {
      (*labels)[key] = value.get<std::string>();
    }
  }
}

std::string CanonicalAcceleratorType(const std::string& s) {
  std::string upper;
  for (char c : s) {
    if (c == '-') c = '_';
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  bool known = Contains(kAcceleratorTypes, upper) || upper.rfind("TPU_", 0) == 0;
  return known ? upper : s;
}

}  // namespace stoker::spec::internal
