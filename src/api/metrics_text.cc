#include "api/metrics_text.h"

#include <cmath>
#include <cstdio>

namespace stoker::api {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void MetricsText::Family(const std::string& name, const std::string& type,
                         const std::string& help) {
  family_ = name;
  std::string escaped_help;
  for (char c : help) {
    if (c == '\\') {
      escaped_help += "\\\\";
    } else if (c == '\n') {
      escaped_help += "\\n";
    } else {
      escaped_help += c;
    }
  }
  text_ += "# HELP " + name + " " + escaped_help + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsText::Sample(const Labels& labels, double value) {
  text_ += family_;
  if (!labels.empty()) {
    text_ += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      text_ += (i ? "," : "") + labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    text_ += "}";
  }
  char buf[64];
  if (std::isnan(value)) {
    std::snprintf(buf, sizeof buf, "NaN");
  } else if (std::isinf(value)) {
    std::snprintf(buf, sizeof buf, value > 0 ? "+Inf" : "-Inf");
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", value);
  }
  text_ += " " + std::string(buf) + "\n";
}

}  // namespace stoker::api
