#include "resources/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

namespace stoker::resources {
namespace {

// The NVML types and entry points used here, declared from the public NVML
// API reference (nvml.h is not needed to build).
using nvmlReturn_t = int;  // an enum in nvml.h; 0 = NVML_SUCCESS
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;     // percent of time a kernel ran, last sample period
  unsigned int memory;  // percent of time memory was read or written
};
constexpr nvmlReturn_t kNvmlNotFound = 6;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;
// nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v2/_v3.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE (all ones) when unknown
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
constexpr unsigned kNameBuffer = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 80;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct Nvml {
  void* lib = nullptr;
  std::string error;  // why `lib` is null or a symbol is missing
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;  // optional
  // Optional (Volta and later): millijoules since the driver was loaded.
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  // Optional: milliwatts; the processes on a GPU and their SM samples.
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*process_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                               unsigned long long) = nullptr;

  std::string Describe(nvmlReturn_t rc) const {
    std::string s = "NVML error " + std::to_string(rc);
    if (error_string) {
      if (const char* text = error_string(rc)) s += " (" + std::string(text) + ")";
    }
    return s;
  }
};

template <typename F>
bool Resolve(Nvml& n, F*& fn, const char* symbol) {
  fn = reinterpret_cast<F*>(::dlsym(n.lib, symbol));
  if (!fn && n.error.empty()) n.error = std::string("the NVML library has no ") + symbol;
  return fn != nullptr;
}

// Loads `library` once per path for the life of the process (NVML is never
// unloaded: other threads may be inside it).
const Nvml& Load(const std::string& library) {
  static std::mutex mu;
  static std::map<std::string, Nvml>* loaded = new std::map<std::string, Nvml>();
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = loaded->try_emplace(library);
  Nvml& n = it->second;
  if (!fresh) return n;
  n.lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) {
    const char* e = ::dlerror();
    n.error = library + " could not be loaded (" + (e ? e : "unknown error") +
              "): no NVIDIA driver on this machine; install the driver or declare the GPUs "
              "in the config";
    return n;
  }
  bool ok = Resolve(n, n.init, "nvmlInit_v2") && Resolve(n, n.shutdown, "nvmlShutdown") &&
            Resolve(n, n.count, "nvmlDeviceGetCount_v2") &&
            Resolve(n, n.handle, "nvmlDeviceGetHandleByIndex_v2") &&
            Resolve(n, n.name, "nvmlDeviceGetName") && Resolve(n, n.uuid, "nvmlDeviceGetUUID") &&
            Resolve(n, n.memory, "nvmlDeviceGetMemoryInfo") &&
            Resolve(n, n.utilization, "nvmlDeviceGetUtilizationRates");
  n.error_string =
      reinterpret_cast<const char* (*)(nvmlReturn_t)>(::dlsym(n.lib, "nvmlErrorString"));
  n.energy = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
      ::dlsym(n.lib, "nvmlDeviceGetTotalEnergyConsumption"));
  n.power = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned int*)>(
      ::dlsym(n.lib, "nvmlDeviceGetPowerUsage"));
  using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
  n.processes =
      reinterpret_cast<ProcessesFn>(::dlsym(n.lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
  if (!n.processes) {
    n.processes =
        reinterpret_cast<ProcessesFn>(::dlsym(n.lib, "nvmlDeviceGetComputeRunningProcesses_v2"));
  }
  n.process_util = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                                     unsigned int*, unsigned long long)>(
      ::dlsym(n.lib, "nvmlDeviceGetProcessUtilization"));
  if (!ok) {
    n.error += " (" + library + " is too old or not NVML); update the NVIDIA driver";
    ::dlclose(n.lib);
    n.lib = nullptr;
  }
  return n;
}

// Runs `body(count)` between nvmlInit_v2 and nvmlShutdown; false with `why`
// set when NVML is unusable.
template <typename Body>
bool WithNvml(const Nvml& n, std::string* why, Body&& body) {
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (!n.lib) return fail(n.error);
  nvmlReturn_t rc = n.init();
  if (rc != kNvmlSuccess) {
    return fail("nvmlInit_v2 failed: " + n.Describe(rc) +
                "; is the NVIDIA driver loaded (nvidia-smi should work)?");
  }
  unsigned int count = 0;
  rc = n.count(&count);
  if (rc != kNvmlSuccess) {
    n.shutdown();
    return fail("nvmlDeviceGetCount_v2 failed: " + n.Describe(rc));
  }
  body(count);
  n.shutdown();
  if (count == 0) return fail("NVML reports no GPUs on this machine");
  return true;
}

std::vector<std::string> Words(const std::string& name) {
  std::vector<std::string> words;
  std::string w;
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      w += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    } else if (!w.empty()) {
      words.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) words.push_back(std::move(w));
  return words;
}

}  // namespace

std::string VertexAcceleratorType(const std::string& nvml_name, uint64_t memory_bytes) {
  const std::vector<std::string> words = Words(nvml_name);
  auto has = [&](const char* w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  constexpr uint64_t k60GiB = 60ull << 30;
  if (has("H200")) return "NVIDIA_H200_141GB";
  if (has("H100")) return "NVIDIA_H100_80GB";
  if (has("A100")) {
    return has("80GB") || memory_bytes > k60GiB ? "NVIDIA_A100_80GB" : "NVIDIA_TESLA_A100";
  }
  if (has("L4")) return "NVIDIA_L4";
  if (has("T4")) return "NVIDIA_TESLA_T4";
  if (has("V100") || has("V100S")) return "NVIDIA_TESLA_V100";
  if (has("P100")) return "NVIDIA_TESLA_P100";
  if (has("P4")) return "NVIDIA_TESLA_P4";
  if (has("K80")) return "NVIDIA_TESLA_K80";
  if (has("GB200")) return "NVIDIA_GB200";
  if (has("B200")) return "NVIDIA_B200";
  for (size_t i = 0; i + 2 < words.size(); ++i) {
    if (words[i] == "RTX" && words[i + 1] == "PRO" && words[i + 2] == "6000") {
      return "NVIDIA_RTX_PRO_6000";
    }
  }
  if (words.empty()) return "NVIDIA_UNKNOWN";
  std::string type = "NVIDIA";
  for (size_t i = words[0] == "NVIDIA" ? 1 : 0; i < words.size(); ++i) type += "_" + words[i];
  return type;
}

std::vector<Gpu> DiscoverGpusFrom(const std::string& library, std::string* why) {
  const Nvml& n = Load(library);
  std::vector<Gpu> gpus;
  std::string problem;
  bool ok = WithNvml(n, why, [&](unsigned int count) {
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t dev = nullptr;
      char name[kNameBuffer] = {0};
      char uuid[kUuidBuffer] = {0};
      nvmlMemory_t mem{};
      nvmlReturn_t rc = n.handle(i, &dev);
      if (rc == kNvmlSuccess) rc = n.name(dev, name, kNameBuffer);
      if (rc == kNvmlSuccess) rc = n.uuid(dev, uuid, kUuidBuffer);
      if (rc == kNvmlSuccess) rc = n.memory(dev, &mem);
      if (rc != kNvmlSuccess) {
        // A GPU that cannot be queried (lost, or in reset) is not offered.
        problem = "GPU " + std::to_string(i) + " could not be queried: " + n.Describe(rc);
        continue;
      }
      name[kNameBuffer - 1] = uuid[kUuidBuffer - 1] = '\0';
      gpus.push_back({static_cast<int>(i), VertexAcceleratorType(name, mem.total),
                      static_cast<uint64_t>(mem.total), uuid});
    }
  });
  if (ok && why) *why = problem;
  if (ok && gpus.empty() && why) *why = "every GPU failed to answer NVML: " + problem;
  return gpus;
}

namespace {

// The processes on `dev` with their memory. NVML answers "insufficient size"
// with the count when the buffer is short; a list that keeps growing between
// the two calls is retried a few times.
std::vector<nvmlProcessInfo_t> Processes(const Nvml& n, nvmlDevice_t dev) {
  std::vector<nvmlProcessInfo_t> infos(16);
  for (int tries = 0; n.processes && tries < 4; ++tries) {
    unsigned int count = static_cast<unsigned int>(infos.size());
    nvmlReturn_t rc = n.processes(dev, &count, infos.data());
    if (rc == kNvmlSuccess) {
      infos.resize(std::min<size_t>(count, infos.size()));
      return infos;
    }
    if (rc != kNvmlInsufficientSize || count > 4096) break;
    infos.resize(count + 8);
  }
  return {};
}

// SM samples of each process on `dev` newer than `since_us`, averaged per pid.
std::map<unsigned int, double> ProcessSm(const Nvml& n, nvmlDevice_t dev, uint64_t since_us) {
  std::map<unsigned int, double> mean;
  if (!n.process_util) return mean;
  unsigned int count = 0;
  nvmlReturn_t rc = n.process_util(dev, nullptr, &count, since_us);
  if (rc != kNvmlInsufficientSize && rc != kNvmlSuccess) return mean;  // incl. not found: none
  if (count == 0 || count > 65536) return mean;
  std::vector<nvmlProcessUtilizationSample_t> samples(count);
  rc = n.process_util(dev, samples.data(), &count, since_us);
  if (rc != kNvmlSuccess) return mean;
  std::map<unsigned int, int> seen;
  for (unsigned int i = 0; i < std::min<size_t>(count, samples.size()); ++i) {
    mean[samples[i].pid] += std::min(samples[i].smUtil, 100u);
    ++seen[samples[i].pid];
  }
  for (auto& [pid, sum] : mean) sum /= seen[pid];
  return mean;
}

// The devices (with their processes when `with_processes`).
GpuSnapshot Snapshot(const std::string& library, const std::vector<int>& indices, uint64_t since_us,
                     bool with_processes) {
  const Nvml& n = Load(library);
  GpuSnapshot snap;
  WithNvml(n, nullptr, [&](unsigned int count) {
    for (unsigned int i = 0; i < count; ++i) {
      if (!indices.empty() &&
          std::find(indices.begin(), indices.end(), static_cast<int>(i)) == indices.end()) {
        continue;
      }
      nvmlDevice_t dev = nullptr;
      nvmlMemory_t mem{};
      nvmlUtilization_t util{};
      if (n.handle(i, &dev) != kNvmlSuccess || n.memory(dev, &mem) != kNvmlSuccess ||
          n.utilization(dev, &util) != kNvmlSuccess) {
        continue;
      }
      GpuUsage u{static_cast<int>(i), static_cast<double>(util.gpu),
                 static_cast<uint64_t>(mem.used), static_cast<uint64_t>(mem.total)};
      unsigned long long mj = 0;
      if (n.energy && n.energy(dev, &mj) == kNvmlSuccess) u.energy_mj = mj;
      unsigned int mw = 0;
      if (n.power && n.power(dev, &mw) == kNvmlSuccess) u.power_watts = mw / 1000.0;
      snap.devices.push_back(u);
      if (!with_processes) continue;
      std::map<unsigned int, double> sm = ProcessSm(n, dev, since_us);
      for (const nvmlProcessInfo_t& p : Processes(n, dev)) {
        GpuProcessUsage pu{static_cast<int>(i), p.pid,
                           p.usedGpuMemory == ~0ull ? 0 : p.usedGpuMemory, std::nullopt};
        if (auto it = sm.find(p.pid); it != sm.end()) pu.sm_percent = it->second;
        snap.processes.push_back(pu);
      }
    }
  });
  return snap;
}

}  // namespace

std::vector<GpuUsage> QueryGpuUsageFrom(const std::string& library) {
  return Snapshot(library, {}, 0, /*with_processes=*/false).devices;
}

GpuSnapshot QueryGpuSnapshotFrom(const std::string& library, const std::vector<int>& indices,
                                 uint64_t since_us) {
  return Snapshot(library, indices, since_us, /*with_processes=*/true);
}

GpuSnapshot QueryGpuSnapshot(const std::vector<int>& indices, uint64_t since_us) {
  return QueryGpuSnapshotFrom(NvmlLibrary(), indices, since_us);
}

std::string NvmlLibrary() {
  const char* override_path = std::getenv("STOKER_NVML_LIBRARY");
  return override_path && *override_path ? override_path : "libnvidia-ml.so.1";
}

std::vector<Gpu> DiscoverGpus(std::string* why) { return DiscoverGpusFrom(NvmlLibrary(), why); }

std::vector<GpuUsage> QueryGpuUsage() { return QueryGpuUsageFrom(NvmlLibrary()); }

}  // namespace stoker::resources
