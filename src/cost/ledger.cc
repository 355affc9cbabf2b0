#include "cost/ledger.h"

#include <algorithm>
#include <ctime>
#include <tuple>

namespace stoker::cost {
namespace {

using nlohmann::json;

// The machineSpec of pool `pool` in a stored CustomJob JSON (null if absent).
const json& PoolMachine(const json& spec, int pool) {
  static const json kNull;
  auto js = spec.find("jobSpec");
  if (js == spec.end()) return kNull;
  auto pools = js->find("workerPoolSpecs");
  if (pools == js->end() || !pools->is_array() || pool < 0 ||
      pool >= static_cast<int>(pools->size())) {
    return kNull;
  }
  auto m = (*pools)[pool].find("machineSpec");
  return m == (*pools)[pool].end() ? kNull : *m;
}

double Number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    try {
      return std::stod(it->get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

void AddOnce(std::vector<std::string>& list, const std::string& s) {
  if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

}  // namespace

std::vector<store::UsageRecord> AttemptUsage(const store::JobRecord& job,
                                             const std::map<std::string, ReplicaTimes>& times,
                                             const std::string& end, int64_t now_us) {
  std::vector<store::UsageRecord> out;
  if (!job.allocation.is_object()) return out;
  json labels = json::object();
  if (auto l = job.spec.find("labels"); l != job.spec.end() && l->is_object()) labels = *l;
  for (const json& r : job.allocation.value("replicas", json::array())) {
    store::UsageRecord u;
    u.job_id = job.id;
    u.attempt = job.attempt;
    u.replica = r.value("name", "");
    u.pool = r.value("pool", 0);
    u.user = job.user;
    u.project = job.project;
    u.labels = labels;
    u.study_id = job.study_id;
    u.location = job.location;
    u.node = job.allocation.value("node", "");
    u.end = end;
    auto t = times.find(u.replica);
    u.start_us =
        t != times.end() && t->second.start_us > 0 ? t->second.start_us : job.start_time_us;
    u.end_us = t != times.end() && t->second.end_us > 0 ? t->second.end_us : now_us;
    if (u.start_us <= 0) continue;  // never started: nothing was used
    if (u.end_us < u.start_us) u.end_us = u.start_us;
    u.cpus = r.value("cpus", 0.0);
    u.memory_bytes = r.value("memory_bytes", uint64_t{0});
    const json& machine = PoolMachine(job.spec, u.pool);
    if (machine.is_object()) {
      u.machine_type = machine.value("machineType", "");
      u.accelerator_type = machine.value("acceleratorType", "");
      if (u.accelerator_type == "ACCELERATOR_TYPE_UNSPECIFIED") u.accelerator_type.clear();
      u.accelerator_count = Number(machine, "acceleratorCount");
    }
    if (r.contains("gpu_shares") && !r["gpu_shares"].empty()) {
      for (const json& g : r["gpu_shares"]) u.gpus += g.value("fraction", 1.0);
    } else if (r.contains("gpus") && !r["gpus"].empty()) {
      u.gpus = static_cast<double>(r["gpus"].size());
    } else if (job.allocation.value("node", "") == "executor") {
      u.gpus = u.accelerator_type.empty() ? 0 : u.accelerator_count;
    }
    u.gpu_type = r.value("gpu_type", "");
    if (u.gpu_type.empty() && u.gpus > 0) u.gpu_type = u.accelerator_type;
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<store::UsageRecord> Clip(std::vector<store::UsageRecord> rows, int64_t from_us,
                                     int64_t to_us) {
  std::vector<store::UsageRecord> out;
  for (store::UsageRecord& u : rows) {
    if (u.end_us <= from_us || u.start_us >= to_us) continue;
    u.start_us = std::max(u.start_us, from_us);
    u.end_us = std::min(u.end_us, to_us);
    out.push_back(std::move(u));
  }
  return out;
}

std::optional<PriceKind> ParsePriceKind(const std::string& name) {
  if (name == "vertex") return PriceKind::kVertex;
  if (name == "compute-engine") return PriceKind::kComputeEngine;
  if (name == "spot") return PriceKind::kSpot;
  if (name == "own") return PriceKind::kOwn;
  return std::nullopt;
}

std::string PriceKindName(PriceKind kind) {
  switch (kind) {
    case PriceKind::kVertex:
      return "vertex";
    case PriceKind::kComputeEngine:
      return "compute-engine";
    case PriceKind::kSpot:
      return "spot";
    case PriceKind::kOwn:
      return "own";
  }
  return "?";
}

Totals Total(const std::vector<store::UsageRecord>& rows, const Catalog& catalog,
             const NodeShape& node, const std::string& region) {
  Totals t;
  constexpr PriceKind kKinds[] = {PriceKind::kVertex, PriceKind::kComputeEngine, PriceKind::kSpot,
                                  PriceKind::kOwn};
  for (PriceKind k : kKinds) t.usd[k] = 0.0;
  std::map<std::tuple<std::string, std::string, std::string, double>, CloudPrice> prices;
  std::map<std::string, std::pair<std::optional<double>, std::string>> own_gpu_rates;
  bool energy_unknown = false;
  auto add = [&](PriceKind k, std::optional<double> usd, const std::string& why) {
    if (!usd) {
      t.usd[k].reset();
      AddOnce(t.no_price[k], why);
    } else if (t.usd[k]) {
      *t.usd[k] += *usd;
    }
  };
  for (const store::UsageRecord& u : rows) {
    double s = u.seconds();
    double h = s / 3600;
    ++t.rows;
    t.replica_seconds += s;
    t.gpu_seconds += u.gpus * s;
    if (u.gpus > 0) t.gpu_seconds_by_type[u.gpu_type] += u.gpus * s;
    t.vcpu_seconds += u.cpus * s;
    t.gb_seconds += u.memory_bytes / 1e9 * s;
    if (u.sampled_seconds > 0 && u.gpus > 0) {
      t.sampled_gpu_seconds += u.gpus * u.sampled_seconds;
      t.busy_gpu_seconds += u.busy_gpu_seconds;
      if (!u.energy_joules) {
        t.energy_joules.reset();
        energy_unknown = true;
      } else if (!energy_unknown) {
        t.energy_joules = t.energy_joules.value_or(0) + *u.energy_joules;
      }
    }

    // The region that prices the row: `region`, else its job's location's;
    // a row from before the ledger kept locations is priced in cost.region.
    const std::string row_region = !region.empty() ? region : catalog.RegionFor(u.location);
    if (region.empty() && u.location.empty()) {
      AddOnce(t.notes,
              "usage recorded before Stoker kept each job's location is priced in "
              "cost.region (" +
                  catalog.region() + ")");
    }
    // Rows repeat a few machine shapes: price each shape once per region and call.
    auto key = std::make_tuple(row_region, u.machine_type, u.accelerator_type, u.accelerator_count);
    auto cached = prices.find(key);
    if (cached == prices.end()) {
      spec::MachineSpec m;
      m.machine_type = u.machine_type;
      m.accelerator_type = u.accelerator_type;
      m.accelerator_count = u.accelerator_count;
      cached = prices.emplace(key, catalog.PriceReplica(m, row_region)).first;
      for (const std::string& n : cached->second.notes) AddOnce(t.notes, n);
    }
    const CloudPrice& p = cached->second;
    const std::string why = p.reason.empty() ? "no price for " + u.machine_type : p.reason;
    auto times = [h](std::optional<double> rate) -> std::optional<double> {
      if (!rate) return std::nullopt;
      return *rate * h;
    };
    add(PriceKind::kVertex, times(p.vertex_usd_per_hour), why);
    add(PriceKind::kComputeEngine, times(p.compute_engine_usd_per_hour), why);
    add(PriceKind::kSpot, times(p.spot_usd_per_hour), why);

    // Own hardware: the GPUs booked, plus the host's share by booked CPUs.
    std::optional<double> own = 0.0;
    std::string own_why;
    if (u.gpus > 0) {
      auto rate = own_gpu_rates.find(u.gpu_type);  // per GPU-hour, linear in the count
      if (rate == own_gpu_rates.end()) {
        std::string reason;
        std::optional<double> r = catalog.OwnGpuUsdPerHour(u.gpu_type, 1.0, &reason);
        rate = own_gpu_rates.emplace(u.gpu_type, std::make_pair(r, reason)).first;
      }
      own_why = rate->second.second;
      own = rate->second.first ? std::optional<double>(*rate->second.first * u.gpus * h)
                               : std::nullopt;
      auto asset = catalog.own().gpus.find(u.gpu_type);
      if (own && u.energy_joules && u.sampled_seconds > 0 && asset != catalog.own().gpus.end()) {
        // Measured energy instead of rated watts: the sampled part, scaled to the run.
        const double usd_per_kwh = catalog.own().usd_per_kwh * catalog.own().pue;
        const double rated = asset->second.watts / 1000 * usd_per_kwh * u.gpus * h;
        const double measured = *u.energy_joules / 3.6e6 * (s / u.sampled_seconds) * usd_per_kwh;
        *own += measured - rated;
      }
    }
    double fraction = node.cpus > 0 ? std::min(1.0, u.cpus / node.cpus) : 0;
    std::optional<double> host = catalog.OwnNodeUsdPerHour(fraction);
    if (host) {
      if (own) *own += *host * h;
    } else if (u.gpus > 0) {
      AddOnce(t.notes,
              "own hardware: the host is not counted (set cost.own_hardware.node to include it)");
    } else {
      own.reset();
      own_why = "own hardware: a job without GPUs needs cost.own_hardware.node to be priced";
    }
    add(PriceKind::kOwn, own, own_why);
  }
  return t;
}

json ToJson(const Totals& t) {
  json usd = json::object(), no_price = json::object();
  for (const auto& [kind, v] : t.usd) {
    usd[PriceKindName(kind)] = v ? json(*v) : json();
  }
  for (const auto& [kind, reasons] : t.no_price) no_price[PriceKindName(kind)] = reasons;
  json by_type = json::object();
  for (const auto& [type, s] : t.gpu_seconds_by_type) by_type[type] = s / 3600;
  json j = {{"replicaHours", t.replica_seconds / 3600},
            {"gpuHours", t.gpu_seconds / 3600},
            {"gpuHoursByType", by_type},
            {"vcpuHours", t.vcpu_seconds / 3600},
            {"memoryGbHours", t.gb_seconds / 3600},
            {"usd", usd},
            {"noPrice", no_price},
            {"notes", t.notes}};
  if (t.sampled_gpu_seconds > 0) {
    j["telemetry"] = {
        {"sampledGpuHours", t.sampled_gpu_seconds / 3600},
        {"busyGpuHours", t.busy_gpu_seconds / 3600},
        {"idleGpuHours", std::max(0.0, t.sampled_gpu_seconds - t.busy_gpu_seconds) / 3600},
        {"energyKwh", t.energy_joules ? json(*t.energy_joules / 3.6e6) : json()}};
  }
  return j;
}

Status ValidateScope(const std::string& scope) {
  auto bad = [&] {
    return InvalidArgument("budget scope '" + scope +
                           "': must be user:NAME, project:NAME or label:KEY=VALUE");
  };
  size_t colon = scope.find(':');
  if (colon == std::string::npos || colon + 1 >= scope.size()) return bad();
  std::string kind = scope.substr(0, colon), rest = scope.substr(colon + 1);
  if (kind == "user" || kind == "project") return OkStatus();
  if (kind == "label") {
    size_t eq = rest.find('=');
    if (eq == std::string::npos || eq == 0) return bad();
    return OkStatus();
  }
  return bad();
}

bool InScope(const std::string& scope, const std::string& user, const std::string& project,
             const json& labels) {
  size_t colon = scope.find(':');
  if (colon == std::string::npos) return false;
  std::string kind = scope.substr(0, colon), rest = scope.substr(colon + 1);
  if (kind == "user") return rest == user;
  if (kind == "project") return rest == project;
  if (kind == "label") {
    size_t eq = rest.find('=');
    if (eq == std::string::npos || !labels.is_object()) return false;
    auto it = labels.find(rest.substr(0, eq));
    return it != labels.end() && it->is_string() && it->get<std::string>() == rest.substr(eq + 1);
  }
  return false;
}

Month MonthOf(int64_t time_us) {
  time_t secs = static_cast<time_t>(time_us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::tm start{};
  start.tm_year = tm.tm_year;
  start.tm_mon = tm.tm_mon;
  start.tm_mday = 1;
  std::tm next = start;
  next.tm_mon += 1;
  if (next.tm_mon == 12) {
    next.tm_mon = 0;
    next.tm_year += 1;
  }
  char name[32];  // room for any int year the compiler can imagine
  std::snprintf(name, sizeof name, "%04d-%02d", tm.tm_year + 1900, tm.tm_mon + 1);
  return {static_cast<int64_t>(timegm(&start)) * 1'000'000,
          static_cast<int64_t>(timegm(&next)) * 1'000'000, name};
}

}  // namespace stoker::cost
