#include "cost/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>

namespace stoker::cost {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

spec::MachineSpec Spec(const std::string& type, const std::string& accel = "", double count = 0) {
  spec::MachineSpec m;
  m.machine_type = type;
  m.accelerator_type = accel;
  m.accelerator_count = count;
  return m;
}

CloudPrice Price(const std::string& type, const std::string& accel = "", double count = 0) {
  return Catalog::BuiltIn().PriceReplica(Spec(type, accel, count));
}

Status ApplyText(Catalog& c, const std::string& yaml) { return c.Apply(YAML::Load(yaml)); }

// ---------------------------------------------------------------------------
// The shipped figures against the reference table.

TEST(BuiltInTest, RegionDateAndSources) {
  Catalog c = Catalog::BuiltIn();
  EXPECT_EQ(c.region(), "us-central1");
  EXPECT_EQ(c.price_date(), "2026-07-30");
  const MachinePrice& n1 = c.machines().at("n1-standard-4");
  EXPECT_EQ(n1.compute_engine->source, "S1 Cyclenerd pricing.yml 2026-07-30");
  EXPECT_EQ(n1.vertex->source, "S3 Vertex pricing page 2026-10-07");
  EXPECT_EQ(n1.vertex->confidence, "A");
  EXPECT_EQ(c.machines().at("n1-standard-8").vertex->confidence, "C");
  EXPECT_EQ(c.machines().at("n1-standard-2").compute_engine->confidence, "C");
  EXPECT_EQ(c.machines().at("n1-highcpu-8").compute_engine->confidence, "C");
  EXPECT_EQ(c.accelerators().at("NVIDIA_TESLA_T4").vertex->confidence, "B");
  EXPECT_EQ(c.accelerators().at("NVIDIA_H100_80GB").vertex->confidence, "A");
  EXPECT_EQ(c.accelerators().at("NVIDIA_TESLA_V100").vertex->confidence, "C");
}

TEST(BuiltInTest, EveryMachineOfTheReferenceTableIsThere) {
  Catalog c = Catalog::BuiltIn();
  for (const char* name :
       {"n1-standard-4",  "n1-standard-8",  "n1-standard-16", "n1-standard-32", "n1-standard-64",
        "n1-standard-96", "n1-highmem-2",   "n1-highmem-4",   "n1-highmem-8",   "n1-highmem-16",
        "n1-highmem-32",  "n1-highmem-64",  "n1-highmem-96",  "n1-highcpu-16",  "n1-highcpu-32",
        "n1-highcpu-64",  "n1-highcpu-96",  "e2-standard-4",  "e2-standard-8",  "e2-standard-16",
        "e2-standard-32", "a2-highgpu-1g",  "a2-highgpu-2g",  "a2-highgpu-4g",  "a2-highgpu-8g",
        "a2-megagpu-16g", "a2-ultragpu-1g", "a2-ultragpu-2g", "a2-ultragpu-4g", "a2-ultragpu-8g",
        "a3-highgpu-1g",  "a3-highgpu-2g",  "a3-highgpu-4g",  "a3-highgpu-8g",  "a3-megagpu-8g",
        "g2-standard-4",  "g2-standard-8",  "g2-standard-12", "g2-standard-16", "g2-standard-24",
        "g2-standard-32", "g2-standard-48", "g2-standard-96"}) {
    EXPECT_EQ(c.machines().count(name), 1u) << name;
  }
  EXPECT_EQ(c.machines().size(), 45u);  // the 43 above + n1-standard-2 + n1-highcpu-8
}

TEST(BuiltInTest, ShapesFromTheReference) {
  Catalog c = Catalog::BuiltIn();
  const MachinePrice& a3 = c.machines().at("a3-highgpu-8g");
  EXPECT_EQ(a3.vcpus, 208);
  EXPECT_EQ(a3.memory_gb, 1872);
  EXPECT_EQ(a3.gpu_type, "NVIDIA_H100_80GB");
  EXPECT_EQ(a3.gpu_count, 8);
  EXPECT_EQ(c.machines().at("g2-standard-24").gpu_count, 2);
  EXPECT_EQ(c.machines().at("g2-standard-32").gpu_count, 1);
  EXPECT_EQ(c.machines().at("n1-highcpu-16").memory_gb, 14.4);
}

TEST(BuiltInTest, N1CountsFromTheReference) {
  Catalog c = Catalog::BuiltIn();
  EXPECT_THAT(c.accelerators().at("NVIDIA_TESLA_T4").n1_counts, ElementsAre(1, 2, 4));
  EXPECT_THAT(c.accelerators().at("NVIDIA_TESLA_V100").n1_counts, ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(c.accelerators().at("NVIDIA_TESLA_P100").n1_counts, ElementsAre(1, 2, 4));
  EXPECT_THAT(c.accelerators().at("NVIDIA_TESLA_P4").n1_counts, ElementsAre(1, 2, 4));
  EXPECT_THAT(c.accelerators().at("NVIDIA_TESLA_K80").n1_counts, ElementsAre(1, 2, 4, 8));
  for (const char* g : {"NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_L4", "NVIDIA_H100_80GB"}) {
    EXPECT_THAT(c.accelerators().at(g).n1_counts, IsEmpty()) << g;
  }
}

TEST(PriceReplicaTest, N1Standard4) {
  CloudPrice p = Price("n1-standard-4");
  ASSERT_TRUE(p.priced());
  EXPECT_NEAR(*p.vertex_usd_per_hour, 0.21849885, 1e-9);
  EXPECT_NEAR(*p.compute_engine_usd_per_hour, 0.19, 1e-9);
  EXPECT_NEAR(*p.spot_usd_per_hour, 0.067, 1e-9);
  EXPECT_EQ(p.confidence, "A");  // CE and Spot from S1, Vertex from S3
  EXPECT_EQ(p.basis, "n1-standard-4");
  EXPECT_EQ(p.reason, "");
}

TEST(PriceReplicaTest, MachinesWithBuiltInGpus) {
  CloudPrice a3 = Price("a3-highgpu-1g", "NVIDIA_H100_80GB", 1);
  EXPECT_NEAR(*a3.compute_engine_usd_per_hour, 11.0612, 1e-9);
  EXPECT_NEAR(*a3.spot_usd_per_hour, 6.3262, 1e-9);
  EXPECT_NEAR(*a3.vertex_usd_per_hour, 11.2386, 1e-9);
  EXPECT_EQ(a3.confidence, "C");  // the Vertex figure is an estimate
  EXPECT_EQ(a3.basis, "a3-highgpu-1g (1 x NVIDIA_H100_80GB built in)");

  CloudPrice g2 = Price("g2-standard-4");  // no acceleratorConfig: the GPU is still there
  EXPECT_NEAR(*g2.compute_engine_usd_per_hour, 0.7068, 1e-9);

  CloudPrice other = Price("a2-highgpu-1g", "NVIDIA_L4", 1);
  EXPECT_FALSE(other.priced());
  EXPECT_THAT(other.reason, HasSubstr("NVIDIA_TESLA_A100"));

  CloudPrice more = Price("a2-highgpu-1g", "NVIDIA_TESLA_A100", 2);
  EXPECT_FALSE(more.priced());
  EXPECT_THAT(more.reason, HasSubstr("use a2-highgpu-2g"));

  CloudPrice share = Price("g2-standard-8", "NVIDIA_L4", 0.5);
  EXPECT_NEAR(*share.compute_engine_usd_per_hour, 0.8536, 1e-9);
  EXPECT_THAT(share.notes, Contains("Vertex sells whole GPUs: 0.5 of a GPU priced as 1"));
}

TEST(PriceReplicaTest, N1WithAttachedGpus) {
  CloudPrice p = Price("n1-standard-8", "NVIDIA_TESLA_T4", 1);
  ASSERT_TRUE(p.priced());
  EXPECT_NEAR(*p.compute_engine_usd_per_hour, 0.38 + 0.35, 1e-9);
  EXPECT_NEAR(*p.vertex_usd_per_hour, 0.4370 + 0.4025, 1e-9);
  EXPECT_NEAR(*p.spot_usd_per_hour, 0.134 + 0.14, 1e-9);
  EXPECT_EQ(p.basis, "n1-standard-8 + 1 x NVIDIA_TESLA_T4");
  EXPECT_EQ(p.confidence, "C");

  CloudPrice four = Price("n1-standard-16", "NVIDIA_TESLA_V100", 4);
  EXPECT_NEAR(*four.compute_engine_usd_per_hour, 0.76 + 4 * 2.48, 1e-9);
}

TEST(PriceReplicaTest, UnspecifiedAcceleratorIsNoGpu) {
  CloudPrice p = Price("n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 0);
  EXPECT_NEAR(*p.compute_engine_usd_per_hour, 0.19, 1e-9);
  EXPECT_EQ(p.basis, "n1-standard-4");
}

TEST(PriceReplicaTest, H100OnN1IsRefusedNamingA3) {
  CloudPrice p = Price("n1-standard-8", "NVIDIA_H100_80GB", 1);
  EXPECT_FALSE(p.priced());
  EXPECT_EQ(p.reason,
            "NVIDIA_H100_80GB does not attach to n1 machines on Google Cloud; use a3-highgpu-1g");
  EXPECT_THAT(Price("n1-standard-8", "NVIDIA_L4", 2).reason, HasSubstr("use g2-standard-24"));
}

TEST(PriceReplicaTest, CountsThatDoNotAttachToN1) {
  CloudPrice p = Price("n1-standard-32", "NVIDIA_TESLA_T4", 8);
  EXPECT_FALSE(p.priced());
  EXPECT_THAT(p.reason, HasSubstr("allowed counts: 1, 2, 4"));
}

TEST(PriceReplicaTest, FractionalGpuIsPricedAsOne) {
  CloudPrice p = Price("n1-standard-4", "NVIDIA_TESLA_T4", 0.25);
  ASSERT_TRUE(p.priced());
  EXPECT_NEAR(*p.compute_engine_usd_per_hour, 0.19 + 0.35, 1e-9);
  EXPECT_THAT(p.notes, ElementsAre("Vertex sells whole GPUs: 0.25 of a GPU priced as 1"));
}

TEST(PriceReplicaTest, CpuMachineOtherThanN1TakesNoGpu) {
  CloudPrice p = Price("e2-standard-8", "NVIDIA_TESLA_T4", 1);
  EXPECT_FALSE(p.priced());
  EXPECT_THAT(p.reason, HasSubstr("e2-standard-8 takes no accelerators"));
}

TEST(PriceReplicaTest, LegacyNamesPriceAsTheirComputeEngineMachine) {
  CloudPrice gpu = Price("standard_gpu");
  ASSERT_TRUE(gpu.priced());
  // 0.38 + 0.45 = the 2019 AI Platform price of standard_gpu, $0.83.
  EXPECT_NEAR(*gpu.compute_engine_usd_per_hour, 0.83, 1e-9);
  EXPECT_EQ(gpu.basis,
            "standard_gpu = n1-standard-8 + 1 x NVIDIA_TESLA_K80 (legacy AI Platform name)");
  EXPECT_FALSE(gpu.spot_usd_per_hour);  // no K80 Spot price
  EXPECT_THAT(gpu.reason, HasSubstr("no Compute Engine Spot price"));
  EXPECT_THAT(gpu.reason, HasSubstr("end of life"));

  // 0.76 + 4 x 0.45 = $2.56, complex_model_m_gpu in 2019.
  EXPECT_NEAR(*Price("complex_model_m_gpu").compute_engine_usd_per_hour, 2.56, 1e-9);
  EXPECT_NEAR(*Price("standard_gpu", "NVIDIA_TESLA_K80", 1).compute_engine_usd_per_hour, 0.83,
              1e-9);
  EXPECT_FALSE(Price("standard_gpu", "NVIDIA_TESLA_T4", 1).priced());

  // The CPU names are within 0.1 % of their 2019 prices.
  const std::map<std::string, double> k2019 = {{"standard", 0.19},
                                               {"large_model", 0.4736},
                                               {"complex_model_s", 0.2836},
                                               {"complex_model_m", 0.5672},
                                               {"complex_model_l", 1.1344}};
  for (const auto& [name, usd] : k2019) {
    CloudPrice p = Price(name);
    ASSERT_TRUE(p.compute_engine_usd_per_hour) << name;
    EXPECT_NEAR(*p.compute_engine_usd_per_hour, usd, usd * 0.001) << name;
    EXPECT_THAT(p.basis, HasSubstr("(legacy AI Platform name)"));
  }
  EXPECT_EQ(Price("large_model").basis, "large_model = n1-highmem-8 (legacy AI Platform name)");
}

TEST(PriceReplicaTest, NoPriceCases) {
  CloudPrice unknown = Price("m9-turbo-1");
  EXPECT_FALSE(unknown.priced());
  EXPECT_EQ(unknown.reason,
            "machine type 'm9-turbo-1' is not in the price catalog (add it under cost.machines in "
            "the config)");
  EXPECT_EQ(unknown.basis, "m9-turbo-1");

  CloudPrice mega = Price("a3-megagpu-8g");
  EXPECT_FALSE(mega.priced());
  EXPECT_THAT(mega.reason, HasSubstr("no us-central1 price"));

  CloudPrice tpu = Price("cloud-tpu", "TPU_V3", 8);
  EXPECT_FALSE(tpu.priced());
  EXPECT_EQ(tpu.reason, "TPUs are not priced by Stoker's catalog");

  EXPECT_FALSE(Price("n1-standard-4", "", 1).priced());
  EXPECT_FALSE(Price("n1-standard-4", "NVIDIA_TESLA_T4", 1.5).priced());
  EXPECT_THAT(Price("n1-standard-4", "NVIDIA_B9000", 1).reason,
              HasSubstr("'NVIDIA_B9000' is not in the price catalog"));
}

// The table's internal consistency: a GPU machine's Compute Engine price is
// its host part + GPUs x the per-GPU price + bundled local SSD
// ($0.08/GB-month / 730 h); host parts and SSD sizes are §1's.
TEST(BuiltInTest, GpuMachinesCrossCheckWithHostPartAndGpuPrices) {
  struct Host {
    double usd;
    double ssd_gb;
  };
  const std::map<std::string, Host> kHosts = {
      {"a2-highgpu-1g", {0.7395, 0}},     {"a2-highgpu-2g", {1.4790, 0}},
      {"a2-highgpu-4g", {2.9579, 0}},     {"a2-highgpu-8g", {5.9158, 0}},
      {"a2-megagpu-16g", {8.7970, 0}},    {"a2-ultragpu-1g", {1.0996, 375}},
      {"a2-ultragpu-2g", {2.1992, 750}},  {"a2-ultragpu-4g", {4.3985, 1500}},
      {"a2-ultragpu-8g", {8.7970, 3000}}, {"a3-highgpu-1g", {1.1825, 750}},
      {"a3-highgpu-2g", {2.3650, 1500}},  {"a3-highgpu-4g", {4.7300, 3000}},
      {"a3-highgpu-8g", {9.4601, 6000}},  {"g2-standard-4", {0.1468, 0}},
      {"g2-standard-8", {0.2936, 0}},     {"g2-standard-12", {0.4404, 0}},
      {"g2-standard-16", {0.5872, 0}},    {"g2-standard-24", {0.8808, 0}},
      {"g2-standard-32", {1.1743, 0}},    {"g2-standard-48", {1.7615, 0}},
      {"g2-standard-96", {3.5230, 0}},
  };
  Catalog c = Catalog::BuiltIn();
  int checked = 0;
  for (const auto& [name, m] : c.machines()) {
    if (m.gpu_count == 0 || !m.compute_engine) continue;
    ASSERT_EQ(kHosts.count(name), 1u) << name;
    const Host& h = kHosts.at(name);
    const AcceleratorPrice& gpu = c.accelerators().at(m.gpu_type);
    const double ssd = h.ssd_gb * 0.08 / 730;
    const double ce = h.usd + m.gpu_count * gpu.compute_engine->usd_per_hour + ssd;
    EXPECT_NEAR(ce, m.compute_engine->usd_per_hour, m.compute_engine->usd_per_hour * 0.01) << name;
    // The Vertex estimate: host x 1.15 + SSD + GPUs at the Vertex GPU rate.
    const double vertex = h.usd * 1.15 + ssd + m.gpu_count * gpu.vertex->usd_per_hour;
    EXPECT_NEAR(vertex, m.vertex->usd_per_hour, m.vertex->usd_per_hour * 0.01) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 21);
}

TEST(BuiltInTest, CpuVertexEstimatesAreComputeEngineTimesOnePointOneFive) {
  Catalog c = Catalog::BuiltIn();
  for (const auto& [name, m] : c.machines()) {
    if (m.gpu_count > 0 || !m.vertex) continue;
    // Within 0.1 %: the reference rounds its Compute Engine column to 4 places.
    EXPECT_NEAR(m.vertex->usd_per_hour, m.compute_engine->usd_per_hour * 1.15,
                m.vertex->usd_per_hour * 0.001)
        << name;
  }
}

// ---------------------------------------------------------------------------
// Apply.

TEST(ApplyTest, NullChangesNothing) {
  Catalog c = Catalog::BuiltIn();
  EXPECT_TRUE(c.Apply(YAML::Node()).ok());
  EXPECT_TRUE(ApplyText(c, "~").ok());
  const YAML::Node config = YAML::Load("listen: 127.0.0.1:0");
  EXPECT_TRUE(c.Apply(config["cost"]).ok());  // the section is absent
  EXPECT_NEAR(*c.PriceReplica(Spec("n1-standard-4")).vertex_usd_per_hour, 0.21849885, 1e-9);
}

TEST(ApplyTest, TheDocumentedExample) {
  Catalog c = Catalog::BuiltIn();
  Status s = ApplyText(c, R"(
region: us-central1
machines:
  lab-box: {vcpus: 16, memory_gb: 64, gpu_type: NVIDIA_L4, gpu_count: 2, vertex_usd_per_hour: 2.3, compute_engine_usd_per_hour: 2.0, spot_usd_per_hour: 0.9}
  n1-standard-4: {vertex_usd_per_hour: 0.25}
accelerators:
  NVIDIA_TESLA_T4: {vertex_usd_per_gpu_hour: 0.40, compute_engine_usd_per_gpu_hour: 0.35, spot_usd_per_gpu_hour: 0.14, n1_counts: [1, 2, 4]}
own_hardware:
  usd_per_kwh: 0.12
  pue: 1.3
  gpus:
    NVIDIA_L4: {purchase_usd: 2500, life_years: 4, watts: 72}
  node: {purchase_usd: 6000, life_years: 4, watts: 250}
)");
  ASSERT_TRUE(s.ok()) << s.ToString();

  // One figure overridden; the others stay the shipped ones.
  CloudPrice n1 = c.PriceReplica(Spec("n1-standard-4"));
  EXPECT_NEAR(*n1.vertex_usd_per_hour, 0.25, 1e-12);
  EXPECT_NEAR(*n1.compute_engine_usd_per_hour, 0.19, 1e-12);
  EXPECT_EQ(c.machines().at("n1-standard-4").vertex->confidence, "config");
  EXPECT_EQ(c.machines().at("n1-standard-4").vertex->source, "config");
  EXPECT_EQ(c.machines().at("n1-standard-4").compute_engine->confidence, "A");

  CloudPrice lab = c.PriceReplica(Spec("lab-box", "NVIDIA_L4", 2));
  EXPECT_NEAR(*lab.vertex_usd_per_hour, 2.3, 1e-12);
  EXPECT_NEAR(*lab.compute_engine_usd_per_hour, 2.0, 1e-12);
  EXPECT_NEAR(*lab.spot_usd_per_hour, 0.9, 1e-12);
  EXPECT_EQ(lab.confidence, "config");

  CloudPrice t4 = c.PriceReplica(Spec("n1-standard-4", "NVIDIA_TESLA_T4", 1));
  EXPECT_NEAR(*t4.vertex_usd_per_hour, 0.25 + 0.40, 1e-12);

  EXPECT_EQ(c.own().usd_per_kwh, 0.12);
  EXPECT_EQ(c.own().pue, 1.3);
  std::string why;
  // 2500 / (4 x 8766) + 0.072 x 0.12 x 1.3, for 2 GPUs.
  std::optional<double> l4 = c.OwnGpuUsdPerHour("NVIDIA_L4", 2, &why);
  ASSERT_TRUE(l4) << why;
  EXPECT_NEAR(*l4, 2 * (2500.0 / (4 * 8766) + 0.072 * 0.12 * 1.3), 1e-12);
  // Node: 6000 / (4 x 8766) + 0.25 x 0.12 x 1.3, a quarter of it.
  std::optional<double> node = c.OwnNodeUsdPerHour(0.25);
  ASSERT_TRUE(node);
  EXPECT_NEAR(*node, 0.25 * (6000.0 / (4 * 8766) + 0.25 * 0.12 * 1.3), 1e-12);
  EXPECT_EQ(c.own().node->source, "config");
}

TEST(ApplyTest, AddedGpuWithoutWattsUsesTheKnownPower) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(ApplyText(c, "own_hardware: {gpus: {NVIDIA_TESLA_T4: {purchase_usd: 1000}}}").ok());
  const Asset& t4 = c.own().gpus.at("NVIDIA_TESLA_T4");
  EXPECT_EQ(t4.watts, 70);
  EXPECT_EQ(t4.life_years, 3);
  EXPECT_THAT(t4.source, HasSubstr("70 W"));

  Status s = ApplyText(c, "own_hardware: {gpus: {NVIDIA_RTX_A6000: {purchase_usd: 4000}}}");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cost.own_hardware.gpus.NVIDIA_RTX_A6000.watts"));
}

TEST(ApplyTest, OverridingOneFigureOfAShippedGpuKeepsTheRest) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(ApplyText(c, "own_hardware: {gpus: {NVIDIA_H100_80GB: {watts: 700}}}").ok());
  const Asset& h100 = c.own().gpus.at("NVIDIA_H100_80GB");
  EXPECT_EQ(h100.watts, 700);
  EXPECT_EQ(h100.purchase_usd, 30000);
  EXPECT_THAT(h100.source, HasSubstr("config over S8"));
}

struct BadCase {
  const char* yaml;
  const char* message;  // expected in the error
};

TEST(ApplyTest, ErrorsNameTheKey) {
  const BadCase kCases[] = {
      {"colour: red",
       "cost.colour: unknown key (accepted keys: region, machines, accelerators, "
       "own_hardware)"},
      {"machines: {n1-standard-4: {vertex_usd_per_hr: 1}}",
       "cost.machines.n1-standard-4.vertex_usd_per_hr: unknown key (accepted keys: vcpus, "
       "memory_gb, gpu_type, gpu_count, vertex_usd_per_hour, compute_engine_usd_per_hour, "
       "spot_usd_per_hour)"},
      {"machines: {n1-standard-4: {vertex_usd_per_hour: -1}}",
       "cost.machines.n1-standard-4.vertex_usd_per_hour: must be a number >= 0, got '-1'"},
      {"machines: {n1-standard-4: {vertex_usd_per_hour: cheap}}",
       "cost.machines.n1-standard-4.vertex_usd_per_hour: must be a number >= 0, got 'cheap'"},
      {"machines: {n1-standard-4: {vertex_usd_per_hour: '0.3'}}",
       "cost.machines.n1-standard-4.vertex_usd_per_hour: must be a number"},
      {"machines: {n1-standard-4: {vertex_usd_per_hour: .inf}}",
       "cost.machines.n1-standard-4.vertex_usd_per_hour: must be a number"},
      {"machines: {n1-standard-4: 0.3}", "cost.machines.n1-standard-4: must be a mapping"},
      {"machines: {box: {vcpus: 4}}", "cost.machines.box: a new machine type needs"},
      {"machines: {box: {gpu_type: NVIDIA_L4, compute_engine_usd_per_hour: 1}}",
       "cost.machines.box: give gpu_type and gpu_count together"},
      {"machines: {box: {gpu_count: 1.5, compute_engine_usd_per_hour: 1}}",
       "cost.machines.box.gpu_count: must be a whole number"},
      {"machines: [a, b]", "cost.machines: must be a mapping"},
      {"accelerators: {NVIDIA_TESLA_T4: {n1_counts: [1, 0]}}",
       "cost.accelerators.NVIDIA_TESLA_T4.n1_counts[1]: must be a whole number from 1"},
      {"accelerators: {NVIDIA_TESLA_T4: {n1_counts: 4}}",
       "cost.accelerators.NVIDIA_TESLA_T4.n1_counts: must be a list"},
      {"accelerators: {NVIDIA_TESLA_T4: {price: 1}}",
       "cost.accelerators.NVIDIA_TESLA_T4.price: unknown key (accepted keys: "
       "vertex_usd_per_gpu_hour, compute_engine_usd_per_gpu_hour, spot_usd_per_gpu_hour, "
       "n1_counts)"},
      {"accelerators: {TPU_V3: {compute_engine_usd_per_gpu_hour: 8}}",
       "cost.accelerators.TPU_V3: TPUs are not priced by Stoker's catalog"},
      {"own_hardware: {pue: 0.9}", "cost.own_hardware.pue: must be a number >= 1, got '0.9'"},
      {"own_hardware: {usd_per_kwh: -0.1}", "cost.own_hardware.usd_per_kwh: must be a number >= 0"},
      {"own_hardware: {solar: true}",
       "cost.own_hardware.solar: unknown key (accepted keys: usd_per_kwh, pue, gpus, node)"},
      {"own_hardware: {gpus: {NVIDIA_L4: {purchase_usd: 2500, life_years: 0, watts: 72}}}",
       "cost.own_hardware.gpus.NVIDIA_L4.life_years: must be a number > 0, got '0'"},
      {"own_hardware: {gpus: {NVIDIA_L4: {life_years: 4, watts: 72}}}",
       "cost.own_hardware.gpus.NVIDIA_L4.purchase_usd: required"},
      {"own_hardware: {gpus: {NVIDIA_L4: {purchase_usd: 2500, lifetime: 4}}}",
       "cost.own_hardware.gpus.NVIDIA_L4.lifetime: unknown key (accepted keys: purchase_usd, "
       "life_years, watts)"},
      {"own_hardware: {node: {purchase_usd: 6000, watts: -5}}",
       "cost.own_hardware.node.watts: must be a number >= 0, got '-5'"},
      {"own_hardware: {node: {watts: 250}}", "cost.own_hardware.node.purchase_usd: required"},
      {"region: [a]", "cost.region: must be a non-empty string"},
      {"[1, 2]", "cost: must be a mapping"},
  };
  for (const BadCase& bad : kCases) {
    Catalog c = Catalog::BuiltIn();
    Status s = ApplyText(c, bad.yaml);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad.yaml;
    EXPECT_THAT(s.message(), HasSubstr(bad.message)) << bad.yaml;
  }
}

TEST(ApplyTest, AnErrorChangesNothing) {
  Catalog c = Catalog::BuiltIn();
  // Valid entries come before the bad one, in several sections.
  Status s = ApplyText(c, R"(
region: europe-west4
machines:
  n1-standard-4: {vertex_usd_per_hour: 9}
  box: {vcpus: 2, memory_gb: 4, compute_engine_usd_per_hour: 0.1}
accelerators:
  NVIDIA_TESLA_T4: {compute_engine_usd_per_gpu_hour: 9}
own_hardware:
  usd_per_kwh: 0.5
  node: {purchase_usd: 6000, watts: 250}
  pue: 0.5
)");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cost.own_hardware.pue"));
  EXPECT_EQ(c.region(), "us-central1");
  EXPECT_NEAR(c.machines().at("n1-standard-4").vertex->usd_per_hour, 0.21849885, 1e-12);
  EXPECT_EQ(c.machines().count("box"), 0u);
  EXPECT_NEAR(c.accelerators().at("NVIDIA_TESLA_T4").compute_engine->usd_per_hour, 0.35, 1e-12);
  EXPECT_EQ(c.own().usd_per_kwh, 0.15);
  EXPECT_FALSE(c.own().node);
}

TEST(ApplyTest, AddedMachineCanPriceTheMegaA3) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(
      ApplyText(c, "machines: {a3-megagpu-8g: {compute_engine_usd_per_hour: 92.9376}}").ok());
  CloudPrice p = c.PriceReplica(Spec("a3-megagpu-8g"));
  EXPECT_NEAR(*p.compute_engine_usd_per_hour, 92.9376, 1e-12);
  EXPECT_FALSE(p.vertex_usd_per_hour);
  EXPECT_THAT(p.reason, HasSubstr("no Vertex or Compute Engine Spot price"));
  EXPECT_EQ(p.confidence, "config");
}

// ---------------------------------------------------------------------------
// Own hardware.

TEST(OwnHardwareTest, DefaultsFromTheReference) {
  Catalog c = Catalog::BuiltIn();
  EXPECT_EQ(c.own().usd_per_kwh, 0.15);
  EXPECT_EQ(c.own().pue, 1.0);
  EXPECT_FALSE(c.own().node);
  const Asset& h100 = c.own().gpus.at("NVIDIA_H100_80GB");
  EXPECT_EQ(h100.purchase_usd, 30000);
  EXPECT_EQ(h100.watts, 350);
  EXPECT_EQ(h100.life_years, 3);
  EXPECT_THAT(h100.source, HasSubstr("2023-08"));
  EXPECT_EQ(c.own().gpus.at("NVIDIA_A100_80GB").purchase_usd, 10000);
  EXPECT_EQ(c.own().gpus.at("NVIDIA_A100_80GB").watts, 300);
  EXPECT_EQ(c.own().gpus.count("NVIDIA_L4"), 0u);
  EXPECT_EQ(c.own().gpus.count("NVIDIA_TESLA_T4"), 0u);
}

TEST(OwnHardwareTest, H100Arithmetic) {
  Catalog c = Catalog::BuiltIn();
  std::string why;
  // $30,000 over 3 x 8766 h = $1.14077/h; 0.35 kW x $0.15 = $0.0525/h.
  std::optional<double> one = c.OwnGpuUsdPerHour("NVIDIA_H100_80GB", 1, &why);
  ASSERT_TRUE(one) << why;
  EXPECT_NEAR(*one, 30000.0 / 26298 + 0.0525, 1e-9);
  EXPECT_NEAR(*one, 1.19327, 1e-5);
  EXPECT_NEAR(*c.OwnGpuUsdPerHour("NVIDIA_H100_80GB", 0.25, &why), *one / 4, 1e-12);
  EXPECT_NEAR(*c.OwnGpuUsdPerHour("NVIDIA_H100_80GB", 8, nullptr), *one * 8, 1e-9);
}

TEST(OwnHardwareTest, NoPurchasePriceGivesTheKeyToSet) {
  Catalog c = Catalog::BuiltIn();
  std::string why;
  EXPECT_FALSE(c.OwnGpuUsdPerHour("NVIDIA_L4", 1, &why));
  EXPECT_THAT(why, HasSubstr("cost.own_hardware.gpus.NVIDIA_L4.purchase_usd"));
  EXPECT_FALSE(c.OwnNodeUsdPerHour(0.5));
}

TEST(OwnHardwareTest, NodeShareAndPue) {
  Catalog c = Catalog::BuiltIn();
  ASSERT_TRUE(ApplyText(c,
                        "own_hardware: {pue: 1.5, usd_per_kwh: 0.2, node: {purchase_usd: "
                        "8766, life_years: 1, watts: 1000}}")
                  .ok());
  // $1/h amortisation + 1 kW x $0.2 x 1.5 = $1.30/h for the whole node.
  EXPECT_NEAR(*c.OwnNodeUsdPerHour(1), 1.3, 1e-12);
  EXPECT_NEAR(*c.OwnNodeUsdPerHour(0.5), 0.65, 1e-12);
  EXPECT_NEAR(*c.OwnNodeUsdPerHour(2), 1.3, 1e-12);  // clamped to the whole node
  EXPECT_EQ(c.own().node->life_years, 1);
}

}  // namespace
}  // namespace stoker::cost
