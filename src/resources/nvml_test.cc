#include "resources/nvml.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace stoker::resources {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

TEST(NvmlTest, MapsRealProductNamesToVertexAcceleratorTypes) {
  struct Case {
    const char* name;
    uint64_t memory;
    const char* type;
  };
  const Case cases[] = {
      {"NVIDIA H100 80GB HBM3", 80 * kGiB, "NVIDIA_H100_80GB"},
      {"NVIDIA H100 PCIe", 80 * kGiB, "NVIDIA_H100_80GB"},
      {"NVIDIA H100 NVL", 94 * kGiB, "NVIDIA_H100_80GB"},
      {"NVIDIA H200", 141 * kGiB, "NVIDIA_H200_141GB"},
      {"NVIDIA H200 NVL", 141 * kGiB, "NVIDIA_H200_141GB"},
      {"NVIDIA A100-SXM4-40GB", 40 * kGiB, "NVIDIA_TESLA_A100"},
      {"NVIDIA A100-PCIE-40GB", 40 * kGiB, "NVIDIA_TESLA_A100"},
      {"NVIDIA A100-SXM4-80GB", 80 * kGiB, "NVIDIA_A100_80GB"},
      {"NVIDIA A100 80GB PCIe", 80 * kGiB, "NVIDIA_A100_80GB"},
      {"NVIDIA A100", 80 * kGiB, "NVIDIA_A100_80GB"},  // decided by memory
      {"NVIDIA L4", 23 * kGiB, "NVIDIA_L4"},
      {"Tesla T4", 15 * kGiB, "NVIDIA_TESLA_T4"},
      {"Tesla V100-SXM2-16GB", 16 * kGiB, "NVIDIA_TESLA_V100"},
      {"Tesla V100-PCIE-32GB", 32 * kGiB, "NVIDIA_TESLA_V100"},
      {"Tesla V100S-PCIE-32GB", 32 * kGiB, "NVIDIA_TESLA_V100"},
      {"Tesla P100-PCIE-16GB", 16 * kGiB, "NVIDIA_TESLA_P100"},
      {"Tesla P4", 8 * kGiB, "NVIDIA_TESLA_P4"},
      {"Tesla K80", 12 * kGiB, "NVIDIA_TESLA_K80"},
      {"NVIDIA B200", 180 * kGiB, "NVIDIA_B200"},
      {"NVIDIA GB200", 186 * kGiB, "NVIDIA_GB200"},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", 96 * kGiB, "NVIDIA_RTX_PRO_6000"},
      // Not Vertex types: still requestable under a stable name.
      {"NVIDIA RTX A6000", 48 * kGiB, "NVIDIA_RTX_A6000"},
      {"NVIDIA L40S", 48 * kGiB, "NVIDIA_L40S"},  // a whole word: not an L4
      {"Tesla P40", 24 * kGiB, "NVIDIA_TESLA_P40"},
      {"NVIDIA GeForce RTX 4090", 24 * kGiB, "NVIDIA_GEFORCE_RTX_4090"},
      {"NVIDIA GH200 480GB", 96 * kGiB, "NVIDIA_GH200_480GB"},
      {"", 0, "NVIDIA_UNKNOWN"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(VertexAcceleratorType(c.name, c.memory), c.type) << c.name;
  }
}

TEST(NvmlTest, MapsEveryKnownTypeToOneTheCatalogKnowsTheMemoryOf) {
  for (const char* name : {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-40GB",
                           "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "Tesla T4", "Tesla V100-SXM2-16GB",
                           "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla K80", "NVIDIA B200"}) {
    EXPECT_GT(AcceleratorMemoryBytes(VertexAcceleratorType(name, 0)), 0u) << name;
  }
}

// On a machine without the NVIDIA driver (the build and CI machines), the
// real library is absent: nothing is found and the reason says so.
TEST(NvmlTest, FindsNoGpuAndSaysWhyWithoutTheDriver) {
  if (::access("/dev/nvidiactl", F_OK) == 0) {
    GTEST_SKIP() << "/dev/nvidiactl exists: this machine has an NVIDIA driver, so the "
                    "no-driver behaviour cannot be observed here";
  }
  std::string why;
  EXPECT_TRUE(DiscoverGpus(&why).empty());
  EXPECT_NE(why.find("libnvidia-ml.so.1"), std::string::npos) << why;
  EXPECT_NE(why.find("declare the GPUs in the config"), std::string::npos) << why;
  EXPECT_TRUE(QueryGpuUsage().empty());
  EXPECT_TRUE(DiscoverGpus(nullptr).empty());  // `why` is optional
}

TEST(NvmlTest, NamesTheMissingLibraryWhenItCannotBeLoaded) {
  std::string why;
  EXPECT_TRUE(DiscoverGpusFrom("/nonexistent/libnvidia-ml.so.1", &why).empty());
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1 could not be loaded"), std::string::npos)
      << why;
}

TEST(NvmlTest, RefusesALibraryThatIsNotNvml) {
  std::string why;
  EXPECT_TRUE(DiscoverGpusFrom("libc.so.6", &why).empty());
  EXPECT_NE(why.find("has no nvmlInit_v2"), std::string::npos) << why;
}

TEST(NvmlTest, DiscoversEveryGpuThroughALoadedNvml) {
  std::string why = "stale";
  std::vector<Gpu> gpus = DiscoverGpusFrom(FAKE_NVML_PATH, &why);
  EXPECT_EQ(why, "");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].type, "NVIDIA_H100_80GB");
  EXPECT_EQ(gpus[0].memory_bytes, 85520809984ull);
  EXPECT_EQ(gpus[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].type, "NVIDIA_TESLA_T4");
}

TEST(NvmlTest, ReportsUtilisationAndMemoryPerGpu) {
  std::vector<GpuUsage> usage = QueryGpuUsageFrom(FAKE_NVML_PATH);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].index, 0);
  EXPECT_DOUBLE_EQ(usage[0].utilization_percent, 37);
  EXPECT_EQ(usage[0].memory_used_bytes, kGiB);
  EXPECT_EQ(usage[0].memory_total_bytes, 85520809984ull);
  EXPECT_EQ(usage[1].memory_used_bytes, 0u);
}

TEST(NvmlTest, ReadsTheEnergyCounterWhereTheLibraryHasIt) {
  std::vector<GpuUsage> before = QueryGpuUsageFrom(FAKE_NVML_PATH);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<GpuUsage> after = QueryGpuUsageFrom(FAKE_NVML_PATH);
  ASSERT_EQ(after.size(), 2u);
  ASSERT_TRUE(before[0].energy_mj && after[0].energy_mj);
  // The fake H100 draws 300 W: at least 50 ms × 300 W = 15 J between the reads.
  EXPECT_GE(*after[0].energy_mj - *before[0].energy_mj, 15'000u);
  EXPECT_LT(*after[0].energy_mj - *before[0].energy_mj, 15'000'000u);
}

TEST(NvmlTest, TellsProcessesSharingAGpuApartWithTheirMemoryAndSmUse) {
  char path[] = "/tmp/fake-nvml-procs-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string lines = "0 101 1073741824 60\n0 202 536870912 15\n1 303 1000 99\n";
  ASSERT_EQ(::write(fd, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  ::close(fd);
  ::setenv("FAKE_NVML_PROCESSES_FILE", path, 1);
  GpuSnapshot only0 = QueryGpuSnapshotFrom(FAKE_NVML_PATH, {0}, 0);
  GpuSnapshot all = QueryGpuSnapshotFrom(FAKE_NVML_PATH, {}, 0);
  ::unsetenv("FAKE_NVML_PROCESSES_FILE");
  ::unlink(path);
  ASSERT_EQ(only0.devices.size(), 1u);
  EXPECT_EQ(only0.devices[0].index, 0);
  ASSERT_TRUE(only0.devices[0].power_watts);
  EXPECT_DOUBLE_EQ(*only0.devices[0].power_watts, 300);
  ASSERT_EQ(only0.processes.size(), 2u);
  EXPECT_EQ(only0.processes[0].pid, 101u);
  EXPECT_EQ(only0.processes[0].memory_bytes, kGiB);
  EXPECT_DOUBLE_EQ(*only0.processes[0].sm_percent, 60);
  EXPECT_EQ(only0.processes[1].pid, 202u);
  EXPECT_DOUBLE_EQ(*only0.processes[1].sm_percent, 15);
  ASSERT_EQ(all.processes.size(), 3u);
  EXPECT_EQ(all.processes[2].index, 1);
}

TEST(NvmlTest, NoProcessesIsAnEmptyListNotAnError) {
  GpuSnapshot snap = QueryGpuSnapshotFrom(FAKE_NVML_PATH, {}, 0);
  EXPECT_EQ(snap.devices.size(), 2u);
  EXPECT_TRUE(snap.processes.empty());
  EXPECT_TRUE(QueryGpuSnapshotFrom("/nonexistent/libnvidia-ml.so.1", {}, 0).devices.empty());
}

TEST(NvmlTest, TheLibraryCanBeChosenByEnvironment) {
  ::setenv("STOKER_NVML_LIBRARY", FAKE_NVML_PATH, 1);
  std::string why;
  std::vector<Gpu> gpus = DiscoverGpus(&why);
  ::unsetenv("STOKER_NVML_LIBRARY");
  EXPECT_EQ(gpus.size(), 2u) << why;
  EXPECT_EQ(NvmlLibrary(), "libnvidia-ml.so.1");
}

TEST(NvmlTest, ExplainsAFailedInitWithNvmlsOwnWords) {
  ::setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  std::string why;
  std::vector<Gpu> gpus = DiscoverGpusFrom(FAKE_NVML_PATH, &why);
  std::vector<GpuUsage> usage = QueryGpuUsageFrom(FAKE_NVML_PATH);
  ::unsetenv("FAKE_NVML_FAIL_INIT");
  EXPECT_TRUE(gpus.empty());
  EXPECT_TRUE(usage.empty());
  EXPECT_EQ(why,
            "nvmlInit_v2 failed: NVML error 9 (Driver Not Loaded); is the NVIDIA driver loaded "
            "(nvidia-smi should work)?");
}

}  // namespace
}  // namespace stoker::resources
