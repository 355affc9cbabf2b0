#include "runner/warm_start.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "replica/warm_start_registry.h"

namespace stoker::runner {
namespace {

TEST(WarmStartTest, ParsesModuleAndScriptInvocations) {
  auto m = ParseWarmInvocation({"python3", "-u", "-m", "trainer.task", "--lr", "0.1"});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->module);
  EXPECT_TRUE(m->flag_u);
  EXPECT_EQ(m->target, "trainer.task");
  EXPECT_EQ(m->args, (std::vector<std::string>{"--lr", "0.1"}));

  auto joined = ParseWarmInvocation({"/usr/bin/python3.11", "-mtrainer"});
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->target, "trainer");
  EXPECT_TRUE(joined->args.empty());

  auto s = ParseWarmInvocation({"python", "train.py", "-m", "x"});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->module);
  EXPECT_EQ(s->target, "train.py");
  EXPECT_EQ(s->args, (std::vector<std::string>{"-m", "x"}));
}

TEST(WarmStartTest, RefusesWhatAZygoteCannotGiveWithTheReason) {
  auto bash = ParseWarmInvocation({"bash", "-c", "python3 x.py"});
  ASSERT_FALSE(bash.ok());
  EXPECT_NE(bash.status().message().find("'bash' is not a Python interpreter"), std::string::npos);
  auto flag = ParseWarmInvocation({"python3", "-X", "importtime", "x.py"});
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("'-X'"), std::string::npos);
  EXPECT_FALSE(ParseWarmInvocation({"python3", "-c", "print(1)"}).ok());
  EXPECT_FALSE(ParseWarmInvocation({"python3", "-m"}).ok());
  EXPECT_FALSE(ParseWarmInvocation({"python3"}).ok());
  EXPECT_FALSE(ParseWarmInvocation({"python3", "-"}).ok());
  EXPECT_FALSE(ParseWarmInvocation({"python3.x", "a.py"}).ok());
}

TEST(WarmStartTest, EnvProblemsNameTheVariable) {
  EXPECT_EQ(WarmEnvProblem({{"PYTHONPATH", "/a"}, {"PYTHONUNBUFFERED", "1"}, {"PATH", "/bin"}}),
            "");
  EXPECT_NE(WarmEnvProblem({{"PYTHONHOME", "/x"}}).find("PYTHONHOME is set"), std::string::npos);
  EXPECT_NE(WarmEnvProblem({{"LD_PRELOAD", "/x.so"}}).find("LD_PRELOAD"), std::string::npos);
  EXPECT_EQ(WarmEnvProblem({{"LD_PRELOAD", ""}}), "");
}

ZygoteIdentity Identity() {
  ZygoteIdentity id;
  id.python_path = "/usr/bin/python3";
  id.preload = {"torch"};
  id.defaults = {{"LANG", "C.UTF-8"}};
  id.user = "alice";
  id.uid = 65534;
  id.gid = 65534;
  id.groups = {65534, 990};
  return id;
}

TEST(WarmStartTest, KeyIsTheUserInterpreterPreloadAndAccountNotTheJobsVariables) {
  const std::string k = ZygoteKey(Identity());
  EXPECT_EQ(k.size(), 16u);
  EXPECT_EQ(k, ZygoteKey(Identity()));  // stable
  // Nothing of the trainer's environment is part of it: there is no way to
  // pass one (ZygoteIdentity has no env), and each part below counts.
  auto changed = [&](auto change) {
    ZygoteIdentity id = Identity();
    change(id);
    return ZygoteKey(id);
  };
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.user = "bob"; }));
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.python_path = "/opt/venv/bin/python3"; }));
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.preload.push_back("numpy"); }));
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.uid = 1000; }));
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.gid = 1000; }));
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.groups.pop_back(); }));
  EXPECT_NE(k, changed([](ZygoteIdentity& id) { id.defaults["LANG"] = "C"; }));
  // The user and the interpreter cannot run into each other.
  EXPECT_NE(changed([](ZygoteIdentity& id) { id.user = "a"; }), changed([](ZygoteIdentity& id) {
              id.user = "";
              id.preload = {"torch,a"};
            }));
}

TEST(WarmStartTest, AStartupVariableOtherThanTheNodesStartsColdAndSaysWhy) {
  const std::map<std::string, std::string> defaults = {{"LANG", "C.UTF-8"},
                                                       {"OMP_NUM_THREADS", "2"}};
  std::map<std::string, std::string> env = {
      {"LANG", "C.UTF-8"}, {"OMP_NUM_THREADS", "2"}, {"FOO", "x"}, {"LC_NUMERIC", "de_DE.UTF-8"}};
  EXPECT_EQ(StartupVarProblem(env, defaults), "");
  env["OMP_NUM_THREADS"] = "3";
  EXPECT_EQ(StartupVarProblem(env, defaults),
            "OMP_NUM_THREADS=3 differs from the warm interpreter's 2 (read at interpreter "
            "start-up, which a warm start skips)");
  env["OMP_NUM_THREADS"] = "2";
  env["PYTHONHASHSEED"] = "0";
  EXPECT_EQ(StartupVarProblem(env, defaults),
            "PYTHONHASHSEED=0 differs from the warm interpreter's, which has none (read at "
            "interpreter start-up, which a warm start skips)");
  env.erase("PYTHONHASHSEED");
  env["MKL_ENABLE_INSTRUCTIONS"] = "AVX2";  // any MKL_*, OMP_*, GOMP_*, KMP_*, OPENBLAS_*
  EXPECT_NE(StartupVarProblem(env, defaults).find("MKL_ENABLE_INSTRUCTIONS=AVX2 differs"),
            std::string::npos);
  env.erase("MKL_ENABLE_INSTRUCTIONS");
  env.erase("LANG");
  EXPECT_NE(StartupVarProblem(env, defaults)
                .find("LANG is not set, the warm interpreter's is "
                      "C.UTF-8"),
            std::string::npos);
}

TEST(WarmStartTest, ZygoteEnvHoldsOnlyTheNodesStartupVariables) {
  auto env = ZygoteEnv({{"OMP_NUM_THREADS", "2"}, {"STOKER_TOKEN", "x"}, {"LANG", "C.UTF-8"}},
                       "/data/warm");
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/data/warm",
                                           "LANG=C.UTF-8", "OMP_NUM_THREADS=2"}));
}

TEST(WarmStartTest, NoteNamesThePreloadTimeAndTheZygotesAccountAndMemory) {
  WarmChild c;
  c.preloaded = {"torch", "numpy"};
  c.fork_ms = 12;
  c.zygote_pid = 77;
  c.zygote_uid = 65534;
  c.zygote_rss_bytes = 230'000'000;
  EXPECT_EQ(WarmStartNote(c, "alice"),
            "warm start: forked from the warm interpreter (torch, numpy preloaded) in 12 ms; it "
            "runs as uid 65534 (pid 77, 230 MB resident, kept for alice)");
  c.preloaded = {"numpy"};
  c.skipped = {"jax: ModuleNotFoundError: No module named 'jax'"};
  c.fork_ms = 3;
  EXPECT_EQ(WarmStartNote(c, ""),
            "warm start: forked from the warm interpreter (numpy preloaded; not jax: "
            "ModuleNotFoundError: No module named 'jax') in 3 ms; it runs as uid 65534 (pid 77, "
            "230 MB resident, kept for the local user)");
}

ZygoteRecord Rec(const std::string& key, const std::string& user, int64_t used, bool idle) {
  ZygoteRecord r;
  r.key = key;
  r.user = user;
  r.pid = 100;
  r.last_use_us = used;
  r.idle = idle;
  return r;
}

TEST(WarmStartRegistryTest, RoomIsMadeByEndingTheLeastRecentlyUsedIdleOne) {
  // Under both limits: nothing to end.
  SpawnPlan p = PlanZygoteSpawn({Rec("a1", "alice", 5, true)}, "alice", 2, 8);
  EXPECT_TRUE(p.end.empty());
  EXPECT_EQ(p.refusal, "");
  // alice at her limit: her oldest idle one goes, not bob's older one, not her busy one.
  std::vector<ZygoteRecord> live = {Rec("b1", "bob", 1, true), Rec("a1", "alice", 2, false),
                                    Rec("a2", "alice", 3, true), Rec("a3", "alice", 4, true)};
  p = PlanZygoteSpawn(live, "alice", 3, 8);
  EXPECT_EQ(p.end, std::vector<std::string>{"a2"});
  // The node at its limit: the oldest idle one of anyone.
  p = PlanZygoteSpawn(live, "carol", 2, 4);
  EXPECT_EQ(p.end, std::vector<std::string>{"b1"});
  // Both: alice's own first, which also makes room in all.
  p = PlanZygoteSpawn(live, "alice", 3, 4);
  EXPECT_EQ(p.end, std::vector<std::string>{"a2"});
  // Limits lowered below what lives: as many as it takes.
  p = PlanZygoteSpawn(live, "alice", 1, 8);
  EXPECT_EQ(p.refusal.find("alice already has 3 warm interpreters, none idle "
                           "(warm_start_max_per_user: 1)"),
            0u)
      << p.refusal;  // a1 is busy: only two of the three needed are idle
  p = PlanZygoteSpawn(live, "bob", 2, 2);
  EXPECT_EQ(p.end, (std::vector<std::string>{"b1", "a2", "a3"}));
}

TEST(WarmStartRegistryTest, WhenEveryOneIsBusyTheTrainerStartsColdWithTheLimit) {
  std::vector<ZygoteRecord> live = {Rec("a1", "alice", 1, false), Rec("b1", "bob", 2, false)};
  SpawnPlan p = PlanZygoteSpawn(live, "alice", 1, 8);
  EXPECT_TRUE(p.end.empty());
  EXPECT_EQ(p.refusal,
            "alice already has 1 warm interpreters, none idle (warm_start_max_per_user: 1)");
  p = PlanZygoteSpawn(live, "carol", 2, 2);
  EXPECT_TRUE(p.end.empty());
  EXPECT_EQ(p.refusal,
            "this node already has 2 warm interpreters, none idle (warm_start_max_total: 2)");
  // "" (a store made before users existed) is a user of its own: the local one.
  EXPECT_EQ(PlanZygoteSpawn({Rec("l1", "", 1, false)}, "", 1, 8).refusal.find("the local user "),
            0u);
  EXPECT_EQ(PlanZygoteSpawn({Rec("l1", "", 1, false)}, "alice", 1, 8).refusal, "");
}

TEST(WarmStartRegistryTest, RecordsReadBackAndAnythingElseIsRefused) {
  ZygoteRecord r = Rec("00ff", "alice", 0, false);
  r.start_ticks = 123;
  r.spawner = 9;
  Result<ZygoteRecord> back = ParseZygoteRecord(FormatZygoteRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, "00ff");
  EXPECT_EQ(back->user, "alice");
  EXPECT_EQ(back->pid, 100);
  EXPECT_EQ(back->start_ticks, 123u);
  EXPECT_EQ(back->spawner, 9);
  EXPECT_FALSE(ParseZygoteRecord("{}").ok());
  EXPECT_FALSE(ParseZygoteRecord("[1]").ok());
  EXPECT_FALSE(ParseZygoteRecord("{\"key\": \"k\", \"pid\": \"1\"}").ok());
}

TEST(WarmStartRegistryTest, StartTicksTellAReusedPid) {
  EXPECT_GT(ProcessStartTicks(::getpid()), 0u);
  EXPECT_EQ(ProcessStartTicks(::getpid()), ProcessStartTicks(::getpid()));
  EXPECT_EQ(ProcessStartTicks(-1), 0u);
}

}  // namespace
}  // namespace stoker::runner
