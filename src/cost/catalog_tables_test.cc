// The per-region price tables: every shipped one parses, and a malformed one
// is refused with its file, entry and field named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cost/catalog_internal.h"

namespace stoker::cost::internal {
namespace {

using ::testing::HasSubstr;

constexpr char kFile[] = "prices/test.yaml";

Result<RegionalTable> Parse(const std::string& text) {
  return ParseRegionalTable(text, kFile, "accelerator");
}

// The error message of parsing `text` ("" when it parses).
std::string ErrorOf(const std::string& text) {
  Result<RegionalTable> t = Parse(text);
  return t.ok() ? std::string() : t.status().message();
}

constexpr char kHeader[] = "regions: [us-central1, europe-west4]\nprices:\n";

TEST(PriceTablesTest, EveryShippedTableParses) {
  Result<RegionalTable> s2 = ParseRegionalTable(PriceTableText("s2_gpu_regions.yaml"),
                                                "s2_gpu_regions.yaml", "accelerator");
  ASSERT_TRUE(s2.ok()) << s2.status().message();
  EXPECT_EQ(s2->regions.size(), 14u);
  EXPECT_EQ(s2->rows.size(), 32u);
  EXPECT_EQ(S2GpuTable().rows.size(), 32u);

  Result<RegionalTable> s1 =
      ParseRegionalTable(PriceTableText("s1_regions.yaml"), "s1_regions.yaml", "machine_type");
  ASSERT_TRUE(s1.ok()) << s1.status().message();
  EXPECT_EQ(s1->regions, s2->regions);  // S2 was read in the regions S1 prices
  EXPECT_EQ(s1->rows.size(), 624u);
  EXPECT_EQ(S1MachineTable().rows.size(), 624u);
}

TEST(PriceTablesTest, ReadsRowsWithExactFiguresAndNullSpot) {
  Result<RegionalTable> t = Parse(std::string(kHeader) +
                                  "  - {region: europe-west4, accelerator: NVIDIA_TESLA_T4, "
                                  "compute_engine: 0.3675, spot: 0.14}\n"
                                  "  - {region: us-central1, accelerator: NVIDIA_TESLA_T4, "
                                  "compute_engine: 5.06879789041096, spot: null}\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].region, "europe-west4");
  EXPECT_EQ(t->rows[0].name, "NVIDIA_TESLA_T4");
  EXPECT_EQ(t->rows[0].compute_engine, 0.3675);  // bit-exact, as the C++ literal reads
  EXPECT_EQ(t->rows[0].spot, 0.14);
  EXPECT_EQ(t->rows[1].compute_engine, 5.06879789041096);
  EXPECT_LT(t->rows[1].spot, 0);  // none
}

TEST(PriceTablesTest, ABadFigureNamesTheFileEntryAndField) {
  EXPECT_EQ(ErrorOf(std::string(kHeader) +
                    "  - {region: us-central1, accelerator: A, compute_engine: 1, spot: 1}\n"
                    "  - {region: us-central1, accelerator: B, compute_engine: abc, spot: 1}\n"),
            "prices/test.yaml: prices[1].compute_engine: must be a number >= 0 (got 'abc')");
  EXPECT_EQ(ErrorOf(std::string(kHeader) +
                    "  - {region: us-central1, accelerator: A, compute_engine: 1, spot: -2}\n"),
            "prices/test.yaml: prices[0].spot: must be a number >= 0 or null (got '-2')");
  EXPECT_EQ(ErrorOf(std::string(kHeader) +
                    "  - {region: us-central1, accelerator: A, compute_engine: null, spot: 1}\n"),
            "prices/test.yaml: prices[0].compute_engine: must be a number >= 0");
}

TEST(PriceTablesTest, MissingUnknownAndRepeatedEntriesAreRefused) {
  EXPECT_EQ(ErrorOf(std::string(kHeader) + "  - {region: us-central1, accelerator: A, spot: 1}\n"),
            "prices/test.yaml: prices[0]: missing compute_engine");
  EXPECT_EQ(ErrorOf(std::string(kHeader) +
                    "  - {region: us-central1, accelerator: A, compute_engine: 1, spot: 1, "
                    "sopt: 2}\n"),
            "prices/test.yaml: prices[0]: unknown key 'sopt' (expected region, accelerator, "
            "compute_engine, spot)");
  EXPECT_EQ(ErrorOf(std::string(kHeader) +
                    "  - {region: mars-north1, accelerator: A, compute_engine: 1, spot: 1}\n"),
            "prices/test.yaml: prices[0].region: mars-north1 is not in regions:");
  EXPECT_EQ(ErrorOf(std::string(kHeader) +
                    "  - {region: us-central1, accelerator: A, compute_engine: 1, spot: 1}\n"
                    "  - {region: us-central1, accelerator: A, compute_engine: 2, spot: 1}\n"),
            "prices/test.yaml: prices[1]: us-central1 A repeats prices[0]");
  EXPECT_EQ(ErrorOf("regions: [us-central1, us-central1]\nprices: []\n"),
            "prices/test.yaml: regions[1]: us-central1 is listed twice");
  EXPECT_EQ(ErrorOf("regions: [us-central1]\n"), "prices/test.yaml: missing prices");
}

TEST(PriceTablesTest, ASyntaxErrorOrAnEmptyTextIsRefused) {
  EXPECT_THAT(ErrorOf("regions: [us-central1\nprices: []\n"), HasSubstr("prices/test.yaml: line "));
  EXPECT_EQ(ErrorOf(""), "prices/test.yaml: empty, or not embedded in this build");
  EXPECT_EQ(ErrorOf("- a\n- b\n"), "prices/test.yaml: must be a map of regions and prices");
  EXPECT_TRUE(PriceTableText("no_such_table.yaml").empty());
}

}  // namespace
}  // namespace stoker::cost::internal
