// What a node has (inventory) and what a machine type asks for (catalog).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::resources {

struct Gpu {
  int index = 0;     // the CUDA_VISIBLE_DEVICES index
  std::string type;  // Vertex AcceleratorType name, e.g. NVIDIA_TESLA_T4
  uint64_t memory_bytes = 0;
  std::string uuid;  // "" for declared GPUs
};

struct Node {
  std::string name;
  double cpus = 0;
  uint64_t memory_bytes = 0;
  std::vector<Gpu> gpus;
};

// This machine's CPUs and memory, read from the OS (no GPUs: those come from
// NVML or the config).
Node DetectLocalNode();

struct MachineShape {
  std::string name;
  double vcpus = 0;
  double memory_gb = 0;
  std::string gpu_type;  // built-in accelerator ("" if none)
  int gpu_count = 0;
};

// Machine types defined or redefined by the config (`machine_types:`), by name.
using MachineCatalog = std::map<std::string, MachineShape>;

// Looks a machine type up in `overrides`, then in the built-in catalog of
// Vertex and legacy AI Platform types (vCPUs and memory from
// reference/pricing.md). nullopt if unknown.
std::optional<MachineShape> LookupMachineType(const std::string& name,
                                              const MachineCatalog& overrides = {});

// The memory in bytes of one GPU of a Vertex accelerator type (0 if unknown).
uint64_t AcceleratorMemoryBytes(const std::string& accelerator_type);

}  // namespace stoker::resources
