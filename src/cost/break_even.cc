#include "cost/break_even.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "common/time.h"

namespace stoker::cost {
namespace {

using nlohmann::json;

constexpr double kHoursPerMonth = 730.5;  // 365.25 × 24 / 12
constexpr double kDaysPerMonth = 30.44;

// GPUs of the class free notebook tiers have handed out (Colab FAQ: K80, T4, P4, P100).
bool FreeTierGpu(const std::string& type) {
  return type == "NVIDIA_TESLA_T4" || type == "NVIDIA_TESLA_K80" || type == "NVIDIA_TESLA_P4" ||
         type == "NVIDIA_TESLA_P100";
}

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(); }

std::string UsdText(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.2f", usd);
  return buf;
}

}  // namespace

BreakEven ComputeBreakEven(const std::vector<store::UsageRecord>& rows, double days,
                           const Catalog& catalog, const NodeShape& node, int64_t now_us) {
  BreakEven b;
  b.days = days;
  Totals all = Total(rows, catalog, node);
  b.gpu_hours = all.gpu_seconds / 3600;
  b.gpu_capacity_hours = node.gpu_types.size() * days * 24;
  if (b.gpu_capacity_hours > 0) b.utilisation = b.gpu_hours / b.gpu_capacity_hours;
  b.vertex_usd = all.usd[PriceKind::kVertex];
  b.spot_usd = all.usd[PriceKind::kSpot];
  for (PriceKind k : {PriceKind::kVertex, PriceKind::kSpot}) {
    for (const std::string& why : all.no_price[k]) {
      b.notes.push_back(PriceKindName(k) + " price unknown for some usage: " + why);
    }
  }
  const double per_month = days > 0 ? kDaysPerMonth / days : 0;
  if (b.vertex_usd) b.vertex_usd_per_month = *b.vertex_usd * per_month;
  if (b.spot_usd) b.spot_usd_per_month = *b.spot_usd * per_month;

  // Colab-class free tier: per job.
  std::map<int64_t, std::vector<store::UsageRecord>> by_job;
  for (const store::UsageRecord& u : rows) by_job[u.job_id].push_back(u);
  b.jobs = static_cast<int>(by_job.size());
  for (const auto& [job, job_rows] : by_job) {
    std::set<std::pair<int, std::string>> replicas;
    bool fits = true;
    for (const store::UsageRecord& u : job_rows) {
      replicas.insert({u.attempt, u.replica});
      if (u.gpus > 1 || (u.gpus > 0 && !FreeTierGpu(u.gpu_type))) fits = false;
      if (u.seconds() > 12 * 3600) fits = false;
    }
    std::set<int> attempts;
    for (const auto& [attempt, name] : replicas) attempts.insert(attempt);
    if (replicas.size() != attempts.size()) fits = false;  // more than one replica per attempt
    if (!fits) continue;
    ++b.colab_fit_jobs;
    Totals t = Total(job_rows, catalog, node);
    b.colab_fit_vertex_usd += t.usd[PriceKind::kVertex].value_or(0);
  }

  // Owning the node.
  const OwnHardware& own = catalog.own();
  const double usd_per_kwh = own.usd_per_kwh * own.pue;
  double purchase = 0, fixed = 0, gpu_power_full = 0;  // gpu_power_full: all GPUs busy a month
  bool known = true;
  for (const std::string& type : node.gpu_types) {
    auto it = own.gpus.find(type);
    if (it == own.gpus.end() || it->second.purchase_usd <= 0) {
      known = false;
      b.notes.push_back("no purchase price for " + type + " (set cost.own_hardware.gpus." + type +
                        ".purchase_usd)");
      continue;
    }
    purchase += it->second.purchase_usd;
    fixed += it->second.purchase_usd / (it->second.life_years * 12);
    gpu_power_full += it->second.watts / 1000 * usd_per_kwh * kHoursPerMonth;
  }
  if (own.node) {
    purchase += own.node->purchase_usd;
    fixed += own.node->purchase_usd / (own.node->life_years * 12);
    fixed +=
        own.node->watts / 1000 * usd_per_kwh * kHoursPerMonth;  // the host runs around the clock
  } else {
    b.notes.push_back("the host is not counted (set cost.own_hardware.node)");
  }
  if (node.gpu_types.empty()) b.notes.push_back("this node has no GPUs");
  if (known && purchase > 0) {
    b.purchase_usd = purchase;
    b.fixed_usd_per_month = fixed;
    const double n = static_cast<double>(node.gpu_types.size());
    // GPU power at the window's utilisation (idle power is not counted).
    b.power_usd_per_month = gpu_power_full * b.utilisation;
    // Owning saves the whole cloud bill. The GPU replicas' part grows with
    // GPU utilisation u (their bill per booked GPU-hour, CPUs and memory of
    // their machines included); the CPU-only replicas' part is saved at any
    // u, at this window's rate. Owning pays off above the u where
    //   fixed = u × (gpu_bill_per_gpu_hour × capacity − gpu_power_full) + cpu_only_bill.
    // (Dividing the whole bill by the GPU-hours once made a node that ran
    // mostly CPU jobs "pay off above 0.2 % GPU use".)
    std::vector<store::UsageRecord> gpu_rows, cpu_rows;
    for (const store::UsageRecord& u : rows) (u.gpus > 0 ? gpu_rows : cpu_rows).push_back(u);
    const std::optional<double> gpu_bill = Total(gpu_rows, catalog, node).usd[PriceKind::kVertex];
    const double cpu_only_per_month =
        Total(cpu_rows, catalog, node).usd[PriceKind::kVertex].value_or(0) * per_month;
    if (cpu_only_per_month > 0) {
      b.notes.push_back("CPU-only jobs' cloud bill (" + UsdText(cpu_only_per_month) +
                        " a month at this rate) counts as saved at any GPU utilisation");
    }
    if (cpu_only_per_month >= fixed) {
      b.break_even_utilisation = 0;  // the CPU-only jobs alone pay for the node
    } else if (gpu_bill && b.gpu_hours > 0 && n > 0) {
      double cloud_per_gpu_hour = *gpu_bill / b.gpu_hours;
      double capacity = n * kHoursPerMonth;
      double margin = cloud_per_gpu_hour * capacity - gpu_power_full;
      if (margin > 0) b.break_even_utilisation = (fixed - cpu_only_per_month) / margin;
    } else if (b.gpu_hours <= 0) {
      b.notes.push_back("no GPU usage in the window: the break-even utilisation is unknown");
    }
    if (b.vertex_usd_per_month) {
      double saving = *b.vertex_usd_per_month - *b.power_usd_per_month -
                      (own.node ? own.node->watts / 1000 * usd_per_kwh * kHoursPerMonth : 0);
      if (saving > 0) {
        b.payback_months = purchase / saving;
        b.payback_time_us =
            now_us + static_cast<int64_t>(*b.payback_months * kDaysPerMonth * 86'400 * 1e6);
      }
    }
  }
  return b;
}

json ToJson(const BreakEven& b) {
  return {{"days", b.days},
          {"jobs", b.jobs},
          {"gpuHours", b.gpu_hours},
          {"gpuCapacityHours", b.gpu_capacity_hours},
          {"utilisation", b.utilisation},
          {"vertexUsd", Opt(b.vertex_usd)},
          {"spotUsd", Opt(b.spot_usd)},
          {"vertexUsdPerMonth", Opt(b.vertex_usd_per_month)},
          {"spotUsdPerMonth", Opt(b.spot_usd_per_month)},
          {"colabFreeTierJobs", b.colab_fit_jobs},
          {"colabFreeTierVertexUsd", b.colab_fit_vertex_usd},
          {"purchaseUsd", Opt(b.purchase_usd)},
          {"fixedUsdPerMonth", Opt(b.fixed_usd_per_month)},
          {"powerUsdPerMonth", Opt(b.power_usd_per_month)},
          {"breakEvenUtilisation", Opt(b.break_even_utilisation)},
          {"paybackMonths", Opt(b.payback_months)},
          {"paybackTime", b.payback_time_us ? json(FormatRfc3339(*b.payback_time_us)) : json()},
          {"notes", b.notes}};
}

}  // namespace stoker::cost
