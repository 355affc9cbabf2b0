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
  // `type` is gauge or counter.
  void Family(const std::string& name, const std::string& type, const std::string& help);
  // A sample of the current family.
  void Sample(const Labels& labels, double value);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string family_;
};

// A label value as the format writes it: backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);

}  // namespace stoker::api
