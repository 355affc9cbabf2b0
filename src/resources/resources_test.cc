#include "resources/resources.h"

#include <gtest/gtest.h>

namespace stoker::resources {
namespace {

struct Row {
  const char* name;
  double vcpus;
  double memory_gb;
  const char* gpu_type;
  int gpus;
};

// Rows of reference/pricing.md §1 (and §3 for the legacy names), one or more
// per family the issue names.
TEST(ResourcesTest, KnowsTheShapesOfThePricingReference) {
  const Row rows[] = {
      {"n1-standard-4", 4, 15, "", 0},
      {"n1-standard-96", 96, 360, "", 0},
      {"n1-highmem-2", 2, 13, "", 0},
      {"n1-highmem-96", 96, 624, "", 0},
      {"n1-highcpu-16", 16, 14.4, "", 0},
      {"n1-highcpu-96", 96, 86.4, "", 0},
      {"n2-standard-8", 8, 32, "", 0},
      {"n2-highmem-4", 4, 32, "", 0},
      {"n2-highcpu-16", 16, 16, "", 0},
      {"e2-standard-4", 4, 16, "", 0},
      {"e2-standard-32", 32, 128, "", 0},
      {"a2-highgpu-1g", 12, 85, "NVIDIA_TESLA_A100", 1},
      {"a2-highgpu-8g", 96, 680, "NVIDIA_TESLA_A100", 8},
      {"a2-megagpu-16g", 96, 1360, "NVIDIA_TESLA_A100", 16},
      {"a2-ultragpu-1g", 12, 170, "NVIDIA_A100_80GB", 1},
      {"a2-ultragpu-8g", 96, 1360, "NVIDIA_A100_80GB", 8},
      {"a3-highgpu-1g", 26, 234, "NVIDIA_H100_80GB", 1},
      {"a3-highgpu-8g", 208, 1872, "NVIDIA_H100_80GB", 8},
      {"a3-megagpu-8g", 208, 1872, "NVIDIA_H100_MEGA_80GB", 8},
      {"g2-standard-4", 4, 16, "NVIDIA_L4", 1},
      {"g2-standard-24", 24, 96, "NVIDIA_L4", 2},
      {"g2-standard-32", 32, 128, "NVIDIA_L4", 1},
      {"g2-standard-96", 96, 384, "NVIDIA_L4", 8},
      {"standard", 4, 15, "", 0},
      {"large_model", 8, 52, "", 0},
      {"complex_model_s", 8, 7.2, "", 0},
      {"complex_model_m", 16, 14.4, "", 0},
      {"complex_model_l", 32, 28.8, "", 0},
      {"standard_gpu", 8, 30, "NVIDIA_TESLA_K80", 1},
      {"complex_model_m_gpu", 16, 60, "NVIDIA_TESLA_K80", 4},
      {"complex_model_l_gpu", 32, 120, "NVIDIA_TESLA_K80", 8},
      {"standard_p100", 8, 30, "NVIDIA_TESLA_P100", 1},
      {"complex_model_m_p100", 16, 60, "NVIDIA_TESLA_P100", 4},
      {"standard_v100", 8, 30, "NVIDIA_TESLA_V100", 1},
      {"large_model_v100", 8, 52, "NVIDIA_TESLA_V100", 1},
      {"complex_model_m_v100", 16, 60, "NVIDIA_TESLA_V100", 4},
      {"complex_model_l_v100", 32, 120, "NVIDIA_TESLA_V100", 8},
  };
  for (const Row& r : rows) {
    auto shape = LookupMachineType(r.name);
    ASSERT_TRUE(shape.has_value()) << r.name;
    EXPECT_EQ(shape->name, r.name);
    EXPECT_DOUBLE_EQ(shape->vcpus, r.vcpus) << r.name;
    EXPECT_NEAR(shape->memory_gb, r.memory_gb, 1e-9) << r.name;
    EXPECT_EQ(shape->gpu_type, r.gpu_type) << r.name;
    EXPECT_EQ(shape->gpu_count, r.gpus) << r.name;
    if (r.gpus > 0) {
      EXPECT_GT(AcceleratorMemoryBytes(r.gpu_type), 0u) << r.name;
    }
  }
}

TEST(ResourcesTest, DoesNotKnowMadeUpMachineTypes) {
  for (const char* name : {"", "n1-standard", "n1-standard-x", "a2-highgpu-3g", "p3-standard-8",
                           "Standard", "complex_model_xl"}) {
    EXPECT_FALSE(LookupMachineType(name).has_value()) << name;
  }
}

}  // namespace
}  // namespace stoker::resources
