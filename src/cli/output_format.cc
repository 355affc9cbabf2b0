// --format's parser and the projection transforms (output_format.h).
#include "cli/output_format.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "cli/output_format_internal.h"

namespace stoker::cli {

using format_internal::Lookup;
using format_internal::Lower;
using format_internal::ParseNumber;
using format_internal::ParsePath;
using format_internal::ParseTime;
using format_internal::Scanner;
using format_internal::Segment;
using format_internal::Stringify;
using format_internal::Truthy;
using format_internal::Unescape;
using format_internal::Upper;
using nlohmann::json;

namespace {

// ------------------------------------------------------------ transforms

const std::vector<std::string>& TransformNames() {
  static const std::vector<std::string> kNames = {"basename", "date", "len",  "yesno",   "lower",
                                                  "upper",    "join", "list", "segment", "firstof"};
  return kNames;
}

// The argument named `name` (name=value) or else the positional one at `index`.
std::optional<std::string> Arg(const Transform& t, size_t index, const std::string& name) {
  size_t positional = 0;
  for (const std::string& a : t.args) {
    size_t eq = a.find('=');
    if (eq != std::string::npos && a.compare(0, eq, name) == 0) return a.substr(eq + 1);
    bool named = eq != std::string::npos && std::all_of(a.begin(), a.begin() + eq, [](char c) {
                   return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                 });
    if (!named && positional++ == index) return a;
  }
  return std::nullopt;
}

std::string FormatTime(int64_t micros, const std::string& format, bool local) {
  std::time_t secs =
      static_cast<std::time_t>(micros >= 0 ? micros / 1000000 : -((-micros + 999999) / 1000000));
  std::tm tm{};
  if (local) {
    localtime_r(&secs, &tm);
  } else {
    gmtime_r(&secs, &tm);
  }
  std::string fmt;  // %f (microseconds) is Python's; strftime lacks it
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size() && format[i + 1] == 'f') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%06lld",
                    static_cast<long long>(((micros % 1000000) + 1000000) % 1000000));
      fmt += buf;
      ++i;
    } else {
      fmt += format[i];
      if (format[i] == '%' && i + 1 < format.size()) fmt += format[++i];
    }
  }
  char out[256];
  size_t n = std::strftime(out, sizeof out, fmt.c_str(), &tm);
  return std::string(out, n);
}

std::optional<json> ApplyTransform(const Transform& t, std::optional<json> v) {
  auto undefined = [&]() -> std::optional<json> {
    auto u = Arg(t, t.name == "segment" ? 1 : 0, "undefined");
    if (t.name == "date") u = Arg(t, 99, "undefined");
    return u ? std::optional<json>(*u) : std::nullopt;
  };
  const std::string& n = t.name;
  if (n == "basename") {
    if (!v || !v->is_string()) return undefined();
    std::string s = v->get<std::string>();
    while (!s.empty() && s.back() == '/') s.pop_back();
    size_t slash = s.rfind('/');
    s = slash == std::string::npos ? s : s.substr(slash + 1);
    return s.empty() ? undefined() : std::optional<json>(s);
  }
  if (n == "date") {
    if (!v) return undefined();
    std::optional<int64_t> us;
    if (v->is_string()) {
      us = ParseTime(v->get<std::string>());
    } else if (v->is_number()) {
      double unit = ParseNumber(Arg(t, 1, "unit").value_or("1")).value_or(1);
      us = static_cast<int64_t>(v->get<double>() / (unit == 0 ? 1 : unit) * 1e6);
    }
    if (!us) return undefined();
    std::string tz = Arg(t, 98, "tz").value_or("UTC");
    return FormatTime(*us, Arg(t, 0, "format").value_or("%Y-%m-%dT%H:%M:%S"), tz == "LOCAL");
  }
  if (n == "len") {
    if (v && (v->is_string() || v->is_structured())) {
      return json(v->is_string() ? v->get_ref<const std::string&>().size() : v->size());
    }
    return json(0);
  }
  if (n == "yesno") {
    if (!Truthy(v)) return json(Arg(t, 1, "no").value_or("No"));
    auto yes = Arg(t, 0, "yes");
    return yes ? json(*yes) : v;
  }
  if (n == "lower" || n == "upper") {
    if (!v || !v->is_string()) return v;
    return json(n == "lower" ? Lower(v->get<std::string>()) : Upper(v->get<std::string>()));
  }
  if (n == "join" || n == "list") {
    if (!v || !v->is_structured()) return v;
    std::string sep =
        n == "join" ? Arg(t, 0, "sep").value_or("/") : Arg(t, 2, "separator").value_or(",");
    std::string s = Stringify(v, sep);
    if (s.empty()) return undefined();
    return json(s);
  }
  if (n == "segment") {
    if (!v || !v->is_string()) return undefined();
    std::vector<std::string> parts;
    std::string s = v->get<std::string>();
    size_t start = 0;
    for (size_t slash; (slash = s.find('/', start)) != std::string::npos; start = slash + 1)
      parts.push_back(s.substr(start, slash - start));
    parts.push_back(s.substr(start));
    int64_t i = static_cast<int64_t>(ParseNumber(Arg(t, 0, "index").value_or("-1")).value_or(-1));
    if (i < 0) i += static_cast<int64_t>(parts.size());
    if (i < 0 || i >= static_cast<int64_t>(parts.size()) || parts[i].empty()) return undefined();
    return json(parts[i]);
  }
  if (n == "firstof") {
    if (!v) return std::nullopt;
    for (const std::string& key : t.args) {
      std::vector<Segment> path;
      if (!ParsePath(key, &path)) continue;
      auto r = Lookup(*v, path, 0);
      if (Truthy(r)) return r;
    }
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<json> format_internal::ColumnValue(const json& resource, const Column& c) {
  std::optional<json> v = resource;
  if (!c.key.empty()) v = LookupKey(resource, c.key);
  for (const Transform& t : c.transforms) v = ApplyTransform(t, std::move(v));
  return v;
}

namespace {

// ------------------------------------------------------------ --format parsing

struct FormatName {
  const char* name;
  FormatKind kind;
};
constexpr FormatName kFormatNames[] = {
    {"text", FormatKind::kText},   {"default", FormatKind::kText},
    {"json", FormatKind::kJson},   {"yaml", FormatKind::kYaml},
    {"value", FormatKind::kValue}, {"get", FormatKind::kValue},
    {"table", FormatKind::kTable}, {"csv", FormatKind::kCsv},
    {"list", FormatKind::kList},   {"flattened", FormatKind::kFlattened},
    {"none", FormatKind::kNone},   {"disable", FormatKind::kNone},
};
constexpr char kFormatChoices[] = "use json, yaml, value(...), table(...), csv(...) or text";

Status ParseAttributes(Scanner& sc, OutputFormat* f) {
  size_t open = sc.pos();
  sc.Advance();  // '['
  for (;;) {
    sc.SkipSpace();
    if (sc.Eat(']')) return OkStatus();
    if (sc.AtEnd()) return sc.ErrorAt(open, "'[' is not closed; add ']' after the attributes");
    STOKER_ASSIGN_OR_RETURN(std::string name, sc.Value("=,]", true));
    std::string value;
    bool has_value = sc.Eat('=');
    if (has_value) {
      STOKER_ASSIGN_OR_RETURN(value, sc.Value(",]", false));
      value = Unescape(value);
    }
    if (name.empty()) return sc.Error("expected an attribute such as box or no-heading");
    if (name == "box" || name == "all-box") f->box = true;
    if (name == "no-heading") f->heading = false;
    if (name == "heading") f->heading = true;
    if (name == "no-box") f->box = false;
    if (has_value && name == "separator") f->separator = value;
    if (has_value && name == "delimiter") f->delimiter = value;
    if (has_value && name == "terminator") f->terminator = value;
    if (has_value && name == "title") f->title = value;
    sc.SkipSpace();
    if (!sc.Eat(',') && sc.Peek() != ']') {
      return sc.Error("expected ',' or ']' after the attribute '" + name + "'");
    }
  }
}

Status ParseTransformArgs(Scanner& sc, Transform* t) {
  size_t open = sc.pos();
  sc.Advance();  // '('
  sc.SkipSpace();
  if (sc.Eat(')')) return OkStatus();
  for (;;) {
    sc.SkipSpace();
    STOKER_ASSIGN_OR_RETURN(std::string arg, sc.Value(",)", false));
    while (!arg.empty() && std::isspace(static_cast<unsigned char>(arg.back()))) arg.pop_back();
    t->args.push_back(Unescape(arg));
    if (sc.Eat(')')) return OkStatus();
    if (!sc.Eat(',')) return sc.ErrorAt(open, "'(' of " + t->name + "() is not closed; add ')'");
  }
}

Result<Column> ParseColumn(Scanner& sc) {
  Column c;
  size_t start = sc.pos();
  STOKER_ASSIGN_OR_RETURN(std::string token, sc.Value(",():", true));
  while (sc.Peek() == '(') {
    size_t dot = token.rfind('.');
    Transform t;
    t.name = dot == std::string::npos ? token : token.substr(dot + 1);
    std::string key = dot == std::string::npos ? "" : token.substr(0, dot);
    if (c.transforms.empty()) {
      c.key = key;
    } else if (!key.empty()) {
      return sc.ErrorAt(start, "expected '.' and a transform after ')', got '" + key + "'");
    }
    const auto& names = TransformNames();
    if (std::find(names.begin(), names.end(), t.name) == names.end()) {
      std::string hint = Suggest(t.name, names);
      return sc.ErrorAt(start, "unknown transform '" + t.name + "()'" +
                                   (hint.empty() ? "" : " (did you mean " + hint + "()?)") +
                                   "; use basename(), date(), len(), yesno(), lower(), upper(), "
                                   "join(), list(), segment() or firstof()");
    }
    STOKER_RETURN_IF_ERROR(ParseTransformArgs(sc, &t));
    c.transforms.push_back(std::move(t));
    token.clear();
    if (sc.Peek() == '.') {
      STOKER_ASSIGN_OR_RETURN(token, sc.Value(",():", true));
      if (sc.Peek() != '(') return sc.Error("expected '(' after the transform '" + token + "'");
    }
  }
  if (c.transforms.empty()) c.key = token;
  std::vector<Segment> path;
  if (!c.key.empty() && !ParsePath(c.key, &path)) {
    return sc.ErrorAt(start, "'" + c.key +
                                 "' is not a resource key; write a dotted path such as "
                                 "jobSpec.workerPoolSpecs[0].machineSpec.machineType");
  }
  if (c.key.empty() && (c.transforms.empty() || c.transforms[0].name != "firstof")) {
    return sc.ErrorAt(start, "expected a resource key such as name or createTime");
  }
  while (sc.Eat(':')) {
    STOKER_ASSIGN_OR_RETURN(std::string attr, sc.Value("=:,)", true));
    std::string value;
    if (sc.Eat('=')) {
      STOKER_ASSIGN_OR_RETURN(value, sc.Value(":,)", false));
    }
    if (attr == "label") c.label = value;
    if (attr == "sort") c.sort = static_cast<int>(ParseNumber(value).value_or(1));
    if (attr == "reverse") c.reverse = true;
  }
  return c;
}

}  // namespace

Result<OutputFormat> ParseFormat(const std::string& text) {
  Scanner sc(text, "--format");
  sc.SkipSpace();
  OutputFormat f;
  if (sc.AtEnd()) return f;
  size_t name_at = sc.pos();
  std::string name;
  while (!sc.AtEnd() && (std::isalnum(static_cast<unsigned char>(sc.Peek())) || sc.Peek() == '-'))
    name += sc.Peek(), sc.Advance();
  const FormatName* found = nullptr;
  for (const FormatName& n : kFormatNames)
    if (name == n.name) found = &n;
  if (found == nullptr) {
    if (name.empty()) {
      return sc.ErrorAt(name_at, "expected a format name; " + std::string(kFormatChoices));
    }
    std::vector<std::string> names;
    for (const FormatName& n : kFormatNames) names.push_back(n.name);
    std::string hint = Suggest(name, names);
    return InvalidArgument("--format: unknown format '" + name + "'; " + kFormatChoices +
                           (hint.empty() ? "" : " (did you mean " + hint + "?)"));
  }
  f.kind = found->kind;
  f.separator = f.kind == FormatKind::kCsv ? "," : "\t";
  sc.SkipSpace();
  if (sc.Peek() == '[') STOKER_RETURN_IF_ERROR(ParseAttributes(sc, &f));
  sc.SkipSpace();
  if (sc.Peek() == '(') {
    size_t open = sc.pos();
    sc.Advance();
    for (;;) {
      sc.SkipSpace();
      if (sc.Eat(')')) break;
      if (sc.AtEnd()) return sc.ErrorAt(open, "'(' is not closed; add ')' after the keys");
      STOKER_ASSIGN_OR_RETURN(Column c, ParseColumn(sc));
      f.columns.push_back(std::move(c));
      sc.SkipSpace();
      if (!sc.Eat(',') && sc.Peek() != ')') {
        if (sc.AtEnd()) return sc.ErrorAt(open, "'(' is not closed; add ')' after the keys");
        return sc.Error("expected ',' or ')' after a key, got '" + std::string(1, sc.Peek()) + "'");
      }
    }
  }
  sc.SkipSpace();
  if (!sc.AtEnd()) {
    return sc.Error("unexpected '" + std::string(sc.Rest()) +
                    "' after the format; write NAME[ATTRIBUTES](KEYS)");
  }
  bool needs_keys =
      f.kind == FormatKind::kValue || f.kind == FormatKind::kTable || f.kind == FormatKind::kCsv;
  if (needs_keys && f.columns.empty()) {
    return InvalidArgument("--format: " + name + " needs the keys to print, e.g. " + name +
                           "(name,displayName,state)");
  }
  if (f.kind == FormatKind::kText && !f.columns.empty()) {
    return InvalidArgument("--format: " + name +
                           " takes no keys; use value(...), table(...) or csv(...) to pick keys");
  }
  return f;
}

}  // namespace stoker::cli
