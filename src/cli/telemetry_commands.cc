// What a job's replicas used (docs/telemetry.md): the resource summary at the
// end of `stoker jobs describe`, and `stoker jobs top`.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "common/time.h"
#include "http/http.h"
#include "storage/transfer.h"

namespace stoker::cli {
namespace {

using nlohmann::json;

std::string Pct(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", j[key].get<double>());
  return buf;
}

std::string Bytes(double b) { return storage::HumanBytes(b, 1); }

// The mean of `key` over the GPUs of a summary or a point, as "NN%"; "-"
// when no GPU has it.
std::string GpuMean(const json& gpus, const char* key) {
  double sum = 0;
  int n = 0;
  for (const json& g : gpus) {
    if (g.contains(key) && g[key].is_number()) {
      sum += g[key].get<double>();
      ++n;
    }
  }
  if (n == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", sum / n);
  return buf;
}

// A throughput the trainer reports: the latest value of a training metric
// named examples_per_sec (or another *_per_sec / *_per_second), or "-".
std::string Throughput(const Result<json>& metrics) {
  if (!metrics.ok() || !metrics->contains("series")) return "-";
  for (const json& s : (*metrics)["series"]) {
    std::string name = s.value("name", "");
    auto ends = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (!(ends("per_sec") || ends("per_second") || ends("/s")) || !s.contains("points") ||
        s["points"].empty()) {
      continue;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g %s", s["points"].back().value("value", 0.0), name.c_str());
    return buf;
  }
  return "-";
}

}  // namespace

void PrintResourceSummary(Connection& conn, const Globals& g, const std::string& id) {
  const std::string base = JobsPath(g) + "/" + http::UrlEncode(id);
  Result<json> t = conn.Call("GET", base + "/telemetry");
  if (!t.ok() || !t->contains("replicas")) return;
  bool any = false;
  for (const json& r : (*t)["replicas"]) any = any || r.contains("summary");
  if (!any) return;
  Result<json> metrics = conn.Call("GET", base + "/trainingMetrics");
  std::cout << "Resources (attempt " << t->value("attempt", 1) << "):\n";
  std::printf("  %-16s %-9s %-9s %-10s %-10s %-8s %s\n", "REPLICA", "CPU UTIL", "MEM UTIL",
              "GPU UTIL", "GPU MEM", "SAMPLED", "THROUGHPUT");
  std::vector<std::string> flags;
  bool first = true;
  for (const json& r : (*t)["replicas"]) {
    if (!r.contains("summary")) continue;
    const json& s = r["summary"];
    // Of the booked CPUs when known, else of one core.
    std::string cpu =
        s.contains("cpuUtilPercent") ? Pct(s, "cpuUtilPercent") : Pct(s, "cpuPercent") + " of 1";
    std::printf(
        "  %-16s %-9s %-9s %-10s %-10s %-8s %s\n", r.value("replica", "?").c_str(), cpu.c_str(),
        Pct(s, "memoryUtilPercent").c_str(), GpuMean(s["gpus"], "utilPercent").c_str(),
        GpuMean(s["gpus"], "memoryUtilPercent").c_str(),
        Span(s.value("sampledSeconds", 0.0)).c_str(), first ? Throughput(metrics).c_str() : "-");
    first = false;
    for (const json& f : s["flags"])
      flags.push_back(r.value("replica", "?") + ": " + f.get<std::string>());
  }
  for (const std::string& f : flags) std::cout << "  ! " << f << "\n";
}

int Top(const Globals& g, double interval_seconds, bool once) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  // Live on a terminal; a single snapshot when piped (or --once).
  const bool live = !once && ::isatty(STDOUT_FILENO) && !Structured(g);
  while (true) {
    Result<json> top = (*conn)->Call("GET", "/v1/stoker/top");
    if (!top.ok()) return Report(top.status());
    if (Structured(g)) {
      PrintResource(g, *top);
      return 0;
    }
    if (live) std::cout << "\033[H\033[2J";  // home, clear: redraw in place
    std::printf("%-6s %-20s %-10s %-8s %-16s %-6s %-10s %-6s %-10s %s\n", "JOB", "NAME", "USER",
                "RUNTIME", "REPLICA", "CPU", "RSS", "GPU", "GPU MEM", "PROCS");
    const double now = static_cast<double>(NowMicros()) / 1e6;
    for (const json& j : (*top)["jobs"]) {
      double start = static_cast<double>(j.value("startTime", int64_t{0})) / 1e6;
      std::string runtime = start > 0 ? Span(now - start) : "-";
      bool first = true;
      for (const json& r : j["replicas"]) {
        json p = r.value("latest", json::object());
        std::string cpu = p.contains("cpuPercent") ? Pct(p, "cpuPercent") : "-";
        std::string rss = p.contains("rssBytes") ? Bytes(p["rssBytes"].get<double>()) : "-";
        double gpu_mem = 0;
        for (const json& gp : p.value("gpus", json::array()))
          gpu_mem += gp.value("memoryBytes", 0.0);
        std::string gpu_util = p.contains("gpus") ? GpuMean(p["gpus"], "utilPercent") : "-";
        if (gpu_util == "-" && p.contains("gpus"))
          gpu_util = GpuMean(p["gpus"], "deviceUtilPercent");
        std::printf(
            "%-6s %-20s %-10s %-8s %-16s %-6s %-10s %-6s %-10s %s\n",
            first ? std::to_string(j.value("id", int64_t{0})).c_str() : "",
            first ? j.value("displayName", "").substr(0, 20).c_str() : "",
            first ? j.value("user", "").substr(0, 10).c_str() : "", first ? runtime.c_str() : "",
            r.value("replica", "?").c_str(), cpu.c_str(), rss.c_str(), gpu_util.c_str(),
            p.contains("gpus") && !p["gpus"].empty() ? Bytes(gpu_mem).c_str() : "-",
            p.contains("processes") ? std::to_string(p["processes"].get<int>()).c_str() : "-");
        first = false;
      }
    }
    if ((*top)["jobs"].empty()) std::cout << "(no running jobs)\n";
    if (!live) return 0;
    std::cout << std::flush;
    std::this_thread::sleep_for(std::chrono::duration<double>(interval_seconds));
  }
}

}  // namespace stoker::cli
