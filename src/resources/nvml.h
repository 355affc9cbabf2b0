// GPU discovery and usage through NVML, the NVIDIA Management Library.
//
// libnvidia-ml.so.1 ships with the NVIDIA driver, not with a toolkit, so it is
// opened at run time with dlopen and never linked: the same binary runs (and
// its tests pass) on machines without a driver, where discovery simply finds
// nothing and says why. Only the handful of NVML entry points below are used;
// their types are declared in nvml.cc from the public API reference.
//
// Thread safety: every function may be called from any thread. Each call
// initialises NVML and shuts it down again (NVML counts these), so no state
// is kept between calls except the loaded library, which stays loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "resources/resources.h"

namespace stoker::resources {

// GPUs on this machine, in NVML index order, or an empty vector when NVML or
// the driver is absent (with `why` set, when given, to a sentence that names
// the cause and the fix). Gpu::index is the NVML index, which is the CUDA
// device index when the replica runs with CUDA_DEVICE_ORDER=PCI_BUS_ID;
// Gpu::type comes from VertexAcceleratorType; Gpu::uuid is "GPU-...".
std::vector<Gpu> DiscoverGpus(std::string* why);

struct GpuUsage {
  int index = 0;                   // as Gpu::index
  double utilization_percent = 0;  // kernel time over NVML's last sample period
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  // Energy used since the driver loaded (NVML total energy consumption);
  // nullopt on GPUs older than Volta or drivers without the counter.
  std::optional<uint64_t> energy_mj;
  // The GPU's power draw; nullopt where NVML cannot read it.
  std::optional<double> power_watts;
};

// One process's use of one GPU, from NVML's compute-process list and its
// per-process utilisation samples: what tells apart replicas that share a
// GPU (acceleratorCount below 1).
struct GpuProcessUsage {
  int index = 0;              // the GPU's NVML index
  uint32_t pid = 0;           // as the host's /proc numbers it
  uint64_t memory_bytes = 0;  // 0 where NVML cannot say (it then reports "not available")
  // Mean SM use of the samples NVML took of this process since the caller's
  // `since_us`; nullopt when it took none (an idle process gets none).
  std::optional<double> sm_percent;
};

struct GpuSnapshot {
  std::vector<GpuUsage> devices;
  std::vector<GpuProcessUsage> processes;
};

// Current utilisation and memory of every GPU; empty when NVML is absent. A
// GPU whose counters cannot be read is left out.
std::vector<GpuUsage> QueryGpuUsage();

// The GPUs with NVML index in `indices` (every GPU when empty) and the
// processes on them, with utilisation samples newer than `since_us` (NVML's
// clock: microseconds since the epoch). Empty when NVML is absent; the
// per-process parts are left out on drivers without them.
GpuSnapshot QueryGpuSnapshot(const std::vector<int>& indices, uint64_t since_us);
GpuSnapshot QueryGpuSnapshotFrom(const std::string& library, const std::vector<int>& indices,
                                 uint64_t since_us);

// The NVML library DiscoverGpus and QueryGpuUsage open: $STOKER_NVML_LIBRARY
// when set (a test or diagnostic override), else "libnvidia-ml.so.1".
std::string NvmlLibrary();

// The same, from an NVML library at `library` (a path or a soname): the seam
// that lets tests load a fake NVML. DiscoverGpus/QueryGpuUsage use NvmlLibrary().
std::vector<Gpu> DiscoverGpusFrom(const std::string& library, std::string* why);
std::vector<GpuUsage> QueryGpuUsageFrom(const std::string& library);

// Pure: the Vertex AcceleratorType enum name for an NVML product name and the
// GPU's memory. The name is split into upper-case words at spaces, '-' and
// '_', and the model word decides:
//   H200                  -> NVIDIA_H200_141GB
//   H100 (SXM, PCIe, NVL) -> NVIDIA_H100_80GB (NVML cannot tell the a3-megagpu
//                            variant NVIDIA_H100_MEGA_80GB apart; declare
//                            such GPUs in the config)
//   A100                  -> NVIDIA_A100_80GB with a word "80GB" or more than
//                            60 GiB of memory, else NVIDIA_TESLA_A100
//   L4, T4, P4, P100, K80 -> NVIDIA_L4, NVIDIA_TESLA_T4, NVIDIA_TESLA_P4,
//                            NVIDIA_TESLA_P100, NVIDIA_TESLA_K80
//   V100, V100S           -> NVIDIA_TESLA_V100
//   B200, GB200           -> NVIDIA_B200, NVIDIA_GB200
//   RTX PRO 6000 ...      -> NVIDIA_RTX_PRO_6000
// Words must match whole ("NVIDIA L40S" is not an L4). Any other GPU maps to
// "NVIDIA_" + its words joined by '_' (a leading "NVIDIA" word is not
// repeated): "NVIDIA RTX A6000" -> NVIDIA_RTX_A6000, "Tesla P40" ->
// NVIDIA_TESLA_P40, so it can still be requested by exactly that name. An
// empty name gives NVIDIA_UNKNOWN.
std::string VertexAcceleratorType(const std::string& nvml_name, uint64_t memory_bytes);

}  // namespace stoker::resources
