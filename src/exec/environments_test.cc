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
#include <iterator>
#include <memory>
#include <string>
#include <vector>

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

// A stand-in engine client: writes its arguments, one a line, to `log`
// and says the image is not in its store (exit 1).
ContainerEngine FakeEngine(const fs::path& dir) {
  fs::path client = dir / "podman";
  std::ofstream(client) << "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done >> " +
                               (dir / "engine.log").string() + "\nexit 1\n";
  fs::permissions(client, fs::perms::owner_all);
  return ContainerEngine{"podman", client.string(), "test"};
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A store that lists `names` and has no events.
class ListedEngine : public ImageEngine {
 public:
  explicit ListedEngine(std::vector<std::string> names) : names_(std::move(names)) {}
  std::string Kind() const override { return "podman"; }
  Result<std::vector<ListedImage>> List() override {
    std::vector<ListedImage> out;
    for (const std::string& n : names_) out.push_back({n, "id"});
    return out;
  }
  Status Watch(const std::function<void()>&) override { return Status(); }
  void Cancel() override {}

 private:
  std::vector<std::string> names_;
};

TEST_F(EnvironmentsTest, WithAReadCatalogNoImageIsAskedOfTheEngine) {
  Environments envs({{"local/*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "");
  envs.UseEngine(FakeEngine(dir_));
  auto catalog = std::make_shared<ImageCatalog>(
      std::make_unique<ListedEngine>(std::vector<std::string>{"localhost/built:1"}));
  envs.UseCatalog(catalog);
  // Not read yet: the engine is asked, as without a catalog.
  EXPECT_EQ(envs.ForImage("local/a", "f").value().python, "/usr/bin/python3");
  EXPECT_NE(ReadAll(dir_ / "engine.log").find("local/a"), std::string::npos);
  fs::remove(dir_ / "engine.log");

  ASSERT_TRUE(catalog->Refresh().ok());
  Environment built = envs.ForImage("built:1", "f").value();
  EXPECT_EQ(built.container_image, "built:1");
  EXPECT_EQ(envs.ForImage("local/b", "f").value().python, "/usr/bin/python3");
  EXPECT_FALSE(fs::exists(dir_ / "engine.log")) << ReadAll(dir_ / "engine.log");

  // A name neither the catalog nor a rule has is asked of the engine before
  // it is refused: it may have been built a moment ago.
  envs.UsePulls(false, {});
  EXPECT_FALSE(envs.ForImage("other/c:1", "f").ok());
  EXPECT_NE(ReadAll(dir_ / "engine.log").find("other/c:1"), std::string::npos);
}

// A listening socket on 127.0.0.1; `port` is its port.
struct Listener {
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { Close(); }
  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  // Whether a connection is waiting to be accepted (never blocks).
  bool Connected() const {
    int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) ::close(c);
    return c >= 0;
  }
  int fd = -1;
  int port = 0;
};

TEST_F(EnvironmentsTest, ANameThatIsNoImageReferenceNeverReachesTheEngine) {
  Environments envs({{"*", "/usr/bin/python3"}}, dir_ / "shims", dir_ / "helpers", "");
  envs.UseEngine(FakeEngine(dir_));
  for (const std::string& name : {"containers-storage:[overlay@" + (dir_ / "store").string() + "+" +
                                      (dir_ / "run").string() + "]localhost/x:1",
                                  std::string("docker://ubuntu"), std::string("oci-archive:/tmp/x"),
                                  std::string("-v"), std::string("oci:x"), std::string("A/b")}) {
    auto env = envs.ForImage(name, "jobSpec.workerPoolSpecs[0].containerSpec.imageUri");
    ASSERT_FALSE(env.ok()) << name;
    EXPECT_EQ(env.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(
        env.status().message().rfind("jobSpec.workerPoolSpecs[0].containerSpec.imageUri: '", 0), 0u)
        << env.status().message();
    EXPECT_NE(env.status().message().find("is not an image reference"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir_ / "engine.log"));  // the engine was never asked
  EXPECT_FALSE(fs::exists(dir_ / "store"));
  // A reference reaches the engine after "--", as parsed.
  ASSERT_TRUE(envs.ForImage("local/x:1", "f").ok());
  EXPECT_EQ(ReadAll(dir_ / "engine.log"), "image\nexists\n--\nlocal/x:1\n");
}

TEST_F(EnvironmentsTest, ARegistryOnALoopbackAddressIsRefusedUnlessInsecure) {
  Listener registry;
  const std::string image = "127.0.0.1:" + std::to_string(registry.port) + "/e2e/x:1";
  Environments envs({}, dir_ / "shims", dir_ / "helpers", "/etc/stoker/config.yaml");
  envs.UseEngine(FakeEngine(dir_));
  envs.UsePulls(true, {});
  auto refused = envs.ForImage(image, "f");
  ASSERT_FALSE(refused.ok());
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("f: image '" + image + "': its registry 127.0.0.1:" +
                   std::to_string(registry.port) + " resolves to 127.0.0.1, a loopback address"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("containers.insecure_registries in /etc/stoker/config.yaml"), std::string::npos)
      << m;
  EXPECT_FALSE(registry.Connected());  // refused before any connection

  Environments trusting({}, dir_ / "shims", dir_ / "helpers", "");
  trusting.UseEngine(FakeEngine(dir_));
  trusting.UsePulls(true, {"127.0.0.1:" + std::to_string(registry.port)});
  auto pulled = trusting.ForImage(image, "f");
  ASSERT_TRUE(pulled.ok()) << pulled.status().message();
  EXPECT_TRUE(pulled->pull);
  EXPECT_TRUE(pulled->insecure_registry);
  EXPECT_EQ(pulled->container_image, image);
  EXPECT_TRUE(registry.Connected());
}

TEST(NonPublicAddressKindTest, NamesEveryAddressARegistryMustNotBeAt) {
  for (const auto& [address, kind] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1", "loopback"},
           {"127.255.0.9", "loopback"},
           {"::1", "loopback"},
           {"::ffff:127.0.0.1", "loopback"},
           {"169.254.169.254", "link-local"},
           {"fe80::1", "link-local"},
           {"fe80::1%eth0", "link-local"},
           {"10.1.2.3", "private"},
           {"172.16.0.1", "private"},
           {"172.31.255.255", "private"},
           {"192.168.1.1", "private"},
           {"fc00::1", "private"},
           {"fd12:3456::1", "private"},
           {"0.0.0.0", "unspecified"},
           {"::", "unspecified"},
           {"224.0.0.1", "multicast"},
           {"ff02::1", "multicast"},
           {"255.255.255.255", "broadcast"},
           {"8.8.8.8", ""},
           {"172.32.0.1", ""},
           {"172.15.255.255", ""},
           {"2001:4860:4860::8888", ""},
           {"::ffff:8.8.8.8", ""},
           {"192.169.0.1", ""},
       }) {
    EXPECT_EQ(NonPublicAddressKind(address), kind) << address;
  }
}

TEST(ProbeRegistryTest, SaysWhetherATcpConnectionOpens) {
  Listener listener;
  const int port = listener.port;
  const ImageReference image =
      ParseImageReference("127.0.0.1:" + std::to_string(port) + "/x", "f").value();
  EXPECT_EQ(ProbeRegistry(image, /*allow_private=*/true, 2000).why, "");
  EXPECT_TRUE(listener.Connected());
  RegistryProbe refused = ProbeRegistry(image, /*allow_private=*/false, 2000);
  EXPECT_TRUE(refused.refused);
  EXPECT_EQ(refused.why, "127.0.0.1, a loopback address");
  EXPECT_FALSE(listener.Connected());
  listener.Close();  // nothing listens there now
  RegistryProbe closed = ProbeRegistry(image, true, 2000);
  EXPECT_FALSE(closed.refused);
  EXPECT_NE(closed.why.find("127.0.0.1:" + std::to_string(port) + ": Connection refused"),
            std::string::npos)
      << closed.why;
  RegistryProbe unknown =
      ProbeRegistry(ParseImageReference("no-such-host.invalid/x", "f").value(), false, 2000);
  EXPECT_NE(unknown.why.find("cannot resolve no-such-host.invalid"), std::string::npos)
      << unknown.why;
}

}  // namespace
}  // namespace stoker::exec
