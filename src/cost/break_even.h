// Buy vs rent (stoker usage --break-even): what a window of real usage would
// have cost on Vertex (on demand and Spot) and on a Colab-class free tier,
// what owning this node costs per month, the utilisation at which owning pays
// off, and when the node pays for itself at the current rate. Pure.
//
// User documentation: docs/cost.md, "Buy vs rent".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/catalog.h"
#include "cost/ledger.h"

namespace stoker::cost {

struct BreakEven {
  double days = 0;
  int jobs = 0;
  double gpu_hours = 0;           // booked in the window
  double gpu_capacity_hours = 0;  // the node's GPUs × the window
  double utilisation = 0;         // gpu_hours / gpu_capacity_hours (0 without GPUs)
  // The window's usage at cloud prices, and the same per 30.44-day month.
  std::optional<double> vertex_usd, spot_usd;
  std::optional<double> vertex_usd_per_month, spot_usd_per_month;
  // Jobs that fit a Colab-class free tier (one replica, at most one T4/K80/P4/P100-class
  // GPU, each attempt under 12 h) and what they cost on Vertex.
  int colab_fit_jobs = 0;
  double colab_fit_vertex_usd = 0;
  // Owning the node: purchase, fixed cost per month (amortisation + the host's
  // power around the clock), GPU power at the current rate.
  std::optional<double> purchase_usd;
  std::optional<double> fixed_usd_per_month;
  std::optional<double> power_usd_per_month;
  // Owning pays off above this GPU utilisation (nullopt: never, or unknown).
  std::optional<double> break_even_utilisation;
  // Months until the node's purchase is paid back by what Vertex would have cost.
  std::optional<double> payback_months;
  std::optional<int64_t> payback_time_us;  // now + payback_months
  std::vector<std::string> notes;          // what is unknown and why
};

// `rows`: the usage of the last `days` days (clipped); `node`: this node's CPUs and GPUs.
// `now_us` dates the payback.
BreakEven ComputeBreakEven(const std::vector<store::UsageRecord>& rows, double days,
                           const Catalog& catalog, const NodeShape& node, int64_t now_us);

nlohmann::json ToJson(const BreakEven& b);

}  // namespace stoker::cost
