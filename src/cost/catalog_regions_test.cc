// The catalog's regions: S1's per-region prices, S2's per-GPU ones, the rules
// that derive the rest, and how a region is chosen. Expected figures were read
// by hand from S1 (pricing.yml at commit fd66b26,
// compute.instance.<type>.cost.<region>) and S2 (vms.csv at commit 017e250).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "cost/catalog.h"
#include "cost/catalog_internal.h"

namespace stoker::cost {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

spec::MachineSpec Spec(const std::string& type, const std::string& accel = "", double count = 0) {
  spec::MachineSpec m;
  m.machine_type = type;
  m.accelerator_type = accel;
  m.accelerator_count = count;
  return m;
}

CloudPrice PriceIn(const std::string& region, const std::string& type,
                   const std::string& accel = "", double count = 0) {
  return Catalog::BuiltIn().PriceReplica(Spec(type, accel, count), region);
}

TEST(RegionsTest, TheRegionsVertexTrainsIn) {
  EXPECT_THAT(Catalog::BuiltIn().regions(),
              ElementsAre("asia-east1", "asia-northeast1", "asia-southeast1",
                          "australia-southeast1", "europe-west1", "europe-west2", "europe-west3",
                          "europe-west4", "northamerica-northeast1", "us-central1", "us-east1",
                          "us-east4", "us-west1", "us-west4"));
}

TEST(RegionsTest, EveryRegionHasEveryMachineRow) {
  Catalog c = Catalog::BuiltIn();
  for (const std::string& region : c.regions()) {
    EXPECT_EQ(c.Prices(region)->machines.size(), c.machines().size()) << region;
  }
}

// S1's us-central1 rows are the ones the hand table (the reference, rounded
// to 4 places, n1-standard-2 and n1-highcpu-8 derived by halving) was read from.
TEST(RegionsTest, GeneratedUsCentral1RowsAgreeWithTheHandTable) {
  Catalog c = Catalog::BuiltIn();
  int checked = 0;
  for (const internal::RegionalRow& p : internal::S1MachineTable().rows) {
    if (p.region != "us-central1") continue;
    const MachinePrice& m = c.Prices("us-central1")->machines.at(p.name);
    ASSERT_TRUE(m.compute_engine) << p.name;
    EXPECT_NEAR(m.compute_engine->usd_per_hour, p.compute_engine, p.compute_engine * 5e-4)
        << p.name;
    ASSERT_TRUE(m.spot) << p.name;
    EXPECT_NEAR(m.spot->usd_per_hour, p.spot, p.spot * 2e-3) << p.name;
    ++checked;
  }
  EXPECT_EQ(checked, 44);  // all but a3-megagpu-8g, which S1 does not price there
}

TEST(RegionsTest, FiguresReadFromS1) {
  CloudPrice a2 = PriceIn("europe-west4", "a2-highgpu-1g");
  EXPECT_DOUBLE_EQ(*a2.compute_engine_usd_per_hour, 3.747972);
  EXPECT_DOUBLE_EQ(*a2.spot_usd_per_hour, 1.692835);

  CloudPrice n1 = PriceIn("asia-east1", "n1-standard-8");
  EXPECT_DOUBLE_EQ(*n1.compute_engine_usd_per_hour, 0.439996);
  EXPECT_DOUBLE_EQ(*n1.spot_usd_per_hour, 0.08608);
  EXPECT_EQ(n1.confidence, "C");  // the Vertex estimate is the weakest part

  CloudPrice g2 = PriceIn("australia-southeast1", "g2-standard-4");
  EXPECT_DOUBLE_EQ(*g2.compute_engine_usd_per_hour, 0.883229213);
  EXPECT_DOUBLE_EQ(*g2.spot_usd_per_hour, 0.099984);

  CloudPrice n4 = PriceIn("europe-west4", "n1-standard-4");
  EXPECT_DOUBLE_EQ(*n4.compute_engine_usd_per_hour, 0.209168);
  EXPECT_DOUBLE_EQ(*n4.spot_usd_per_hour, 0.12153);
}

TEST(RegionsTest, VertexScalesWithTheRegionalComputeEnginePrice) {
  // n1-standard-4: Vertex $0.21849885 / Compute Engine $0.19 in us-central1 (S3, S1).
  CloudPrice n4 = PriceIn("europe-west4", "n1-standard-4");
  EXPECT_NEAR(*n4.vertex_usd_per_hour, 0.209168 * 0.21849885 / 0.19, 1e-12);
  EXPECT_NEAR(*n4.vertex_usd_per_hour, 0.24054, 1e-5);
  // a2-highgpu-1g: Vertex est. $4.2244 / Compute Engine $3.6734 in us-central1.
  CloudPrice a2 = PriceIn("europe-west4", "a2-highgpu-1g");
  EXPECT_NEAR(*a2.vertex_usd_per_hour, 3.747972 * 4.2244 / 3.6734, 1e-12);
  const Catalog catalog = Catalog::BuiltIn();  // the row below lives in it
  const MachinePrice& row = catalog.Prices("europe-west4")->machines.at("n1-standard-4");
  EXPECT_EQ(row.vertex->confidence, "C");
  EXPECT_EQ(row.compute_engine->confidence, "A");
  EXPECT_THAT(row.compute_engine->source, HasSubstr("2026-07-30"));
}

TEST(RegionsTest, TheMegaA3IsPricedWhereS1PricesIt) {
  CloudPrice east = PriceIn("us-east4", "a3-megagpu-8g");
  EXPECT_DOUBLE_EQ(*east.compute_engine_usd_per_hour, 92.9375881512329);
  EXPECT_DOUBLE_EQ(*east.spot_usd_per_hour, 23.2752366027397);
  EXPECT_FALSE(east.vertex_usd_per_hour);
  EXPECT_THAT(east.reason, HasSubstr("no Vertex price: no Vertex estimate for a3-megagpu-8g"));

  CloudPrice west = PriceIn("europe-west2", "a3-megagpu-8g");
  EXPECT_FALSE(west.priced());
  EXPECT_THAT(west.reason, HasSubstr("S1 (2026-07-30) has no europe-west2 price"));
}

// S2's us-central1 rows are the figures the hand table (docs/prices.md) was read from.
TEST(RegionsTest, GeneratedUsCentral1GpuRowsAgreeWithTheHandTable) {
  Catalog c = Catalog::BuiltIn();
  int checked = 0;
  for (const internal::RegionalRow& p : internal::S2GpuTable().rows) {
    if (p.region != "us-central1") continue;
    const AcceleratorPrice& a = c.Prices("us-central1")->accelerators.at(p.name);
    EXPECT_DOUBLE_EQ(a.compute_engine->usd_per_hour, p.compute_engine) << p.name;
    EXPECT_DOUBLE_EQ(a.spot->usd_per_hour, p.spot) << p.name;
    ++checked;
  }
  EXPECT_EQ(checked, 4);  // T4, V100, P100, P4 (S2 has no K80)
}

// Figures read from S2 (vms.csv at 017e250), count-1 rows, e.g.
// ",,,T4,1,...,europe-west4,europe-west4-a,0.3675,0.14".
TEST(RegionsTest, AttachedGpusArePricedWithTheRegionsS2Figures) {
  CloudPrice eu = PriceIn("europe-west4", "n1-standard-4", "NVIDIA_TESLA_T4", 1);
  ASSERT_TRUE(eu.priced()) << eu.reason;
  EXPECT_NEAR(*eu.compute_engine_usd_per_hour, 0.209168 + 0.3675, 1e-12);
  EXPECT_NEAR(*eu.spot_usd_per_hour, 0.12153 + 0.14, 1e-12);
  // Vertex: the machine scaled as before, the GPU at Compute Engine x 1.15.
  EXPECT_NEAR(*eu.vertex_usd_per_hour, 0.209168 * 0.21849885 / 0.19 + 0.3675 * 1.15, 1e-12);
  EXPECT_EQ(eu.confidence, "C");

  // ",,,T4,1,...,asia-east1,asia-east1-a,0.35,0.14": the same as us-central1.
  CloudPrice asia = PriceIn("asia-east1", "n1-standard-4", "NVIDIA_TESLA_T4", 1);
  EXPECT_NEAR(*asia.compute_engine_usd_per_hour, 0.219998 + 0.35, 1e-12);
  EXPECT_NEAR(*asia.spot_usd_per_hour, 0.04304 + 0.14, 1e-12);

  // ",,,V100,1,...,europe-west4,europe-west4-a,2.604,0.7148", times 2.
  CloudPrice v100 = PriceIn("europe-west4", "n1-standard-8", "NVIDIA_TESLA_V100", 2);
  EXPECT_NEAR(*v100.compute_engine_usd_per_hour, 0.418336 + 2 * 2.604, 1e-12);
  EXPECT_NEAR(*v100.spot_usd_per_hour, 0.24306 + 2 * 0.7148, 1e-12);

  // ",,,P4,1,...,northamerica-northeast1,northamerica-northeast1-a,0.65,0.1261".
  CloudPrice p4 = PriceIn("northamerica-northeast1", "n1-standard-4", "NVIDIA_TESLA_P4", 4);
  EXPECT_NEAR(*p4.compute_engine_usd_per_hour, 0.209168 + 4 * 0.65, 1e-12);

  const Catalog catalog = Catalog::BuiltIn();
  const AcceleratorPrice& t4 =
      catalog.Prices("australia-southeast1")->accelerators.at("NVIDIA_TESLA_T4");
  EXPECT_DOUBLE_EQ(t4.compute_engine->usd_per_hour, 0.44);
  EXPECT_EQ(t4.compute_engine->confidence, "A");
  EXPECT_THAT(t4.compute_engine->source, HasSubstr("S2 SkyPilot vms.csv"));
  EXPECT_EQ(t4.spot->confidence, "C");
  EXPECT_THAT(t4.vertex->source, HasSubstr("x 1.15"));
}

TEST(RegionsTest, AnAttachedGpuNotSoldInTheRegionHasNoPriceAndSaysSo) {
  // S2 lists the V100 in asia-east1, europe-west4, us-central1, us-east1 and us-west1 only.
  CloudPrice v100 = PriceIn("europe-west2", "n1-standard-8", "NVIDIA_TESLA_V100", 1);
  EXPECT_FALSE(v100.priced());
  EXPECT_THAT(v100.reason, HasSubstr("NVIDIA_TESLA_V100 is not sold in europe-west2 (S2 lists it "
                                     "in us-central1, us-east1, us-west1, europe-west4, "
                                     "asia-east1; set cost.accelerators.NVIDIA_TESLA_V100"));
  EXPECT_THAT(PriceIn("us-east4", "n1-standard-4", "NVIDIA_TESLA_P100", 1).reason,
              HasSubstr("NVIDIA_TESLA_P100 is not sold in us-east4"));
  // The K80 is not in S2: its regional estimate stays (see below).
  EXPECT_TRUE(
      PriceIn("europe-west2", "n1-standard-8", "NVIDIA_TESLA_K80", 1).compute_engine_usd_per_hour);
  // Still the same rules: an L4 does not attach to n1 anywhere.
  EXPECT_THAT(PriceIn("europe-west4", "n1-standard-8", "NVIDIA_L4", 1).reason,
              HasSubstr("does not attach to n1 machines"));
}

// AI Platform's BASIC_GPU (standard_gpu: n1-standard-8 + 1 K80) in Asia:
// the K80 at the 2019 Americas $0.45 x 0.54 / 0.49.
TEST(RegionsTest, LegacyGpuNameInAsiaUsesTheEuropeAsiaRate) {
  CloudPrice p = PriceIn("asia-east1", "standard_gpu");
  const double k80 = 0.45 * 0.54 / 0.49;  // 0.495918...
  EXPECT_NEAR(*p.compute_engine_usd_per_hour, 0.439996 + k80, 1e-12);
  EXPECT_NEAR(*p.vertex_usd_per_hour, 0.439996 * 0.4370 / 0.38 + k80 * 1.15, 1e-12);
  EXPECT_THAT(
      p.notes,
      testing::Contains(HasSubstr("in Europe and Asia-Pacific $0.9147 (training units at $0.54")));
  // In an Americas region the K80 stays at $0.45 and the note has no Europe/Asia part.
  CloudPrice us = PriceIn("us-east1", "standard_gpu");
  EXPECT_NEAR(*us.compute_engine_usd_per_hour, 0.379998 + 0.45, 1e-9);
  for (const std::string& n : us.notes) EXPECT_THAT(n, testing::Not(HasSubstr("Asia")));
}

TEST(RegionsTest, TrainingUnitRates) {
  EXPECT_EQ(Catalog::TrainingUnitUsd("us-central1"), 0.49);
  EXPECT_EQ(Catalog::TrainingUnitUsd("northamerica-northeast1"), 0.49);
  EXPECT_EQ(Catalog::TrainingUnitUsd("local"), 0.49);
  EXPECT_EQ(Catalog::TrainingUnitUsd("europe-west4"), 0.54);
  EXPECT_EQ(Catalog::TrainingUnitUsd("asia-east1"), 0.54);
  EXPECT_EQ(Catalog::TrainingUnitUsd("australia-southeast1"), 0.54);
}

TEST(RegionsTest, AnUnknownRegionGetsNoPriceNeverUsCentral1s) {
  CloudPrice p = PriceIn("mars-north1", "n1-standard-4");
  EXPECT_FALSE(p.priced());
  EXPECT_THAT(p.reason, HasSubstr("no prices for 'mars-north1'; known: asia-east1, "));
  Status s = Catalog::BuiltIn().CheckRegion("mars-north1", "region");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("region: no prices for 'mars-north1'; known: "));
  EXPECT_TRUE(Catalog::BuiltIn().CheckRegion("europe-west1", "region").ok());
}

TEST(RegionsTest, RegionForALocation) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(c.Apply(YAML::Load("region: europe-west1")).ok());
  EXPECT_EQ(c.RegionFor("asia-east1"), "asia-east1");
  EXPECT_EQ(c.RegionFor("mars-north1"), "mars-north1");  // a region, unknown: no price
  EXPECT_EQ(c.RegionFor("asia-pacific"), "asia-pacific");
  EXPECT_EQ(c.RegionFor("local"), "europe-west1");  // Stoker's own locations
  EXPECT_EQ(c.RegionFor("l"), "europe-west1");
  EXPECT_EQ(c.RegionFor(""), "europe-west1");
}

TEST(RegionsTest, ConfigRegionChoosesTheDefaultPrices) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(c.Apply(YAML::Load("region: europe-west4")).ok());
  EXPECT_EQ(c.region(), "europe-west4");
  EXPECT_DOUBLE_EQ(*c.PriceReplica(Spec("n1-standard-4")).compute_engine_usd_per_hour, 0.209168);
  EXPECT_DOUBLE_EQ(c.machines().at("n1-standard-4").compute_engine->usd_per_hour, 0.209168);
  // us-central1 can still be asked for.
  EXPECT_DOUBLE_EQ(
      *c.PriceReplica(Spec("n1-standard-4"), "us-central1").compute_engine_usd_per_hour, 0.19);
}

TEST(RegionsTest, ConfigRegionMustBeOneTheCatalogHas) {
  Catalog c = Catalog::BuiltIn();
  Status s = c.Apply(YAML::Load("region: asia-pacific"));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cost.region: no prices for 'asia-pacific'; known: "
                                     "asia-east1, asia-northeast1"));
  EXPECT_EQ(c.region(), "us-central1");
}

TEST(RegionsTest, ConfigFiguresHoldInEveryRegion) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(c.Apply(YAML::Load(R"(
machines:
  n1-standard-4: {vertex_usd_per_hour: 0.25}
  lab-box: {vcpus: 16, memory_gb: 64, compute_engine_usd_per_hour: 2.0}
accelerators:
  NVIDIA_TESLA_T4: {compute_engine_usd_per_gpu_hour: 0.41}
)"))
                  .ok());
  CloudPrice n4 = c.PriceReplica(Spec("n1-standard-4"), "asia-east1");
  EXPECT_EQ(*n4.vertex_usd_per_hour, 0.25);
  EXPECT_DOUBLE_EQ(*n4.compute_engine_usd_per_hour, 0.219998);  // S1's stays
  EXPECT_EQ(*c.PriceReplica(Spec("lab-box"), "europe-west3").compute_engine_usd_per_hour, 2.0);
  CloudPrice t4 = c.PriceReplica(Spec("n1-standard-4", "NVIDIA_TESLA_T4", 1), "europe-west4");
  EXPECT_NEAR(*t4.compute_engine_usd_per_hour, 0.209168 + 0.41, 1e-12);
}

}  // namespace
}  // namespace stoker::cost
