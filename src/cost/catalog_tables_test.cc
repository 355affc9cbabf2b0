// The per-region price tables: every shipped one parses, and a malformed one
// is refused with its file, entry and field named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

  Result<HandPrices> us = ParseHandPrices(PriceTableText("us_central1.yaml"), "us_central1.yaml");
  ASSERT_TRUE(us.ok()) << us.status().message();
  EXPECT_EQ(us->machines.size(), 43u);  // n1-standard-2 and n1-highcpu-8 are derived
  EXPECT_EQ(us->accelerators.size(), 10u);
  EXPECT_EQ(us->legacy_machines.size(), 7u);

  Result<OwnHardwareTable> own =
      ParseOwnHardware(PriceTableText("own_hardware.yaml"), "own_hardware.yaml");
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(own->own.gpus.size(), 4u);
  EXPECT_EQ(own->known_watts.size(), 4u);
}

// The hand-read table: a bare machine figure is left for the market's rule
// to grade; a {usd, grade, source} rate keeps its own.
TEST(PriceTablesTest, ReadsTheHandTable) {
  Result<HandPrices> t = ParseHandPrices(R"(
sources:
  - &S3 "S3 Vertex pricing page 2026-10-07"
machines:
  - {name: n1-standard-4, vcpus: 4, memory_gb: 15, compute_engine: 0.1900, spot: null,
     vertex: {usd: 0.21849885, grade: A, source: *S3}}
  - {name: g2-standard-4, vcpus: 4, memory_gb: 16, gpu_type: NVIDIA_L4, gpu_count: 1,
     compute_engine: 0.7068, spot: 0.3973, vertex: 0.8129}
accelerators:
  - {name: NVIDIA_TESLA_K80, compute_engine: {usd: 0.45, grade: B, source: S4b}, spot: null,
     vertex: null, n1_counts: [1, 2, 4, 8]}
legacy_machines:
  - {name: standard_gpu, machine_type: n1-standard-8, gpu_type: NVIDIA_TESLA_K80, gpu_count: 1,
     usd_2019: 0.83}
)",
                                         kFile);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const MachinePrice& n4 = t->machines.at("n1-standard-4");
  EXPECT_EQ(n4.compute_engine->usd_per_hour, 0.19);
  EXPECT_EQ(n4.compute_engine->source, "");  // the market's rule grades it
  EXPECT_FALSE(n4.spot);
  EXPECT_EQ(n4.vertex->confidence, "A");
  EXPECT_EQ(n4.vertex->source, "S3 Vertex pricing page 2026-10-07");
  EXPECT_EQ(t->machines.at("g2-standard-4").gpu_type, "NVIDIA_L4");
  const AcceleratorPrice& k80 = t->accelerators.at("NVIDIA_TESLA_K80");
  EXPECT_EQ(k80.compute_engine->confidence, "B");
  EXPECT_FALSE(k80.vertex);
  EXPECT_EQ(k80.n1_counts, (std::vector<int>{1, 2, 4, 8}));
  ASSERT_EQ(t->legacy_machines.size(), 1u);
  EXPECT_EQ(t->legacy_machines[0].gpu_count, 1);
  EXPECT_EQ(t->legacy_machines[0].usd_2019, 0.83);
}

// The error of parsing a hand table whose lists are `lists` ("" when it parses).
std::string HandErrorOf(const std::string& lists) {
  Result<HandPrices> t = ParseHandPrices(lists, kFile);
  return t.ok() ? std::string() : t.status().message();
}

TEST(PriceTablesTest, ABadHandTableNamesTheFileEntryAndField) {
  const std::string k80 =
      "accelerators:\n  - {name: K80, compute_engine: null, spot: null, vertex: null, "
      "n1_counts: []}\n";
  const std::string no_legacy = "legacy_machines: []\n";
  EXPECT_EQ(HandErrorOf("machines:\n  - {name: a, vcpus: 1, memory_gb: 1, compute_engine: 1, "
                        "spot: 1, vertex: {usd: 1, grade: D, source: x}}\n" +
                        k80 + no_legacy),
            "prices/test.yaml: machines[0].vertex.grade: must be A, B or C (got 'D')");
  EXPECT_EQ(HandErrorOf("machines: []\naccelerators:\n  - {name: T4, compute_engine: 0.35, "
                        "spot: null, vertex: null, n1_counts: [1]}\n" +
                        no_legacy),
            "prices/test.yaml: accelerators[0].compute_engine: must be null, or a map of usd, "
            "grade, source");
  EXPECT_EQ(HandErrorOf("machines:\n  - {name: a, vcpus: 1, memory_gb: 1, gpu_type: L4, "
                        "compute_engine: 1, spot: 1, vertex: 1}\n" +
                        k80 + no_legacy),
            "prices/test.yaml: machines[0]: gpu_type and gpu_count go together (set both or "
            "neither)");
  EXPECT_EQ(HandErrorOf("machines:\n  - {name: a, vcpus: 1, memory_gb: 1, compute_engine: 1, "
                        "spot: 1, vertex: 1}\n  - {name: a, vcpus: 2, memory_gb: 1, "
                        "compute_engine: 1, spot: 1, vertex: 1}\n" +
                        k80 + no_legacy),
            "prices/test.yaml: machines[1].name: a is listed twice");
  EXPECT_EQ(HandErrorOf("machines: []\n" + k80 +
                        "legacy_machines:\n  - {name: standard_gpu, machine_type: n1-standard-8, "
                        "gpu_type: T4, gpu_count: 1, usd_2019: 0.83}\n"),
            "prices/test.yaml: legacy_machines[0].gpu_type: T4 is not among the accelerators");
  EXPECT_EQ(HandErrorOf("machines: []\naccelerators:\n  - {name: T4, compute_engine: null, "
                        "spot: null, vertex: null, n1_counts: [1, 0]}\n" +
                        no_legacy),
            "prices/test.yaml: accelerators[0].n1_counts[1]: must be a whole number from 1 to "
            "1024");
  EXPECT_EQ(HandErrorOf("machines: []\n" + k80), "prices/test.yaml: missing legacy_machines");
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

// The error of parsing an own-hardware table ("" when it parses).
std::string OwnErrorOf(const std::string& text) {
  Result<OwnHardwareTable> t = ParseOwnHardware(text, kFile);
  return t.ok() ? std::string() : t.status().message();
}

TEST(PriceTablesTest, ABadOwnHardwareTableNamesTheFileEntryAndField) {
  const std::string gpu =
      "  - {gpu_type: H100, purchase_usd: 30000, life_years: 3, watts: 350, source: S8}\n";
  EXPECT_EQ(OwnErrorOf("usd_per_kwh: 0.15\npue: 1\ngpus:\n" + gpu + "known_watts: []\n"), "");
  EXPECT_EQ(OwnErrorOf("usd_per_kwh: 0.15\npue: 0.9\ngpus: []\nknown_watts: []\n"),
            "prices/test.yaml: pue: must be a number >= 1");
  EXPECT_EQ(OwnErrorOf("usd_per_kwh: 0.15\npue: 1\ngpus:\n" + gpu +
                       "  - {gpu_type: A100, purchase_usd: 1, life_years: 0, watts: 1, source: x}\n"
                       "known_watts: []\n"),
            "prices/test.yaml: gpus[1].life_years: must be a number > 0");
  EXPECT_EQ(OwnErrorOf("usd_per_kwh: 0.15\npue: 1\ngpus:\n" + gpu + gpu + "known_watts: []\n"),
            "prices/test.yaml: gpus[1].gpu_type: H100 is listed twice");
  EXPECT_EQ(OwnErrorOf("usd_per_kwh: 0.15\npue: 1\ngpus: []\nknown_watts:\n"
                       "  - {gpu_type: L4, watt: 72, source: x}\n"),
            "prices/test.yaml: known_watts[0]: unknown key 'watt' (expected gpu_type, watts, "
            "source)");
}

}  // namespace
}  // namespace stoker::cost::internal
