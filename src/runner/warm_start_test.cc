#include "runner/warm_start.h"

#include <gtest/gtest.h>

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

TEST(WarmStartTest, KeyDependsOnInterpreterPreloadAccountAndStartupVariables) {
  std::map<std::string, std::string> env = {{"OMP_NUM_THREADS", "2"}, {"FOO", "1"}};
  std::string k = ZygoteKey("/usr/bin/python3", {"torch"}, 1000, 1000, env);
  EXPECT_EQ(k.size(), 16u);
  EXPECT_EQ(k, ZygoteKey("/usr/bin/python3", {"torch"}, 1000, 1000,
                         {{"OMP_NUM_THREADS", "2"}, {"FOO", "2"}}));
  EXPECT_NE(k, ZygoteKey("/usr/bin/python3", {"torch"}, 1000, 1000, {{"OMP_NUM_THREADS", "4"}}));
  EXPECT_NE(k, ZygoteKey("/usr/bin/python3", {"torch", "numpy"}, 1000, 1000, env));
  EXPECT_NE(k, ZygoteKey("/usr/bin/python3", {"torch"}, 1001, 1000, env));
  EXPECT_NE(k, ZygoteKey("/opt/venv/bin/python3", {"torch"}, 1000, 1000, env));
}

TEST(WarmStartTest, ZygoteEnvHoldsOnlyTheKeyVariables) {
  auto env = ZygoteEnv({{"OMP_NUM_THREADS", "2"}, {"STOKER_TOKEN", "x"}, {"LANG", "C.UTF-8"}},
                       "/data/warm");
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/data/warm",
                                           "LANG=C.UTF-8", "OMP_NUM_THREADS=2"}));
}

TEST(WarmStartTest, NoteNamesThePreloadAndTime) {
  EXPECT_EQ(WarmStartNote({"torch", "numpy"}, {}, 12),
            "warm start: forked from the warm interpreter (torch, numpy preloaded) in 12 ms");
  EXPECT_EQ(WarmStartNote({"numpy"}, {"jax: ModuleNotFoundError: No module named 'jax'"}, 3),
            "warm start: forked from the warm interpreter (numpy preloaded; not jax: "
            "ModuleNotFoundError: No module named 'jax') in 3 ms");
}

}  // namespace
}  // namespace stoker::runner
