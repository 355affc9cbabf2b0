// The AI Platform Training tables (ai_platform_internal.h): scale tiers,
// legacy machine names, replica roles, GPU types and runtime images.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "spec/ai_platform_internal.h"

namespace stoker::spec::internal {

const Names kScaleTiers = {"BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU", "CUSTOM"};
const Names kScaleTierFlags = {"basic",     "standard-1", "premium-1",
                               "basic-gpu", "basic-tpu",  "custom"};
const Names kGpuTypes = {"NVIDIA_TESLA_K80",      "NVIDIA_TESLA_P100",  "NVIDIA_TESLA_V100",
                         "NVIDIA_TESLA_P4",       "NVIDIA_TESLA_T4",    "NVIDIA_TESLA_A100",
                         "NVIDIA_A100_80GB",      "NVIDIA_L4",          "NVIDIA_H100_80GB",
                         "NVIDIA_H100_MEGA_80GB", "NVIDIA_H200_141GB",  "NVIDIA_B200",
                         "NVIDIA_GB200",          "NVIDIA_RTX_PRO_6000"};

std::string ScaleTierName(std::string_view given) {
  std::string name(given);
  for (char& c : name) c = c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

const char* const kNoTpu =
    "TPUs are not supported on Stoker; use an NVIDIA GPU (acceleratorConfig type such as "
    "NVIDIA_TESLA_T4) with scaleTier CUSTOM";

bool IsTpu(std::string_view s) { return s.rfind("TPU", 0) == 0 || s == "cloud_tpu"; }

namespace {

// The predefined scale tiers. UNCONFIRMED (reference §5.5 and §8): the
// service never published exact machines or replica counts; these are the
// historically documented ones (BASIC_GPU's K80 is deprecated but still a
// valid enum). Change them here only.
const std::array<Tier, 4> kTiers = {{
    {"BASIC", {{{"n1-standard-4", 1, ""}, {}, {}}}},
    {"BASIC_GPU", {{{"n1-standard-8", 1, "NVIDIA_TESLA_K80"}, {}, {}}}},
    {"STANDARD_1", {{{"n1-highcpu-8", 1, ""}, {"n1-highcpu-8", 4, ""}, {"n1-standard-4", 3, ""}}}},
    {"PREMIUM_1",
     {{{"n1-highcpu-16", 1, ""}, {"n1-highcpu-16", 19, ""}, {"n1-highmem-8", 11, ""}}}},
}};

// The legacy GPU machines, from the old AI Platform machine-type table.
// standard_gpu and complex_model_m_gpu are in the resources catalog and pass
// through.
const std::array<LegacyGpuMachine, 7> kLegacyGpuMachines = {{
    {"standard_p100", "n1-standard-8", "NVIDIA_TESLA_P100", 1},
    {"complex_model_m_p100", "n1-standard-16", "NVIDIA_TESLA_P100", 4},
    {"standard_v100", "n1-standard-8", "NVIDIA_TESLA_V100", 1},
    {"large_model_v100", "n1-highmem-8", "NVIDIA_TESLA_V100", 1},
    {"complex_model_m_v100", "n1-standard-16", "NVIDIA_TESLA_V100", 4},
    {"complex_model_l_v100", "n1-standard-32", "NVIDIA_TESLA_V100", 8},
    {"complex_model_l_gpu", "n1-standard-32", "NVIDIA_TESLA_K80", 8},
}};

}  // namespace

const Tier* FindTier(std::string_view name) {
  auto it =
      std::find_if(kTiers.begin(), kTiers.end(), [&](const Tier& t) { return t.name == name; });
  return it == kTiers.end() ? nullptr : &*it;
}

const LegacyGpuMachine* FindLegacyGpuMachine(std::string_view name) {
  for (const LegacyGpuMachine& m : kLegacyGpuMachines) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

bool HasBuiltInGpu(const std::string& machine_type) {
  for (std::string_view prefix : {"a2-", "a3-", "g2-"}) {
    if (machine_type.rfind(prefix, 0) == 0) return true;
  }
  return machine_type == "standard_gpu" || machine_type == "complex_model_m_gpu";
}

const std::array<Role, 4> kRoles = {{
    {"master", "masterType", "masterConfig", nullptr, "--master-machine-type"},
    {"worker", "workerType", "workerConfig", "workerCount", "--worker-machine-type"},
    {"parameter server", "parameterServerType", "parameterServerConfig", "parameterServerCount",
     "--parameter-server-machine-type"},
    {"evaluator", "evaluatorType", "evaluatorConfig", "evaluatorCount", ""},
}};

std::optional<std::pair<int, int>> ParseRuntimeVersion(const std::string& v) {
  size_t dot = v.find('.');
  if (dot == std::string::npos) return std::nullopt;
  int major = 0;
  int minor = 0;
  auto [e1, c1] = std::from_chars(v.data(), v.data() + dot, major);
  auto [e2, c2] = std::from_chars(v.data() + dot + 1, v.data() + v.size(), minor);
  if (dot == 0 || c1 != std::errc() || e1 != v.data() + dot || c2 != std::errc() ||
      e2 != v.data() + v.size() || dot + 1 == v.size()) {
    return std::nullopt;
  }
  return std::make_pair(major, minor);
}

std::string ExecutorImage(const std::optional<std::pair<int, int>>& runtime, bool gpu) {
  int major = runtime ? runtime->first : 2;
  int minor = runtime ? runtime->second : 11;
  if (major <= 1) minor = 15;
  std::string version = major <= 1 ? "1-15" : std::to_string(major) + "-" + std::to_string(minor);
  bool py310 = major > 2 || (major == 2 && minor >= 11);
  return std::string("us-docker.pkg.dev/vertex-ai/training/tf-") + (gpu ? "gpu" : "cpu") + "." +
         version + (py310 ? ".py310" : "") + ":latest";
}

}  // namespace stoker::spec::internal
