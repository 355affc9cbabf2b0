// `stoker queue` and `stoker nodes`: the scheduler's views (api/cluster_routes.cc).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "common/time.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

std::string Cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n); }

// "in 1m58s", "in 3h05m", "now" for a start estimate; "unknown" without one.
std::string StartsIn(const json& job, int64_t now_us) {
  auto at = ParseRfc3339Micros(job.value("estimatedStartTime", ""));
  if (!at) return "unknown";
  int64_t s = (*at - now_us) / 1000000;
  if (s <= 0) return "now";
  return "in " + Span(static_cast<double>(s));
}

std::string Gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / double(1ull << 30));
  return buf;
}

}  // namespace

int Queue(const Globals& g) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto q = (*conn)->Call("GET", "/v1/stoker/queue");
  if (!q.ok()) return Report(q.status());
  if (Structured(g)) {
    PrintResource(g, *q);
    return 0;
  }
  const json& jobs = (*q)["jobs"];
  if (jobs.empty()) {
    std::cout << "The queue is empty.\n";
    return 0;
  }
  int64_t now = NowMicros();
  std::printf("%-4s %-6s %-20s %-10s %-5s %-20s %-12s %s\n", "POS", "ID", "NAME", "USER", "PRIO",
              "GPUS", "EST. START", "WHY IT WAITS");
  for (const json& j : jobs) {
    std::string prio = std::to_string(j.value("priority", 0));
    int64_t effective = j.value("effectivePriority", int64_t{0});
    if (effective != j.value("priority", 0))
      prio += "+" + std::to_string(effective - j.value("priority", 0));
    std::printf("%-4d %-6s %-20s %-10s %-5s %-20s %-12s %s\n", j.value("position", 0),
                j.value("jobId", "").c_str(), Cut(j.value("displayName", ""), 20).c_str(),
                Cut(j.value("user", ""), 10).c_str(), prio.c_str(),
                Cut(j.value("gpus", ""), 20).c_str(), StartsIn(j, now).c_str(),
                j.value("reason", "").c_str());
  }
  return 0;
}

int Nodes(const Globals& g) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto n = (*conn)->Call("GET", "/v1/stoker/nodes");
  if (!n.ok()) return Report(n.status());
  if (Structured(g)) {
    PrintResource(g, *n);
    return 0;
  }
  for (const json& node : (*n).value("nodes", json::array())) {
    double cpus = node.value("cpus", 0.0), over = node.value("cpu_oversubscription", 1.0);
    std::printf("%s: %.4g CPUs (%.4g booked of %.4g allowed), %s memory (%s booked)\n",
                node.value("name", "").c_str(), cpus, node.value("cpus_booked", 0.0), cpus * over,
                Gb(node.value("memory_bytes", 0.0)).c_str(),
                Gb(node.value("memory_booked_bytes", 0.0)).c_str());
    // Memory booked outside jobs (warm interpreters), to whom.
    for (const json& h : node.value("held", json::array())) {
      std::printf("  %s of user %s: %s booked\n", h.value("what", "").c_str(),
                  h.value("user", "").c_str(), Gb(h.value("memory_bytes", 0.0)).c_str());
    }
    const json& gpus = node.value("gpus", json::array());
    if (gpus.empty()) std::printf("  no GPUs\n");
    for (const json& gpu : gpus) {
      std::string line = "  GPU " + std::to_string(gpu.value("index", 0)) + "  " +
                         gpu.value("type", "") + "  " + Gb(gpu.value("memory_bytes", 0.0));
      if (gpu.contains("utilization_percent")) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "  %.0f%% busy, %s in use",
                      gpu.value("utilization_percent", 0.0),
                      Gb(gpu.value("memory_used_bytes", 0.0)).c_str());
        line += buf;
      }
      std::string held;
      for (const json& h : gpu.value("holders", json::array())) {
        if (!held.empty()) held += ", ";
        held += "job " + h.value("job", "") + " " + h.value("replica", "") + " (" +
                h.value("user", "") + ")";
        double f = h.value("fraction", 1.0);
        if (f < 1) {
          char buf[32];
          std::snprintf(buf, sizeof buf, " %.4g of it", f);
          held += buf;
        }
      }
      std::printf("%s  %s\n", line.c_str(), held.empty() ? "free" : ("running " + held).c_str());
    }
  }
  return 0;
}

void RegisterClusterCommands(CLI::App& app, Globals& g, int& rc) {
  app.add_subcommand("queue",
                     "The queue in the scheduler's order, with reasons and estimated starts")
      ->callback([&] { rc = Queue(g); });
  app.add_subcommand("nodes", "Nodes and GPUs, with what runs on each")->callback([&] {
    rc = Nodes(g);
  });
}

}  // namespace stoker::cli
