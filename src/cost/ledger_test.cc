#include "cost/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/time.h"

namespace stoker::cost {
namespace {

using nlohmann::json;

constexpr int64_t kHour = 3'600'000'000;

// A stored job with one pool of `machine` (+ GPUs) and an allocation of its replicas.
store::JobRecord Job(const json& machine, const json& replicas, const std::string& node = "box") {
  store::JobRecord r;
  r.id = 7;
  r.attempt = 1;
  r.user = "alice";
  r.project = "vision";
  r.location = "europe-west4";
  r.start_time_us = 10 * kHour;
  r.spec = {{"displayName", "j"},
            {"labels", {{"team", "cv"}}},
            {"jobSpec", {{"workerPoolSpecs", {{{"machineSpec", machine}, {"replicaCount", 2}}}}}}};
  r.allocation = {{"node", node}, {"replicas", replicas}};
  return r;
}

TEST(AttemptUsageTest, BooksEachReplicaFromItsOwnTimesWithFractionalGpus) {
  json replicas =
      json::array({{{"name", "workerpool0-0"},
                    {"pool", 0},
                    {"cpus", 4.0},
                    {"memory_bytes", 15'000'000'000ull},
                    {"gpus", {0}},
                    {"gpu_shares", {{{"gpu", 0}, {"fraction", 0.25}, {"memory_bytes", 4}}}},
                    {"gpu_type", "NVIDIA_TESLA_T4"}},
                   {{"name", "workerpool0-1"},
                    {"pool", 0},
                    {"cpus", 4.0},
                    {"memory_bytes", 15'000'000'000ull},
                    {"gpus", {1}},
                    {"gpu_type", "NVIDIA_TESLA_T4"}}});
  store::JobRecord job = Job({{"machineType", "n1-standard-4"},
                              {"acceleratorType", "NVIDIA_TESLA_T4"},
                              {"acceleratorCount", 0.25}},
                             replicas);
  // Replica 0 ran 11:00-12:30 by its supervisor; replica 1 is not in the map:
  // it started with the job (10:00) and ends "now" (13:00).
  auto rows = AttemptUsage(job, {{"workerpool0-0", {11 * kHour, 12 * kHour + kHour / 2}}},
                           "succeeded", 13 * kHour);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].replica, "workerpool0-0");
  EXPECT_EQ(rows[0].attempt, 1);
  EXPECT_EQ(rows[0].user, "alice");
  EXPECT_EQ(rows[0].labels["team"], "cv");
  EXPECT_DOUBLE_EQ(rows[0].seconds(), 5400);
  EXPECT_DOUBLE_EQ(rows[0].gpus, 0.25);
  EXPECT_EQ(rows[0].gpu_type, "NVIDIA_TESLA_T4");
  EXPECT_EQ(rows[0].machine_type, "n1-standard-4");
  EXPECT_EQ(rows[0].location, "europe-west4");  // the job's: its region prices the row
  EXPECT_DOUBLE_EQ(rows[0].accelerator_count, 0.25);
  EXPECT_EQ(rows[1].start_us, 10 * kHour);
  EXPECT_EQ(rows[1].end_us, 13 * kHour);
  EXPECT_DOUBLE_EQ(rows[1].gpus, 1);
  EXPECT_EQ(rows[1].end, "succeeded");
}

TEST(AttemptUsageTest, AReplicaThatNeverStartedBooksNothing) {
  store::JobRecord job =
      Job({{"machineType", "n1-standard-4"}},
          json::array({{{"name", "workerpool0-0"}, {"pool", 0}, {"cpus", 4.0}}}));
  job.start_time_us = 0;
  EXPECT_TRUE(AttemptUsage(job, {{"workerpool0-0", {0, 0}}}, "failed", 13 * kHour).empty());
}

TEST(AttemptUsageTest, AnExecutorThatPlacesReplicasBooksTheGpusTheSpecAsked) {
  // Slurm's allocation lists no GPU indexes: the machineSpec's count and type count.
  store::JobRecord job =
      Job({{"machineType", "n1-standard-8"},
           {"acceleratorType", "NVIDIA_TESLA_V100"},
           {"acceleratorCount", 2}},
          json::array(
              {{{"name", "workerpool0-0"}, {"pool", 0}, {"cpus", 8.0}, {"gpus", json::array()}}}),
          "executor");
  auto rows = AttemptUsage(job, {}, "running", 11 * kHour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].gpus, 2);
  EXPECT_EQ(rows[0].gpu_type, "NVIDIA_TESLA_V100");
}

TEST(ClipTest, CutsRowsToTheWindowAndDropsOthers) {
  store::UsageRecord a, b, c;
  a.start_us = 0, a.end_us = 10;
  b.start_us = 5, b.end_us = 30;
  c.start_us = 40, c.end_us = 50;
  auto rows = Clip({a, b, c}, 8, 20);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].start_us, 8);
  EXPECT_EQ(rows[0].end_us, 10);
  EXPECT_EQ(rows[1].start_us, 8);
  EXPECT_EQ(rows[1].end_us, 20);
}

store::UsageRecord Row(const std::string& machine, const std::string& gpu_type, double gpus,
                       double hours, double cpus = 4) {
  store::UsageRecord u;
  u.job_id = 1;
  u.machine_type = machine;
  u.accelerator_type = gpu_type;
  u.accelerator_count = gpus;
  u.gpu_type = gpu_type;
  u.gpus = gpus;
  u.cpus = cpus;
  u.memory_bytes = 15'000'000'000ull;
  u.start_us = 0;
  u.end_us = static_cast<int64_t>(hours * kHour);
  return u;
}

TEST(TotalTest, PricesReplicaHoursAtTheCatalogsFigures) {
  Catalog catalog = Catalog::BuiltIn();
  // Two hours of n1-standard-4 (Vertex $0.21849885/h, CE $0.19/h, Spot $0.067/h).
  Totals t = Total({Row("n1-standard-4", "", 0, 1.5), Row("n1-standard-4", "", 0, 0.5)}, catalog,
                   {.cpus = 16});
  EXPECT_EQ(t.rows, 2);
  EXPECT_DOUBLE_EQ(t.replica_seconds, 7200);
  EXPECT_DOUBLE_EQ(t.vcpu_seconds, 4 * 7200);
  EXPECT_NEAR(t.gb_seconds, 15 * 7200, 1e-6);
  EXPECT_NEAR(*t.usd[PriceKind::kVertex], 2 * 0.21849885, 1e-9);
  EXPECT_NEAR(*t.usd[PriceKind::kComputeEngine], 2 * 0.19, 1e-4);
  EXPECT_NEAR(*t.usd[PriceKind::kSpot], 2 * 0.067, 1e-4);
  // No node configured and no GPUs: own hardware cannot be priced, and says why.
  EXPECT_FALSE(t.usd[PriceKind::kOwn]);
  ASSERT_EQ(t.no_price[PriceKind::kOwn].size(), 1u);
  EXPECT_NE(t.no_price[PriceKind::kOwn][0].find("cost.own_hardware.node"), std::string::npos);
}

TEST(TotalTest, OneUnpricedRowMakesTheTotalUnknownNeverWrong) {
  Catalog catalog = Catalog::BuiltIn();
  Totals t = Total({Row("n1-standard-4", "", 0, 1), Row("no-such-machine", "", 0, 1)}, catalog,
                   {.cpus = 16});
  EXPECT_FALSE(t.usd[PriceKind::kVertex]);
  ASSERT_FALSE(t.no_price[PriceKind::kVertex].empty());
  EXPECT_NE(t.no_price[PriceKind::kVertex][0].find("no-such-machine"), std::string::npos);
  json j = ToJson(t);
  EXPECT_TRUE(j["usd"]["vertex"].is_null());
  EXPECT_DOUBLE_EQ(j["replicaHours"].get<double>(), 2);
}

TEST(TotalTest, OwnHardwareCountsFractionalGpusAndTheHostShare) {
  Catalog catalog = Catalog::BuiltIn();
  ASSERT_TRUE(catalog
                  .Apply(YAML::Load(R"(
own_hardware:
  usd_per_kwh: 0.10
  gpus: {NVIDIA_TESLA_T4: {purchase_usd: 8766, life_years: 1, watts: 100}}
  node: {purchase_usd: 17532, life_years: 1, watts: 0}
)"))
                  .ok());
  // T4: $1/h amortised + 0.1 kW × $0.10 = $1.01/h per GPU; half a GPU for 2 h = $1.01.
  // Host: $2/h for the node; 4 of 16 CPUs = $0.50/h; 2 h = $1.00.
  Totals t = Total({Row("n1-standard-4", "NVIDIA_TESLA_T4", 0.5, 2)}, catalog, {.cpus = 16});
  ASSERT_TRUE(t.usd[PriceKind::kOwn]);
  EXPECT_NEAR(*t.usd[PriceKind::kOwn], 1.01 + 1.00, 1e-9);
  EXPECT_DOUBLE_EQ(t.gpu_seconds, 3600);
  EXPECT_DOUBLE_EQ(t.gpu_seconds_by_type["NVIDIA_TESLA_T4"], 3600);
  // Vertex sells whole GPUs: the half GPU is priced as one, with a note.
  EXPECT_FALSE(t.notes.empty());
}

TEST(TotalTest, PricesEachRowInItsJobsRegion) {
  Catalog catalog = Catalog::BuiltIn();
  store::UsageRecord eu = Row("n1-standard-4", "NVIDIA_TESLA_T4", 1, 1);
  eu.location = "europe-west4";  // S1 n1-standard-4 $0.209168/h, S2 T4 $0.3675/h
  store::UsageRecord local = Row("n1-standard-4", "NVIDIA_TESLA_T4", 1, 1);
  local.location = "local";  // Stoker's own location: cost.region (us-central1)
  Totals t = Total({eu, local}, catalog, {.cpus = 16});
  EXPECT_NEAR(*t.usd[PriceKind::kComputeEngine], (0.209168 + 0.3675) + (0.19 + 0.35), 1e-9);
  EXPECT_NEAR(*t.usd[PriceKind::kSpot], (0.12153 + 0.14) + (0.067 + 0.14), 1e-4);
  for (const std::string& n : t.notes) EXPECT_EQ(n.find("before Stoker kept"), std::string::npos);

  // A region asked for prices every row (a job's own usage).
  Totals asia = Total({eu, local}, catalog, {.cpus = 16}, "asia-east1");
  EXPECT_NEAR(*asia.usd[PriceKind::kComputeEngine], 2 * (0.219998 + 0.35), 1e-9);

  // A job in a region the catalog lacks: no price, never another region's.
  store::UsageRecord mars = eu;
  mars.location = "mars-north1";
  Totals m = Total({eu, mars}, catalog, {.cpus = 16});
  EXPECT_FALSE(m.usd[PriceKind::kComputeEngine]);
  ASSERT_FALSE(m.no_price[PriceKind::kComputeEngine].empty());
  EXPECT_NE(m.no_price[PriceKind::kComputeEngine][0].find("no prices for 'mars-north1'"),
            std::string::npos);
}

TEST(TotalTest, ARowWithoutALocationIsPricedInCostRegionAndSaysSo) {
  Catalog catalog = Catalog::BuiltIn();
  ASSERT_TRUE(catalog.Apply(YAML::Load("region: europe-west4")).ok());
  store::UsageRecord old = Row("n1-standard-4", "", 0, 1);  // written before schema 5
  store::UsageRecord asia = Row("n1-standard-4", "", 0, 1);
  asia.location = "asia-east1";
  Totals t = Total({old, asia}, catalog, {.cpus = 16});
  EXPECT_NEAR(*t.usd[PriceKind::kComputeEngine], 0.209168 + 0.219998, 1e-9);
  EXPECT_NE(std::find(t.notes.begin(), t.notes.end(),
                      "usage recorded before Stoker kept each job's location is priced in "
                      "cost.region (europe-west4)"),
            t.notes.end());
}

TEST(ScopeTest, ValidatesAndMatchesUserProjectAndLabel) {
  EXPECT_TRUE(ValidateScope("user:alice").ok());
  EXPECT_TRUE(ValidateScope("project:vision").ok());
  EXPECT_TRUE(ValidateScope("label:team=cv").ok());
  for (const char* bad : {"alice", "user:", "label:team", "label:=x", "team:cv"}) {
    Status s = ValidateScope(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("user:NAME"), std::string::npos) << s.message();
  }
  json labels = {{"team", "cv"}};
  EXPECT_TRUE(InScope("user:alice", "alice", "p", labels));
  EXPECT_FALSE(InScope("user:alice", "bob", "p", labels));
  EXPECT_TRUE(InScope("project:p", "bob", "p", labels));
  EXPECT_TRUE(InScope("label:team=cv", "bob", "q", labels));
  EXPECT_FALSE(InScope("label:team=nlp", "bob", "q", labels));
}

TEST(MonthTest, IsTheUtcCalendarMonth) {
  Month m = MonthOf(*ParseRfc3339Micros("2026-11-26T03:00:00Z"));
  EXPECT_EQ(m.name, "2026-11");
  EXPECT_EQ(FormatRfc3339(m.start_us), "2026-11-01T00:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339(m.end_us), "2026-12-01T00:00:00.000000Z");
  Month d = MonthOf(*ParseRfc3339Micros("2026-12-31T23:59:59Z"));
  EXPECT_EQ(d.name, "2026-12");
  EXPECT_EQ(FormatRfc3339(d.end_us), "2027-01-01T00:00:00.000000Z");
}

}  // namespace
}  // namespace stoker::cost
