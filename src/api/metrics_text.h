// The Prometheus text exposition format (version 0.0.4): families with HELP
// and TYPE lines, samples with escaped label values. Pure.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stoker::api {

class MetricsText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family: `name` follows Prometheus' naming rules (the caller's
  // contract: [a-zA-Z_:][a-zA-Z0-9_:]*, base units, _total for counters);
  // `type` is gauge, counter or histogram.
  void Family(const std::string& name, const std::string& type, const std::string& help);
  // A sample of the current family.
  void Sample(const Labels& labels, double value);
  // The samples of one histogram of the current (histogram) family:
  // NAME_bucket{...,le="B"} for each bound B and le="+Inf", with cumulative
  // counts (`cumulative` has one more element than `upper_bounds`; its last
  // is the +Inf bucket and must equal `count`), then NAME_sum and NAME_count.
  void Histogram(const Labels& labels, const std::vector<double>& upper_bounds,
                 const std::vector<uint64_t>& cumulative, double sum, uint64_t count);

  const std::string& text() const { return text_; }

 private:
  void Line(const char* suffix, const Labels& labels, double value);

  std::string text_;
  std::string family_;
};

// A label value as the format writes it: backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);
// A number as the format writes it: the shortest text that reads back as
// `value` ("0.25", "1e-05", "3"), "NaN", "+Inf", "-Inf".
std::string FormatMetricValue(double value);

}  // namespace stoker::api
