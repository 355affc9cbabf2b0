// gcloud's global flags hoisted from anywhere on a command line, and
// "did you mean" suggestions (output_format.h).
#include <algorithm>

#include "cli/output_format.h"
#include "cli/output_format_internal.h"

namespace stoker::cli {

using format_internal::Lower;
using nlohmann::json;

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
