// `stoker jobs metrics JOB`: a job's training metrics (hypertune reports and
// TensorBoard scalars; docs/training-metrics.md) as one line per series.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "http/http.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

// A value for a table cell: up to 6 significant digits.
std::string CellNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Names and reasons come from a trainer's files: no terminal control
// characters reach the screen (the daemon strips them too).
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  return out;
}

// Who wrote a TensorBoard series when several processes share the log
// directory: its replica ("workerpool1-0", "workerpool1-0 (attempt 1)"),
// else its writer ("node-1 pid 4242"); "" when one writer wrote them all.
std::string WrittenBy(const json& series) {
  return Printable(series.value("replica", series.value("writer", "")));
}

}  // namespace

int JobMetrics(const Globals& g, const std::string& id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto m = (*conn)->Call("GET", JobsPath(g) + "/" + http::UrlEncode(id) + "/trainingMetrics");
  if (!m.ok()) return Report(m.status());
  if (Structured(g)) {
    PrintResource(g, *m);
    return 0;
  }
  const json& series = (*m)["series"];
  if (series.empty()) {
    std::cout << "Job " << id
              << " has no training metrics yet (hypertune reports or TensorBoard scalars under "
                 "$AIP_TENSORBOARD_LOG_DIR)\n";
  } else {
    size_t width = 4;
    size_t writer_width = 0;  // 0: no WRITER column (one writer, or hypertune only)
    for (const json& s : series) {
      width = std::max(width, s.value("name", "").size());
      if (!WrittenBy(s).empty())
        writer_width = std::max({writer_width, WrittenBy(s).size(), size_t{6}});
    }
    width = std::min<size_t>(width, 60);
    writer_width = std::min<size_t>(writer_width, 40);
    // The WRITER column (when any series has one) names the replica or
    // process of each TensorBoard series: three replicas logging `loss`
    // are three lines told apart by it.
    auto writer_cell = [&](const std::string& v) {
      if (writer_width == 0) return std::string();
      std::string cell = v.empty() ? "-" : v.substr(0, writer_width);
      return cell + std::string(writer_width - cell.size() + 1, ' ');
    };
    std::printf("%-*s %-11s %s%6s %10s %12s %12s %12s\n", static_cast<int>(width), "NAME", "SOURCE",
                writer_cell("WRITER").c_str(), "POINTS", "LAST_STEP", "LAST", "MIN", "MAX");
    for (const json& s : series) {
      const json& points = s["points"];
      if (points.empty()) continue;
      double lo = points[0].value("value", 0.0), hi = lo;
      for (const json& p : points) {
        lo = std::min(lo, p.value("value", 0.0));
        hi = std::max(hi, p.value("value", 0.0));
      }
      const json& last = points.back();
      std::printf("%-*s %-11s %s%6zu %10lld %12s %12s %12s\n", static_cast<int>(width),
                  Printable(s.value("name", "")).c_str(), s.value("source", "").c_str(),
                  writer_cell(WrittenBy(s)).c_str(), points.size(),
                  static_cast<long long>(last.value("step", int64_t{0})),
                  CellNumber(last.value("value", 0.0)).c_str(), CellNumber(lo).c_str(),
                  CellNumber(hi).c_str());
    }
  }
  for (const json& k : (*m)["skipped"]) {
    std::cout << "skipped " << Printable(k.value("file", "")) << ": "
              << Printable(k.value("reason", "")) << "\n";
  }
  return 0;
}

void PrintTrainingMetricsSummary(Connection& conn, const Globals& g, const std::string& id) {
  constexpr size_t kMaxShown = 8;
  auto m =
      conn.Call("GET", JobsPath(g) + "/" + http::UrlEncode(id) + "/trainingMetrics?maxPoints=2");
  if (!m.ok() || !(*m)["series"].is_array() || (*m)["series"].empty()) return;
  std::string line;
  size_t shown = 0;
  for (const json& s : (*m)["series"]) {
    if (s["points"].empty()) continue;
    if (shown++ == kMaxShown) {
      line += ", ...";
      break;
    }
    const json& last = s["points"].back();
    const std::string by = WrittenBy(s);
    line += (line.empty() ? "" : ", ") + Printable(s.value("name", "")) +
            (by.empty() ? "" : " [" + by + "]") + " " + CellNumber(last.value("value", 0.0)) +
            " (step " + std::to_string(last.value("step", int64_t{0})) + ")";
  }
  if (!line.empty())
    std::cout << "  metrics:  " << line << "  (stoker jobs metrics " << id << ")\n";
}

}  // namespace stoker::cli
