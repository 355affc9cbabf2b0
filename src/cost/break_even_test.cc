#include "cost/break_even.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace stoker::cost {
namespace {

constexpr int64_t kHourUs = 3'600'000'000;

// One replica-row of `hours` on n1-standard-4, with one T4 or none.
store::UsageRecord Row(int64_t job, double hours, bool t4) {
  store::UsageRecord u;
  u.job_id = job;
  u.replica = "workerpool0-0";
  u.start_us = 0;
  u.end_us = static_cast<int64_t>(hours * kHourUs);
  u.cpus = 4;
  u.machine_type = "n1-standard-4";
  if (t4) {
    u.gpu_type = u.accelerator_type = "NVIDIA_TESLA_T4";
    u.gpus = u.accelerator_count = 1;
  }
  return u;
}

class BreakEvenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    catalog_ = Catalog::BuiltIn();
    ASSERT_TRUE(catalog_
                    .Apply(YAML::Load("{own_hardware: {usd_per_kwh: 0.10, gpus: {NVIDIA_TESLA_T4: "
                                      "{purchase_usd: 2000, life_years: 2, watts: 70}}}}"))
                    .ok());
  }
  // The model's terms, from the catalog: the T4's fixed cost a month, its
  // power a month when always busy, a GPU replica's and a CPU replica's
  // Vertex price an hour.
  double Fixed() const { return 2000.0 / (2 * 12); }
  double PowerFull() const { return 0.070 * 0.10 * 730.5; }
  double PerHour(bool t4) const {
    spec::MachineSpec m;
    m.machine_type = "n1-standard-4";
    if (t4) {
      m.accelerator_type = "NVIDIA_TESLA_T4";
      m.accelerator_count = 1;
    }
    return *catalog_.PriceReplica(m).vertex_usd_per_hour;
  }

  Catalog catalog_;
  NodeShape node_{.cpus = 16, .gpu_types = {"NVIDIA_TESLA_T4"}};
};

TEST_F(BreakEvenTest, GpuJobsAlonePayOffAtFixedCostOverWhatTheGpuEarns) {
  BreakEven b = ComputeBreakEven({Row(1, 10, true)}, 30.44, catalog_, node_, 0);
  ASSERT_TRUE(b.break_even_utilisation);
  EXPECT_NEAR(*b.break_even_utilisation, Fixed() / (PerHour(true) * 730.5 - PowerFull()), 1e-9);
}

TEST_F(BreakEvenTest, CpuOnlyJobsAreSavedAtAnyUtilisationNotPricedPerGpuHour) {
  // 10 GPU-hours and 300 CPU-only replica-hours in a month.
  std::vector<store::UsageRecord> rows = {Row(1, 10, true)};
  for (int i = 0; i < 30; ++i) rows.push_back(Row(2 + i, 10, false));
  BreakEven b = ComputeBreakEven(rows, 30.44, catalog_, node_, 0);
  ASSERT_TRUE(b.break_even_utilisation);
  const double cpu_month = 300 * PerHour(false);
  ASSERT_LT(cpu_month, Fixed());  // so that the GPUs must earn the rest
  EXPECT_NEAR(*b.break_even_utilisation,
              (Fixed() - cpu_month) / (PerHour(true) * 730.5 - PowerFull()), 1e-9);
  // The old answer divided the whole bill, CPU-only jobs' too, by the 10
  // GPU-hours (1.6 % here, against 4.0 %).
  const double whole_bill_per_gpu_hour = (300 * PerHour(false) + 10 * PerHour(true)) / 10;
  EXPECT_GT(*b.break_even_utilisation,
            2 * Fixed() / (whole_bill_per_gpu_hour * 730.5 - PowerFull()));
  bool noted = false;
  for (const std::string& n : b.notes) noted |= n.find("CPU-only jobs' cloud bill") == 0;
  EXPECT_TRUE(noted);
}

TEST_F(BreakEvenTest, CpuOnlyJobsThatCostMoreThanTheNodePayOffAtZero) {
  std::vector<store::UsageRecord> rows;
  for (int i = 0; i < 30; ++i) rows.push_back(Row(i, 24, false));  // 720 replica-hours
  ASSERT_GE(720 * PerHour(false), Fixed());
  BreakEven b = ComputeBreakEven(rows, 30.44, catalog_, node_, 0);
  ASSERT_TRUE(b.break_even_utilisation);
  EXPECT_EQ(*b.break_even_utilisation, 0);
}

}  // namespace
}  // namespace stoker::cost
