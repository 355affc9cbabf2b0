// Resource keys, the flag-text scanner and the value rules shared by
// --format, --filter and --sort-by (output_format_internal.h).
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "cli/output_format.h"
#include "cli/output_format_internal.h"
#include "common/time.h"

namespace stoker::cli {

using nlohmann::json;

namespace format_internal {

namespace {

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

}  // namespace

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

Result<std::string> Scanner::Value(std::string_view stops, bool blank_stops, bool* quoted) {
  std::string out;
  while (!AtEnd()) {
    char c = s_[pos_];
    if (c == '"' || c == '\'') {
      size_t open = pos_++;
      while (!AtEnd() && s_[pos_] != c) {
        // \\ and \<quote> escape; other backslashes stay (for Unescape).
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == c || s_[pos_ + 1] == '\\'))
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

}  // namespace format_internal

std::optional<json> LookupKey(const json& resource, const std::string& key) {
  std::vector<format_internal::Segment> path;
  if (!format_internal::ParsePath(key, &path)) return std::nullopt;
  return format_internal::Lookup(resource, path, 0);
}

}  // namespace stoker::cli
