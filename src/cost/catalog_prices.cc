// The price tables shipped with Stoker (Catalog::BuiltIn): us-central1 list
// prices with their sources and dates (prices/us_central1.yaml; docs/prices.md,
// keep the two in step) and the rules that grade them and derive the rows it
// lacks, the other regions' from the per-region tables (prices/s1_regions.yaml,
// prices/s2_gpu_regions.yaml) by the rules below, and own-hardware defaults
// (prices/own_hardware.yaml).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost/catalog.h"
#include "cost/catalog_internal.h"

namespace stoker::cost {
namespace internal {
namespace {

// ---------------------------------------------------------------------------
// Sources (docs/prices.md lists them with what each gives).

constexpr char kS1[] = "S1 Cyclenerd pricing.yml 2026-07-30";
constexpr char kS1Spot[] = "S1 Cyclenerd pricing.yml 2026-07-30 (Spot snapshot)";
constexpr char kS1Half4[] =
    "derived: half of n1-standard-4 (S1 Cyclenerd pricing.yml 2026-07-30; N1 prices are linear "
    "in vCPUs and memory)";
constexpr char kS1HalfHighcpu16[] =
    "derived: half of n1-highcpu-16 (S1 Cyclenerd pricing.yml 2026-07-30; N1 prices are linear "
    "in vCPUs and memory; AI Platform listed complex_model_s at $0.2836 in 2019, S4b)";
constexpr char kS2[] = "S2 SkyPilot vms.csv commit 017e250 (date not recorded, <= 2026-11)";
constexpr char kS2Spot[] =
    "S2 SkyPilot vms.csv commit 017e250 (Spot snapshot, date not recorded, <= 2026-11)";
constexpr char kS3Half[] = "derived: half of n1-standard-4 (S3 Vertex pricing page 2026-10-07)";
constexpr char kVertexCpuRule[] =
    "est.: S1 Compute Engine price x 1.15 (the S3 n1-standard-4 ratio, 2026-10-07)";
constexpr char kVertexGpuMachineRule[] =
    "est.: host part x 1.15 + bundled local SSD + GPUs at the Vertex GPU rate (S1 2026-07-30, "
    "S3 2026-10-07)";
constexpr char kRegionalVertexRule[] =
    "est.: S1 Compute Engine price in the region (2026-07-30) x the machine's us-central1 "
    "Vertex / Compute Engine ratio";
constexpr char kK80Regional[] =
    "est.: the 2019 Americas K80 price (S4b) x AI Platform's regional training-unit rate "
    "($0.54 Europe/Asia vs $0.49 Americas, S5)";
constexpr char kGpuRegionalVertexRule[] =
    "est.: S2 Compute Engine price in the region x 1.15 (Vertex GPU uplift seen between 1.00 and "
    "1.20)";
constexpr char kK80RegionalVertex[] =
    "est.: the regional K80 estimate x 1.15 (Vertex GPU uplift seen between 1.00 and 1.20)";

std::optional<Rate> MakeRate(double usd, const char* confidence, const char* source) {
  if (usd < 0) return std::nullopt;
  return Rate{usd, confidence, source};
}

// `r`, graded and sourced as `confidence` and `source` say when the table gave
// a bare number (no grade or source of its own).
std::optional<Rate> Graded(std::optional<Rate> r, const char* confidence, const char* source) {
  if (r && r->source.empty()) {
    r->confidence = confidence;
    r->source = source;
  }
  return r;
}

// The row `name` of `machines`, with Compute Engine and Spot figures; aborts
// when the shipped table lacks it (a derived row needs it; catalog_test
// builds the catalog first).
const MachinePrice& BaseRow(const std::map<std::string, MachinePrice>& machines, const char* name) {
  auto it = machines.find(name);
  if (it == machines.end() || !it->second.compute_engine || !it->second.spot) {
    std::fprintf(stderr,
                 "stoker: src/cost/prices/us_central1.yaml has no %s row with compute_engine and "
                 "spot figures\n",
                 name);
    std::abort();
  }
  return it->second;
}

// §1: the machine types, whole VM per hour: the table's rows, a bare figure
// read from S1 (Compute Engine, Spot: confidence A) or estimated by the
// Vertex rule of its kind (confidence C).
std::map<std::string, MachinePrice> BuiltInMachines() {
  std::map<std::string, MachinePrice> machines;
  for (auto [name, m] : UsCentral1Prices().machines) {
    m.compute_engine = Graded(m.compute_engine, "A", kS1);
    m.spot = Graded(m.spot, "A", kS1Spot);
    m.vertex = Graded(m.vertex, "C", m.gpu_count > 0 ? kVertexGpuMachineRule : kVertexCpuRule);
    machines[name] = m;
  }

  // Not in the reference table; derived (confidence C) because the legacy
  // names and small jobs need them.
  {
    const MachinePrice& n4 = BaseRow(machines, "n1-standard-4");
    MachinePrice m;
    m.vcpus = 2;
    m.memory_gb = 7.5;
    m.compute_engine = MakeRate(n4.compute_engine->usd_per_hour / 2, "C", kS1Half4);
    m.spot = MakeRate(n4.spot->usd_per_hour / 2, "C", kS1Half4);
    if (n4.vertex) m.vertex = MakeRate(n4.vertex->usd_per_hour / 2, "C", kS3Half);
    machines["n1-standard-2"] = m;
  }
  {
    const MachinePrice& h16 = BaseRow(machines, "n1-highcpu-16");
    MachinePrice m;
    m.vcpus = 8;
    m.memory_gb = 7.2;
    m.compute_engine = MakeRate(h16.compute_engine->usd_per_hour / 2, "C", kS1HalfHighcpu16);
    m.spot = MakeRate(h16.spot->usd_per_hour / 2, "C", kS1HalfHighcpu16);
    m.vertex = MakeRate(h16.compute_engine->usd_per_hour / 2 * 1.15, "C", kVertexCpuRule);
    machines["n1-highcpu-8"] = m;
  }
  return machines;
}

// Another region's rows from us-central1's: the shapes and N1 counts stay;
// Compute Engine and Spot are S1's figures for the region (a type S1 does
// not list there has none); Vertex is scaled from us-central1 by the
// regional Compute Engine price. The GPUs that attach to N1 take S2's
// figures for the region (one S2 does not list there has none), Vertex x
// 1.15 as in us-central1; the K80 (not in S2) the 2019 AI Platform price x
// the regional rate; the other GPUs' per-GPU prices are us-central1's only.
RegionPrices Regional(const std::string& region, const RegionPrices& us) {
  RegionPrices out = us;
  for (auto& [name, m] : out.machines) {
    m.compute_engine.reset();
    m.spot.reset();
    m.vertex.reset();
  }
  for (const RegionalRow& p : S1MachineTable().rows) {
    auto row = out.machines.find(p.name);
    if (region != p.region || row == out.machines.end()) continue;
    MachinePrice& m = row->second;
    m.compute_engine = MakeRate(p.compute_engine, "A", kS1);
    m.spot = MakeRate(p.spot, "A", kS1Spot);
    const MachinePrice& base = us.machines.at(p.name);
    if (base.compute_engine && base.vertex && base.compute_engine->usd_per_hour > 0) {
      m.vertex =
          MakeRate(p.compute_engine * base.vertex->usd_per_hour / base.compute_engine->usd_per_hour,
                   "C", kRegionalVertexRule);
    }
  }
  const double rate = Catalog::TrainingUnitUsd(region) / Catalog::TrainingUnitUsd("us-central1");
  for (auto& [name, a] : out.accelerators) {
    a.compute_engine.reset();
    a.spot.reset();
    a.vertex.reset();
    const std::optional<Rate>& base = us.accelerators.at(name).compute_engine;
    if (name == "NVIDIA_TESLA_K80" && base) {  // $0.45 in 2019 (S4b)
      a.compute_engine = MakeRate(base->usd_per_hour * rate, "C", kK80Regional);
      a.vertex = MakeRate(base->usd_per_hour * rate * 1.15, "C", kK80RegionalVertex);
    }
  }
  for (const RegionalRow& p : S2GpuTable().rows) {
    auto row = out.accelerators.find(p.name);
    if (region != p.region || row == out.accelerators.end()) continue;
    row->second.compute_engine = MakeRate(p.compute_engine, "A", kS2);
    row->second.spot = MakeRate(p.spot, "C", kS2Spot);
    row->second.vertex = MakeRate(p.compute_engine * 1.15, "C", kGpuRegionalVertexRule);
  }
  return out;
}

// The regions where S2 lists `accelerator`, comma-separated; "" when none.
std::string RegionsSelling(const std::string& accelerator) {
  std::vector<std::string> regions;
  for (const RegionalRow& p : S2GpuTable().rows) {
    if (accelerator == p.name) regions.push_back(p.region);
  }
  return Join(regions, ", ");
}

}  // namespace

const LegacyMachine* FindLegacy(const std::string& name) {
  for (const LegacyMachine& l : UsCentral1Prices().legacy_machines) {
    if (name == l.name) return &l;
  }
  return nullptr;
}

// Why a shipped row lacks a figure, for the reason text.
std::string WhyMissing(const std::string& name, const std::string& region) {
  bool sold = false;  // S1 prices the machine type in the region
  for (const RegionalRow& p : S1MachineTable().rows) {
    sold = sold || (region == p.region && name == p.name);
  }
  if (name == "a3-megagpu-8g" && sold) {
    return "no Vertex estimate for a3-megagpu-8g (no us-central1 Vertex figure to scale); set "
           "cost.machines.a3-megagpu-8g.vertex_usd_per_hour";
  }
  if (name == "a3-megagpu-8g") {
    return "S1 (2026-07-30) has no " + region +
           " price for a3-megagpu-8g (us-east4: $92.9376/h on demand, $23.2752/h Spot); set it "
           "under cost.machines.a3-megagpu-8g";
  }
  if (const std::string sold = RegionsSelling(name);
      !sold.empty() && (", " + sold + ", ").find(", " + region + ", ") == std::string::npos) {
    return name + " is not sold in " + region + " (S2 lists it in " + sold +
           "; set cost.accelerators." + name + " to price it)";
  }
  if (region != "us-central1" && name.rfind("NVIDIA_", 0) == 0 && name != "NVIDIA_TESLA_K80") {
    return "the catalog's per-GPU prices of " + name +
           " are for us-central1 only (set cost.accelerators." + name + ")";
  }
  if (name == "NVIDIA_TESLA_K80") {
    return "the K80 is end of life on Google Cloud and has no current Spot price (preemptible K80s "
           "were $0.22/h in 2018)";
  }
  if (name == "NVIDIA_H100_MEGA_80GB") {
    return "only an unverified Compute Engine figure is known for the H100 Mega (S2, 8-GPU row / "
           "8)";
  }
  return "";
}

const KnownWatts* FindKnownWatts(const std::string& gpu_type) {
  for (const KnownWatts& k : OwnHardwareDefaults().known_watts) {
    if (gpu_type == k.gpu_type) return &k;
  }
  return nullptr;
}

}  // namespace internal

Catalog Catalog::BuiltIn() {
  Catalog c;
  c.region_ = "us-central1";
  c.price_date_ = "2026-07-30";
  RegionPrices& us = c.regions_["us-central1"];
  us.machines = internal::BuiltInMachines();
  us.accelerators = internal::UsCentral1Prices().accelerators;
  for (const std::string& region : internal::S1MachineTable().regions) {
    if (region != "us-central1") c.regions_[region] = internal::Regional(region, us);
  }
  c.own_ = internal::OwnHardwareDefaults().own;
  return c;
}

}  // namespace stoker::cost
