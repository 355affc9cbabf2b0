#include "cli/output_format.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <regex>
#include <string_view>

#include "common/time.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

// ------------------------------------------------------------ resource keys

struct Segment {
  enum class Kind { kName, kIndex, kEach } kind = Kind::kName;
  std::string name;
  int64_t index = 0;
};

// "a.b[0].c", "a[]", "a[-1]"; false when malformed (an empty name, a bad
// index, an unclosed '[').
bool ParsePath(std::string_view key, std::vector<Segment>* out) {
  out->clear();
  size_t i = 0;
  bool need_name = true;  // at the start or after '.'
  while (i < key.size()) {
    if (key[i] == '[') {
      size_t close = key.find(']', i);
      if (close == std::string_view::npos || (need_name && !out->empty())) return false;
      std::string_view inside = key.substr(i + 1, close - i - 1);
      Segment s;
      if (inside.empty()) {
        s.kind = Segment::Kind::kEach;
      } else {
        s.kind = Segment::Kind::kIndex;
        std::string text(inside);
        char* end = nullptr;
        s.index = std::strtoll(text.c_str(), &end, 10);
        if (*end != '\0') return false;
      }
      out->push_back(s);
      i = close + 1;
      need_name = false;
      continue;
    }
    if (key[i] == '.') {
      if (need_name) return false;
      need_name = true;
      ++i;
      continue;
    }
    if (!need_name) return false;
    size_t end = i;
    while (end < key.size() && key[end] != '.' && key[end] != '[' && key[end] != ']') ++end;
    if (end == i) return false;
    out->push_back({Segment::Kind::kName, std::string(key.substr(i, end - i)), 0});
    i = end;
    need_name = false;
  }
  return !out->empty() && !need_name;
}

// gcloud's key matching: `create_time` and `createTime` are one name.
std::string FoldKey(std::string_view k) {
  std::string out;
  for (char c : k)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const json* FindKey(const json& object, const std::string& name) {
  auto it = object.find(name);
  if (it != object.end()) return &*it;
  std::string folded = FoldKey(name);
  for (auto i = object.begin(); i != object.end(); ++i)
    if (FoldKey(i.key()) == folded) return &i.value();
  return nullptr;
}

std::optional<json> Lookup(const json& v, const std::vector<Segment>& path, size_t at) {
  if (at == path.size()) return v;
  const Segment& s = path[at];
  switch (s.kind) {
    case Segment::Kind::kName: {
      if (!v.is_object()) return std::nullopt;
      const json* child = FindKey(v, s.name);
      if (child == nullptr) return std::nullopt;
      return Lookup(*child, path, at + 1);
    }
    case Segment::Kind::kIndex: {
      if (!v.is_array()) return std::nullopt;
      int64_t n = static_cast<int64_t>(v.size());
      int64_t i = s.index < 0 ? n + s.index : s.index;
      if (i < 0 || i >= n) return std::nullopt;
      return Lookup(v[static_cast<size_t>(i)], path, at + 1);
    }
    case Segment::Kind::kEach: {
      if (!v.is_array()) return std::nullopt;
      json out = json::array();
      for (const json& item : v) {
        auto r = Lookup(item, path, at + 1);
        if (r) out.push_back(std::move(*r));
      }
      return out;
    }
  }
  return std::nullopt;
}

// ------------------------------------------------------------ scanning

// A cursor over a flag's text; errors name the flag and the position.
class Scanner {
 public:
  Scanner(std::string_view text, std::string flag) : s_(text), flag_(std::move(flag)) {}

  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return AtEnd() ? '\0' : s_[pos_]; }
  size_t pos() const { return pos_; }
  void Advance(size_t n = 1) { pos_ += n; }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool StartsWith(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  std::string_view Rest() const { return s_.substr(std::min(pos_, s_.size())); }

  Status ErrorAt(size_t at, const std::string& what) const {
    return InvalidArgument(flag_ + ": at " + std::to_string(at + 1) + ": " + what);
  }
  Status Error(const std::string& what) const { return ErrorAt(pos_, what); }

  // A run of characters not in `stops` (and not blank when `blank_stops`),
  // with "..." or '...' pieces (backslash escapes) joined in. `quoted` is set
  // when any piece was quoted.
  Result<std::string> Value(std::string_view stops, bool blank_stops, bool* quoted = nullptr) {
    std::string out;
    while (!AtEnd()) {
      char c = s_[pos_];
      if (c == '"' || c == '\'') {
        size_t open = pos_++;
        while (!AtEnd() && s_[pos_] != c) {
          // \\ and \<quote> escape; other backslashes stay (for Unescape).
          if (s_[pos_] == '\\' && pos_ + 1 < s_.size() &&
              (s_[pos_ + 1] == c || s_[pos_ + 1] == '\\'))
            ++pos_;
          out += s_[pos_++];
        }
        if (AtEnd()) {
          return ErrorAt(open, std::string("unterminated string; add the closing ") + c);
        }
        ++pos_;
        if (quoted) *quoted = true;
        continue;
      }
      if (stops.find(c) != std::string_view::npos) break;
      if (blank_stops && std::isspace(static_cast<unsigned char>(c))) break;
      out += c;
      ++pos_;
    }
    return out;
  }

 private:
  std::string_view s_;
  std::string flag_;
  size_t pos_ = 0;
};

bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || (static_cast<unsigned char>(c) >= 0x80);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "\t" and "\n" written as two characters, as gcloud's docs ask for.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char n = s[++i];
      out += n == 't' ? '\t' : n == 'n' ? '\n' : n;
    } else {
      out += s[i];
    }
  }
  return out;
}

// ------------------------------------------------------------ values

std::optional<double> ParseNumber(const std::string& s) {
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '+' &&
        c != 'e' && c != 'E')
      return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

// RFC 3339, or a date ("2018-01-15") or a time without a zone, both UTC.
std::optional<int64_t> ParseTime(std::string s) {
  if (s.size() == 10 && s[4] == '-' && s[7] == '-') s += "T00:00:00Z";
  if (s.size() >= 19 && (s[10] == 'T' || s[10] == 't') &&
      s.find_first_of("Zz+", 19) == std::string::npos && s.find('-', 19) == std::string::npos)
    s += "Z";
  return ParseRfc3339Micros(s);
}

std::optional<double> NumberOf(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return ParseNumber(v.get<std::string>());
  return std::nullopt;
}

std::string Stringify(const std::optional<json>& v, const std::string& delimiter);

std::string ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A cell of value, table and csv output: lists joined by the delimiter,
// maps as key=value items, absent and null as "".
std::string Stringify(const std::optional<json>& v, const std::string& delimiter) {
  if (!v) return "";
  if (v->is_array()) {
    std::string out;
    for (size_t i = 0; i < v->size(); ++i) {
      if (i) out += delimiter;
      const json& item = (*v)[i];
      out += item.is_structured() ? item.dump(-1, ' ', false, json::error_handler_t::replace)
                                  : ScalarText(item);
    }
    return out;
  }
  if (v->is_object()) {
    std::string out;
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it != v->begin()) out += delimiter;
      out += it.key() + "=" +
             (it->is_structured() ? it->dump(-1, ' ', false, json::error_handler_t::replace)
                                  : ScalarText(*it));
    }
    return out;
  }
  return ScalarText(*v);
}

bool Truthy(const std::optional<json>& v) {
  if (!v || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0;
  if (v->is_string() || v->is_structured()) return !v->empty() && *v != "";
  return true;
}

// Order of two resource values for sorting: absent first, then numbers
// (numeric strings too, as Vertex writes int64 as strings), times, text.
int CompareValues(const std::optional<json>& a, const std::optional<json>& b) {
  bool ha = a && !a->is_null(), hb = b && !b->is_null();
  if (!ha || !hb) return ha == hb ? 0 : (ha ? 1 : -1);
  auto na = NumberOf(*a), nb = NumberOf(*b);
  if (na && nb) return *na < *nb ? -1 : (*na > *nb ? 1 : 0);
  if (a->is_string() && b->is_string()) {
    const std::string &sa = a->get_ref<const std::string&>(),
                      &sb = b->get_ref<const std::string&>();
    auto ta = ParseTime(sa), tb = ParseTime(sb);
    if (ta && tb) return *ta < *tb ? -1 : (*ta > *tb ? 1 : 0);
    return sa.compare(sb) < 0 ? -1 : (sa == sb ? 0 : 1);
  }
  if (a->type() != b->type()) return a->type() < b->type() ? -1 : 1;
  std::string da = a->dump(), db = b->dump();
  return da < db ? -1 : (da == db ? 0 : 1);
}

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

std::optional<json> ColumnValue(const json& resource, const Column& c) {
  std::optional<json> v = resource;
  if (!c.key.empty()) v = LookupKey(resource, c.key);
  for (const Transform& t : c.transforms) v = ApplyTransform(t, std::move(v));
  return v;
}

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

// ------------------------------------------------------------ rendering

std::string Spaces(size_t n) { return std::string(n, ' '); }

// Characters on screen: UTF-8 continuation bytes take no column.
size_t Width(const std::string& s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

bool NeedsQuotes(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return true;
  static const char* kWords[] = {"true", "false", "yes", "no",   "on",
                                 "off",  "null",  "~",   ".inf", ".nan"};
  std::string low = Lower(s);
  for (const char* w : kWords)
    if (low == w) return true;
  if (std::string_view(",[]{}#&*!|>'\"%@`=").find(s.front()) != std::string_view::npos) return true;
  if (s.rfind("---", 0) == 0 || s.rfind("...", 0) == 0) return true;  // document markers
  // '-', '?' and ':' start a plain scalar only when a non-blank follows.
  if (std::string_view("-?:").find(s.front()) != std::string_view::npos &&
      (s.size() == 1 || s[1] == ' '))
    return true;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos || s.back() == ':')
    return true;
  // Numbers, dates and times read back as numbers or timestamps.
  bool numeric_like =
      std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '.' || s.front() == '+';
  if (numeric_like && s.find_first_not_of("0123456789.:_-+eEtTzZ ") == std::string::npos)
    return true;
  return ParseNumber(s).has_value();
}

bool HasControl(const std::string& s, bool allow_newline) {
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t' && !(allow_newline && c == '\n')) || u == 0x7f) return true;
  }
  return false;
}

std::string YamlScalar(const json& v) {
  if (!v.is_string()) return v.is_null() ? "null" : v.dump();
  const std::string& s = v.get_ref<const std::string&>();
  if (HasControl(s, false)) return v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!NeedsQuotes(s)) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A multi-line string as a literal block scalar, lines at `indent`.
bool YamlBlock(const std::string& s, size_t indent, std::string* out) {
  if (s.find('\n') == std::string::npos || HasControl(s, true)) return false;
  size_t end = s.find_last_not_of('\n');
  if (end == std::string::npos) return false;
  size_t trailing = s.size() - end - 1;
  std::string body = s.substr(0, end + 1);
  *out += "|";
  if (body.front() == ' ') *out += "2";
  *out += trailing == 0 ? "-" : (trailing == 1 ? "" : "+");
  *out += "\n";
  size_t start = 0;
  for (;;) {
    size_t nl = body.find('\n', start);
    std::string line = body.substr(start, nl == std::string::npos ? nl : nl - start);
    *out += (line.empty() ? "" : Spaces(indent) + line) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  for (size_t i = 1; i < trailing; ++i) *out += "\n";
  return true;
}

void YamlNode(const json& v, size_t indent, std::string* out);

// The value after "key:" or "-": inline scalars, or nested blocks.
void YamlAfterIndicator(const json& v, size_t indent, bool in_sequence, std::string* out) {
  if (v.is_object() && !v.empty()) {
    *out += "\n";
    YamlNode(v, indent + 2, out);
  } else if (v.is_array() && !v.empty()) {
    *out += "\n";
    YamlNode(v, in_sequence ? indent + 2 : indent, out);  // PyYAML: no indent under a key
  } else {
    *out += " ";
    if (v.is_string() && YamlBlock(v.get<std::string>(), indent + 2, out)) return;
    *out += (v.is_object() ? "{}" : v.is_array() ? "[]" : YamlScalar(v)) + "\n";
  }
}

void YamlNode(const json& v, size_t indent, std::string* out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      *out += Spaces(indent) + YamlScalar(it.key()) + ":";
      YamlAfterIndicator(*it, indent, false, out);
    }
  } else if (v.is_array()) {
    for (const json& item : v) {
      if (item.is_structured() && !item.empty()) {
        // The first line of the nested block goes right after "- ".
        std::string nested;
        YamlNode(item, indent + 2, &nested);
        *out += Spaces(indent) + "- " + nested.substr(indent + 2);
      } else {
        *out += Spaces(indent) + "-";
        YamlAfterIndicator(item, indent, true, out);
      }
    }
  }
}

std::string Yaml(const json& v) {
  if (v.is_structured() && !v.empty()) {
    std::string out;
    YamlNode(v, 0, &out);
    return out;
  }
  std::string out;
  if (v.is_string() && YamlBlock(v.get<std::string>(), 2, &out)) return out;
  return (v.is_object() ? "{}" : v.is_array() ? "[]" : YamlScalar(v)) + "\n";
}

// The resource cut down to the projection's keys (json, yaml, flattened).
json Project(const json& resource, const std::vector<Column>& columns) {
  if (columns.empty()) return resource;
  json out = json::object();
  for (const Column& c : columns) {
    auto v = ColumnValue(resource, c);
    if (!v) continue;
    std::vector<Segment> path;
    bool plain = ParsePath(c.key, &path) &&
                 std::all_of(path.begin(), path.end(),
                             [](const Segment& s) { return s.kind == Segment::Kind::kName; });
    if (!c.label.empty() || !plain) {
      out[c.label.empty() ? c.key : c.label] = std::move(*v);
      continue;
    }
    json* at = &out;
    for (const Segment& s : path) {
      if (!at->is_object()) *at = json::object();
      at = &(*at)[s.name];
    }
    *at = std::move(*v);
  }
  return out;
}

void Flatten(const json& v, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* out) {
  if (v.is_object() && !v.empty()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      Flatten(*it, prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else if (v.is_array() && !v.empty()) {
    for (size_t i = 0; i < v.size(); ++i)
      Flatten(v[i], prefix + "[" + std::to_string(i) + "]", out);
  } else {
    out->emplace_back(prefix, v.is_object() ? "{}" : v.is_array() ? "[]" : ScalarText(v));
  }
}

std::string Flattened(const json& v) {
  std::vector<std::pair<std::string, std::string>> lines;
  Flatten(v, "", &lines);
  size_t width = 0;
  for (const auto& [k, _] : lines) width = std::max(width, Width(k));
  std::string out;
  for (const auto& [k, value] : lines) {
    std::string line = k + ":" + Spaces(width - Width(k) + 1) + value;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// ANGRY_SNAKE_CASE of a key's last `parts` names: createTime -> CREATE_TIME.
std::string Heading(const std::string& key, size_t parts) {
  std::vector<Segment> path;
  std::vector<std::string> names;
  if (ParsePath(key, &path))
    for (const Segment& s : path)
      if (s.kind == Segment::Kind::kName) names.push_back(s.name);
  std::string out;
  size_t first = names.size() > parts ? names.size() - parts : 0;
  for (size_t i = first; i < names.size(); ++i) {
    if (!out.empty()) out += '_';
    const std::string& n = names[i];
    for (size_t j = 0; j < n.size(); ++j) {
      char c = n[j];
      if (std::isupper(static_cast<unsigned char>(c)) && j > 0 &&
          (std::islower(static_cast<unsigned char>(n[j - 1])) ||
           std::isdigit(static_cast<unsigned char>(n[j - 1]))))
        out += '_';
      out += (c == '-' || c == '.')
                 ? '_'
                 : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

std::vector<std::string> TableHeadings(const std::vector<Column>& columns) {
  std::vector<std::string> out;
  for (const Column& c : columns) {
    if (!c.label.empty()) {
      out.push_back(c.label);
    } else if (c.key.empty()) {
      out.push_back(Upper(c.transforms.front().name));
    } else {
      out.push_back(Heading(c.key, 1));
    }
  }
  // gcloud disambiguates (first.name, last.name) as (NAME, LAST_NAME).
  for (size_t i = 0; i < columns.size(); ++i) {
    if (!columns[i].label.empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (out[j] == out[i]) out[i] = Heading(columns[i].key, 2);
  }
  return out;
}

std::string Table(const std::vector<json>& items, const OutputFormat& f) {
  std::vector<std::vector<std::string>> rows;
  if (f.heading) rows.push_back(TableHeadings(f.columns));
  for (const json& r : items) {
    std::vector<std::string> row;
    for (const Column& c : f.columns) {
      std::string cell = Stringify(ColumnValue(r, c), f.delimiter);
      std::replace(cell.begin(), cell.end(), '\n', ' ');
      row.push_back(cell);
    }
    rows.push_back(std::move(row));
  }
  if (items.empty()) return "";
  std::vector<size_t> w(f.columns.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], Width(row[i]));
  std::string out;
  if (!f.box) {
    size_t total = 0;
    for (size_t x : w) total += x + 2;
    if (!f.title.empty())
      out += Spaces(total > Width(f.title) + 2 ? (total - 2 - Width(f.title)) / 2 : 0) + f.title +
             "\n";
    for (const auto& row : rows) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i)
        line += row[i] + (i + 1 < row.size() ? Spaces(w[i] - Width(row[i]) + 2) : "");
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }
  auto rule = [&](const char* l, const char* m, const char* r) {
    std::string s = l;
    for (size_t i = 0; i < w.size(); ++i) {
      for (size_t k = 0; k < w[i] + 2; ++k) s += "─";
      s += i + 1 < w.size() ? m : r;
    }
    return s + "\n";
  };
  if (!f.title.empty()) {
    size_t inner = w.size() - 1;
    for (size_t x : w) inner += x + 2;
    size_t tw = Width(f.title);
    size_t left = inner > tw ? (inner - tw) / 2 : 0;
    out += rule("┌", "─", "┐");
    out += "│" + Spaces(left) + f.title + Spaces(inner > tw + left ? inner - tw - left : 0) + "│\n";
    out += rule("├", "┬", "┤");
  } else {
    out += rule("┌", "┬", "┐");
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line = "│";
    for (size_t i = 0; i < rows[r].size(); ++i)
      line += " " + rows[r][i] + Spaces(w[i] - Width(rows[r][i])) + " │";
    out += line + "\n";
    if (r == 0 && f.heading) out += rule("├", "┼", "┤");
  }
  return out + rule("└", "┴", "┘");
}

std::string CsvField(const std::string& s, const std::string& separator) {
  if (s.find(separator) == std::string::npos && s.find_first_of("\"\r\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string Records(const std::vector<json>& items, const OutputFormat& f) {
  bool csv = f.kind == FormatKind::kCsv;
  std::string out;
  auto record = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) out += f.separator;
      out += csv ? CsvField(cells[i], f.separator) : cells[i];
    }
    out += f.terminator;
  };
  if (csv && f.heading && !items.empty()) {
    std::vector<std::string> heads;
    for (const Column& c : f.columns)
      heads.push_back(!c.label.empty() ? c.label : c.key.empty() ? c.transforms[0].name : c.key);
    record(heads);
  }
  for (const json& r : items) {
    std::vector<std::string> cells;
    for (const Column& c : f.columns) cells.push_back(Stringify(ColumnValue(r, c), f.delimiter));
    record(cells);
  }
  return out;
}

std::string ListLine(const json& r, const OutputFormat& f) {
  std::vector<std::string> parts;
  if (!f.columns.empty()) {
    for (const Column& c : f.columns) parts.push_back(Stringify(ColumnValue(r, c), f.delimiter));
  } else if (r.is_object()) {
    for (auto it = r.begin(); it != r.end(); ++it)
      parts.push_back(it.key() + "=" + Stringify(*it, f.delimiter));
  } else {
    parts.push_back(Stringify(r, f.delimiter));
  }
  std::string out = " -";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " ") + parts[i];
  return out + "\n";
}

// `:sort=N` and `:reverse` on the projection's columns.
void SortByColumns(std::vector<json>* items, const std::vector<Column>& columns) {
  std::vector<const Column*> keys;
  for (const Column& c : columns)
    if (c.sort > 0) keys.push_back(&c);
  if (keys.empty()) return;
  std::stable_sort(keys.begin(), keys.end(),
                   [](const Column* a, const Column* b) { return a->sort < b->sort; });
  std::stable_sort(items->begin(), items->end(), [&](const json& a, const json& b) {
    for (const Column* c : keys) {
      int cmp = CompareValues(LookupKey(a, c->key), LookupKey(b, c->key));
      if (c->reverse) cmp = -cmp;
      if (cmp != 0) return cmp < 0;
    }
    return false;
  });
}

}  // namespace

std::optional<json> LookupKey(const json& resource, const std::string& key) {
  std::vector<Segment> path;
  if (!ParsePath(key, &path)) return std::nullopt;
  return Lookup(resource, path, 0);
}

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

std::string FormatList(const std::vector<json>& input, const OutputFormat& f) {
  const std::vector<json>* items = &input;
  std::vector<json> sorted;
  if (std::any_of(f.columns.begin(), f.columns.end(), [](const Column& c) { return c.sort > 0; })) {
    sorted = input;
    SortByColumns(&sorted, f.columns);
    items = &sorted;
  }
  std::string out;
  switch (f.kind) {
    case FormatKind::kNone:
      return "";
    case FormatKind::kJson: {
      json arr = json::array();
      for (const json& r : *items) arr.push_back(Project(r, f.columns));
      return arr.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    }
    case FormatKind::kText:
    case FormatKind::kYaml:
      for (const json& r : *items) out += "---\n" + Yaml(Project(r, f.columns));
      return out;
    case FormatKind::kFlattened:
      for (const json& r : *items) out += "---\n" + Flattened(Project(r, f.columns));
      return out;
    case FormatKind::kValue:
    case FormatKind::kCsv:
      return Records(*items, f);
    case FormatKind::kTable:
      return Table(*items, f);
    case FormatKind::kList:
      for (const json& r : *items) out += ListLine(r, f);
      return out;
  }
  return out;
}

std::string FormatResource(const json& resource, const OutputFormat& f) {
  switch (f.kind) {
    case FormatKind::kJson:
      return Project(resource, f.columns).dump(2, ' ', false, json::error_handler_t::replace) +
             "\n";
    case FormatKind::kText:
    case FormatKind::kYaml:
      return Yaml(Project(resource, f.columns));
    case FormatKind::kFlattened:
      return Flattened(Project(resource, f.columns));
    default:
      return FormatList({resource}, f);
  }
}

// ------------------------------------------------------------ --filter

namespace {
enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kHas, kMatch, kNoMatch };
constexpr int kMaxFilterNesting = 32;
constexpr size_t kMaxFilterText = 4096;
}  // namespace

struct ResourceFilter::Node {
  enum class Kind { kAll, kAny, kNot, kTerm } kind = Kind::kTerm;
  std::vector<std::shared_ptr<const Node>> kids;
  std::vector<Segment> path;
  Op op = Op::kEq;
  std::vector<std::string> values;  // one, or the list of key=(a b) / key:(a b)
  std::shared_ptr<const std::regex> re;
};

namespace {

using NodeRef = std::shared_ptr<const ResourceFilter::Node>;
using Node = ResourceFilter::Node;

// Words: runs of letters and digits, compared without case.
std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (IsWordChar(c)) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

// gcloud's ':' match: the pattern's words stand together among the value's
// words; a trailing '*' makes the last one a prefix.
bool WordMatch(const std::string& text, std::string pattern) {
  bool prefix = !pattern.empty() && pattern.back() == '*';
  if (prefix) pattern.pop_back();
  std::vector<std::string> want = Words(pattern), have = Words(text);
  if (want.empty()) return Lower(text).find(Lower(pattern)) != std::string::npos;
  for (size_t i = 0; i + want.size() <= have.size(); ++i) {
    size_t k = 0;
    for (; k < want.size(); ++k) {
      const std::string& h = have[i + k];
      bool last = k + 1 == want.size();
      if (last && prefix ? h.compare(0, want[k].size(), want[k]) != 0 : h != want[k]) break;
    }
    if (k == want.size()) return true;
  }
  return false;
}

bool Holds(Op op, int cmp) {
  switch (op) {
    case Op::kEq:
      return cmp == 0;
    case Op::kLt:
      return cmp < 0;
    case Op::kLe:
      return cmp <= 0;
    case Op::kGt:
      return cmp > 0;
    case Op::kGe:
      return cmp >= 0;
    default:
      return false;
  }
}

// `value` (a scalar) against one operand of =, <, <=, >, >=.
bool CompareTerm(const json& value, Op op, const std::string& operand) {
  if (value.is_boolean()) {
    std::string o = Lower(operand);
    if (o != "true" && o != "false") return false;
    return Holds(op, value.get<bool>() == (o == "true") ? 0 : (value.get<bool>() ? 1 : -1));
  }
  auto n = NumberOf(value);
  auto m = ParseNumber(operand);
  if (n && m) return Holds(op, *n < *m ? -1 : (*n > *m ? 1 : 0));
  std::string text = ScalarText(value);
  auto t = ParseTime(text), u = ParseTime(operand);
  if (t && u) return Holds(op, *t < *u ? -1 : (*t > *u ? 1 : 0));
  return Holds(op, text.compare(operand) < 0 ? -1 : (text == operand ? 0 : 1));
}

bool TermHolds(const Node& n, const json& v) {
  if (v.is_null()) return false;
  if (v.is_array()) {
    if (n.op == Op::kHas && n.values.size() == 1 && n.values[0] == "*") return !v.empty();
    return std::any_of(v.begin(), v.end(), [&](const json& item) { return TermHolds(n, item); });
  }
  switch (n.op) {
    case Op::kHas:
      return std::any_of(n.values.begin(), n.values.end(), [&](const std::string& p) {
        if (p == "*") return Truthy(v) || v.is_number() || v.is_boolean();
        if (v.is_object()) {
          for (auto it = v.begin(); it != v.end(); ++it)
            if (WordMatch(it.key(), p)) return true;
          return false;
        }
        return WordMatch(ScalarText(v), p);
      });
    case Op::kMatch:
      if (v.is_object()) return false;
      return std::regex_search(ScalarText(v), *n.re);
    default:
      if (v.is_object()) return false;
      return std::any_of(n.values.begin(), n.values.end(),
                         [&](const std::string& o) { return CompareTerm(v, n.op, o); });
  }
}

bool Evaluate(const Node& n, const json& resource) {
  switch (n.kind) {
    case Node::Kind::kAll:
      return std::all_of(n.kids.begin(), n.kids.end(),
                         [&](const NodeRef& k) { return Evaluate(*k, resource); });
    case Node::Kind::kAny:
      return std::any_of(n.kids.begin(), n.kids.end(),
                         [&](const NodeRef& k) { return Evaluate(*k, resource); });
    case Node::Kind::kNot:
      return !Evaluate(*n.kids[0], resource);
    case Node::Kind::kTerm:
      break;
  }
  auto v = Lookup(resource, n.path, 0);
  return v.has_value() && TermHolds(n, *v);
}

constexpr char kOperators[] = "=, !=, <, <=, >, >=, :, ~ or !~";

class FilterParser {
 public:
  explicit FilterParser(const std::string& text) : text_(text), sc_(text, "--filter") {}

  Result<NodeRef> Parse() {
    STOKER_ASSIGN_OR_RETURN(NodeRef root, Conjunction());
    sc_.SkipSpace();
    if (!sc_.AtEnd()) return sc_.Error("unbalanced ')'; remove it or add a '(' before it");
    return root;
  }

 private:
  static NodeRef Group(Node::Kind kind, std::vector<NodeRef> kids) {
    if (kids.size() == 1) return kids[0];
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->kids = std::move(kids);
    return n;
  }

  // A keyword standing alone: followed by a blank, '(' or the end.
  bool Keyword(std::string_view word) {
    if (!sc_.StartsWith(word)) return false;
    std::string_view after = sc_.Rest().substr(word.size());
    if (!after.empty() && !std::isspace(static_cast<unsigned char>(after[0])) && after[0] != '(')
      return false;
    sc_.Advance(word.size());
    return true;
  }

  // conjunction := chain { chain }   (juxtaposition: AND below OR)
  Result<NodeRef> Conjunction() {
    std::vector<NodeRef> kids;
    do {
      STOKER_ASSIGN_OR_RETURN(NodeRef k, Chain());
      kids.push_back(std::move(k));
      sc_.SkipSpace();
    } while (!sc_.AtEnd() && sc_.Peek() != ')');
    return Group(Node::Kind::kAll, std::move(kids));
  }

  // chain := unary { AND unary } | unary { OR unary }
  Result<NodeRef> Chain() {
    std::vector<NodeRef> kids;
    STOKER_ASSIGN_OR_RETURN(NodeRef first, Unary());
    kids.push_back(std::move(first));
    std::string joiner;
    for (;;) {
      sc_.SkipSpace();
      size_t at = sc_.pos();
      std::string word = Keyword("AND") ? "AND" : Keyword("OR") ? "OR" : "";
      if (word.empty()) break;
      if (!joiner.empty() && word != joiner) {
        return sc_.ErrorAt(at,
                           "AND and OR need parentheses to combine; write (a AND b) OR c "
                           "or a AND (b OR c)");
      }
      joiner = word;
      STOKER_ASSIGN_OR_RETURN(NodeRef next, Unary());
      kids.push_back(std::move(next));
    }
    return Group(joiner == "OR" ? Node::Kind::kAny : Node::Kind::kAll, std::move(kids));
  }

  // unary := NOT unary | '-' unary | '(' conjunction ')' | term
  Result<NodeRef> Unary() {
    sc_.SkipSpace();
    if (sc_.AtEnd() || sc_.Peek() == ')') {
      return sc_.Error("expected a term such as state=JOB_STATE_RUNNING or labels.team:*");
    }
    if (depth_ >= kMaxFilterNesting) {
      return sc_.Error("nested deeper than " + std::to_string(kMaxFilterNesting) + "; simplify it");
    }
    if (Keyword("NOT") || sc_.Eat('-')) {
      ++depth_;
      STOKER_ASSIGN_OR_RETURN(NodeRef inner, Unary());
      --depth_;
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kNot;
      n->kids.push_back(std::move(inner));
      return NodeRef(n);
    }
    if (sc_.Peek() == '(') {
      size_t open = sc_.pos();
      sc_.Advance();
      ++depth_;
      STOKER_ASSIGN_OR_RETURN(NodeRef inner, Conjunction());
      --depth_;
      if (!sc_.Eat(')')) return sc_.ErrorAt(open, "'(' is not closed; add ')'");
      return inner;
    }
    return Term();
  }

  bool ReadOp(Op* op) {
    static constexpr std::pair<std::string_view, Op> kOps[] = {
        {"!=", Op::kNe}, {"!~", Op::kNoMatch}, {"<=", Op::kLe}, {">=", Op::kGe},  {"=", Op::kEq},
        {"<", Op::kLt},  {">", Op::kGt},       {":", Op::kHas}, {"~", Op::kMatch}};
    for (const auto& [text, o] : kOps) {
      if (sc_.StartsWith(text)) {
        sc_.Advance(text.size());
        *op = o;
        return true;
      }
    }
    return false;
  }

  // term := key operator value | key ('=' | ':') '(' value ... ')'
  Result<NodeRef> Term() {
    size_t key_at = sc_.pos();
    std::string key;
    while (!sc_.AtEnd() && !std::isspace(static_cast<unsigned char>(sc_.Peek())) &&
           std::string_view("=!<>:~()").find(sc_.Peek()) == std::string_view::npos)
      key += sc_.Peek(), sc_.Advance();
    auto n = std::make_shared<Node>();
    if (key.empty()) {
      return sc_.Error("expected a key such as state, displayName or labels.team, got '" +
                       std::string(1, sc_.Peek()) + "'");
    }
    if (!ParsePath(key, &n->path)) {
      return sc_.ErrorAt(key_at, "'" + key +
                                     "' is not a resource key; write a dotted path such "
                                     "as labels.team or jobSpec.workerPoolSpecs[0]");
    }
    sc_.SkipSpace();
    size_t op_at = sc_.pos();
    Op op;
    if (!ReadOp(&op)) {
      return sc_.Error("expected an operator (" + std::string(kOperators) + ") after '" + key +
                       "', e.g. " + key + "=VALUE or " + key + ":*");
    }
    std::string op_text = text_.substr(op_at, sc_.pos() - op_at);
    sc_.SkipSpace();
    n->op = op == Op::kNe ? Op::kEq : op == Op::kNoMatch ? Op::kMatch : op;
    if (sc_.Peek() == '(' && (op == Op::kEq || op == Op::kHas)) {
      size_t open = sc_.pos();
      sc_.Advance();
      for (;;) {
        while (!sc_.AtEnd() &&
               (std::isspace(static_cast<unsigned char>(sc_.Peek())) || sc_.Peek() == ','))
          sc_.Advance();
        if (sc_.Eat(')')) break;
        if (sc_.AtEnd()) return sc_.ErrorAt(open, "'(' of the value list is not closed; add ')'");
        STOKER_ASSIGN_OR_RETURN(std::string v, sc_.Value(",()", true));
        n->values.push_back(std::move(v));
      }
      if (n->values.empty()) return sc_.ErrorAt(open, "expected values inside '()'");
    } else {
      size_t value_at = sc_.pos();
      bool quoted = false;
      STOKER_ASSIGN_OR_RETURN(std::string v, sc_.Value("()", true, &quoted));
      if (v.empty() && !quoted) {
        return sc_.ErrorAt(value_at, "expected a value after '" + key + op_text + "', e.g. " + key +
                                         op_text + "\"some value\"");
      }
      if (n->op == Op::kMatch) {
        try {
          n->re = std::make_shared<const std::regex>(v, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          return sc_.ErrorAt(value_at, "'" + v + "' is not a regular expression (" + e.what() +
                                           "); escape special characters with '\\'");
        }
      }
      n->values.push_back(std::move(v));
    }
    NodeRef term = n;
    if (op == Op::kNe || op == Op::kNoMatch) {
      auto neg = std::make_shared<Node>();
      neg->kind = Node::Kind::kNot;
      neg->kids.push_back(term);
      return NodeRef(neg);
    }
    return term;
  }

  const std::string& text_;
  Scanner sc_;
  int depth_ = 0;
};

struct SortKey {
  std::vector<Segment> path;
  bool descending = false;
};

Result<std::vector<SortKey>> ParseSortBy(const std::string& text) {
  std::vector<SortKey> keys;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    size_t b = part.find_first_not_of(" \t"), e = part.find_last_not_of(" \t");
    part = b == std::string::npos ? "" : part.substr(b, e - b + 1);
    if (part.empty() && text.find_first_not_of(" \t,") == std::string::npos) break;
    SortKey k;
    if (!part.empty() && part[0] == '~') {
      k.descending = true;
      part.erase(0, 1);
    }
    if (!ParsePath(part, &k.path)) {
      return InvalidArgument("--sort-by: '" + part +
                             "' is not a resource key; write --sort-by=createTime or "
                             "--sort-by=~createTime,displayName ('~' sorts descending)");
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

Status CheckCount(const char* flag, const std::optional<int64_t>& n) {
  if (n && *n < 1) {
    return InvalidArgument(std::string(flag) + ": must be 1 or more, got " + std::to_string(*n) +
                           "; leave " + flag + " out for no bound");
  }
  return OkStatus();
}

}  // namespace

bool ResourceFilter::Matches(const json& resource) const {
  return root_ == nullptr || Evaluate(*root_, resource);
}

Result<ResourceFilter> ParseResourceFilter(const std::string& text) {
  if (text.size() > kMaxFilterText) {
    return InvalidArgument("--filter: is " + std::to_string(text.size()) +
                           " characters long; at most " + std::to_string(kMaxFilterText) +
                           " are accepted");
  }
  ResourceFilter f;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return f;
  FilterParser p(text);
  STOKER_ASSIGN_OR_RETURN(f.root_, p.Parse());
  return f;
}

Status ValidateListFlags(const ListFlags& flags) {
  STOKER_RETURN_IF_ERROR(CheckCount("--limit", flags.limit));
  STOKER_RETURN_IF_ERROR(CheckCount("--page-size", flags.page_size));
  STOKER_ASSIGN_OR_RETURN(ResourceFilter unused_filter, ParseResourceFilter(flags.filter));
  STOKER_ASSIGN_OR_RETURN(std::vector<SortKey> unused_keys, ParseSortBy(flags.sort_by));
  return OkStatus();
}

Result<std::vector<json>> ApplyListFlags(std::vector<json> items, const ListFlags& flags) {
  STOKER_RETURN_IF_ERROR(CheckCount("--limit", flags.limit));
  STOKER_RETURN_IF_ERROR(CheckCount("--page-size", flags.page_size));
  STOKER_ASSIGN_OR_RETURN(ResourceFilter filter, ParseResourceFilter(flags.filter));
  STOKER_ASSIGN_OR_RETURN(std::vector<SortKey> keys, ParseSortBy(flags.sort_by));
  if (!keys.empty()) {
    std::stable_sort(items.begin(), items.end(), [&](const json& a, const json& b) {
      for (const SortKey& k : keys) {
        int cmp = CompareValues(Lookup(a, k.path, 0), Lookup(b, k.path, 0));
        if (k.descending) cmp = -cmp;
        if (cmp != 0) return cmp < 0;
      }
      return false;
    });
  }
  std::vector<json> out;
  for (json& r : items) {
    if (flags.limit && static_cast<int64_t>(out.size()) >= *flags.limit) break;
    if (filter.Matches(r)) out.push_back(std::move(r));
  }
  return out;
}

// ------------------------------------------------------------ argv

Result<HoistedFlags> HoistGlobalFlags(const std::vector<std::string>& args,
                                      const std::set<std::string>& flags_with_values) {
  static const std::vector<std::string> kVerbosities = {"debug", "info",     "warning",
                                                        "error", "critical", "none"};
  HoistedFlags out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.rest.insert(out.rest.end(), args.begin() + static_cast<ptrdiff_t>(i), args.end());
      break;
    }
    if (flags_with_values.count(a) && i + 1 < args.size()) {
      out.rest.push_back(a);
      out.rest.push_back(args[++i]);
      continue;
    }
    if (a == "--quiet" || a == "-q") {
      out.quiet = true;
      continue;
    }
    std::optional<std::string>* slot = nullptr;
    std::string flag;
    for (const char* name : {"--format", "--verbosity"}) {
      if (a == name || a.rfind(std::string(name) + "=", 0) == 0) {
        flag = name;
        slot = flag == "--format" ? &out.format : &out.verbosity;
      }
    }
    if (slot == nullptr) {
      out.rest.push_back(a);
      continue;
    }
    std::string value;
    if (a.size() > flag.size()) {
      value = a.substr(flag.size() + 1);
    } else if (i + 1 < args.size() && args[i + 1] != "--") {
      value = args[++i];
    }
    if (value.empty()) {
      return InvalidArgument(flag + ": expected a value, e.g. " +
                             (flag == "--format" ? "--format=json" : "--verbosity=info"));
    }
    if (flag == "--verbosity" &&
        std::find(kVerbosities.begin(), kVerbosities.end(), value) == kVerbosities.end()) {
      std::string hint = Suggest(value, kVerbosities);
      return InvalidArgument("--verbosity: unknown level '" + value +
                             "'; use debug, info, warning, error, critical or none" +
                             (hint.empty() ? "" : " (did you mean " + hint + "?)"));
    }
    *slot = value;
  }
  return out;
}

// ------------------------------------------------------------ did you mean

std::string Suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string w = Lower(word);
  if (w.empty()) return "";
  size_t limit = w.size() <= 4 ? 1 : w.size() <= 8 ? 2 : 3;
  size_t best = limit + 1;
  std::string choice;
  for (const std::string& candidate : candidates) {
    std::string c = Lower(candidate);
    // Optimal string alignment distance: edits plus swaps of neighbours.
    std::vector<std::vector<size_t>> d(w.size() + 1, std::vector<size_t>(c.size() + 1));
    for (size_t i = 0; i <= w.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= c.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= w.size(); ++i) {
      for (size_t j = 1; j <= c.size(); ++j) {
        size_t cost = w[i - 1] == c[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && w[i - 1] == c[j - 2] && w[i - 2] == c[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    if (d[w.size()][c.size()] < best) {
      best = d[w.size()][c.size()];
      choice = candidate;
    }
  }
  if (!choice.empty() || w.size() < 3) return choice;
  for (const std::string& candidate : candidates) {
    if (Lower(candidate).rfind(w, 0) != 0) continue;
    if (!choice.empty() && choice != candidate) return "";
    choice = candidate;
  }
  return choice;
}

}  // namespace stoker::cli
