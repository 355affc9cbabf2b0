// A fake libnvidia-ml for nvml_test and the telemetry e2e test: the NVML entry
// points that nvml.cc uses, answering for two GPUs (an H100 at 37% busy
// drawing 300 W, a T4 idle at 70 W) with fixed numbers, energy counted from
// the first call as if that power were drawn since, and failing on demand
// through FAKE_NVML_FAIL_INIT. Loaded with dlopen by path, exactly
// as the real library would be; never linked into anything.
#include <chrono>
#include <cstdlib>
#include <cstring>

extern "C" {

struct nvmlDevice_st {
  const char* name;
  const char* uuid;
  unsigned long long total, used;
  unsigned int util;
  unsigned long long watts;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};

static nvmlDevice_st kDevices[] = {
    {"NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", 85520809984ull,
     1073741824ull, 37, 300},
    {"Tesla T4", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 16106127360ull, 0, 0, 70},
};

int nvmlInit_v2() { return std::getenv("FAKE_NVML_FAIL_INIT") ? 9 : 0; }  // 9: driver not loaded
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) { return rc == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_st** d) {
  if (i >= 2) return 2;  // invalid argument
  *d = &kDevices[i];
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_st* d, char* out, unsigned int len) {
  std::strncpy(out, d->name, len);
  return 0;
}
int nvmlDeviceGetUUID(nvmlDevice_st* d, char* out, unsigned int len) {
  std::strncpy(out, d->uuid, len);
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st* d, nvmlMemory_t* m) {
  m->total = d->total;
  m->used = d->used;
  m->free = d->total - d->used;
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_st* d, nvmlUtilization_t* u) {
  u->gpu = d->util;
  u->memory = 0;
  return 0;
}
// Millijoules: the device's power since the first call in this process
// (W × ms = mJ); a real counter starts when the driver loads.
int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_st* d, unsigned long long* mj) {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point start = Clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  *mj = d->watts * static_cast<unsigned long long>(ms);
  return 0;
}
}

// Power and processes, for the per-replica telemetry test: the draw above,
// and the processes listed in $FAKE_NVML_PROCESSES_FILE, one per line as
// "GPU_INDEX PID MEMORY_BYTES SM_PERCENT" (read at each call, so a trainer
// can list itself once it runs).
#include <cstdio>
extern "C" {
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
};

int nvmlDeviceGetPowerUsage(nvmlDevice_st* d, unsigned int* mw) {
  *mw = static_cast<unsigned int>(d->watts * 1000);
  return 0;
}

static int FakeProcesses(nvmlDevice_st* d, nvmlProcessInfo_t* out, unsigned int cap,
                         unsigned int* sm) {
  const char* path = std::getenv("FAKE_NVML_PROCESSES_FILE");
  FILE* f = path ? std::fopen(path, "r") : nullptr;
  if (!f) return 0;
  unsigned int n = 0, index = 0, pid = 0, util = 0;
  unsigned long long mem = 0;
  while (std::fscanf(f, "%u %u %llu %u", &index, &pid, &mem, &util) == 4) {
    if (&kDevices[index < 2 ? index : 0] != d || index >= 2) continue;
    if (n < cap) {
      out[n] = {pid, mem, 0, 0};
      sm[n] = util;
    }
    ++n;
  }
  std::fclose(f);
  return static_cast<int>(n);
}

int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_st* d, unsigned int* count,
                                            nvmlProcessInfo_t* infos) {
  unsigned int sm[64];
  nvmlProcessInfo_t tmp[64];
  unsigned int n = static_cast<unsigned int>(FakeProcesses(d, tmp, 64, sm));
  if (n > *count) {
    *count = n;
    return 7;  // insufficient size
  }
  for (unsigned int i = 0; i < n; ++i) infos[i] = tmp[i];
  *count = n;
  return 0;
}

int nvmlDeviceGetProcessUtilization(nvmlDevice_st* d, nvmlProcessUtilizationSample_t* samples,
                                    unsigned int* count, unsigned long long /*since*/) {
  unsigned int sm[64];
  nvmlProcessInfo_t tmp[64];
  unsigned int n = static_cast<unsigned int>(FakeProcesses(d, tmp, 64, sm));
  if (n == 0) return 6;  // not found: no samples
  if (samples == nullptr || *count < n) {
    *count = n;
    return 7;
  }
  for (unsigned int i = 0; i < n; ++i) samples[i] = {tmp[i].pid, 1, sm[i], 0, 0, 0};
  *count = n;
  return 0;
}
}
