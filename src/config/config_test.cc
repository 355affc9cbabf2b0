// LoadConfig over real files: each key's parser, the errors that name the
// key and the fix, and the rules every config gets.
#include "config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stoker::config {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }

  Result<Config> Load(const std::string& yaml) {
    std::ofstream(dir_ / "config.yaml") << yaml;
    return LoadConfig(dir_, dir_ / "config.yaml", true);
  }
  std::string Error(const std::string& yaml) {
    Result<Config> c = Load(yaml);
    EXPECT_FALSE(c.ok()) << yaml;
    return c.ok() ? "" : c.status().message();
  }

  fs::path dir_ = fs::temp_directory_path() / ("config_test_" + std::to_string(::getpid()));
};

TEST_F(ConfigTest, KeysSetTheirFieldsAndTheFilesImageRulesComeBeforeTheBuiltInOnes) {
  Result<Config> c = Load(
      "listen: 127.0.0.1:9000\n"
      "poll_interval_ms: 50\n"
      "aging_hours: 2.5\n"
      "log_max_files: 4\n"
      "containers: {engine: none, pull: never}\n"
      "warm_start_preload: [torch, numpy.linalg]\n"
      "retention: {replica_dirs_days: 3}\n"
      "images:\n"
      "  - match: \"my/*\"\n"
      "    python: /opt/venv/bin/python\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, "127.0.0.1:9000");
  EXPECT_EQ(c->poll_interval_ms, 50);
  EXPECT_DOUBLE_EQ(c->aging_hours, 2.5);
  EXPECT_EQ(c->log_max_files, 4);
  EXPECT_EQ(c->container_engine, "none");
  EXPECT_FALSE(c->container_pull);
  EXPECT_EQ(c->warm_starts.preload, (std::vector<std::string>{"torch", "numpy.linalg"}));
  EXPECT_DOUBLE_EQ(c->retention.replica_dirs_days, 3);
  ASSERT_GT(c->images.size(), 1u);
  EXPECT_EQ(c->images[0].match, "my/*");
  EXPECT_EQ(c->images.size(), 1 + DefaultImageRules().size());
  EXPECT_EQ(c->python_packages.wheelhouse, (std::vector<fs::path>{dir_ / "wheelhouse"}));
}

TEST_F(ConfigTest, AnUnknownKeyListsEveryKnownKey) {
  std::string e = Error("colour: blue\n");
  EXPECT_NE(e.find("unknown key 'colour' (known: listen, images, buckets"), std::string::npos) << e;
  EXPECT_NE(e.find("webhooks)"), std::string::npos) << e;
}

TEST_F(ConfigTest, ErrorsNameTheKeyAndWhatItTakes) {
  EXPECT_NE(Error("log_max_bytes: 10\n").find("log_max_bytes: must be 0 or at least 1024"),
            std::string::npos);
  EXPECT_NE(Error("aging_hours: -1\n").find("aging_hours: must be a number of at least 0"),
            std::string::npos);
  EXPECT_NE(Error("fair_share_half_life_hours: 0\n").find("must be above 0"), std::string::npos);
  EXPECT_NE(Error("job_isolation: maybe\n").find("job_isolation: must be auto, required or off"),
            std::string::npos);
  EXPECT_NE(Error("warm_start_max_total: 0\n").find("warm_start_max_total: must be a whole number"),
            std::string::npos);
  EXPECT_NE(Error("containers: {engine: lxc}\n").find("containers.engine: must be one of"),
            std::string::npos);
  // A value of the wrong type names its key.
  EXPECT_NE(Error("backfill: [1]\n").find("backfill: wrong type of value"), std::string::npos);
  EXPECT_NE(Error("tls_cert_file: a.pem\n").find("give both"), std::string::npos);
}

TEST_F(ConfigTest, TheExecutorKindsAreTheRegistrys) {
  std::string e = Error("executor: kubernetes\n");
  EXPECT_NE(e.find("executor: 'kubernetes' is not an executor (use local or slurm)"),
            std::string::npos)
      << e;
  Result<Config> c = Load("executor: slurm\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->executor, "slurm");
}

TEST_F(ConfigTest, AMissingFileIsAnErrorOnlyWhenNamed) {
  EXPECT_FALSE(LoadConfig(dir_, dir_ / "absent.yaml", true).ok());
  Result<Config> c = LoadConfig(dir_, dir_ / "absent.yaml", false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->images.size(), DefaultImageRules().size());
}

}  // namespace
}  // namespace stoker::config
