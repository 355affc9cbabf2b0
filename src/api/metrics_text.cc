#include "api/metrics_text.h"

#include <charconv>
#include <cmath>

namespace stoker::api {

namespace {

// `value` with backslash, double quote and newline escaped, appended to `out`.
void AppendEscaped(const std::string& value, std::string& out) {
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
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  AppendEscaped(value, out);
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

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

void MetricsText::Line(const char* suffix, const Labels& labels, double value) {
  // Appends in place: a scrape writes thousands of lines.
  text_ += family_;
  text_ += suffix;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) text_ += ',';
      text_ += labels[i].first;
      text_ += "=\"";
      AppendEscaped(labels[i].second, text_);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += FormatMetricValue(value);
  text_ += '\n';
}

void MetricsText::Sample(const Labels& labels, double value) { Line("", labels, value); }

void MetricsText::Histogram(const Labels& labels, const std::vector<double>& upper_bounds,
                            const std::vector<uint64_t>& cumulative, double sum, uint64_t count) {
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i < cumulative.size(); ++i) {
    with_le.back().second = i < upper_bounds.size() ? FormatMetricValue(upper_bounds[i]) : "+Inf";
    Line("_bucket", with_le, static_cast<double>(cumulative[i]));
  }
  Line("_sum", labels, sum);
  Line("_count", labels, static_cast<double>(count));
}

}  // namespace stoker::api
