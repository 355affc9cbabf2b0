#include "admission/trainer_imports.h"

#include <algorithm>

namespace stoker::admission {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The dotted name at the start of `s` (after spaces), or "" for none.
std::string_view DottedName(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  size_t e = b;
  while (e < s.size() && (IsNameChar(s[e]) || s[e] == '.')) ++e;
  return s.substr(b, e - b);
}

std::string TopLevel(std::string_view dotted) {
  return std::string(dotted.substr(0, dotted.find('.')));
}

}  // namespace

std::vector<ModuleImport> ModuleLevelImports(std::string_view source) {
  std::vector<ModuleImport> out;
  auto add = [&out](std::string_view dotted, int line) {
    if (dotted.empty() || dotted[0] == '.' || !IsNameChar(dotted[0])) return;
    std::string module = TopLevel(dotted);
    if (std::none_of(out.begin(), out.end(),
                     [&](const ModuleImport& m) { return m.module == module; })) {
      out.push_back({std::move(module), line});
    }
  };
  int line_no = 0;
  size_t pos = 0;
  while (pos <= source.size()) {
    size_t end = source.find('\n', pos);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(pos, end - pos);
    ++line_no;
    pos = end + 1;
    if (line.substr(0, 7) == "import " || line.substr(0, 7) == "import\t") {
      // import a.b, c as d  (a trailing comment or ; ends the list)
      std::string_view rest = line.substr(7);
      rest = rest.substr(0, std::min(rest.find('#'), rest.find(';')));
      while (!rest.empty()) {
        add(DottedName(rest), line_no);
        size_t comma = rest.find(',');
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    } else if (line.substr(0, 5) == "from " || line.substr(0, 5) == "from\t") {
      std::string_view rest = line.substr(5);
      size_t b = rest.find_first_not_of(" \t");
      if (b != std::string_view::npos && rest[b] == '.') continue;  // relative
      add(DottedName(rest), line_no);
    }
    if (end == source.size()) break;
  }
  return out;
}

bool IsModuleFile(std::string_view member, std::string_view module) {
  if (module.empty()) return false;
  std::string file(module);
  std::replace(file.begin(), file.end(), '.', '/');
  file += ".py";
  if (member == file) return true;
  // One root directory above it (an sdist's NAME-VERSION/), no more.
  size_t slash = member.find('/');
  return slash != std::string_view::npos && member.substr(slash + 1) == file;
}

}  // namespace stoker::admission
