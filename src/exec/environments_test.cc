#include "exec/environments.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

class EnvironmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // What `python3 -c CODE` prints under `env` (PATH decides which python3).
  static std::string Run(const Environment& env, const std::string& code) {
    std::string cmd;
    for (const auto& [k, v] : env.base_env) cmd += k + "='" + v + "' ";
    cmd = "env -i " + cmd + "python3 -c '" + code + "'";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[256];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    if (p) ::pclose(p);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  fs::path dir_ = fs::temp_directory_path() / ("environments_test_" + std::to_string(getpid()));
};

TEST_F(EnvironmentsTest, PythonInACommandIsTheRulesInterpreter) {
  Environments envs({{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "");
  Environment env = envs.ForImage("local/x", "f").value();
  EXPECT_EQ(env.python, "/usr/bin/python3");
  EXPECT_EQ(env.base_env.at("PATH").rfind((dir_ / "shims").string(), 0), 0u);
  EXPECT_FALSE(env.base_env.count("VIRTUAL_ENV"));
  EXPECT_EQ(Run(env, "import sys; print(sys.prefix)"), "/usr");
}

TEST_F(EnvironmentsTest, AVirtualEnvironmentKeepsItsPackages) {
  fs::path venv = dir_ / "venv";
  ASSERT_EQ(std::system(("/usr/bin/python3 -m venv --without-pip " + venv.string()).c_str()), 0);
  Environments envs({{"local/*", (venv / "bin" / "python3").string()}}, dir_ / "shims",
                    dir_ / "helpers", "");
  Environment env = envs.ForImage("local/x", "f").value();
  EXPECT_EQ(env.base_env.at("PATH").rfind((venv / "bin").string() + ":", 0), 0u);
  EXPECT_EQ(env.base_env.at("VIRTUAL_ENV"), venv.string());
  // The interpreter `python3` finds is the venv's, with its prefix: a link
  // elsewhere would have started the base interpreter (prefix /usr).
  EXPECT_EQ(Run(env, "import sys; print(sys.prefix)"), venv.string());
}

TEST_F(EnvironmentsTest, AnImageWithoutARuleNamesTheFieldAndTheFix) {
  Environments envs({}, dir_ / "shims", dir_ / "helpers", "/etc/stoker/config.yaml");
  auto env = envs.ForImage("gcr.io/p/t:1", "jobSpec.workerPoolSpecs[0].containerSpec.imageUri");
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("jobSpec.workerPoolSpecs[0].containerSpec.imageUri"),
            std::string::npos);
  EXPECT_NE(env.status().message().find("/etc/stoker/config.yaml"), std::string::npos);
}

}  // namespace
}  // namespace stoker::exec
