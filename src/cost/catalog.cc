// Pricing a replica from the catalog (Catalog::PriceReplica) and own
// hardware. The shipped tables are in catalog_prices.cc, the config's
// `cost:` section in catalog_config.cc.
#include "cost/catalog.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "cost/catalog_internal.h"

namespace stoker::cost {
namespace internal {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

bool IsWhole(double c) { return std::floor(c) == c; }

}  // namespace internal

namespace {

using internal::FindLegacy;
using internal::IsWhole;
using internal::Join;
using internal::kAcceleratorKeys;
using internal::kComputeEngine;
using internal::kConfig;
using internal::kMachineKeys;
using internal::kMarketNames;
using internal::kMarkets;
using internal::kSpot;
using internal::kVertex;
using internal::LegacyMachine;
using internal::Num;
using internal::WhyMissing;

constexpr double kHoursPerYear = 8766;  // 365.25 days x 24 h

// C < B < A < config (an operator's own figure is taken as given).
int Strength(const std::string& confidence) {
  if (confidence == "A") return 2;
  if (confidence == "B") return 1;
  if (confidence == kConfig) return 3;
  return 0;  // C, or anything unknown
}

// One priced component of a replica: a machine, or `count` GPUs.
struct Part {
  std::string name;
  double count = 1;
  bool accelerator = false;
  std::optional<Rate> rates[kMarkets];
};

Part MachinePart(const std::string& name, const MachinePrice& m) {
  Part p;
  p.name = name;
  p.rates[kVertex] = m.vertex;
  p.rates[kComputeEngine] = m.compute_engine;
  p.rates[kSpot] = m.spot;
  return p;
}

Part AcceleratorPart(const std::string& name, double count, const AcceleratorPrice& a) {
  Part p;
  p.name = name;
  p.count = count;
  p.accelerator = true;
  p.rates[kVertex] = a.vertex;
  p.rates[kComputeEngine] = a.compute_engine;
  p.rates[kSpot] = a.spot;
  return p;
}

// Sums the parts per market; a market any part lacks stays empty, with why.
void Combine(const std::vector<Part>& parts, const std::string& region, CloudPrice& out) {
  std::optional<double>* figures[kMarkets] = {
      &out.vertex_usd_per_hour, &out.compute_engine_usd_per_hour, &out.spot_usd_per_hour};
  // Why each market is missing; markets with the same explanation share it.
  std::vector<std::pair<std::string, std::vector<std::string>>> missing;
  int weakest = std::numeric_limits<int>::max();
  std::string weakest_name;
  for (int m = 0; m < kMarkets; ++m) {
    double sum = 0;
    std::vector<std::string> why;
    for (const Part& p : parts) {
      const std::optional<Rate>& r = p.rates[m];
      if (r) {
        sum += r->usd_per_hour * p.count;
        continue;
      }
      std::string w = WhyMissing(p.name, region);
      if (w.empty()) {
        w = std::string("the catalog has none for ") + p.name + " (set cost." +
            (p.accelerator ? "accelerators." : "machines.") + p.name + "." +
            (p.accelerator ? kAcceleratorKeys[m] : kMachineKeys[m]) + ")";
      }
      why.push_back(w);
    }
    if (!why.empty()) {
      const std::string text = Join(why, "; ");
      auto same = std::find_if(missing.begin(), missing.end(),
                               [&text](const auto& entry) { return entry.first == text; });
      if (same == missing.end()) {
        missing.push_back({text, {kMarketNames[m]}});
      } else {
        same->second.push_back(kMarketNames[m]);
      }
      continue;
    }
    *figures[m] = sum;
    for (const Part& p : parts) {
      int s = Strength(p.rates[m]->confidence);
      if (s < weakest) {
        weakest = s;
        weakest_name = p.rates[m]->confidence;
      }
    }
  }
  out.confidence = weakest_name;
  std::vector<std::string> reasons;
  for (const auto& [text, markets] : missing) {
    std::string names = markets[0];
    for (size_t i = 1; i < markets.size(); ++i) {
      names += (i + 1 == markets.size() ? " or " : ", ") + markets[i];
    }
    reasons.push_back("no " + names + " price: " + text);
  }
  out.reason = Join(reasons, "; ");
}

bool IsTpu(const std::string& machine_type, const std::string& accelerator) {
  if (accelerator.rfind("TPU_", 0) == 0) return true;
  if (machine_type == "cloud-tpu") return true;
  // ct4p-, ct5lp-, ct5p-, ct6e-...: TPU VM machine types.
  return machine_type.size() > 3 && machine_type[0] == 'c' && machine_type[1] == 't' &&
         std::isdigit(static_cast<unsigned char>(machine_type[2]));
}

std::string CountText(double count) { return Num(count) + " x "; }

std::string CountsText(const std::vector<int>& counts) {
  std::vector<std::string> s;
  for (int c : counts) s.push_back(std::to_string(c));
  return Join(s, ", ");
}

std::string FractionNote(double count) {
  return "Vertex sells whole GPUs: " + Num(count) + " of a GPU priced as 1";
}

}  // namespace

namespace {

using Machines = std::map<std::string, MachinePrice>;
using Accelerators = std::map<std::string, AcceleratorPrice>;

// Why the accelerator fields of a spec cannot be priced at all; "" when they can.
std::string CountProblem(const std::string& type, const std::string& accel, double count) {
  if (IsTpu(type, accel)) return "TPUs are not priced by Stoker's catalog";
  if (!std::isfinite(count) || count < 0) {
    return "accelerator_count " + Num(count) + " is not a count of GPUs";
  }
  if (count > 1 && !IsWhole(count)) {
    return "accelerator_count " + Num(count) + ": counts of 1 or more must be whole numbers";
  }
  if (accel.empty() && count > 0) {
    return "accelerator_count " + Num(count) + " without an accelerator_type";
  }
  return "";
}

// Smallest catalog machine that carries `n` GPUs of `gpu` (for advice); "" when none does.
std::string SmallestMachineWith(const Machines& machines, const std::string& gpu, double n) {
  const std::pair<const std::string, MachinePrice>* best = nullptr;
  for (const auto& entry : machines) {
    const MachinePrice& m = entry.second;
    if (m.gpu_type != gpu || m.gpu_count < n) continue;
    if (!best ||
        std::tie(m.gpu_count, m.vcpus) < std::tie(best->second.gpu_count, best->second.vcpus)) {
      best = &entry;
    }
  }
  return best ? best->first : std::string();
}

std::string NotInCatalog(const std::string& accel) {
  return "accelerator type '" + accel +
         "' is not in the price catalog (add it under cost.accelerators in the config)";
}

// A replica's machine as resolved against the catalog.
struct Resolved {
  std::string type;   // as the spec names it
  std::string accel;  // "" = none (also when the spec asks for 0 GPUs)
  double count = 0;
  std::string row_name;                   // the catalog row it prices as
  const MachinePrice* row = nullptr;      // never null once resolved
  const LegacyMachine* legacy = nullptr;  // set for a legacy AI Platform name
};

// A machine that comes with GPUs (a2, a3, g2, or a legacy GPU name): the
// spec may only ask for those GPUs, in that number or a fraction of one.
// Adds the legacy name's GPUs to `parts`; returns why it cannot be priced
// ("" when it can).
std::string PriceBundledGpus(const Resolved& r, const std::string& bundled_gpu, int bundled_count,
                             const Machines& machines, const Accelerators& accelerators,
                             CloudPrice& out, std::vector<Part>& parts) {
  const std::string bundled = std::to_string(bundled_count) + " x " + bundled_gpu;
  if (r.legacy) {
    out.basis = r.type + " = " + r.row_name + " + " + bundled + " (legacy AI Platform name)";
  } else {
    out.basis = r.type + " (" + bundled + " built in)";
  }
  if (!r.accel.empty() && r.accel != bundled_gpu) {
    return r.type + " comes with " + bundled + "; the spec asks for " + r.accel;
  }
  if (!r.accel.empty() && r.count >= 1 && r.count != bundled_count) {
    std::string use = SmallestMachineWith(machines, bundled_gpu, r.count);
    return r.type + " comes with " + bundled + "; the spec asks for " + Num(r.count) +
           (use.empty() ? std::string() : " (use " + use + ")");
  }
  if (!r.accel.empty() && r.count < 1) {
    out.notes.push_back(bundled_count == 1
                            ? FractionNote(r.count)
                            : "Vertex sells whole machines: " + Num(r.count) +
                                  " of a GPU priced as " + r.type + " with its " + bundled);
  }
  if (r.legacy) {
    auto a = accelerators.find(bundled_gpu);
    if (a == accelerators.end()) return NotInCatalog(bundled_gpu);
    parts.push_back(AcceleratorPart(bundled_gpu, bundled_count, a->second));
  }
  return "";
}

// GPUs attached to a machine without any: only n1 machines take them, in the
// counts Google Cloud allows; a fraction is priced as one whole GPU. Adds
// them to `parts`; returns why they cannot be priced ("" when they can).
std::string PriceAttachedGpus(const Resolved& r, const Machines& machines,
                              const Accelerators& accelerators, CloudPrice& out,
                              std::vector<Part>& parts) {
  const bool n1 = r.row_name.rfind("n1-", 0) == 0;
  out.basis = r.row_name + " + " + CountText(r.count) + r.accel;
  if (r.legacy) out.basis = r.type + " = " + out.basis + " (legacy AI Platform name)";
  if (!n1) {
    return r.row_name +
           " takes no accelerators on Google Cloud: GPUs attach to n1 machines or come built "
           "into a2, a3 and g2 machines";
  }
  auto a = accelerators.find(r.accel);
  if (a == accelerators.end()) return NotInCatalog(r.accel);
  const double whole = r.count < 1 ? 1 : r.count;
  if (a->second.n1_counts.empty()) {
    std::string use = SmallestMachineWith(machines, r.accel, whole);
    return r.accel + " does not attach to n1 machines on Google Cloud; " +
           (use.empty() ? "use a machine type that comes with it" : "use " + use);
  }
  const auto& allowed = a->second.n1_counts;
  if (std::find(allowed.begin(), allowed.end(), static_cast<int>(whole)) == allowed.end()) {
    return Num(whole) + " x " + r.accel +
           " does not attach to an n1 machine; allowed counts: " + CountsText(allowed);
  }
  if (r.count < 1) out.notes.push_back(FractionNote(r.count));
  parts.push_back(AcceleratorPart(r.accel, whole, a->second));
  return "";
}

}  // namespace

const RegionPrices* Catalog::Prices(const std::string& region) const {
  auto it = regions_.find(region);
  return it == regions_.end() ? nullptr : &it->second;
}

std::vector<std::string> Catalog::regions() const {
  std::vector<std::string> out;
  for (const auto& entry : regions_) out.push_back(entry.first);
  return out;
}

Status Catalog::CheckRegion(const std::string& region, const std::string& field) const {
  if (Prices(region)) return OkStatus();
  return InvalidArgument(field + ": no prices for '" + region +
                         "'; known: " + Join(regions(), ", "));
}

std::string Catalog::RegionFor(const std::string& location) const {
  // Google Cloud regions have a dash ("us-central1", "europe-west4"); Stoker's
  // own locations ("local") do not.
  if (location.find('-') != std::string::npos) return location;
  return region_;
}

double Catalog::TrainingUnitUsd(const std::string& region) {
  for (const char* prefix : {"europe-", "asia-", "australia-"}) {
    if (region.rfind(prefix, 0) == 0) return 0.54;
  }
  return 0.49;
}

CloudPrice Catalog::PriceReplica(const spec::MachineSpec& machine,
                                 const std::string& region_asked) const {
  const std::string& region = region_asked.empty() ? region_ : region_asked;
  CloudPrice out;
  Resolved r;
  r.type = machine.machine_type;
  r.accel = machine.accelerator_type;
  if (r.accel == "ACCELERATOR_TYPE_UNSPECIFIED") r.accel.clear();
  r.count = machine.accelerator_count;
  out.basis = r.type;
  if (!r.accel.empty() && r.count > 0) out.basis += " + " + CountText(r.count) + r.accel;
  auto no_price = [&out](std::string reason) {
    out.reason = std::move(reason);
    return out;
  };
  if (std::string why = CountProblem(r.type, r.accel, r.count); !why.empty()) {
    return no_price(why);
  }
  const RegionPrices* prices = Prices(region);
  if (!prices) {
    return no_price("no prices for '" + region + "'; known: " + Join(regions(), ", "));
  }
  const Machines& machines = prices->machines;
  const Accelerators& accelerators = prices->accelerators;
  if (!r.accel.empty() && r.count == 0) {
    out.notes.push_back("accelerator_type " + r.accel +
                        " with accelerator_count 0: priced without GPUs");
    r.accel.clear();
    out.basis = r.type;
  }

  // Resolve the machine: a catalog row, or a legacy AI Platform name.
  r.row_name = r.type;
  if (auto it = machines.find(r.type); it != machines.end()) {
    r.row = &it->second;
  } else if ((r.legacy = FindLegacy(r.type)) != nullptr) {
    r.row_name = r.legacy->machine_type;
    if (auto base = machines.find(r.row_name); base != machines.end()) r.row = &base->second;
  }
  if (!r.row) {
    if (r.legacy) {
      return no_price("legacy name '" + r.type + "' prices as " + r.row_name +
                      ", which is not in the price catalog (add it under cost.machines in the "
                      "config)");
    }
    return no_price("machine type '" + r.type +
                    "' is not in the price catalog (add it under cost.machines in the config)");
  }

  // The GPUs that come with the machine: built in (a2, a3, g2) or part of a
  // legacy GPU name.
  std::string bundled_gpu = r.row->gpu_type;
  int bundled_count = r.row->gpu_count;
  if (r.legacy && r.legacy->gpu_count > 0) {
    bundled_gpu = r.legacy->gpu_type;
    bundled_count = r.legacy->gpu_count;
  }
  std::vector<Part> parts;
  parts.push_back(MachinePart(r.row_name, *r.row));
  std::string why;
  if (bundled_count > 0) {
    why = PriceBundledGpus(r, bundled_gpu, bundled_count, machines, accelerators, out, parts);
  } else if (!r.accel.empty()) {
    why = PriceAttachedGpus(r, machines, accelerators, out, parts);
  } else if (r.legacy) {
    out.basis = r.type + " = " + r.row_name + " (legacy AI Platform name)";
  }
  if (!why.empty()) return no_price(why);

  if (r.legacy) {
    std::string note = "AI Platform listed " + r.type + " at $" + Num(r.legacy->usd_2019) +
                       "/h in the Americas in 2019 (S4b)";
    if (TrainingUnitUsd(region) != TrainingUnitUsd("us-central1")) {
      note += "; in Europe and Asia-Pacific $" +
              Num(std::round(r.legacy->usd_2019 / 0.49 * 0.54 * 1e4) / 1e4) +
              " (training units at $0.54, not $0.49)";
    }
    out.notes.push_back(note);
  }
  for (const Part& p : parts) {
    if (p.name == "NVIDIA_TESLA_K80") {
      out.notes.push_back("the K80 is end of life on Google Cloud; its price is the 2019 one");
    }
  }
  Combine(parts, region, out);
  return out;
}

std::optional<double> Catalog::OwnGpuUsdPerHour(const std::string& gpu_type, double gpus,
                                                std::string* reason) const {
  auto fail = [reason](std::string why) -> std::optional<double> {
    if (reason) *reason = std::move(why);
    return std::nullopt;
  };
  if (!std::isfinite(gpus) || gpus < 0) return fail("GPU count " + Num(gpus) + " is not a count");
  auto it = own_.gpus.find(gpu_type);
  if (it == own_.gpus.end()) {
    return fail("no purchase price for " + gpu_type + " GPUs (set cost.own_hardware.gpus." +
                gpu_type + ".purchase_usd in the config)");
  }
  const Asset& a = it->second;
  const double amortisation = a.purchase_usd / (a.life_years * kHoursPerYear);
  const double power = a.watts / 1000 * own_.usd_per_kwh * own_.pue;
  if (reason) reason->clear();
  return (amortisation + power) * gpus;
}

std::optional<double> Catalog::OwnNodeUsdPerHour(double fraction) const {
  if (!own_.node) return std::nullopt;
  // A share outside 0..1 is clamped: a replica never owns more than the node.
  if (!std::isfinite(fraction) || fraction < 0) fraction = 0;
  fraction = std::min(fraction, 1.0);
  const Asset& a = *own_.node;
  const double amortisation = a.purchase_usd / (a.life_years * kHoursPerYear);
  const double power = a.watts / 1000 * own_.usd_per_kwh * own_.pue;
  return (amortisation + power) * fraction;
}

}  // namespace stoker::cost
