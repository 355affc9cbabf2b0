#include "exec/environments.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

TEST(RegistryOfTest, FollowsDockersRuleForTheFirstComponent) {
  auto is = [](const std::string& image, const std::string& name, const std::string& host,
               int port) {
    ImageRegistry r = RegistryOf(image);
    EXPECT_EQ(r.name, name) << image;
    EXPECT_EQ(r.host, host) << image;
    EXPECT_EQ(r.port, port) << image;
  };
  is("gcr.io/proj/trainer:v1", "gcr.io", "gcr.io", 443);
  is("us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4:latest", "us-docker.pkg.dev",
     "us-docker.pkg.dev", 443);
  is("localhost:5000/t:1", "localhost:5000", "localhost", 5000);
  is("localhost/t", "localhost", "localhost", 443);
  is("127.0.0.1:8080/a/b@sha256:00", "127.0.0.1:8080", "127.0.0.1", 8080);
  is("[::1]:5000/t", "[::1]:5000", "::1", 5000);
  // No registry named: Docker Hub.
  is("ubuntu:22.04", "docker.io", "registry-1.docker.io", 443);
  is("library/ubuntu", "docker.io", "registry-1.docker.io", 443);
}

TEST(ProbeRegistryTest, SaysWhetherATcpConnectionOpens) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  EXPECT_EQ(ProbeRegistry({"127.0.0.1:" + std::to_string(port), "127.0.0.1", port}, 2000), "");
  ::close(listener);  // nothing listens there now
  std::string why = ProbeRegistry({"127.0.0.1:" + std::to_string(port), "127.0.0.1", port}, 2000);
  EXPECT_NE(why.find("127.0.0.1:" + std::to_string(port) + ": Connection refused"),
            std::string::npos)
      << why;
  why = ProbeRegistry({"no-such-host.invalid", "no-such-host.invalid", 443}, 2000);
  EXPECT_NE(why.find("cannot resolve no-such-host.invalid"), std::string::npos) << why;
}

}  // namespace
}  // namespace stoker::exec
