#include "cost/catalog.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

namespace stoker::cost {
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

constexpr char kConfig[] = "config";
constexpr double kNone = -1;            // "no figure" in the tables below
constexpr double kHoursPerYear = 8766;  // 365.25 days x 24 h

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
struct LegacyMachine {
  const char* name;
  const char* machine_type;
  const char* gpu_type;  // "" = none
  int gpu_count;
  double usd_2019;  // S4b, 2019-11-04
};
constexpr LegacyMachine kLegacyMachines[] = {
    {"standard", "n1-standard-4", "", 0, 0.19},
    {"large_model", "n1-highmem-8", "", 0, 0.4736},
    {"complex_model_s", "n1-highcpu-8", "", 0, 0.2836},
    {"complex_model_m", "n1-highcpu-16", "", 0, 0.5672},
    {"complex_model_l", "n1-highcpu-32", "", 0, 1.1344},
    {"standard_gpu", "n1-standard-8", "NVIDIA_TESLA_K80", 1, 0.83},
    {"complex_model_m_gpu", "n1-standard-16", "NVIDIA_TESLA_K80", 4, 2.56},
};

const LegacyMachine* FindLegacy(const std::string& name) {
  for (const LegacyMachine& l : kLegacyMachines) {
    if (name == l.name) return &l;
  }
  return nullptr;
}

// Why a shipped row lacks a figure, for the reason text.
std::string WhyMissing(const std::string& name) {
  if (name == "a3-megagpu-8g") {
    return "S1 (2026-07-30) has no us-central1 price for a3-megagpu-8g (us-east4: $92.9376/h on "
           "demand, $23.2752/h Spot); set it under cost.machines.a3-megagpu-8g";
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

// Power of GPUs without a published purchase price, so that a config entry
// that gives only the purchase price still counts power (reference §5).
struct KnownWatts {
  const char* gpu_type;
  double watts;
  const char* source;
};
constexpr KnownWatts kKnownWatts[] = {
    {"NVIDIA_L4", 72, "L4 72 W, spec aggregators"},
    {"NVIDIA_TESLA_T4", 70, "T4 70 W, spec aggregators"},
    {"NVIDIA_TESLA_V100", 250, "V100 PCIe 250 W (SXM2 300 W), spec aggregators"},
    {"NVIDIA_TESLA_K80", 300, "K80 300 W max, hobbyist write-up"},
};

// ---------------------------------------------------------------------------
// Formatting and confidence.

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

// C < B < A < config (an operator's own figure is taken as given).
int Strength(const std::string& confidence) {
  if (confidence == "A") return 2;
  if (confidence == "B") return 1;
  if (confidence == kConfig) return 3;
  return 0;  // C, or anything unknown
}

// ---------------------------------------------------------------------------
// Pricing.

enum Market { kVertex, kComputeEngine, kSpot, kMarkets };
constexpr const char* kMarketNames[kMarkets] = {"Vertex", "Compute Engine on-demand",
                                                "Compute Engine Spot"};
constexpr const char* kMachineKeys[kMarkets] = {"vertex_usd_per_hour",
                                                "compute_engine_usd_per_hour", "spot_usd_per_hour"};
constexpr const char* kAcceleratorKeys[kMarkets] = {
    "vertex_usd_per_gpu_hour", "compute_engine_usd_per_gpu_hour", "spot_usd_per_gpu_hour"};

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
void Combine(const std::vector<Part>& parts, CloudPrice& out) {
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
      std::string w = WhyMissing(p.name);
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

bool IsWhole(double c) { return std::floor(c) == c; }

std::string CountText(double count) { return Num(count) + " x "; }

std::string CountsText(const std::vector<int>& counts) {
  std::vector<std::string> s;
  for (int c : counts) s.push_back(std::to_string(c));
  return Join(s, ", ");
}

std::string FractionNote(double count) {
  return "Vertex sells whole GPUs: " + Num(count) + " of a GPU priced as 1";
}

// ---------------------------------------------------------------------------
// Config parsing.

std::string ValueText(const YAML::Node& v) {
  if (v.IsScalar()) return "'" + v.Scalar() + "'";
  if (v.IsSequence()) return "a list";
  if (v.IsMap()) return "a mapping";
  return "nothing";
}

Status UnknownKey(const std::string& path, const std::vector<std::string>& accepted) {
  return InvalidArgument(path + ": unknown key (accepted keys: " + Join(accepted, ", ") + ")");
}

Status CheckKey(const YAML::Node& key, const std::string& parent) {
  if (!key.IsScalar() || key.Scalar().empty()) {
    return InvalidArgument(parent + ": keys must be non-empty strings");
  }
  return OkStatus();
}

// A plain decimal number (no quotes, no hex, no inf/nan).
bool ParseNumber(const YAML::Node& v, double* out) {
  if (!v.IsScalar() || v.Tag() == "!") return false;
  const std::string& s = v.Scalar();
  if (s.empty() || s.find_first_of("0123456789") == std::string::npos) return false;
  if (s.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(d)) return false;
  *out = d;
  return true;
}

enum class Bound { kAtLeastZero, kAboveZero, kAtLeastOne };

Status ReadNumber(const YAML::Node& v, const std::string& path, Bound bound, double* out) {
  const char* want = bound == Bound::kAtLeastZero ? "a number >= 0"
                     : bound == Bound::kAboveZero ? "a number > 0"
                                                  : "a number >= 1";
  double d = 0;
  bool ok = ParseNumber(v, &d);
  if (ok) {
    ok = bound == Bound::kAtLeastZero ? d >= 0 : bound == Bound::kAboveZero ? d > 0 : d >= 1;
  }
  if (!ok) return InvalidArgument(path + ": must be " + want + ", got " + ValueText(v));
  *out = d;
  return OkStatus();
}

Status ReadWhole(const YAML::Node& v, const std::string& path, int min, int* out) {
  double d = 0;
  if (!ParseNumber(v, &d) || !IsWhole(d) || d < min || d > 1024) {
    return InvalidArgument(path + ": must be a whole number from " + std::to_string(min) +
                           " to 1024, got " + ValueText(v));
  }
  *out = static_cast<int>(d);
  return OkStatus();
}

Status ReadString(const YAML::Node& v, const std::string& path, std::string* out) {
  if (!v.IsScalar() || v.Scalar().empty()) {
    return InvalidArgument(path + ": must be a non-empty string, got " + ValueText(v));
  }
  *out = v.Scalar();
  return OkStatus();
}

Status ReadRate(const YAML::Node& v, const std::string& path, std::optional<Rate>* out) {
  double d = 0;
  STOKER_RETURN_IF_ERROR(ReadNumber(v, path, Bound::kAtLeastZero, &d));
  *out = Rate{d, kConfig, kConfig};
  return OkStatus();
}

// A mapping, or null (= nothing to change). Anything else is an error.
Status CheckMapping(const YAML::Node& v, const std::string& path, const char* example) {
  if (v.IsNull() || v.IsMap()) return OkStatus();
  return InvalidArgument(path + ": must be a mapping" + (*example ? std::string(", e.g. ") : "") +
                         example + ", got " + ValueText(v));
}

Status ApplyMachines(const YAML::Node& node, std::map<std::string, MachinePrice>& machines) {
  const std::string base = "cost.machines";
  STOKER_RETURN_IF_ERROR(CheckMapping(
      node, base, "{lab-box: {vcpus: 16, memory_gb: 64, compute_engine_usd_per_hour: 2.0}}"));
  if (node.IsNull()) return OkStatus();
  static const std::vector<std::string> kKeys = {"vcpus",
                                                 "memory_gb",
                                                 "gpu_type",
                                                 "gpu_count",
                                                 kMachineKeys[kVertex],
                                                 kMachineKeys[kComputeEngine],
                                                 kMachineKeys[kSpot]};
  for (const auto& kv : node) {
    STOKER_RETURN_IF_ERROR(CheckKey(kv.first, base));
    const std::string name = kv.first.Scalar();
    const std::string path = base + "." + name;
    if (!kv.second.IsMap()) {
      return InvalidArgument(path + ": must be a mapping of " + Join(kKeys, ", ") + ", got " +
                             ValueText(kv.second));
    }
    auto it = machines.find(name);
    const bool added = it == machines.end();
    MachinePrice row = added ? MachinePrice{} : it->second;
    bool has_rate = false;
    for (const auto& field : kv.second) {
      STOKER_RETURN_IF_ERROR(CheckKey(field.first, path));
      const std::string key = field.first.Scalar();
      const std::string at = path + "." + key;
      const YAML::Node& v = field.second;
      if (key == "vcpus") {
        STOKER_RETURN_IF_ERROR(ReadNumber(v, at, Bound::kAboveZero, &row.vcpus));
      } else if (key == "memory_gb") {
        STOKER_RETURN_IF_ERROR(ReadNumber(v, at, Bound::kAboveZero, &row.memory_gb));
      } else if (key == "gpu_type") {
        STOKER_RETURN_IF_ERROR(ReadString(v, at, &row.gpu_type));
      } else if (key == "gpu_count") {
        STOKER_RETURN_IF_ERROR(ReadWhole(v, at, 0, &row.gpu_count));
      } else if (key == kMachineKeys[kVertex]) {
        STOKER_RETURN_IF_ERROR(ReadRate(v, at, &row.vertex));
        has_rate = true;
      } else if (key == kMachineKeys[kComputeEngine]) {
        STOKER_RETURN_IF_ERROR(ReadRate(v, at, &row.compute_engine));
        has_rate = true;
      } else if (key == kMachineKeys[kSpot]) {
        STOKER_RETURN_IF_ERROR(ReadRate(v, at, &row.spot));
        has_rate = true;
      } else {
        return UnknownKey(at, kKeys);
      }
    }
    if (row.gpu_type.empty() != (row.gpu_count == 0)) {
      return InvalidArgument(path +
                             ": give gpu_type and gpu_count together (gpu_count above 0), or "
                             "neither");
    }
    if (added && !has_rate) {
      return InvalidArgument(path + ": a new machine type needs at least one of " +
                             kMachineKeys[kVertex] + ", " + kMachineKeys[kComputeEngine] + ", " +
                             kMachineKeys[kSpot]);
    }
    machines[name] = row;
  }
  return OkStatus();
}

Status ApplyAccelerators(const YAML::Node& node,
                         std::map<std::string, AcceleratorPrice>& accelerators) {
  const std::string base = "cost.accelerators";
  STOKER_RETURN_IF_ERROR(
      CheckMapping(node, base, "{NVIDIA_TESLA_T4: {vertex_usd_per_gpu_hour: 0.40}}"));
  if (node.IsNull()) return OkStatus();
  static const std::vector<std::string> kKeys = {kAcceleratorKeys[kVertex],
                                                 kAcceleratorKeys[kComputeEngine],
                                                 kAcceleratorKeys[kSpot], "n1_counts"};
  for (const auto& kv : node) {
    STOKER_RETURN_IF_ERROR(CheckKey(kv.first, base));
    const std::string name = kv.first.Scalar();
    const std::string path = base + "." + name;
    if (name.rfind("TPU_", 0) == 0) {
      return InvalidArgument(path + ": TPUs are not priced by Stoker's catalog");
    }
    if (!kv.second.IsMap()) {
      return InvalidArgument(path + ": must be a mapping of " + Join(kKeys, ", ") + ", got " +
                             ValueText(kv.second));
    }
    auto it = accelerators.find(name);
    const bool added = it == accelerators.end();
    AcceleratorPrice row = added ? AcceleratorPrice{} : it->second;
    bool has_rate = false;
    for (const auto& field : kv.second) {
      STOKER_RETURN_IF_ERROR(CheckKey(field.first, path));
      const std::string key = field.first.Scalar();
      const std::string at = path + "." + key;
      const YAML::Node& v = field.second;
      if (key == kAcceleratorKeys[kVertex]) {
        STOKER_RETURN_IF_ERROR(ReadRate(v, at, &row.vertex));
        has_rate = true;
      } else if (key == kAcceleratorKeys[kComputeEngine]) {
        STOKER_RETURN_IF_ERROR(ReadRate(v, at, &row.compute_engine));
        has_rate = true;
      } else if (key == kAcceleratorKeys[kSpot]) {
        STOKER_RETURN_IF_ERROR(ReadRate(v, at, &row.spot));
        has_rate = true;
      } else if (key == "n1_counts") {
        if (!v.IsSequence()) {
          return InvalidArgument(at + ": must be a list of whole numbers, e.g. [1, 2, 4], got " +
                                 ValueText(v));
        }
        std::vector<int> counts;
        for (size_t i = 0; i < v.size(); ++i) {
          int c = 0;
          STOKER_RETURN_IF_ERROR(ReadWhole(v[i], at + "[" + std::to_string(i) + "]", 1, &c));
          counts.push_back(c);
        }
        std::sort(counts.begin(), counts.end());
        counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
        row.n1_counts = counts;
      } else {
        return UnknownKey(at, kKeys);
      }
    }
    if (added && !has_rate) {
      return InvalidArgument(path + ": a new accelerator type needs at least one of " +
                             kAcceleratorKeys[kVertex] + ", " + kAcceleratorKeys[kComputeEngine] +
                             ", " + kAcceleratorKeys[kSpot]);
    }
    accelerators[name] = row;
  }
  return OkStatus();
}

// One asset mapping (a GPU type or the node) over `asset` (nullopt = new).
Status ApplyAsset(const YAML::Node& node, const std::string& path, const std::string& gpu_type,
                  std::optional<Asset>& asset) {
  static const std::vector<std::string> kKeys = {"purchase_usd", "life_years", "watts"};
  if (!node.IsMap()) {
    return InvalidArgument(path + ": must be a mapping of " + Join(kKeys, ", ") +
                           ", e.g. {purchase_usd: 2500, life_years: 4, watts: 72}, got " +
                           ValueText(node));
  }
  Asset a = asset.value_or(Asset{});
  bool has_purchase = false, has_watts = false;
  for (const auto& field : node) {
    STOKER_RETURN_IF_ERROR(CheckKey(field.first, path));
    const std::string key = field.first.Scalar();
    const std::string at = path + "." + key;
    if (key == "purchase_usd") {
      STOKER_RETURN_IF_ERROR(ReadNumber(field.second, at, Bound::kAtLeastZero, &a.purchase_usd));
      has_purchase = true;
    } else if (key == "life_years") {
      STOKER_RETURN_IF_ERROR(ReadNumber(field.second, at, Bound::kAboveZero, &a.life_years));
    } else if (key == "watts") {
      STOKER_RETURN_IF_ERROR(ReadNumber(field.second, at, Bound::kAtLeastZero, &a.watts));
      has_watts = true;
    } else {
      return UnknownKey(at, kKeys);
    }
  }
  std::string source = kConfig;
  if (!asset) {
    if (!has_purchase) return InvalidArgument(path + ".purchase_usd: required (no default known)");
    if (!has_watts) {
      const KnownWatts* known = nullptr;
      for (const KnownWatts& k : kKnownWatts) {
        if (gpu_type == k.gpu_type) known = &k;
      }
      if (!known) {
        return InvalidArgument(path + ".watts: required (no default known" +
                               (gpu_type.empty() ? std::string() : " for " + gpu_type) +
                               "; 0 leaves power out)");
      }
      a.watts = known->watts;
      source = std::string(kConfig) + " (watts: " + known->source + ")";
    }
  } else if (!has_purchase || !has_watts) {
    // Some figures stay the shipped ones: say so.
    source = std::string(kConfig) + " over " + asset->source;
  }
  a.source = source;
  asset = a;
  return OkStatus();
}

Status ApplyOwnHardware(const YAML::Node& node, OwnHardware& own) {
  const std::string base = "cost.own_hardware";
  STOKER_RETURN_IF_ERROR(CheckMapping(node, base, "{usd_per_kwh: 0.12, pue: 1.3}"));
  if (node.IsNull()) return OkStatus();
  static const std::vector<std::string> kKeys = {"usd_per_kwh", "pue", "gpus", "node"};
  for (const auto& kv : node) {
    STOKER_RETURN_IF_ERROR(CheckKey(kv.first, base));
    const std::string key = kv.first.Scalar();
    const std::string at = base + "." + key;
    const YAML::Node& v = kv.second;
    if (key == "usd_per_kwh") {
      STOKER_RETURN_IF_ERROR(ReadNumber(v, at, Bound::kAtLeastZero, &own.usd_per_kwh));
    } else if (key == "pue") {
      STOKER_RETURN_IF_ERROR(ReadNumber(v, at, Bound::kAtLeastOne, &own.pue));
    } else if (key == "gpus") {
      STOKER_RETURN_IF_ERROR(
          CheckMapping(v, at, "{NVIDIA_L4: {purchase_usd: 2500, life_years: 4, watts: 72}}"));
      if (v.IsNull()) continue;
      for (const auto& g : v) {
        STOKER_RETURN_IF_ERROR(CheckKey(g.first, at));
        const std::string type = g.first.Scalar();
        std::optional<Asset> asset;
        if (auto it = own.gpus.find(type); it != own.gpus.end()) asset = it->second;
        STOKER_RETURN_IF_ERROR(ApplyAsset(g.second, at + "." + type, type, asset));
        own.gpus[type] = *asset;
      }
    } else if (key == "node") {
      if (v.IsNull()) continue;
      STOKER_RETURN_IF_ERROR(ApplyAsset(v, at, "", own.node));
    } else {
      return UnknownKey(at, kKeys);
    }
  }
  return OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------

Catalog Catalog::BuiltIn() {
  Catalog c;
  c.region_ = "us-central1";
  c.price_date_ = "2026-07-30";

  for (const MachineRow& r : kCpuMachines) {
    MachinePrice m;
    m.vcpus = r.vcpus;
    m.memory_gb = r.memory_gb;
    m.compute_engine = MakeRate(r.compute_engine, "A", kS1);
    m.spot = MakeRate(r.spot, "A", kS1Spot);
    m.vertex = MakeRate(r.vertex, "C", kVertexCpuRule);
    c.machines_[r.name] = m;
  }
  c.machines_["n1-standard-4"].vertex = MakeRate(0.21849885, "A", kS3);

  // Not in the reference table; derived (confidence C) because the legacy
  // names and small jobs need them.
  {
    MachinePrice m;
    m.vcpus = 2;
    m.memory_gb = 7.5;
    m.compute_engine = MakeRate(0.1900 / 2, "C", kS1Half4);
    m.spot = MakeRate(0.0670 / 2, "C", kS1Half4);
    m.vertex = MakeRate(0.21849885 / 2, "C", kS3Half);
    c.machines_["n1-standard-2"] = m;
  }
  {
    MachinePrice m;
    m.vcpus = 8;
    m.memory_gb = 7.2;
    m.compute_engine = MakeRate(0.5668 / 2, "C", kS1HalfHighcpu16);
    m.spot = MakeRate(0.1999 / 2, "C", kS1HalfHighcpu16);
    m.vertex = MakeRate(0.5668 / 2 * 1.15, "C", kVertexCpuRule);
    c.machines_["n1-highcpu-8"] = m;
  }

  for (const MachineRow& r : kGpuMachines) {
    MachinePrice m;
    m.vcpus = r.vcpus;
    m.memory_gb = r.memory_gb;
    m.gpu_type = r.gpu_type;
    m.gpu_count = r.gpu_count;
    m.compute_engine = MakeRate(r.compute_engine, "A", kS1);
    m.spot = MakeRate(r.spot, "A", kS1Spot);
    m.vertex = MakeRate(r.vertex, "C", kVertexGpuMachineRule);
    c.machines_[r.name] = m;
  }

  // §2: per GPU-hour. N1 counts from §1a (S6, SkyPilot transcribing
  // cloud.google.com/compute/docs/gpus).
  auto& acc = c.accelerators_;
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

  // §5: own hardware. Datacenter prices are press reports and drift.
  auto& own = c.own_;
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
  return c;
}

Status Catalog::Apply(const YAML::Node& cost) {
  if (!cost.IsDefined() || cost.IsNull()) return OkStatus();
  if (!cost.IsMap()) return InvalidArgument("cost: must be a mapping, got " + ValueText(cost));
  Catalog next = *this;
  static const std::vector<std::string> kKeys = {"region", "machines", "accelerators",
                                                 "own_hardware"};
  try {
    for (const auto& kv : cost) {
      STOKER_RETURN_IF_ERROR(CheckKey(kv.first, "cost"));
      const std::string key = kv.first.Scalar();
      if (key == "region") {
        STOKER_RETURN_IF_ERROR(ReadString(kv.second, "cost.region", &next.region_));
      } else if (key == "machines") {
        STOKER_RETURN_IF_ERROR(ApplyMachines(kv.second, next.machines_));
      } else if (key == "accelerators") {
        STOKER_RETURN_IF_ERROR(ApplyAccelerators(kv.second, next.accelerators_));
      } else if (key == "own_hardware") {
        STOKER_RETURN_IF_ERROR(ApplyOwnHardware(kv.second, next.own_));
      } else {
        return UnknownKey("cost." + key, kKeys);
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("cost: ") + e.what());
  }
  *this = std::move(next);
  return OkStatus();
}

CloudPrice Catalog::PriceReplica(const spec::MachineSpec& machine) const {
  CloudPrice out;
  const std::string& type = machine.machine_type;
  std::string accel = machine.accelerator_type;
  if (accel == "ACCELERATOR_TYPE_UNSPECIFIED") accel.clear();
  const double count = machine.accelerator_count;
  out.basis = type;
  if (!accel.empty() && count > 0) out.basis += " + " + CountText(count) + accel;
  auto no_price = [&out](std::string reason) {
    out.reason = std::move(reason);
    return out;
  };

  if (IsTpu(type, accel)) return no_price("TPUs are not priced by Stoker's catalog");
  if (!std::isfinite(count) || count < 0) {
    return no_price("accelerator_count " + Num(count) + " is not a count of GPUs");
  }
  if (count > 1 && !IsWhole(count)) {
    return no_price("accelerator_count " + Num(count) +
                    ": counts of 1 or more must be whole numbers");
  }
  if (accel.empty() && count > 0) {
    return no_price("accelerator_count " + Num(count) + " without an accelerator_type");
  }
  if (!accel.empty() && count == 0) {
    out.notes.push_back("accelerator_type " + accel +
                        " with accelerator_count 0: priced without GPUs");
    accel.clear();
    out.basis = type;
  }

  // Resolve the machine: a catalog row, or a legacy AI Platform name.
  const MachinePrice* row = nullptr;
  std::string row_name = type;
  const LegacyMachine* legacy = nullptr;
  if (auto it = machines_.find(type); it != machines_.end()) {
    row = &it->second;
  } else if ((legacy = FindLegacy(type)) != nullptr) {
    row_name = legacy->machine_type;
    if (auto base = machines_.find(row_name); base != machines_.end()) row = &base->second;
  }
  if (!row) {
    if (legacy) {
      return no_price("legacy name '" + type + "' prices as " + row_name +
                      ", which is not in the price catalog (add it under cost.machines in the "
                      "config)");
    }
    return no_price("machine type '" + type +
                    "' is not in the price catalog (add it under cost.machines in the config)");
  }

  // Smallest catalog machine that carries `n` GPUs of `gpu` (for advice).
  auto suggest = [this](const std::string& gpu, double n) -> std::string {
    const std::pair<const std::string, MachinePrice>* best = nullptr;
    for (const auto& entry : machines_) {
      const MachinePrice& m = entry.second;
      if (m.gpu_type != gpu || m.gpu_count < n) continue;
      if (!best ||
          std::tie(m.gpu_count, m.vcpus) < std::tie(best->second.gpu_count, best->second.vcpus)) {
        best = &entry;
      }
    }
    return best ? best->first : std::string();
  };

  // The GPUs that come with the machine: built in (a2, a3, g2) or part of a
  // legacy GPU name.
  std::string bundled_gpu = row->gpu_type;
  int bundled_count = row->gpu_count;
  if (legacy && legacy->gpu_count > 0) {
    bundled_gpu = legacy->gpu_type;
    bundled_count = legacy->gpu_count;
  }

  std::vector<Part> parts;
  parts.push_back(MachinePart(row_name, *row));

  if (bundled_count > 0) {
    const std::string bundled = std::to_string(bundled_count) + " x " + bundled_gpu;
    if (legacy) {
      out.basis = type + " = " + row_name + " + " + bundled + " (legacy AI Platform name)";
    } else {
      out.basis = type + " (" + bundled + " built in)";
    }
    if (!accel.empty() && accel != bundled_gpu) {
      return no_price(type + " comes with " + bundled + "; the spec asks for " + accel);
    }
    if (!accel.empty() && count >= 1 && count != bundled_count) {
      std::string use = suggest(bundled_gpu, count);
      return no_price(type + " comes with " + bundled + "; the spec asks for " + Num(count) +
                      (use.empty() ? std::string() : " (use " + use + ")"));
    }
    if (!accel.empty() && count < 1) {
      out.notes.push_back(bundled_count == 1
                              ? FractionNote(count)
                              : "Vertex sells whole machines: " + Num(count) +
                                    " of a GPU priced as " + type + " with its " + bundled);
    }
    if (legacy) {
      auto a = accelerators_.find(bundled_gpu);
      if (a == accelerators_.end()) {
        return no_price("accelerator type '" + bundled_gpu +
                        "' is not in the price catalog (add it under cost.accelerators in the "
                        "config)");
      }
      parts.push_back(AcceleratorPart(bundled_gpu, bundled_count, a->second));
    }
  } else if (!accel.empty()) {
    const bool n1 = row_name.rfind("n1-", 0) == 0;
    out.basis = row_name + " + " + CountText(count) + accel;
    if (legacy) out.basis = type + " = " + out.basis + " (legacy AI Platform name)";
    if (!n1) {
      return no_price(row_name +
                      " takes no accelerators on Google Cloud: GPUs attach to n1 machines or "
                      "come built into a2, a3 and g2 machines");
    }
    auto a = accelerators_.find(accel);
    if (a == accelerators_.end()) {
      return no_price("accelerator type '" + accel +
                      "' is not in the price catalog (add it under cost.accelerators in the "
                      "config)");
    }
    const double whole = count < 1 ? 1 : count;
    if (a->second.n1_counts.empty()) {
      std::string use = suggest(accel, whole);
      return no_price(accel + " does not attach to n1 machines on Google Cloud; " +
                      (use.empty() ? "use a machine type that comes with it" : "use " + use));
    }
    const auto& allowed = a->second.n1_counts;
    if (std::find(allowed.begin(), allowed.end(), static_cast<int>(whole)) == allowed.end()) {
      return no_price(Num(whole) + " x " + accel +
                      " does not attach to an n1 machine; allowed counts: " + CountsText(allowed));
    }
    if (count < 1) out.notes.push_back(FractionNote(count));
    parts.push_back(AcceleratorPart(accel, whole, a->second));
  } else if (legacy) {
    out.basis = type + " = " + row_name + " (legacy AI Platform name)";
  }

  if (legacy) {
    out.notes.push_back("AI Platform listed " + type + " at $" + Num(legacy->usd_2019) +
                        "/h in the Americas in 2019 (S4b)");
  }
  for (const Part& p : parts) {
    if (p.name == "NVIDIA_TESLA_K80") {
      out.notes.push_back("the K80 is end of life on Google Cloud; its price is the 2019 one");
    }
  }
  Combine(parts, out);
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
