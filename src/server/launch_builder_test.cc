#include "server/launch_builder.h"

#include <gtest/gtest.h>

#include "auth/auth.h"

namespace stoker::server {
namespace {

using nlohmann::json;

// A chief and two workers; worker 1 holds half of GPU 1.
class LaunchBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    json spec = {{"displayName", "ddp"},
                 {"labels", {{"team", "nlp"}}},
                 {"jobSpec",
                  {{"workerPoolSpecs",
                    {{{"machineSpec", {{"machineType", "n1-standard-4"}}},
                      {"replicaCount", "1"},
                      {"pythonPackageSpec",
                       {{"executorImageUri", "local/py"},
                        {"packageUris", {"gs://b/trainer.tar.gz"}},
                        {"pythonModule", "trainer.task"},
                        {"args", {"--out=gs://b/out"}}}}},
                     {{"machineSpec", {{"machineType", "n1-standard-4"}}},
                      {"replicaCount", "2"},
                      {"containerSpec",
                       {{"imageUri", "local/sh"}, {"command", {"python3", "worker.py"}}}}}}},
                   {"scheduling", {{"timeout", "600s"}, {"priority", 7}}}}}};
    job_ = spec::ParseCustomJob(spec).value();
    rec_.id = 12;
    rec_.user = "bob";
    rec_.attempt = 1;
    rec_.project = "p";
    rec_.location = "l";
    rec_.allocation = {
        {"node", "local"},
        {"replicas",
         {{{"name", "workerpool0-0"}, {"pool", 0}, {"index", 0}, {"port", 5000}, {"gpus", {0}}},
          {{"name", "workerpool1-0"},
           {"pool", 1},
           {"index", 0},
           {"port", 5001},
           {"gpus", json::array()}},
          {{"name", "workerpool1-1"},
           {"pool", 1},
           {"index", 1},
           {"port", 5002},
           {"gpus", {1}},
           {"gpu_shares", {{{"gpu", 1}, {"fraction", 0.5}, {"memory_bytes", 8589934592}}}}}}}};
    requests_ = {{"workerpool0-0", 0, 0, {4, 15ull << 30, 1, "NVIDIA_TESLA_T4"}},
                 {"workerpool1-0", 1, 0, {4, 15ull << 30, 0, ""}},
                 {"workerpool1-1", 1, 1, {4, 15ull << 30, 0.5, "NVIDIA_TESLA_T4"}}};
    in_.rec = &rec_;
    in_.job = &job_;
    in_.requests = &requests_;
    in_.output_dir = "/data/buckets/b/out";
    in_.environments = {{"/usr/bin/python3", {{"PATH", "/shim:/usr/bin"}}},
                        {"/usr/bin/python3", {{"PATH", "/shim:/usr/bin"}}}};
    in_.packages = {{"/data/buckets/b/trainer.tar.gz"}, {}};
    in_.metric_files = {{"workerpool0-0", "/data/jobs/12/attempt-1/workerpool0-0/hypertune/m"}};
    in_.rewrite_uris = [](const std::string& s) {
      std::string out = s;
      for (size_t at; (at = out.find("gs://")) != std::string::npos;) {
        out.replace(at, 5, "/data/buckets/");
      }
      return out;
    };
    in_.settings = {.grace_seconds = 30,
                    .log_max_bytes = 1 << 20,
                    .log_max_files = 2,
                    .api_url = "http://127.0.0.1:8080",
                    .push_secret = "s3cret"};
  }

  spec::CustomJob job_;
  store::JobRecord rec_;
  std::vector<scheduler::ReplicaRequest> requests_;
  LaunchInputs in_;
};

TEST_F(LaunchBuilderTest, EveryReplicaOfTheAllocationInItsOrderWithTheJobsSettings) {
  exec::JobLaunch launch = BuildJobLaunch(in_).value();
  EXPECT_EQ(launch.job_id, 12);
  EXPECT_EQ(launch.attempt, 1);
  EXPECT_EQ(launch.user, "bob");  // whose account runs it (TrainerAccounts)
  EXPECT_EQ(launch.priority, 7);
  EXPECT_EQ(launch.labels.at("team"), "nlp");
  ASSERT_EQ(launch.replicas.size(), 3u);
  const exec::ReplicaLaunch& chief = launch.replicas[0];
  EXPECT_EQ(chief.name, "workerpool0-0");
  EXPECT_EQ(chief.argv, (std::vector<std::string>{"/usr/bin/python3", "-m", "trainer.task",
                                                  "--out=/data/buckets/b/out"}));
  EXPECT_EQ(chief.packages, std::vector<std::string>{"/data/buckets/b/trainer.tar.gz"});
  EXPECT_EQ(chief.timeout_seconds, 600);
  EXPECT_EQ(chief.grace_seconds, 30);
  EXPECT_EQ(chief.log_max_bytes, 1u << 20);
  EXPECT_EQ(chief.log_max_files, 2);
  EXPECT_EQ(chief.gpus, 1);
  EXPECT_EQ(chief.cpus, 4);
  EXPECT_EQ(chief.env.at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(chief.gpu_indexes, std::vector<int>{0});  // typed for the supervisor
  EXPECT_TRUE(launch.replicas[1].gpu_indexes.empty());
  EXPECT_EQ(chief.env.at("CLOUD_ML_HP_METRIC_FILE"),
            "/data/jobs/12/attempt-1/workerpool0-0/hypertune/m");
  EXPECT_EQ(chief.env.at("AIP_MODEL_DIR").rfind("/data/buckets/b/out", 0), 0u);
  EXPECT_EQ(launch.replicas[2].argv, (std::vector<std::string>{"python3", "worker.py"}));
}

TEST_F(LaunchBuilderTest, TheClusterSpecNamesEveryReplicaAtItsAllocatedPort) {
  exec::JobLaunch launch = BuildJobLaunch(in_).value();
  json cluster = json::parse(launch.replicas[1].env.at("CLUSTER_SPEC"))["cluster"];
  EXPECT_EQ(cluster["workerpool0"], json({"127.0.0.1:5000"}));
  EXPECT_EQ(cluster["workerpool1"], json({"127.0.0.1:5001", "127.0.0.1:5002"}));
  EXPECT_EQ(launch.replicas[1].env.at("MASTER_PORT"), "5000");
  EXPECT_EQ(launch.replicas[1].env.at("RANK"), "1");
  EXPECT_EQ(launch.replicas[2].env.at("WORLD_SIZE"), "3");
  // The place the variables were built from, for launch.json.
  ASSERT_TRUE(launch.replicas[2].cluster.has_value());
  EXPECT_EQ(launch.replicas[2].cluster->pool, 1);
  EXPECT_EQ(launch.replicas[2].cluster->index, 1);
}

TEST_F(LaunchBuilderTest, AShareOfAGpuIsToldToTheTrainerOnlyWhereItIsAShare) {
  exec::JobLaunch launch = BuildJobLaunch(in_).value();
  const exec::ReplicaLaunch& shared = launch.replicas[2];
  EXPECT_EQ(shared.env.at("STOKER_GPU_FRACTION"), "0.5");
  EXPECT_EQ(shared.env.at("STOKER_GPU_MEMORY_LIMIT_BYTES"), "8589934592");
  EXPECT_EQ(shared.env.at("XLA_PYTHON_CLIENT_MEM_FRACTION"), "0.5");
  EXPECT_EQ(shared.gpus, 1);  // a share still asks an executor for a whole GPU
  EXPECT_FALSE(launch.replicas[0].env.count("STOKER_GPU_FRACTION"));
}

TEST_F(LaunchBuilderTest, OnlyATrialsReplicasGetTheMeasurementPushUrlWithTheTrialsKey) {
  EXPECT_FALSE(BuildJobLaunch(in_).value().replicas[0].env.count("STOKER_METRICS_URL"));
  rec_.study_id = 4;
  rec_.trial_id = "2";
  exec::JobLaunch launch = BuildJobLaunch(in_).value();
  EXPECT_EQ(launch.replicas[0].env.at("CLOUD_ML_TRIAL_ID"), "2");
  EXPECT_EQ(launch.replicas[0].env.at("STOKER_METRICS_URL"),
            "http://127.0.0.1:8080/v1/projects/p/locations/l/studies/4/trials/2:"
            "addTrialMeasurement?key=" +
                auth::TrialPushKey("s3cret", "4", "2"));
}

TEST_F(LaunchBuilderTest, EveryReplicaIsToldItsAttemptAndWhyItRestarted) {
  exec::JobLaunch launch = BuildJobLaunch(in_).value();  // attempt index 1, no reason stored
  for (const exec::ReplicaLaunch& r : launch.replicas) {
    EXPECT_EQ(r.env.at("STOKER_ATTEMPT"), "2");
    EXPECT_FALSE(r.env.count("STOKER_RESTART_REASON"));
  }
  rec_.attempt = 3;
  rec_.restart_reason = "preemption";
  launch = BuildJobLaunch(in_).value();
  for (const exec::ReplicaLaunch& r : launch.replicas) {
    EXPECT_EQ(r.env.at("STOKER_ATTEMPT"), "4");
    EXPECT_EQ(r.env.at("STOKER_RESTART_REASON"), "preemption");
    // The same checkpoint directory on every attempt.
    EXPECT_EQ(r.env.at("AIP_CHECKPOINT_DIR"), "/data/buckets/b/out/checkpoints/");
  }
}

TEST_F(LaunchBuilderTest, ThePreemptibleJobsAreMarkedForExecutorsThatPreempt) {
  auto preemptible = [this]() { return BuildJobLaunch(in_).value().preemptible; };
  EXPECT_FALSE(preemptible());
  job_.job_spec.scheduling.strategy = "SPOT";
  EXPECT_TRUE(preemptible());
  job_.labels["stoker-preemptible"] = "false";  // the label decides
  EXPECT_FALSE(preemptible());
  job_.labels["stoker-preemptible"] = "true";
  job_.job_spec.scheduling.strategy = "";
  EXPECT_TRUE(preemptible());
  job_.labels.erase("stoker-preemptible");
  in_.settings.preemption.preemptible_below = 10;  // priority 7 is in the band
  EXPECT_TRUE(preemptible());
}

TEST_F(LaunchBuilderTest, AnExpansionOverItsBoundIsRefusedNamingTheField) {
  std::string big(100'000, 'x');
  job_.job_spec.worker_pool_specs[1].container_spec->env = {{"A", big}, {"B", "$(A)$(A)"}};
  auto launch = BuildJobLaunch(in_);
  ASSERT_FALSE(launch.ok());
  EXPECT_EQ(launch.status().code(), Code::kInvalidArgument);
  EXPECT_NE(launch.status().message().find("workerPoolSpecs[1]"), std::string::npos)
      << launch.status().message();
}

TEST_F(LaunchBuilderTest, WarmStartsGoToTrialsAndOptedInJobsOnlyWhenEnabled) {
  auto warm_of = [this]() {
    auto launch = BuildJobLaunch(in_);
    EXPECT_TRUE(launch.ok()) << launch.status().ToString();
    return launch->replicas.at(0).warm;
  };
  in_.settings.warm = {true, {"torch", "numpy"}, 120, "/data/warm", "/share/stoker_zygote.py", 3,
                       7};
  EXPECT_FALSE(warm_of().requested);  // neither a trial nor labelled
  job_.labels[kWarmStartLabel] = "true";
  rec_.user = "alice";
  in_.environments[0].base_env["LANG"] = "C.UTF-8";
  in_.environments[0].base_env["TZ"] = "UTC";
  replica::WarmSpec w = warm_of();
  EXPECT_TRUE(w.requested);
  EXPECT_EQ(w.cold_reason, "");
  EXPECT_EQ(w.preload, (std::vector<std::string>{"torch", "numpy"}));
  EXPECT_EQ(w.dir, "/data/warm");
  EXPECT_EQ(w.zygote, "/share/stoker_zygote.py");
  EXPECT_EQ(w.python, "/usr/bin/python3");
  EXPECT_EQ(w.idle_seconds, 120);
  // Whose zygote, how many, and the node's start-up variables (not TZ).
  EXPECT_EQ(w.user, "alice");
  EXPECT_EQ(w.max_per_user, 3);
  EXPECT_EQ(w.max_total, 7);
  EXPECT_EQ(w.defaults, (std::map<std::string, std::string>{{"LANG", "C.UTF-8"}}));
  job_.labels.erase(kWarmStartLabel);
  rec_.study_id = 3;
  rec_.trial_id = "2";
  EXPECT_TRUE(warm_of().requested);  // a trial
  job_.labels[kWarmStartLabel] = "false";
  EXPECT_FALSE(warm_of().requested);  // a trial that opted out
  job_.labels[kWarmStartLabel] = "true";
  in_.settings.warm.enabled = false;
  EXPECT_FALSE(warm_of().requested);  // warm_starts: false
}

TEST_F(LaunchBuilderTest, ReplicasWithPackagesGetTheirInterpretersRequirementEnvironment) {
  auto launch = BuildJobLaunch(in_);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_FALSE(launch->replicas.at(0).python_env.has_value());  // not configured

  in_.settings.python_packages = {"/data/envs/pip", {"/srv/wheels"}, ""};
  launch = BuildJobLaunch(in_);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  const auto& p = launch->replicas.at(0).python_env;
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->cache_dir, "/data/envs/pip");
  EXPECT_EQ(p->python, "/usr/bin/python3");
  EXPECT_EQ(p->find_links, std::vector<std::filesystem::path>{"/srv/wheels"});
  EXPECT_EQ(p->index_url, "");
  EXPECT_TRUE(p->requirements.empty());  // stoker-run reads them from the packages
  // Pool 1 has no packages: nothing to install.
  EXPECT_FALSE(launch->replicas.at(1).python_env.has_value());
  EXPECT_FALSE(launch->replicas.at(2).python_env.has_value());
}

TEST_F(LaunchBuilderTest, AContainersNameCarriesTheDaemonsTagSoTwoDaemonsNeverShareOne) {
  in_.environments[1].container_image = "localhost/trainer:1";
  in_.environments[1].engine = "/usr/bin/podman";
  in_.settings.instance = InstanceTag("/var/lib/stoker");
  EXPECT_EQ(in_.settings.instance.size(), 8u);
  EXPECT_NE(InstanceTag("/var/lib/stoker"), InstanceTag("/var/lib/stoker2"));
  exec::JobLaunch launch = BuildJobLaunch(in_).value();
  ASSERT_TRUE(launch.replicas[1].container.has_value());
  EXPECT_EQ(launch.replicas[1].container->name,
            "stoker-12-1-workerpool1-0-" + in_.settings.instance);
  EXPECT_FALSE(launch.replicas[0].container.has_value());
}

}  // namespace
}  // namespace stoker::server
