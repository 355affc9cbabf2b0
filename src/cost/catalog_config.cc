// Reading the config's `cost:` section over a catalog (Catalog::Apply).
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cost/catalog.h"
#include "cost/catalog_internal.h"

namespace stoker::cost {
namespace internal {
namespace {

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
      const KnownWatts* known = FindKnownWatts(gpu_type);
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
}  // namespace internal

Status Catalog::Apply(const YAML::Node& cost) {
  if (!cost.IsDefined() || cost.IsNull()) return OkStatus();
  if (!cost.IsMap())
    return InvalidArgument("cost: must be a mapping, got " + internal::ValueText(cost));
  Catalog next = *this;
  static const std::vector<std::string> kKeys = {"region", "machines", "accelerators",
                                                 "own_hardware"};
  try {
    for (const auto& kv : cost) {
      STOKER_RETURN_IF_ERROR(internal::CheckKey(kv.first, "cost"));
      const std::string key = kv.first.Scalar();
      if (key == "region") {
        STOKER_RETURN_IF_ERROR(internal::ReadString(kv.second, "cost.region", &next.region_));
        STOKER_RETURN_IF_ERROR(next.CheckRegion(next.region_, "cost.region"));
      } else if (key == "machines") {
        // The operator's figures hold in every region.
        for (auto& [region, prices] : next.regions_) {
          STOKER_RETURN_IF_ERROR(internal::ApplyMachines(kv.second, prices.machines));
        }
      } else if (key == "accelerators") {
        for (auto& [region, prices] : next.regions_) {
          STOKER_RETURN_IF_ERROR(internal::ApplyAccelerators(kv.second, prices.accelerators));
        }
      } else if (key == "own_hardware") {
        STOKER_RETURN_IF_ERROR(internal::ApplyOwnHardware(kv.second, next.own_));
      } else {
        return internal::UnknownKey("cost." + key, kKeys);
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("cost: ") + e.what());
  }
  *this = std::move(next);
  return OkStatus();
}

}  // namespace stoker::cost
