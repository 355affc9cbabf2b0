// The one reader of cloudml-hypertune's report lines (CLOUD_ML_HP_METRIC_FILE
// and the measurements trials push): one flat JSON object per line,
// {"timestamp": t, "global_step": "n", "<metric>": "<value>", "trial": ..,
// "checkpoint_path": ..}, values written as strings or numbers. The study
// driver turns reports into measurements (study_logic.h), the API into
// metric series (api/training_metrics_routes.cc). Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stoker::study {

struct HypertuneReport {
  std::optional<double> timestamp;  // seconds since the epoch, when a number
  std::string global_step;          // as written (a number's JSON text); "" = absent
  // Each other key whose value is a number or a string that starts with
  // one (strtod), in the line's order; the value may be non-finite.
  std::vector<std::pair<std::string, double>> values;
};

struct HypertuneReports {
  std::vector<HypertuneReport> reports;  // one per line that is a JSON object, in order
  // Lines left out because they nest more than a flat report can (they are
  // not handed to the recursive JSON parser).
  bool skipped_nested = false;
};

// Lines that are not JSON objects (a torn write) are skipped silently.
HypertuneReports ParseHypertuneReports(std::string_view text);

}  // namespace stoker::study
