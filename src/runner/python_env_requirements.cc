// Requirements (python_env.h): checking them, and reading those a package
// declares without running any of its code.
#include <sys/stat.h>

#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/files.h"
#include "runner/python_env.h"
#include "runner/python_env_text.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using env_text::Join;
using env_text::Lines;
using env_text::Trim;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A line without its comment (`#` to the end).
std::string_view Uncomment(std::string_view line) {
  size_t hash = line.find('#');
  return hash == std::string_view::npos ? line : line.substr(0, hash);
}

// Parses a literal list of string literals starting at text[*pos] ('[' or
// '('), Python's or TOML's: quoted strings (' or "), commas, whitespace and
// # comments. nullopt for anything else (a name, a call, a triple quote).
std::optional<std::vector<std::string>> ParseStringList(std::string_view text, size_t* pos) {
  size_t i = *pos;
  if (i >= text.size() || (text[i] != '[' && text[i] != '(')) return std::nullopt;
  const char close = text[i] == '[' ? ']' : ')';
  ++i;
  std::vector<std::string> out;
  bool want_item = true;
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == close) {
      *pos = i + 1;
      return out;
    } else if (c == ',') {
      if (want_item) return std::nullopt;
      want_item = true;
      ++i;
    } else if (c == '"' || c == '\'') {
      if (!want_item) return std::nullopt;
      if (text.substr(i, 3) == std::string(3, c)) return std::nullopt;
      std::string s;
      ++i;
      while (i < text.size() && text[i] != c && text[i] != '\n') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        s += text[i++];
      }
      if (i >= text.size() || text[i] != c) return std::nullopt;
      ++i;
      out.push_back(std::string(Trim(s)));
      want_item = false;
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::string> CheckRequirement(std::string_view text) {
  std::string_view r = Trim(text);
  std::string shown(r.substr(0, 80));
  if (r.empty()) return InvalidArgument("an empty requirement");
  if (r.size() > 256) return InvalidArgument("requirement '" + shown + "...' is too long");
  if (!std::isalnum(static_cast<unsigned char>(r[0]))) {
    return InvalidArgument("requirement '" + shown +
                           "' must start with a distribution name (e.g. numpy>=1.24)");
  }
  for (char c : r) {
    if (c == '@' || c == '/' || c == '\\' || c == ':') {
      return InvalidArgument("requirement '" + shown +
                             "' is a direct reference (a URL or a path); give a name and "
                             "version (e.g. numpy>=1.24) and put its wheel in the wheelhouse");
    }
    bool ok = std::isalnum(static_cast<unsigned char>(c)) ||
              std::string_view(" ._-[],<>=!~*+;()'\"").find(c) != std::string_view::npos;
    if (!ok) {
      return InvalidArgument("requirement '" + shown + "' holds '" + std::string(1, c) +
                             "', which no requirement has");
    }
  }
  return std::string(r);
}

Result<std::vector<std::string>> NormaliseRequirements(const std::vector<std::string>& requirements,
                                                       const std::string& where) {
  std::set<std::string> out;
  for (const std::string& r : requirements) {
    Result<std::string> checked = CheckRequirement(r);
    if (!checked.ok()) return InvalidArgument(where + checked.status().message());
    out.insert(*checked);
  }
  return std::vector<std::string>(out.begin(), out.end());
}

std::vector<std::string> ParseRequiresTxt(std::string_view text) {
  std::vector<std::string> out;
  std::string marker;  // of the current section; "-" = an extra's (skipped)
  for (std::string_view line : Lines(text)) {
    std::string_view l = Trim(Uncomment(line));
    if (l.empty()) continue;
    if (l.front() == '[' && l.back() == ']') {
      std::string_view section = Trim(l.substr(1, l.size() - 2));
      marker =
          section.empty() ? "" : (section.front() == ':' ? std::string(section.substr(1)) : "-");
      continue;
    }
    if (marker == "-") continue;
    out.push_back(marker.empty() ? std::string(l) : std::string(l) + "; " + marker);
  }
  return out;
}

std::vector<std::string> ParseRequiresDist(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view line : Lines(text)) {
    if (Trim(line).empty()) break;  // the headers end; the description follows
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || Lower(line.substr(0, colon)) != "requires-dist")
      continue;
    std::string_view value = Trim(line.substr(colon + 1));
    size_t semi = value.find(';');
    if (semi != std::string_view::npos) {
      std::string marker = Lower(value.substr(semi + 1));
      marker.erase(std::remove(marker.begin(), marker.end(), ' '), marker.end());
      if (marker.find("extra==") != std::string::npos) continue;
    }
    if (!value.empty()) out.emplace_back(value);
  }
  return out;
}

std::optional<std::vector<std::string>> ParseSetupPyRequires(std::string_view text) {
  const std::string_view kKey = "install_requires";
  size_t at = 0;
  bool named = false;
  while ((at = text.find(kKey, at)) != std::string_view::npos) {
    size_t i = at + kKey.size();
    at = i;
    // The start of a line up to here must not be a comment.
    size_t bol = text.rfind('\n', at);
    bol = bol == std::string_view::npos ? 0 : bol + 1;
    if (text.substr(bol, at - bol).find('#') != std::string_view::npos) continue;
    if (i < text.size() && (text[i] == '"' || text[i] == '\'')) ++i;  // a dict key
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size() || (text[i] != '=' && text[i] != ':')) continue;
    if (text[i] == '=' && i + 1 < text.size() && text[i + 1] == '=') continue;
    named = true;
    ++i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::optional<std::vector<std::string>> list = ParseStringList(text, &i);
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    // A literal followed by more (`[...] + extra`) is only part of the list.
    if (list && (i >= text.size() || (text[i] != '+' && text[i] != '*'))) return list;
  }
  if (named) return std::nullopt;
  return std::vector<std::string>{};
}

std::vector<std::string> ParseSetupCfgRequires(std::string_view text) {
  std::vector<std::string> out;
  bool in_options = false, in_value = false;
  for (std::string_view line : Lines(text)) {
    std::string_view l = Trim(line);
    bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    if (in_value) {
      if (indented || l.empty()) {
        std::string_view v = Trim(Uncomment(l));
        if (!v.empty()) out.emplace_back(v);
        continue;
      }
      in_value = false;
    }
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l.front() == '[') {
      in_options = l == "[options]";
      continue;
    }
    if (!in_options || indented) continue;
    size_t eq = l.find_first_of("=:");
    if (eq == std::string_view::npos || Trim(l.substr(0, eq)) != "install_requires") continue;
    std::string_view v = Trim(Uncomment(l.substr(eq + 1)));
    if (!v.empty()) out.emplace_back(v);
    in_value = true;
  }
  return out;
}

std::optional<std::vector<std::string>> ParsePyprojectDependencies(std::string_view text) {
  bool in_project = false;
  size_t offset = 0;
  for (std::string_view line : Lines(text)) {
    size_t line_start = offset;
    offset += line.size() + 1;
    std::string_view l = Trim(Uncomment(line));
    if (l.empty()) continue;
    if (l.front() == '[') {
      in_project = l == "[project]";
      continue;
    }
    if (!in_project) continue;
    size_t eq = l.find('=');
    if (eq == std::string_view::npos || Trim(l.substr(0, eq)) != "dependencies") continue;
    size_t i = text.find('=', line_start) + 1;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    return ParseStringList(text, &i);
  }
  return std::vector<std::string>{};
}

DeclaredRequirements ReadDeclaredRequirements(const fs::path& root) {
  DeclaredRequirements out;
  std::error_code ec;
  // Root reads these in a package it unpacked: a link is never followed
  // (the archive rules keep links inside, and this does not rely on them).
  auto read = [](const fs::path& p) -> std::optional<std::string> {
    std::error_code e;
    if (!fs::is_regular_file(fs::symlink_status(p, e))) return std::nullopt;
    Result<std::string> text = ReadFile(p);
    if (!text.ok()) return std::nullopt;
    return std::move(*text);
  };
  // setuptools' own record of the sdist's metadata.
  std::vector<fs::path> egg_infos;
  for (const fs::path& dir : {root, root / "src"}) {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".egg-info" && !it->is_symlink(ec) && it->is_directory(ec)) {
        egg_infos.push_back(it->path());
      }
    }
  }
  std::sort(egg_infos.begin(), egg_infos.end());
  std::vector<std::string> sources;
  for (const fs::path& e : egg_infos) {
    if (auto text = read(e / "requires.txt")) {
      for (std::string& r : ParseRequiresTxt(*text)) out.requirements.push_back(std::move(r));
      sources.push_back((e / "requires.txt").lexically_relative(root).string());
    }
  }
  if (sources.empty() && !egg_infos.empty()) {
    // An egg-info without requires.txt: the package requires nothing.
    out.source = egg_infos[0].lexically_relative(root).string();
    return out;
  }
  if (sources.empty()) {
    if (auto text = read(root / "PKG-INFO")) {
      out.requirements = ParseRequiresDist(*text);
      if (!out.requirements.empty()) sources.push_back("PKG-INFO");
    }
  }
  if (sources.empty()) {
    if (auto text = read(root / "setup.cfg")) {
      std::vector<std::string> r = ParseSetupCfgRequires(*text);
      if (!r.empty()) sources.push_back("setup.cfg");
      out.requirements.insert(out.requirements.end(), r.begin(), r.end());
    }
    if (auto text = read(root / "pyproject.toml")) {
      std::optional<std::vector<std::string>> r = ParsePyprojectDependencies(*text);
      if (!r) {
        out.note = "pyproject.toml's [project] dependencies are not a list of strings";
      } else if (!r->empty()) {
        sources.push_back("pyproject.toml");
        out.requirements.insert(out.requirements.end(), r->begin(), r->end());
      }
    }
    if (auto text = read(root / "setup.py")) {
      std::optional<std::vector<std::string>> r = ParseSetupPyRequires(*text);
      if (!r) {
        out.note =
            "setup.py's install_requires is not a literal list of strings, and setup.py is "
            "never run: its requirements are not installed (build the package with `python3 "
            "setup.py sdist`, whose egg-info lists them, or write them as a literal list)";
      } else if (!r->empty()) {
        sources.push_back("setup.py");
        out.requirements.insert(out.requirements.end(), r->begin(), r->end());
      }
    }
  }
  out.source = Join(sources, ", ");
  return out;
}

}  // namespace stoker::runner
