// The price tables shipped with Stoker (Catalog::BuiltIn): us-central1 list
// prices with their sources and dates (docs/prices.md, keep the two in step),
// the other regions' from S1's per-region table (prices/s1_regions.yaml) by the
// rules below, legacy AI Platform machine names, and own-hardware defaults.
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
constexpr char kS3[] = "S3 Vertex pricing page 2026-10-07";
constexpr char kS3Half[] = "derived: half of n1-standard-4 (S3 Vertex pricing page 2026-10-07)";
constexpr char kVertexCpuRule[] =
    "est.: S1 Compute Engine price x 1.15 (the S3 n1-standard-4 ratio, 2026-10-07)";
constexpr char kVertexGpuMachineRule[] =
    "est.: host part x 1.15 + bundled local SSD + GPUs at the Vertex GPU rate (S1 2026-07-30, "
    "S3 2026-10-07)";
constexpr char kVertexGpuRule[] =
    "est.: Compute Engine price x 1.15 (Vertex GPU uplift seen between 1.00 and 1.20)";
constexpr char kT4Vertex[] =
    "public Vertex job script citing cloud.google.com/vertex-ai/pricing (= 0.35 x 1.15)";
constexpr char kK80Ce[] =
    "S4b AI Platform pricing 2019-11-04 (BASIC_GPU $0.83 - n1-standard-8 $0.38)";
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

constexpr double kNone = -1;  // "no figure" in the tables below

std::optional<Rate> MakeRate(double usd, const char* confidence, const char* source) {
  if (usd < 0) return std::nullopt;
  return Rate{usd, confidence, source};
}

// §1 of the reference: Compute Engine list prices, us-central1, S1 2026-07-30.
struct MachineRow {
  const char* name;
  double vcpus;
  double memory_gb;
  const char* gpu_type;
  int gpu_count;
  double compute_engine;  // on demand, whole VM
  double spot;            // Spot snapshot, whole VM
  double vertex;          // estimate (confidence C) unless overridden below
};

// CPU-only types: Vertex = CE x 1.15 (n1-standard-4's Vertex price is read
// from S3 and set below).
constexpr MachineRow kCpuMachines[] = {
    {"n1-standard-4", 4, 15, "", 0, 0.1900, 0.0670, 0.21849885},
    {"n1-standard-8", 8, 30, "", 0, 0.3800, 0.1340, 0.4370},
    {"n1-standard-16", 16, 60, "", 0, 0.7600, 0.2680, 0.8740},
    {"n1-standard-32", 32, 120, "", 0, 1.5200, 0.5361, 1.7480},
    {"n1-standard-64", 64, 240, "", 0, 3.0400, 1.0722, 3.4960},
    {"n1-standard-96", 96, 360, "", 0, 4.5600, 1.6082, 5.2440},
    {"n1-highmem-2", 2, 13, "", 0, 0.1183, 0.0417, 0.1360},
    {"n1-highmem-4", 4, 26, "", 0, 0.2366, 0.0834, 0.2721},
    {"n1-highmem-8", 8, 52, "", 0, 0.4732, 0.1669, 0.5442},
    {"n1-highmem-16", 16, 104, "", 0, 0.9464, 0.3338, 1.0884},
    {"n1-highmem-32", 32, 208, "", 0, 1.8928, 0.6676, 2.1768},
    {"n1-highmem-64", 64, 416, "", 0, 3.7857, 1.3351, 4.3536},
    {"n1-highmem-96", 96, 624, "", 0, 5.6785, 2.0027, 6.5303},
    {"n1-highcpu-16", 16, 14.4, "", 0, 0.5668, 0.1999, 0.6518},
    {"n1-highcpu-32", 32, 28.8, "", 0, 1.1336, 0.3998, 1.3036},
    {"n1-highcpu-64", 64, 57.6, "", 0, 2.2672, 0.7997, 2.6072},
    {"n1-highcpu-96", 96, 86.4, "", 0, 3.4007, 1.1995, 3.9108},
    {"e2-standard-4", 4, 16, "", 0, 0.1340, 0.0804, 0.1541},
    {"e2-standard-8", 8, 32, "", 0, 0.2680, 0.1608, 0.3083},
    {"e2-standard-16", 16, 64, "", 0, 0.5361, 0.3217, 0.6165},
    {"e2-standard-32", 32, 128, "", 0, 1.0722, 0.6434, 1.2330},
};

// Types with built-in GPUs: Vertex = host part x 1.15 + bundled local SSD +
// GPUs at the Vertex GPU rate (all estimates).
constexpr MachineRow kGpuMachines[] = {
    {"a2-highgpu-1g", 12, 85, "NVIDIA_TESLA_A100", 1, 3.6734, 1.9280, 4.2244},
    {"a2-highgpu-2g", 24, 170, "NVIDIA_TESLA_A100", 2, 7.3468, 3.8560, 8.4488},
    {"a2-highgpu-4g", 48, 340, "NVIDIA_TESLA_A100", 4, 14.6935, 7.7121, 16.8976},
    {"a2-highgpu-8g", 96, 680, "NVIDIA_TESLA_A100", 8, 29.3871, 15.4242, 33.7951},
    {"a2-megagpu-16g", 96, 1360, "NVIDIA_TESLA_A100", 16, 55.7395, 29.2557, 64.1004},
    {"a2-ultragpu-1g", 12, 170, "NVIDIA_A100_80GB", 1, 5.0688, 2.7595, 5.8230},
    {"a2-ultragpu-2g", 24, 340, "NVIDIA_A100_80GB", 2, 10.1376, 5.5191, 11.6459},
    {"a2-ultragpu-4g", 48, 680, "NVIDIA_A100_80GB", 4, 20.2752, 11.0382, 23.2918},
    {"a2-ultragpu-8g", 96, 1360, "NVIDIA_A100_80GB", 8, 40.5504, 22.0764, 46.5836},
    {"a3-highgpu-1g", 26, 234, "NVIDIA_H100_80GB", 1, 11.0612, 6.3262, 11.2386},
    {"a3-highgpu-2g", 52, 468, "NVIDIA_H100_80GB", 2, 22.1225, 12.6524, 22.4773},
    {"a3-highgpu-4g", 104, 936, "NVIDIA_H100_80GB", 4, 44.2450, 25.3048, 44.9545},
    {"a3-highgpu-8g", 208, 1872, "NVIDIA_H100_80GB", 8, 88.4900, 50.6095, 89.9090},
    // Not priced for us-central1 in S1 (see WhyMissing).
    {"a3-megagpu-8g", 208, 1872, "NVIDIA_H100_MEGA_80GB", 8, kNone, kNone, kNone},
    {"g2-standard-4", 4, 16, "NVIDIA_L4", 1, 0.7068, 0.3973, 0.8129},
    {"g2-standard-8", 8, 32, "NVIDIA_L4", 1, 0.8536, 0.4799, 0.9817},
    {"g2-standard-12", 12, 48, "NVIDIA_L4", 1, 1.0004, 0.5624, 1.1505},
    {"g2-standard-16", 16, 64, "NVIDIA_L4", 1, 1.1472, 0.6449, 1.3193},
    {"g2-standard-24", 24, 96, "NVIDIA_L4", 2, 2.0008, 1.1248, 2.3010},
    {"g2-standard-32", 32, 128, "NVIDIA_L4", 1, 1.7344, 0.9751, 1.9945},
    {"g2-standard-48", 48, 192, "NVIDIA_L4", 4, 4.0017, 2.2496, 4.6019},
    {"g2-standard-96", 96, 384, "NVIDIA_L4", 8, 8.0033, 4.4993, 9.2038},
};

// Legacy AI Platform machine names and the Compute Engine machine (and GPUs)
// each was built on (reference §3b; the 2019 Americas price is a cross-check
// shown in a note).
constexpr LegacyMachine kLegacyMachines[] = {
    {"standard", "n1-standard-4", "", 0, 0.19},
    {"large_model", "n1-highmem-8", "", 0, 0.4736},
    {"complex_model_s", "n1-highcpu-8", "", 0, 0.2836},
    {"complex_model_m", "n1-highcpu-16", "", 0, 0.5672},
    {"complex_model_l", "n1-highcpu-32", "", 0, 1.1344},
    {"standard_gpu", "n1-standard-8", "NVIDIA_TESLA_K80", 1, 0.83},
    {"complex_model_m_gpu", "n1-standard-16", "NVIDIA_TESLA_K80", 4, 2.56},
};

// Power of GPUs without a published purchase price, so that a config entry
// that gives only the purchase price still counts power (reference §5).
constexpr KnownWatts kKnownWatts[] = {
    {"NVIDIA_L4", 72, "L4 72 W, spec aggregators"},
    {"NVIDIA_TESLA_T4", 70, "T4 70 W, spec aggregators"},
    {"NVIDIA_TESLA_V100", 250, "V100 PCIe 250 W (SXM2 300 W), spec aggregators"},
    {"NVIDIA_TESLA_K80", 300, "K80 300 W max, hobbyist write-up"},
};

// A shipped row: Compute Engine figures read from S1 (confidence A), the
// Vertex one estimated by `vertex_rule` (confidence C).
MachinePrice FromRow(const MachineRow& r, const char* vertex_rule) {
  MachinePrice m;
  m.vcpus = r.vcpus;
  m.memory_gb = r.memory_gb;
  m.gpu_type = r.gpu_type;
  m.gpu_count = r.gpu_count;
  m.compute_engine = MakeRate(r.compute_engine, "A", kS1);
  m.spot = MakeRate(r.spot, "A", kS1Spot);
  m.vertex = MakeRate(r.vertex, "C", vertex_rule);
  return m;
}

// §1: the machine types, whole VM per hour.
std::map<std::string, MachinePrice> BuiltInMachines() {
  std::map<std::string, MachinePrice> machines;
  for (const MachineRow& r : kCpuMachines) machines[r.name] = FromRow(r, kVertexCpuRule);
  machines["n1-standard-4"].vertex = MakeRate(0.21849885, "A", kS3);

  // Not in the reference table; derived (confidence C) because the legacy
  // names and small jobs need them.
  {
    MachinePrice m;
    m.vcpus = 2;
    m.memory_gb = 7.5;
    m.compute_engine = MakeRate(0.1900 / 2, "C", kS1Half4);
    m.spot = MakeRate(0.0670 / 2, "C", kS1Half4);
    m.vertex = MakeRate(0.21849885 / 2, "C", kS3Half);
    machines["n1-standard-2"] = m;
  }
  {
    MachinePrice m;
    m.vcpus = 8;
    m.memory_gb = 7.2;
    m.compute_engine = MakeRate(0.5668 / 2, "C", kS1HalfHighcpu16);
    m.spot = MakeRate(0.1999 / 2, "C", kS1HalfHighcpu16);
    m.vertex = MakeRate(0.5668 / 2 * 1.15, "C", kVertexCpuRule);
    machines["n1-highcpu-8"] = m;
  }

  for (const MachineRow& r : kGpuMachines) {
    machines[r.name] = FromRow(r, kVertexGpuMachineRule);
  }
  return machines;
}

std::map<std::string, AcceleratorPrice> BuiltInAccelerators() {
  std::map<std::string, AcceleratorPrice> acc;
  // §2: per GPU-hour. N1 counts from §1a (S6, SkyPilot transcribing
  // cloud.google.com/compute/docs/gpus).
  acc["NVIDIA_TESLA_T4"] = {MakeRate(0.35, "A", kS2),
                            MakeRate(0.14, "C", kS2Spot),
                            MakeRate(0.4025, "B", kT4Vertex),
                            {1, 2, 4}};
  acc["NVIDIA_TESLA_V100"] = {MakeRate(2.48, "A", kS2),
                              MakeRate(0.992, "C", kS2Spot),
                              MakeRate(2.852, "C", kVertexGpuRule),
                              {1, 2, 4, 8}};
  acc["NVIDIA_TESLA_P100"] = {MakeRate(1.46, "A", kS2),
                              MakeRate(0.584, "C", kS2Spot),
                              MakeRate(1.679, "C", kVertexGpuRule),
                              {1, 2, 4}};
  acc["NVIDIA_TESLA_P4"] = {MakeRate(0.60, "A", kS2),
                            MakeRate(0.24, "C", kS2Spot),
                            MakeRate(0.69, "C", kVertexGpuRule),
                            {1, 2, 4}};
  acc["NVIDIA_TESLA_K80"] = {MakeRate(0.45, "B", kK80Ce),
                             std::nullopt,
                             MakeRate(0.5175, "C", kVertexGpuRule),
                             {1, 2, 4, 8}};
  acc["NVIDIA_TESLA_A100"] = {
      MakeRate(2.933908, "A", "S1 Cyclenerd pricing.yml 2026-07-30 (a2 arithmetic)"),
      std::nullopt,
      MakeRate(3.3740, "C", kVertexGpuRule),
      {}};
  acc["NVIDIA_A100_80GB"] = {
      MakeRate(3.92808, "A", "S1 Cyclenerd pricing.yml 2026-07-30 (a2-ultragpu arithmetic)"),
      std::nullopt,
      MakeRate(4.5173, "C", kVertexGpuRule),
      {}};
  acc["NVIDIA_L4"] = {MakeRate(0.56004, "A", "S1 Cyclenerd pricing.yml 2026-07-30 (g2 arithmetic)"),
                      MakeRate(0.2231, "C", kS2Spot),
                      MakeRate(0.6440, "C", kVertexGpuRule),
                      {}};
  acc["NVIDIA_H100_80GB"] = {
      MakeRate(9.79655, "A", "S1 Cyclenerd pricing.yml 2026-07-30 (a3 arithmetic)"),
      std::nullopt,
      MakeRate(9.79655057, "A", kS3),
      {}};
  acc["NVIDIA_H100_MEGA_80GB"] = {
      MakeRate(10.34, "C", "S2 SkyPilot vms.csv, 8-GPU row / 8"), std::nullopt, std::nullopt, {}};
  return acc;
}

OwnHardware BuiltInOwnHardware() {
  OwnHardware own;
  // §5: own hardware. Datacenter prices are press reports and drift.
  own.usd_per_kwh = 0.15;
  own.pue = 1.0;
  own.gpus["NVIDIA_H100_80GB"] = {
      30000, 3, 350,
      "S8 H100 PCIe ~$30,000 (FT report via press 2023-08-15); 350 W (NVIDIA PB-11133-001_v02, "
      "2022-11)"};
  own.gpus["NVIDIA_A100_80GB"] = {
      10000, 3, 300,
      "S8 A100 80GB ~$10,000 (CNBC 2023-02-23); 300 W PCIe (SXM4 400 W; thundercompute.com "
      "spec table)"};
  own.gpus["NVIDIA_GEFORCE_RTX_4090"] = {
      1599, 3, 450, "S8 RTX 4090 $1,599 MSRP at launch 2022-10-12; 450 W TGP (launch coverage)"};
  own.gpus["NVIDIA_GEFORCE_RTX_5090"] = {
      1999, 3, 575, "S8 RTX 5090 $1,999 MSRP (Founders Edition) 2025-01-30; 575 W (LTT Labs)"};
  return own;
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
  for (const LegacyMachine& l : kLegacyMachines) {
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
  for (const KnownWatts& k : kKnownWatts) {
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
  us.accelerators = internal::BuiltInAccelerators();
  for (const std::string& region : internal::S1MachineTable().regions) {
    if (region != "us-central1") c.regions_[region] = internal::Regional(region, us);
  }
  c.own_ = internal::BuiltInOwnHardware();
  return c;
}

}  // namespace stoker::cost
