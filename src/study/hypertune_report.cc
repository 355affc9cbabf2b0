#include "study/hypertune_report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace stoker::study {

HypertuneReports ParseHypertuneReports(std::string_view text) {
  using nlohmann::json;
  HypertuneReports out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    if (line.empty()) continue;
    // A report is one flat object: anything nested deeper is not one.
    if (std::count(line.begin(), line.end(), '{') + std::count(line.begin(), line.end(), '[') > 8) {
      out.skipped_nested = true;
      continue;
    }
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    HypertuneReport& r = out.reports.emplace_back();
    for (const auto& [key, value] : j.items()) {
      if (key == "timestamp") {
        if (value.is_number()) r.timestamp = value.get<double>();
      } else if (key == "global_step") {
        r.global_step = value.is_string() ? value.get<std::string>() : value.dump();
      } else if (key != "trial" && key != "checkpoint_path") {
        if (value.is_number()) {
          r.values.emplace_back(key, value.get<double>());
        } else if (value.is_string()) {
          // cloudml-hypertune writes values as strings.
          const std::string& s = value.get_ref<const std::string&>();
          char* end = nullptr;
          double v = std::strtod(s.c_str(), &end);
          if (end != s.c_str()) r.values.emplace_back(key, v);
        }
      }
    }
  }
  return out;
}

}  // namespace stoker::study
