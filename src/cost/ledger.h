// The usage ledger's pure core: rows of an attempt from its allocation, rows
// clipped to a period, their totals priced with the catalog, and budget
// scopes. No I/O; Accountant (accounting.h) feeds it from the store.
//
// User documentation: docs/cost.md (keep the two in step).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/catalog.h"
#include "store/store.h"

namespace stoker::cost {

// When one replica's trainer ran, as its supervisor recorded it (0 = unknown).
struct ReplicaTimes {
  int64_t start_us = 0;
  int64_t end_us = 0;
};

// The rows of `job`'s current attempt as its stored allocation booked them,
// one per replica that started. A replica's times come from `times` where
// known; otherwise it started with the job (`job.start_time_us`) and ends at
// `now_us`. `end` is how the attempt ended (succeeded, failed, retried,
// cancelled) or "running". GPUs: the fractions of `gpu_shares`, else the
// listed `gpus`, else (an executor that places replicas itself) what the
// machineSpec asked; their type is the allocation's `gpu_type`, else the
// machineSpec's accelerator.
std::vector<store::UsageRecord> AttemptUsage(const store::JobRecord& job,
                                             const std::map<std::string, ReplicaTimes>& times,
                                             const std::string& end, int64_t now_us);

// `rows` cut to [from_us, to_us): rows outside are dropped, the rest clipped.
std::vector<store::UsageRecord> Clip(std::vector<store::UsageRecord> rows, int64_t from_us,
                                     int64_t to_us);

// Which price a figure is in.
enum class PriceKind { kVertex, kComputeEngine, kSpot, kOwn };
std::optional<PriceKind> ParsePriceKind(
    const std::string& name);  // vertex, compute-engine, spot, own
std::string PriceKindName(PriceKind kind);

// What a set of rows booked, and what it cost. A money figure is absent when
// some row could not be priced in it; `no_price` then says why (each reason once).
struct Totals {
  int rows = 0;
  double replica_seconds = 0;
  double gpu_seconds = 0;
  std::map<std::string, double> gpu_seconds_by_type;
  double vcpu_seconds = 0;
  double gb_seconds = 0;  // memory GB-seconds (GB = 10^9 bytes, as cloud bills count)
  // GPU telemetry, over the part of the runs that was sampled: GPU-seconds
  // booked then, and busy; energy where every sampled row had a counter.
  double sampled_gpu_seconds = 0;
  double busy_gpu_seconds = 0;
  std::optional<double> energy_joules;
  std::map<PriceKind, std::optional<double>> usd;  // every kind present
  std::map<PriceKind, std::vector<std::string>> no_price;
  std::vector<std::string> notes;  // e.g. "Vertex sells whole GPUs: ..." (each once)
};

// The node the rows ran on, for the own-hardware share of its host.
struct NodeShape {
  double cpus = 0;
  std::vector<std::string> gpu_types;  // one entry per GPU of the node
};

// Adds up and prices `rows`: cloud prices per replica-hour of each row's
// machineSpec, own hardware by the GPUs booked and the booked share of the
// node's CPUs (the host part only when cost.own_hardware.node is set, with
// a note otherwise). A row with measured energy pays for its GPUs' power by
// that energy (scaled from the sampled part to the whole run) instead of by
// their rated watts. Cloud prices are `region`'s for every row when it is
// given; when empty, each row's own: the region of its job's location
// (Catalog::RegionFor: Stoker's own locations such as "local" take the
// configured cost.region). Rows written before the ledger kept locations
// (location "") are priced in cost.region, with a note saying so.
Totals Total(const std::vector<store::UsageRecord>& rows, const Catalog& catalog,
             const NodeShape& node, const std::string& region = "");

// {"replicaHours", "gpuHours", "gpuHoursByType", "vcpuHours", "memoryGbHours",
//  "usd": {"vertex": 1.23 | null, ...}, "noPrice": {"own": ["..."]}, "notes": [...],
//  "telemetry": {"sampledGpuHours", "busyGpuHours", "idleGpuHours", "energyKwh"}  (when sampled)}
nlohmann::json ToJson(const Totals& totals);

// Budget scopes: "user:NAME", "project:NAME", "label:KEY=VALUE".
// InvalidArgument naming the form when `scope` is none of them.
Status ValidateScope(const std::string& scope);
bool InScope(const std::string& scope, const std::string& user, const std::string& project,
             const nlohmann::json& labels);

// The UTC calendar month holding `time_us`: [start, end) in microseconds, and "YYYY-MM".
struct Month {
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::string name;
};
Month MonthOf(int64_t time_us);

}  // namespace stoker::cost
