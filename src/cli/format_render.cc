// Rendering resources in each --format: YAML, flattened, table, value, csv
// and list (FormatResource, FormatList in output_format.h).
#include <algorithm>
#include <cctype>

#include "cli/output_format.h"
#include "cli/output_format_internal.h"

namespace stoker::cli {

using format_internal::ColumnValue;
using format_internal::CompareValues;
using format_internal::Lower;
using format_internal::ParseNumber;
using format_internal::ParsePath;
using format_internal::ScalarText;
using format_internal::Segment;
using format_internal::Stringify;
using format_internal::Upper;
using nlohmann::json;

namespace {

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

}  // namespace stoker::cli
