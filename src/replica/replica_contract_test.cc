// The replica contract: what exec writes, stoker-run reads back the same,
// and the other way round; hostile input is refused, never thrown.
#include "replica/replica_contract.h"

#include <gtest/gtest.h>

namespace stoker::replica {
namespace {

TEST(ReplicaContractTest, ALaunchSpecReadsBackAsWritten) {
  LaunchSpec s;
  s.argv = {"python3", "-m", "trainer.task"};
  s.env = {{"PATH", "/usr/bin"}, {"AIP_MODEL_DIR", "/data/b/m/"}};
  s.packages = {"/data/staging/a.tar.gz"};
  s.timeout_seconds = 5.5;
  s.grace_seconds = 3;
  s.log_limits = {1024, 7};
  s.run_as = RunAs{"alice", 1001, 1002, {50}, "/home/alice"};
  s.isolation = {IsolationMode::kRequired,
                 {"/data"},
                 {"/data/buckets"},
                 {"/data/jobs/7"},
                 {{"/data/buckets", "/gcs"}, {"/srv/sets", "/gcs/sets"}}};
  auto back = ParseLaunchSpec(FormatLaunchSpec(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->argv, s.argv);
  EXPECT_EQ(back->env, s.env);
  EXPECT_EQ(back->packages, s.packages);
  EXPECT_EQ(back->timeout_seconds, 5.5);
  EXPECT_EQ(back->grace_seconds, 3);
  EXPECT_EQ(back->log_limits.max_bytes, 1024u);
  EXPECT_EQ(back->log_limits.max_files, 7);
  ASSERT_TRUE(back->run_as.has_value());
  EXPECT_EQ(back->run_as->user, "alice");
  EXPECT_EQ(back->run_as->uid, 1001u);
  EXPECT_EQ(back->run_as->extra_gids, std::vector<uint32_t>{50});
  EXPECT_EQ(back->run_as->home, "/home/alice");
  EXPECT_EQ(back->isolation.mode, IsolationMode::kRequired);
  EXPECT_EQ(back->isolation.keep_read_only, std::vector<std::filesystem::path>{"/data/jobs/7"});
  EXPECT_EQ(back->isolation.bind, s.isolation.bind);
  // A bind's paths are absolute, and the error names where.
  auto bad = ParseLaunchSpec(R"({"argv": ["x"], "isolation": {"mode": "auto",
                                 "bind": [{"source": "/a", "target": "gcs"}]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("isolation.bind[0].target: must be an absolute path"),
            std::string::npos)
      << bad.status().message();
}

// The replica's place and GPUs are typed fields, not read back from env.
TEST(ReplicaContractTest, AClusterPlaceAndGpusReadBackAndBadOnesAreRefused) {
  LaunchSpec spec;
  spec.argv = {"python3"};
  LaunchSpec plain = ParseLaunchSpec(FormatLaunchSpec(spec)).value();
  EXPECT_FALSE(plain.cluster.has_value());
  EXPECT_TRUE(plain.gpu_indexes.empty());
  spec.cluster = ClusterTask{1, 2, "7", R"({"python_module":"t.task"})"};
  spec.gpu_indexes = {3, 1};
  LaunchSpec back = ParseLaunchSpec(FormatLaunchSpec(spec)).value();
  ASSERT_TRUE(back.cluster.has_value());
  EXPECT_EQ(back.cluster->pool, 1);
  EXPECT_EQ(back.cluster->index, 2);
  EXPECT_EQ(back.cluster->trial, "7");
  EXPECT_EQ(back.cluster->job, R"({"python_module":"t.task"})");
  EXPECT_EQ(back.gpu_indexes, (std::vector<int>{3, 1}));
  auto bad_gpus = ParseLaunchSpec(R"({"argv": ["x"], "gpu_indexes": "0,1"})");
  ASSERT_FALSE(bad_gpus.ok());
  EXPECT_NE(bad_gpus.status().message().find("gpu_indexes"), std::string::npos);
  EXPECT_FALSE(ParseLaunchSpec(R"({"argv": ["x"], "gpu_indexes": [-1]})").ok());
  auto bad_cluster = ParseLaunchSpec(R"({"argv": ["x"], "cluster": {"pool": "0"}})");
  ASSERT_FALSE(bad_cluster.ok());
  EXPECT_NE(bad_cluster.status().message().find("cluster"), std::string::npos);
}

TEST(ReplicaContractTest, AContainerReadsBackAsWritten) {
  LaunchSpec s;
  s.argv = {"python3", "-m", "trainer.task"};
  s.container = ContainerSpec{"/usr/bin/podman",
                              "gcr.io/p/t:v1",
                              "stoker-7-0-workerpool0-0",
                              std::vector<std::string>{"python3", "-m", "trainer.task"},
                              {"--epochs", "2"},
                              {"/data/buckets"},
                              {"/data/jobs/7"}};
  auto back = ParseLaunchSpec(FormatLaunchSpec(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->container.has_value());
  EXPECT_EQ(back->container->engine, "/usr/bin/podman");
  EXPECT_EQ(back->container->image, "gcr.io/p/t:v1");
  EXPECT_EQ(back->container->name, "stoker-7-0-workerpool0-0");
  EXPECT_EQ(back->container->entrypoint, s.container->entrypoint);
  EXPECT_EQ(back->container->args, s.container->args);
  EXPECT_EQ(back->container->mounts, std::vector<std::filesystem::path>{"/data/buckets"});
  EXPECT_EQ(back->container->mounts_read_only, std::vector<std::filesystem::path>{"/data/jobs/7"});
  EXPECT_TRUE(back->container->binds.empty());
  s.container->binds = {{"/data/buckets", "/gcs"}};
  back = ParseLaunchSpec(FormatLaunchSpec(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->container->binds, s.container->binds);
  EXPECT_FALSE(back->container->pull);
  EXPECT_TRUE(back->container->tls_verify);
  EXPECT_TRUE(back->container->user_namespace);
  s.container->pull = true;
  s.container->tls_verify = false;
  s.container->user_namespace = false;
  back = ParseLaunchSpec(FormatLaunchSpec(s));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->container->pull);
  EXPECT_FALSE(back->container->tls_verify);
  EXPECT_FALSE(back->container->user_namespace);
  // No entrypoint: the image's own, which is not the same as an empty one.
  s.container->entrypoint.reset();
  back = ParseLaunchSpec(FormatLaunchSpec(s));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->container->entrypoint.has_value());
  // Without a container there is no "container" field.
  s.container.reset();
  EXPECT_FALSE(ParseLaunchSpec(FormatLaunchSpec(s))->container.has_value());
}

TEST(ReplicaContractTest, ABadContainerIsRefusedByName) {
  for (const char* bad :
       {R"("x")", R"({"engine": "podman", "image": "i", "name": "n", "args": []})",
        R"({"engine": "/p", "image": "", "name": "n", "args": []})",
        R"({"engine": "/p", "image": "--privileged", "name": "n", "args": []})",
        R"({"engine": "/p", "image": "i", "name": "n", "args": [1]})",
        R"({"engine": "/p", "image": "i", "name": "n", "args": [], "entrypoint": []})",
        R"({"engine": "/p", "image": "i", "name": "n", "args": [], "mounts": ["rel"]})",
        R"({"engine": "/p", "image": "i", "name": "n", "args": [], "pull": "yes"})"}) {
    auto r =
        ParseLaunchSpec(std::string(R"({"argv": ["x"], "env": {}, "container": )") + bad + "}");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("container"), std::string::npos) << r.status().ToString();
  }
}

TEST(ReplicaContractTest, AContainerImageThatIsNoImageReferenceIsRefused) {
  for (const char* image : {"containers-storage:[overlay@/tmp/x+/tmp/xrun]localhost/x:1",
                            "docker://ubuntu", "oci-archive:/tmp/x", "-v", "A/b", "a b"}) {
    nlohmann::json c = {{"engine", "/usr/bin/podman"},
                        {"image", image},
                        {"name", "n"},
                        {"args", nlohmann::json::array()}};
    nlohmann::json doc = {{"argv", {"x"}}, {"env", nlohmann::json::object()}, {"container", c}};
    auto r = ParseLaunchSpec(doc.dump());
    ASSERT_FALSE(r.ok()) << image;
    EXPECT_NE(r.status().message().find("launch.json: container.image: '"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("is not an image reference"), std::string::npos);
  }
}

TEST(ReplicaContractTest, IsolationOffIsNotWritten) {
  LaunchSpec s;
  s.argv = {"true"};
  EXPECT_EQ(FormatLaunchSpec(s).find("isolation"), std::string::npos);
  EXPECT_EQ(ParseLaunchSpec(FormatLaunchSpec(s))->isolation.mode, IsolationMode::kOff);
}

TEST(ReplicaContractTest, EveryEndStateHasOneSpelling) {
  for (EndState s : {EndState::kExited, EndState::kSignaled, EndState::kTimeout,
                     EndState::kCancelled, EndState::kLaunchFailed}) {
    EXPECT_EQ(ParseEndState(EndStateName(s)), s);
  }
  EXPECT_EQ(EndStateName(EndState::kLaunchFailed), "launch_failed");
  EXPECT_FALSE(ParseEndState("exploded").has_value());
  EXPECT_EQ(*ParseIsolationMode("auto"), IsolationMode::kAuto);
  EXPECT_FALSE(ParseIsolationMode("sometimes").ok());
}

TEST(ReplicaContractTest, AStatusReadsBackAsWritten) {
  FinalStatus s{EndState::kSignaled, std::nullopt, 9, 100, 200, "killed by signal 9 (SIGKILL)"};
  auto back = ParseStatus(FormatStatus(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, EndState::kSignaled);
  EXPECT_FALSE(back->exit_code.has_value());
  EXPECT_EQ(back->signal, 9);
  EXPECT_EQ(back->start_time_us, 100);
  EXPECT_EQ(back->end_time_us, 200);
  EXPECT_EQ(back->message, s.message);
  EXPECT_FALSE(back->permanent);

  FinalStatus failed{EndState::kLaunchFailed, std::nullopt, std::nullopt, 100, 100, "no CDI"};
  failed.permanent = true;
  auto read = ParseStatus(FormatStatus(failed));
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->permanent);
  EXPECT_NE(FormatStatus(failed).find("\"permanent\": true"), std::string::npos);
}

TEST(ReplicaContractTest, ADamagedStatusIsRefusedNotThrown) {
  for (const char* bad : {"", "[]", "{}", R"({"state": 3})", R"({"state": "exploded"})",
                          "{\"state\": \"exited\"", "null"}) {
    EXPECT_FALSE(ParseStatus(bad).ok()) << bad;
  }
  // Fields of the wrong type read as unset.
  auto odd = ParseStatus(
      R"({"state": "exited", "exit_code": "0", "signal": 1e99, "start_time_us": [], "message": 5})");
  ASSERT_TRUE(odd.ok());
  EXPECT_FALSE(odd->exit_code.has_value());
  EXPECT_FALSE(odd->signal.has_value());
  EXPECT_EQ(odd->start_time_us, 0);
  EXPECT_EQ(odd->message, "");
}

TEST(ReplicaContractTest, TrainerAndRunnerFilesReadBack) {
  auto t = ParseTrainerInfo(FormatTrainerInfo({12, 12, 34}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->pgid, 12);
  EXPECT_EQ(t->start_time_us, 34);
  auto r = ParseRunnerInfo(FormatRunnerInfo({56, 78}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pid, 56);
  EXPECT_FALSE(ParseRunnerInfo("[1]").ok());
  EXPECT_EQ(ParseTrainerInfo(R"({"pid": "x"})")->pid, 0);
}

TEST(ReplicaContractTest, AWarmRequestAndAStartNoteReadBack) {
  LaunchSpec spec;
  spec.argv = {"python3", "-m", "trainer"};
  spec.warm.requested = true;
  spec.warm.preload = {"torch", "numpy"};
  spec.warm.dir = "/data/warm";
  spec.warm.zygote = "/usr/share/stoker/python/stoker_zygote.py";
  spec.warm.python = "/usr/bin/python3";
  spec.warm.idle_seconds = 30;
  spec.warm.user = "alice";
  spec.warm.defaults = {{"LANG", "C.UTF-8"}};
  spec.warm.max_per_user = 3;
  spec.warm.max_total = 5;
  auto back = ParseLaunchSpec(FormatLaunchSpec(spec));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->warm.requested);
  EXPECT_EQ(back->warm.preload, spec.warm.preload);
  EXPECT_EQ(back->warm.dir, spec.warm.dir);
  EXPECT_EQ(back->warm.zygote, spec.warm.zygote);
  EXPECT_EQ(back->warm.python, spec.warm.python);
  EXPECT_EQ(back->warm.idle_seconds, 30);
  EXPECT_EQ(back->warm.user, "alice");
  EXPECT_EQ(back->warm.defaults, spec.warm.defaults);
  EXPECT_EQ(back->warm.max_per_user, 3);
  EXPECT_EQ(back->warm.max_total, 5);

  spec.warm = WarmSpec{};
  EXPECT_FALSE(ParseLaunchSpec(FormatLaunchSpec(spec))->warm.requested);
  spec.warm.requested = true;
  spec.warm.cold_reason = "no";
  EXPECT_EQ(ParseLaunchSpec(FormatLaunchSpec(spec))->warm.cold_reason, "no");

  auto relative = ParseLaunchSpec(
      R"({"argv": ["python3"], "warm": {"dir": "warm", "zygote": "/z.py", "python": "/p"}})");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("launch.json: warm"), std::string::npos);
  // Only start-up variables may be defaults (anything else would reach the
  // zygote's environment), and the limits are at least 1.
  auto not_startup = ParseLaunchSpec(
      R"({"argv": ["python3"], "warm": {"dir": "/w", "zygote": "/z.py", "python": "/p",)"
      R"( "defaults": {"LD_PRELOAD": "/x.so"}}})");
  ASSERT_FALSE(not_startup.ok());
  EXPECT_NE(not_startup.status().message().find("warm.defaults.LD_PRELOAD"), std::string::npos);
  auto zero = ParseLaunchSpec(
      R"({"argv": ["python3"], "warm": {"dir": "/w", "zygote": "/z.py", "python": "/p",)"
      R"( "max_total": 0}})");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("warm.max_total"), std::string::npos);

  TrainerInfo info{7, 7, 5, "warm start: forked"};
  EXPECT_EQ(ParseTrainerInfo(FormatTrainerInfo(info))->start_note, "warm start: forked");
  EXPECT_EQ(ParseTrainerInfo(R"({"pid": 1})")->start_note, "");
}

TEST(ReplicaContractTest, APreparingNoteReadsBack) {
  auto back = ParsePreparingInfo(FormatPreparingInfo({"installing requirements [a]", 42}));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->note, "installing requirements [a]");
  EXPECT_EQ(back->since_us, 42);
  EXPECT_FALSE(ParsePreparingInfo("[]").ok());
}

TEST(ReplicaContractTest, APythonEnvReadsBackAndIsOptional) {
  LaunchSpec spec;
  spec.argv = {"python3"};
  EXPECT_FALSE(ParseLaunchSpec(FormatLaunchSpec(spec))->python_env.has_value());
  spec.python_env = PythonEnvSpec{
      "/data/envs/pip", "/usr/bin/python3", {"/srv/wheels"}, "", {"tinytop>=2", "numpy"}};
  auto back = ParseLaunchSpec(FormatLaunchSpec(spec));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->python_env.has_value());
  EXPECT_EQ(back->python_env->cache_dir, "/data/envs/pip");
  EXPECT_EQ(back->python_env->python, "/usr/bin/python3");
  EXPECT_EQ(back->python_env->find_links, std::vector<std::filesystem::path>{"/srv/wheels"});
  EXPECT_EQ(back->python_env->index_url, "");
  EXPECT_EQ(back->python_env->requirements, (std::vector<std::string>{"tinytop>=2", "numpy"}));

  for (
      const char* bad :
      {R"({"argv": ["p"], "python_env": {"cache_dir": "envs", "python": "/p"}})",
       R"({"argv": ["p"], "python_env": {"cache_dir": "/e", "python": "/p", "requirements": [1]}})",
       R"({"argv": ["p"], "python_env": {"cache_dir": "/e", "python": "/p", "find_links": ["w"]}})",
       R"({"argv": ["p"], "python_env": []})"}) {
    auto refused = ParseLaunchSpec(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("launch.json: python_env"), std::string::npos)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace stoker::replica
