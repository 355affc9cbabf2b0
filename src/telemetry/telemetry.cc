#include "telemetry/telemetry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace stoker::telemetry {
namespace {

using nlohmann::json;

// A number field of `j`, or `fallback` when absent or not a finite number.
double Num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  double v = it->get<double>();
  return std::isfinite(v) ? v : fallback;
}
uint64_t Bytes(const json& j, const char* key) {
  double v = Num(j, key);
  return v > 0 && v < 1.8e19 ? static_cast<uint64_t>(v) : 0;
}
std::optional<double> OptNum(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>())) return std::nullopt;
  return it->get<double>();
}

// Time-weighted mean of a and b over wa and wb.
double Mean(double a, double wa, double b, double wb) {
  return wa + wb > 0 ? (a * wa + b * wb) / (wa + wb) : (a + b) / 2;
}
uint64_t MeanBytes(uint64_t a, double wa, uint64_t b, double wb) {
  return static_cast<uint64_t>(
      std::llround(Mean(static_cast<double>(a), wa, static_cast<double>(b), wb)));
}
std::optional<double> MeanOpt(std::optional<double> a, double wa, std::optional<double> b,
                              double wb) {
  if (a && b) return Mean(*a, wa, *b, wb);
  return a ? a : b;
}

std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", v);
  return buf;
}

}  // namespace

json PointJson(const Point& p) {
  json gpus = json::array();
  for (const GpuPoint& g : p.gpus) {
    json j = {{"index", g.index},
              {"memoryBytes", g.memory_bytes},
              {"deviceUtilPercent", g.device_util_percent},
              {"deviceMemoryBytes", g.device_memory_bytes},
              {"deviceMemoryTotalBytes", g.device_memory_total_bytes}};
    if (g.util_percent) j["utilPercent"] = *g.util_percent;
    if (g.power_watts) j["powerWatts"] = *g.power_watts;
    if (g.energy_joules) j["energyJoules"] = *g.energy_joules;
    gpus.push_back(std::move(j));
  }
  json out = {{"t", p.t},
              {"dt", p.dt},
              {"cpuPercent", p.cpu_percent},
              {"rssBytes", p.rss_bytes},
              {"rssMaxBytes", p.rss_max_bytes},
              {"processes", p.processes},
              {"cpus", p.cpus},
              {"memoryBookedBytes", p.memory_booked_bytes},
              {"machineCpuPercent", p.machine_cpu_percent},
              {"machineMemoryUsedBytes", p.machine_memory_used_bytes},
              {"machineMemoryTotalBytes", p.machine_memory_total_bytes},
              {"samplerCpuSeconds", p.sampler_cpu_seconds},
              {"gpus", std::move(gpus)}};
  if (!p.new_pids.empty()) out["newPids"] = p.new_pids;
  return out;
}

std::string FormatPoint(const Point& p) { return PointJson(p).dump(); }

std::optional<Point> ParsePoint(std::string_view line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("t")) return std::nullopt;
  Point p;
  p.t = Num(j, "t");
  p.dt = std::max(0.0, Num(j, "dt"));
  p.cpu_percent = std::max(0.0, Num(j, "cpuPercent"));
  p.rss_bytes = Bytes(j, "rssBytes");
  p.rss_max_bytes = std::max(p.rss_bytes, Bytes(j, "rssMaxBytes"));
  p.processes = static_cast<int>(std::clamp(Num(j, "processes"), 0.0, 1e9));
  p.cpus = std::max(0.0, Num(j, "cpus"));
  p.memory_booked_bytes = Bytes(j, "memoryBookedBytes");
  p.machine_cpu_percent = std::max(0.0, Num(j, "machineCpuPercent"));
  p.machine_memory_used_bytes = Bytes(j, "machineMemoryUsedBytes");
  p.machine_memory_total_bytes = Bytes(j, "machineMemoryTotalBytes");
  p.sampler_cpu_seconds = std::max(0.0, Num(j, "samplerCpuSeconds"));
  if (auto g = j.find("gpus"); g != j.end() && g->is_array()) {
    for (const json& e : *g) {
      if (!e.is_object()) continue;
      GpuPoint gp;
      gp.index = static_cast<int>(std::clamp(Num(e, "index"), 0.0, 1e6));
      gp.util_percent = OptNum(e, "utilPercent");
      gp.memory_bytes = Bytes(e, "memoryBytes");
      gp.device_util_percent = Num(e, "deviceUtilPercent");
      gp.device_memory_bytes = Bytes(e, "deviceMemoryBytes");
      gp.device_memory_total_bytes = Bytes(e, "deviceMemoryTotalBytes");
      gp.power_watts = OptNum(e, "powerWatts");
      gp.energy_joules = OptNum(e, "energyJoules");
      p.gpus.push_back(gp);
    }
  }
  if (auto n = j.find("newPids"); n != j.end() && n->is_array()) {
    for (const json& e : *n) {
      if (p.new_pids.size() >= kMaxNewPids) break;
      if (e.is_number_integer() && e.get<int64_t>() > 0) p.new_pids.push_back(e.get<int64_t>());
    }
  }
  return p;
}

std::vector<int64_t> ProcessesSeen(const std::vector<Point>& points) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (const Point& p : points) {
    for (int64_t pid : p.new_pids) {
      if (seen.insert(pid).second) out.push_back(pid);
    }
  }
  return out;
}

std::vector<Point> ParsePoints(std::string_view text) {
  std::vector<Point> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (std::optional<Point> p = ParsePoint(line)) out.push_back(std::move(*p));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

Point Merge(const Point& a, const Point& b) {
  const double wa = a.dt, wb = b.dt;
  Point m = b;  // time, booked figures and cumulative counters are the newer's
  m.dt = wa + wb;
  m.cpu_percent = Mean(a.cpu_percent, wa, b.cpu_percent, wb);
  m.rss_bytes = MeanBytes(a.rss_bytes, wa, b.rss_bytes, wb);
  m.rss_max_bytes = std::max(a.rss_max_bytes, b.rss_max_bytes);
  m.processes = std::max(a.processes, b.processes);
  // The earliest first, up to the bound.
  m.new_pids.assign(a.new_pids.begin(), a.new_pids.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                 a.new_pids.size(), kMaxNewPids)));
  for (int64_t pid : b.new_pids) {
    if (m.new_pids.size() >= kMaxNewPids) break;
    m.new_pids.push_back(pid);
  }
  m.machine_cpu_percent = Mean(a.machine_cpu_percent, wa, b.machine_cpu_percent, wb);
  m.machine_memory_used_bytes =
      MeanBytes(a.machine_memory_used_bytes, wa, b.machine_memory_used_bytes, wb);
  for (GpuPoint& g : m.gpus) {
    auto old = std::find_if(a.gpus.begin(), a.gpus.end(),
                            [&](const GpuPoint& o) { return o.index == g.index; });
    if (old == a.gpus.end()) continue;
    g.util_percent = MeanOpt(old->util_percent, wa, g.util_percent, wb);
    g.memory_bytes = MeanBytes(old->memory_bytes, wa, g.memory_bytes, wb);
    g.device_util_percent = Mean(old->device_util_percent, wa, g.device_util_percent, wb);
    g.device_memory_bytes = MeanBytes(old->device_memory_bytes, wa, g.device_memory_bytes, wb);
    g.power_watts = MeanOpt(old->power_watts, wa, g.power_watts, wb);
  }
  return m;
}

void Compact(std::vector<Point>& points) {
  if (points.size() <= kMaxPoints) return;
  const size_t old_end = points.size() - kKeepRecent;
  std::vector<Point> out;
  out.reserve(old_end / 2 + kKeepRecent + 1);
  size_t i = 0;
  for (; i + 1 < old_end; i += 2) out.push_back(Merge(points[i], points[i + 1]));
  for (; i < points.size(); ++i) out.push_back(std::move(points[i]));
  points = std::move(out);
}

double ReplicaGpuPercent(const GpuPoint& g, double share) {
  return g.util_percent ? *g.util_percent : g.device_util_percent * share;
}

GpuUse UseOfGpus(const std::vector<Point>& points, const std::function<double(int)>& share_of) {
  GpuUse use;
  std::map<int, std::optional<double>> energy;  // each GPU's last counter (nullopt: none)
  for (const Point& p : points) {
    if (p.gpus.empty()) continue;
    use.sampled_s += p.dt;
    for (const GpuPoint& g : p.gpus) {
      use.busy_gpu_s += ReplicaGpuPercent(g, share_of(g.index)) / 100 * p.dt;
      if (g.energy_joules) {
        energy[g.index] = g.energy_joules;
      } else {
        energy.try_emplace(g.index);
      }
    }
  }
  if (energy.empty()) return use;
  double joules = 0;
  for (const auto& [index, j] : energy) {
    if (!j) return use;
    joules += *j * share_of(index);
  }
  use.energy_j = joules;
  return use;
}

std::optional<Summary> Summarize(const std::vector<Point>& points) {
  if (points.empty()) return std::nullopt;
  Summary s;
  double cpu = 0, rss = 0;
  for (const Point& p : points) {
    s.sampled_seconds += p.dt;
    cpu += p.cpu_percent * p.dt;
    rss += static_cast<double>(p.rss_bytes) * p.dt;
    s.rss_max_bytes = std::max(s.rss_max_bytes, p.rss_max_bytes);
  }
  const double w = s.sampled_seconds > 0 ? s.sampled_seconds : 1;
  s.cpu_percent = cpu / w;
  s.rss_mean_bytes = static_cast<uint64_t>(rss / w);
  const Point& last = points.back();
  s.sampler_cpu_seconds = last.sampler_cpu_seconds;
  if (last.cpus > 0) s.cpu_util_percent = s.cpu_percent / last.cpus;
  if (last.memory_booked_bytes > 0) {
    s.memory_util_percent = 100.0 * static_cast<double>(s.rss_max_bytes) /
                            static_cast<double>(last.memory_booked_bytes);
  }

  // GPUs in the order they first appear.
  for (const Point& p : points) {
    for (const GpuPoint& g : p.gpus) {
      auto it = std::find_if(s.gpus.begin(), s.gpus.end(),
                             [&](const GpuSummary& x) { return x.index == g.index; });
      if (it == s.gpus.end()) s.gpus.push_back({g.index});
    }
  }
  for (GpuSummary& gs : s.gpus) {
    double util = 0, util_w = 0, mem = 0, mem_w = 0, watts = 0, watts_w = 0, idle = 0, seen = 0;
    for (const Point& p : points) {
      for (const GpuPoint& g : p.gpus) {
        if (g.index != gs.index) continue;
        seen += p.dt;
        // The replica's own use where NVML sampled it, else the device's.
        double u = ReplicaGpuPercent(g, 1);
        util += u * p.dt;
        util_w += p.dt;
        if (u < kIdleGpuPercent) idle += p.dt;
        if (g.device_memory_total_bytes > 0) {
          mem += 100.0 * static_cast<double>(g.memory_bytes) /
                 static_cast<double>(g.device_memory_total_bytes) * p.dt;
          mem_w += p.dt;
        }
        gs.memory_max_bytes = std::max(gs.memory_max_bytes, g.memory_bytes);
        if (g.power_watts) {
          watts += *g.power_watts * p.dt;
          watts_w += p.dt;
        }
      }
    }
    if (util_w > 0) gs.util_percent = util / util_w;
    if (mem_w > 0) gs.memory_util_percent = mem / mem_w;
    if (watts_w > 0) gs.power_watts = watts / watts_w;
    gs.idle_share = seen > 0 ? idle / seen : 0;
  }

  // Waste and risk, as cluster job-stats reports word them. A run of a few
  // samples says too little to judge.
  if (points.size() >= 3) {
    for (const GpuSummary& g : s.gpus) {
      if (g.idle_share >= 0.5) {
        s.flags.push_back("GPU " + std::to_string(g.index) + " was under " +
                          Percent(kIdleGpuPercent) + " busy for " + Percent(100 * g.idle_share) +
                          " of the run: check the input pipeline (more DataLoader workers, "
                          "a larger batch), or ask for a smaller or shared GPU");
      }
    }
    if (s.cpu_util_percent && last.cpus >= 2 && *s.cpu_util_percent < 25) {
      s.flags.push_back("CPUs: " + Percent(*s.cpu_util_percent) + " of the " +
                        std::to_string(static_cast<int>(last.cpus)) +
                        " booked were used: a smaller machine type would do");
    }
    if (s.memory_util_percent && *s.memory_util_percent > 90) {
      s.flags.push_back("memory: the peak was " + Percent(*s.memory_util_percent) +
                        " of the booked memory: a larger machine type avoids running out");
    }
  }
  return s;
}

json SummaryJson(const Summary& s) {
  json gpus = json::array();
  for (const GpuSummary& g : s.gpus) {
    json j = {{"index", g.index},
              {"memoryUtilPercent", g.memory_util_percent},
              {"memoryMaxBytes", g.memory_max_bytes},
              {"idleShare", g.idle_share}};
    if (g.util_percent) j["utilPercent"] = *g.util_percent;
    if (g.power_watts) j["powerWatts"] = *g.power_watts;
    gpus.push_back(std::move(j));
  }
  json j = {{"sampledSeconds", s.sampled_seconds},
            {"cpuPercent", s.cpu_percent},
            {"rssMeanBytes", s.rss_mean_bytes},
            {"rssMaxBytes", s.rss_max_bytes},
            {"gpus", std::move(gpus)},
            {"samplerCpuSeconds", s.sampler_cpu_seconds},
            {"flags", s.flags}};
  if (s.cpu_util_percent) j["cpuUtilPercent"] = *s.cpu_util_percent;
  if (s.memory_util_percent) j["memoryUtilPercent"] = *s.memory_util_percent;
  return j;
}

}  // namespace stoker::telemetry
