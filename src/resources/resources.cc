#include "resources/resources.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace stoker::resources {

Node DetectLocalNode() {
  Node node;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  node.name = host[0] ? host : "localhost";
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  node.cpus = n > 0 ? static_cast<double>(n) : 1;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemTotal:") {
      node.memory_bytes = kb * 1024;
      break;
    }
  }
  return node;
}

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// Families whose shape follows from the name: <family>-<kind>-<vcpus>,
// memory = vcpus × GB per vCPU of that kind (reference/pricing.md).
std::optional<MachineShape> FromPattern(const std::string& name) {
  static const std::regex re(R"(^(n1|n2|n2d|e2|c2|c3)-(standard|highmem|highcpu)-(\d+)$)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return std::nullopt;
  double vcpus = std::stod(m[3]);
  std::string family = m[1], kind = m[2];
  double per_cpu = 0;
  if (kind == "standard") per_cpu = family == "n1" ? 3.75 : 4;
  if (kind == "highmem") per_cpu = family == "n1" ? 6.5 : 8;
  if (kind == "highcpu") per_cpu = family == "n1" ? 0.9 : 1;
  return MachineShape{name, vcpus, vcpus * per_cpu, "", 0};
}

}  // namespace

std::optional<MachineShape> LookupMachineType(const std::string& name,
                                              const MachineCatalog& overrides) {
  if (auto it = overrides.find(name); it != overrides.end()) return it->second;
  if (auto shape = FromPattern(name)) return shape;
  static const std::map<std::string, MachineShape> kTable = {
      {"a2-highgpu-1g", {"a2-highgpu-1g", 12, 85, "NVIDIA_TESLA_A100", 1}},
      {"a2-highgpu-2g", {"a2-highgpu-2g", 24, 170, "NVIDIA_TESLA_A100", 2}},
      {"a2-highgpu-4g", {"a2-highgpu-4g", 48, 340, "NVIDIA_TESLA_A100", 4}},
      {"a2-highgpu-8g", {"a2-highgpu-8g", 96, 680, "NVIDIA_TESLA_A100", 8}},
      {"a2-megagpu-16g", {"a2-megagpu-16g", 96, 1360, "NVIDIA_TESLA_A100", 16}},
      {"a2-ultragpu-1g", {"a2-ultragpu-1g", 12, 170, "NVIDIA_A100_80GB", 1}},
      {"a2-ultragpu-2g", {"a2-ultragpu-2g", 24, 340, "NVIDIA_A100_80GB", 2}},
      {"a2-ultragpu-4g", {"a2-ultragpu-4g", 48, 680, "NVIDIA_A100_80GB", 4}},
      {"a2-ultragpu-8g", {"a2-ultragpu-8g", 96, 1360, "NVIDIA_A100_80GB", 8}},
      {"a3-highgpu-1g", {"a3-highgpu-1g", 26, 234, "NVIDIA_H100_80GB", 1}},
      {"a3-highgpu-2g", {"a3-highgpu-2g", 52, 468, "NVIDIA_H100_80GB", 2}},
      {"a3-highgpu-4g", {"a3-highgpu-4g", 104, 936, "NVIDIA_H100_80GB", 4}},
      {"a3-highgpu-8g", {"a3-highgpu-8g", 208, 1872, "NVIDIA_H100_80GB", 8}},
      {"a3-megagpu-8g", {"a3-megagpu-8g", 208, 1872, "NVIDIA_H100_MEGA_80GB", 8}},
      {"g2-standard-4", {"g2-standard-4", 4, 16, "NVIDIA_L4", 1}},
      {"g2-standard-8", {"g2-standard-8", 8, 32, "NVIDIA_L4", 1}},
      {"g2-standard-12", {"g2-standard-12", 12, 48, "NVIDIA_L4", 1}},
      {"g2-standard-16", {"g2-standard-16", 16, 64, "NVIDIA_L4", 1}},
      {"g2-standard-24", {"g2-standard-24", 24, 96, "NVIDIA_L4", 2}},
      {"g2-standard-32", {"g2-standard-32", 32, 128, "NVIDIA_L4", 1}},
      {"g2-standard-48", {"g2-standard-48", 48, 192, "NVIDIA_L4", 4}},
      {"g2-standard-96", {"g2-standard-96", 96, 384, "NVIDIA_L4", 8}},
      // Legacy AI Platform Training names (reference §6).
      {"standard", {"standard", 4, 15, "", 0}},
      {"large_model", {"large_model", 8, 52, "", 0}},
      {"complex_model_s", {"complex_model_s", 8, 7.2, "", 0}},
      {"complex_model_m", {"complex_model_m", 16, 14.4, "", 0}},
      {"complex_model_l", {"complex_model_l", 32, 28.8, "", 0}},
      {"standard_gpu", {"standard_gpu", 8, 30, "NVIDIA_TESLA_K80", 1}},
      {"complex_model_m_gpu", {"complex_model_m_gpu", 16, 60, "NVIDIA_TESLA_K80", 4}},
      // 2018-only legacy GPU names (reference §3): the n1 host their price
      // decomposes into (standard_* = n1-standard-8, large_model_* =
      // n1-highmem-8, complex_model_m_* = n1-standard-16, complex_model_l_* =
      // n1-standard-32) plus the GPUs.
      {"complex_model_l_gpu", {"complex_model_l_gpu", 32, 120, "NVIDIA_TESLA_K80", 8}},
      {"standard_p100", {"standard_p100", 8, 30, "NVIDIA_TESLA_P100", 1}},
      {"complex_model_m_p100", {"complex_model_m_p100", 16, 60, "NVIDIA_TESLA_P100", 4}},
      {"standard_v100", {"standard_v100", 8, 30, "NVIDIA_TESLA_V100", 1}},
      {"large_model_v100", {"large_model_v100", 8, 52, "NVIDIA_TESLA_V100", 1}},
      {"complex_model_m_v100", {"complex_model_m_v100", 16, 60, "NVIDIA_TESLA_V100", 4}},
      {"complex_model_l_v100", {"complex_model_l_v100", 32, 120, "NVIDIA_TESLA_V100", 8}},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

uint64_t AcceleratorMemoryBytes(const std::string& t) {
  static const std::map<std::string, double> kGb = {
      {"NVIDIA_TESLA_K80", 12},      {"NVIDIA_TESLA_P100", 16},   {"NVIDIA_TESLA_V100", 16},
      {"NVIDIA_TESLA_P4", 8},        {"NVIDIA_TESLA_T4", 16},     {"NVIDIA_TESLA_A100", 40},
      {"NVIDIA_A100_80GB", 80},      {"NVIDIA_L4", 24},           {"NVIDIA_H100_80GB", 80},
      {"NVIDIA_H100_MEGA_80GB", 80}, {"NVIDIA_H200_141GB", 141},  {"NVIDIA_B200", 180},
      {"NVIDIA_GB200", 186},         {"NVIDIA_RTX_PRO_6000", 96},
  };
  auto it = kGb.find(t);
  return it == kGb.end() ? 0 : static_cast<uint64_t>(it->second * kGiB);
}

}  // namespace stoker::resources
