// Requirement environments: what is read from package metadata (never by
// running it), the key, pip's command line, and real pip building from a
// wheelhouse the test writes (skipped where /usr/bin/python3 has no pip).
#include "runner/python_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/files.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST(PythonEnvTest, RequirementsArePlainNamesWithVersionsAndMarkers) {
  for (const char* ok : {"numpy", "numpy>=1.24,<2", "tiny_pkg.sub-x[extra1,b]==1.0.*",
                         "torch ; python_version >= '3.8'", "a!=1.0", "b~=2.1"}) {
    EXPECT_TRUE(CheckRequirement(ok).ok()) << ok;
  }
  EXPECT_EQ(*CheckRequirement("  numpy  "), "numpy");
  EXPECT_THAT(CheckRequirement("--index-url=http://evil").status().message(),
              HasSubstr("must start with a distribution name"));
  EXPECT_THAT(CheckRequirement("-r/etc/shadow").status().message(),
              HasSubstr("must start with a distribution name"));
  EXPECT_THAT(CheckRequirement("pkg @ https://x/y.whl").status().message(),
              HasSubstr("direct reference"));
  EXPECT_THAT(CheckRequirement("./local/dir").status().message(),
              HasSubstr("must start with a distribution name"));
  EXPECT_THAT(CheckRequirement("a$(rm -rf)").status().message(), HasSubstr("'$'"));
  EXPECT_FALSE(CheckRequirement("").ok());
  EXPECT_FALSE(CheckRequirement(std::string(300, 'a')).ok());

  auto n = NormaliseRequirements({"b", " a ", "b"}, "x: ");
  ASSERT_TRUE(n.ok());
  EXPECT_THAT(*n, ElementsAre("a", "b"));
  EXPECT_THAT(NormaliseRequirements({"ok", "-e ."}, "where: ").status().message(),
              HasSubstr("where: requirement '-e .'"));
}

TEST(PythonEnvTest, PipInAnImageRunsInTheReplicasCgroupWithoutNetworkOrCapabilities) {
  PythonEnvRequest::Image image{"/usr/bin/podman", "localhost/t:1", {"--ulimit=nofile=1:2"},
                                "/stoker/r-abc-workerpool0-0/engine"};
  std::vector<std::string> argv =
      PipInContainerArgv(image, "stoker-pip-1", "/cache/env", {"/wheels"}, "",
                         {"python3", "-s", "-m", "pip", "install", "a==1"}, {"PIP_X=1", "PATH=/p"});
  EXPECT_THAT(argv, Contains("--cgroup-parent=/stoker/r-abc-workerpool0-0/engine"));
  EXPECT_THAT(argv, Contains("--network=none"));
  EXPECT_THAT(argv, Contains("--cap-drop=all"));
  EXPECT_THAT(argv, Contains("--volume=/wheels:/wheels:ro"));
  EXPECT_THAT(argv, Contains("PIP_X=1"));
  EXPECT_THAT(argv, Not(Contains("PATH=/p")));
  image.cgroup_parent.clear();
  EXPECT_THAT(PipInContainerArgv(image, "n", "/cache/env", {}, "", {"python3"}, {}),
              Not(Contains(HasSubstr("--cgroup-parent"))));
}

TEST(PythonEnvTest, RequiresTxtKeepsUnconditionalAndMarkerSectionsNotExtras) {
  EXPECT_THAT(ParseRequiresTxt("numpy>=1.2\n# note\n\ntinydep\n\n[test]\npytest\n"
                               "[:python_version < \"3.9\"]\nimportlib-metadata\n"
                               "[gpu:sys_platform == \"linux\"]\ncupy\n"),
              ElementsAre("numpy>=1.2", "tinydep", "importlib-metadata; python_version < \"3.9\""));
  EXPECT_THAT(ParseRequiresTxt(""), IsEmpty());
}

TEST(PythonEnvTest, RequiresDistHeadersWithoutExtrasAndNotFromTheBody) {
  EXPECT_THAT(ParseRequiresDist("Metadata-Version: 2.1\nName: t\nRequires-Dist: numpy (>=1.2)\n"
                                "requires-dist: tinydep; python_version >= \"3\"\n"
                                "Requires-Dist: pytest ; extra == 'test'\n"
                                "Provides-Extra: test\n\nRequires-Dist: not-a-header\n"),
              ElementsAre("numpy (>=1.2)", "tinydep; python_version >= \"3\""));
  EXPECT_THAT(ParseRequiresDist("Metadata-Version: 1.0\nName: t\nVersion: 0.0.0\n"), IsEmpty());
}

TEST(PythonEnvTest, SetupPyIsReadNotRun) {
  EXPECT_THAT(
      *ParseSetupPyRequires("from setuptools import setup\n"
                            "# install_requires=['commented']\n"
                            "setup(name='t', install_requires=[\n"
                            "    'numpy>=1.2',  # why\n    \"tinydep\",\n], zip_safe=False)\n"),
      ElementsAre("numpy>=1.2", "tinydep"));
  EXPECT_THAT(*ParseSetupPyRequires("setup(name='t', install_requires=[])"), IsEmpty());
  EXPECT_THAT(*ParseSetupPyRequires("setup(name='t', packages=['t'])"), IsEmpty());
  EXPECT_THAT(*ParseSetupPyRequires("kw = {'install_requires': ('a', 'b')}\nsetup(**kw)"),
              ElementsAre("a", "b"));
  EXPECT_FALSE(ParseSetupPyRequires("REQS = ['a']\nsetup(install_requires=REQS)").has_value());
  EXPECT_FALSE(ParseSetupPyRequires("setup(install_requires=['a'] + extra)").has_value());
  EXPECT_FALSE(ParseSetupPyRequires("setup(install_requires=open('r.txt').read())").has_value());
}

TEST(PythonEnvTest, SetupCfgAndPyprojectLists) {
  EXPECT_THAT(ParseSetupCfgRequires("[metadata]\nname = t\n\n[options]\npackages = find:\n"
                                    "install_requires =\n    numpy>=1.2\n    # c\n    tinydep\n"
                                    "python_requires = >=3.8\n[options.extras_require]\n"
                                    "test = pytest\n"),
              ElementsAre("numpy>=1.2", "tinydep"));
  EXPECT_THAT(ParseSetupCfgRequires("[options]\ninstall_requires = one\n"), ElementsAre("one"));
  EXPECT_THAT(*ParsePyprojectDependencies("[build-system]\nrequires = [\"setuptools\"]\n\n"
                                          "[project]\nname = \"t\"\ndependencies = [\n"
                                          "  \"numpy>=1.2\", # c\n  'tinydep',\n]\n"
                                          "[project.optional-dependencies]\ntest = [\"pytest\"]\n"),
              ElementsAre("numpy>=1.2", "tinydep"));
  EXPECT_THAT(*ParsePyprojectDependencies("[build-system]\nrequires = [\"setuptools\"]\n"),
              IsEmpty());
  EXPECT_FALSE(ParsePyprojectDependencies("[project]\ndependencies = \"\"\"a\"\"\"\n").has_value());
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/python-env-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(PythonEnvTest, DeclaredRequirementsTrustEggInfoThenPkgInfoThenStaticFiles) {
  TempDir t;
  fs::path root = t.path() / "trainer-0.1";
  Write(root / "setup.py", "setup(install_requires=['from-setup-py'])");
  Write(root / "PKG-INFO", "Metadata-Version: 2.1\nName: trainer\nRequires-Dist: from-pkg-info\n");
  Write(root / "trainer.egg-info" / "requires.txt", "from-egg-info\n[test]\npytest\n");
  DeclaredRequirements d = ReadDeclaredRequirements(root);
  EXPECT_THAT(d.requirements, ElementsAre("from-egg-info"));
  EXPECT_EQ(d.source, "trainer.egg-info/requires.txt");

  fs::remove_all(root / "trainer.egg-info");
  d = ReadDeclaredRequirements(root);
  EXPECT_THAT(d.requirements, ElementsAre("from-pkg-info"));
  EXPECT_EQ(d.source, "PKG-INFO");

  Write(root / "PKG-INFO", "Metadata-Version: 1.0\nName: trainer\nVersion: 0.1\n");
  Write(root / "setup.cfg", "[options]\ninstall_requires =\n  from-setup-cfg\n");
  d = ReadDeclaredRequirements(root);
  EXPECT_THAT(d.requirements, ElementsAre("from-setup-cfg", "from-setup-py"));
  EXPECT_EQ(d.source, "setup.cfg, setup.py");
  EXPECT_EQ(d.note, "");

  fs::remove(root / "setup.cfg");
  Write(root / "setup.py", "R = ['a']\nsetup(install_requires=R)");
  d = ReadDeclaredRequirements(root);
  EXPECT_THAT(d.requirements, IsEmpty());
  EXPECT_THAT(d.note, HasSubstr("setup.py's install_requires is not a literal list"));

  // An egg-info without requires.txt: the package requires nothing.
  Write(root / "src" / "trainer.egg-info" / "PKG-INFO", "Name: trainer\n");
  d = ReadDeclaredRequirements(root);
  EXPECT_THAT(d.requirements, IsEmpty());
  EXPECT_EQ(d.note, "");
}

TEST(PythonEnvTest, DeclaredRequirementsNeverFollowALink) {
  TempDir t;
  fs::path root = t.path() / "trainer-0.1";
  Write(t.path() / "outside" / "requires.txt", "from-outside\n");
  Write(t.path() / "outside.egg-info" / "requires.txt", "from-outside-dir\n");
  fs::create_directories(root / "a.egg-info");
  fs::create_symlink(t.path() / "outside" / "requires.txt", root / "a.egg-info" / "requires.txt");
  fs::create_directory_symlink(t.path() / "outside.egg-info", root / "b.egg-info");
  fs::create_symlink(t.path() / "outside" / "requires.txt", root / "PKG-INFO");
  DeclaredRequirements d = ReadDeclaredRequirements(root);
  EXPECT_THAT(d.requirements, IsEmpty());
}

TEST(PythonEnvTest, TheKeyChangesWithEachInput) {
  EnvKeyInputs base{"/usr/bin/python3", "/usr/bin/python3.11:1:2:3", {"a", "b"}, "index="};
  std::string k = EnvKey(base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, EnvKey(base));
  for (int i = 0; i < 4; ++i) {
    EnvKeyInputs other = base;
    if (i == 0) other.python = "/venv/bin/python3";
    if (i == 1) other.python_id += "4";
    if (i == 2) other.requirements = {"a", "b>=2"};
    if (i == 3) other.sources += "\nlinks=/w\na-1.0-py3-none-any.whl 100";
    EXPECT_NE(EnvKey(other), k) << i;
  }
  // Joined differently, the same characters are another key.
  EnvKeyInputs split = base;
  split.requirements = {"ab"};
  EXPECT_NE(EnvKey(split), k);
}

TEST(PythonEnvTest, PipIsOfflineWheelsOnlyAndTakesNoRequirementAsAnOption) {
  auto argv = PipInstallArgv("/usr/bin/python3", "/c/k", {"/w1", "/w2"}, "", {"a", "b"});
  EXPECT_THAT(argv, ElementsAre("/usr/bin/python3", "-s", "-m", "pip", "install", "--no-input",
                                "--disable-pip-version-check", "--no-cache-dir",
                                "--no-warn-script-location", "--only-binary=:all:", "--prefix",
                                "/c/k", "--no-index", "--find-links", "/w1", "--find-links", "/w2",
                                "--", "a", "b"));
  argv = PipInstallArgv("/p", "/c/k", {}, "https://pypi.example/simple", {"a"});
  EXPECT_THAT(std::vector<std::string>(argv.end() - 4, argv.end()),
              ElementsAre("--index-url", "https://pypi.example/simple", "--", "a"));
}

TEST(PythonEnvTest, DescribesBuildsAndReuses) {
  PythonEnv env;
  env.key = "3f2a9c1b4d5e6f7a";
  env.requirements = {"a", "b>=1"};
  env.built = true;
  env.elapsed_ms = 3240;
  EXPECT_EQ(DescribePythonEnv(env),
            "requirements [a, b>=1]: environment 3f2a9c1b4d5e built in 3.2 s");
  env.built = false;
  env.elapsed_ms = 4;
  EXPECT_EQ(DescribePythonEnv(env),
            "requirements [a, b>=1]: environment 3f2a9c1b4d5e reused in 4 ms");
}

// ---- real pip ----

constexpr char kPython[] = "/usr/bin/python3";

// A pure-Python wheel `name`-`version` whose module defines VALUE, written
// by Python's zipfile (a wheel is a zip with dist-info METADATA, WHEEL, RECORD).
void WriteWheel(const fs::path& dir, const std::string& name, const std::string& version,
                const std::string& module_source, const std::vector<std::string>& requires_dist) {
  std::string reqs;
  for (const std::string& r : requires_dist) reqs += "'" + r + "',";
  fs::path script = dir / ("make-" + name + ".py");
  Write(
      script,
      "import base64, hashlib, sys, zipfile\n"
      "name, version, src, reqs = " +
          std::string("'") + name + "', '" + version + "', " + "'''" + module_source + "''', [" +
          reqs +
          "]\n"
          "dist = f'{name}-{version}.dist-info'\n"
          "meta = f'Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n' + "
          "''.join(f'Requires-Dist: {r}\\n' for r in reqs)\n"
          "files = {f'{name}.py': src, f'{dist}/METADATA': meta, f'{dist}/WHEEL': "
          "'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}\n"
          "rec = [f'{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest())"
          ".rstrip(b\"=\").decode()},{len(c.encode())}' for p, c in files.items()]\n"
          "files[f'{dist}/RECORD'] = '\\n'.join(rec + [f'{dist}/RECORD,,']) + '\\n'\n"
          "with zipfile.ZipFile(sys.argv[1] + f'/{name}-{version}-py3-none-any.whl', 'w') as z:\n"
          "    for p, c in files.items():\n"
          "        z.writestr(p, c)\n");
  std::string cmd = std::string(kPython) + " " + script.string() + " " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove(script);
}

class RealPipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system((std::string(kPython) + " -m pip --version >/dev/null 2>&1").c_str()) != 0) {
      GTEST_SKIP() << kPython << " has no pip";
    }
    wheels_ = t_.path() / "wheelhouse";
    fs::create_directories(wheels_);
    WriteWheel(wheels_, "stoker_tinydep", "1.0", "VALUE = 41\n", {});
    WriteWheel(wheels_, "stoker_tinytop", "2.0",
               "import stoker_tinydep\nVALUE = stoker_tinydep.VALUE + 1\n",
               {"stoker_tinydep>=1.0"});
  }

  PythonEnvRequest Request(std::vector<std::string> requirements) {
    PythonEnvRequest r;
    r.cache_dir = t_.path() / "cache";
    r.python = kPython;
    r.find_links = {wheels_};
    r.requirements = std::move(requirements);
    return r;
  }

  // What `import MODULE; print(MODULE.VALUE)` prints with the environment on PYTHONPATH.
  std::string Import(const PythonEnv& env, const std::string& module) {
    std::string pp;
    for (const fs::path& d : env.site_dirs) pp += (pp.empty() ? "" : ":") + d.string();
    fs::path out = t_.path() / "import.out";
    std::string cmd = "env -i PYTHONPATH=" + pp + " " + kPython + " -c 'import " + module +
                      "; print(" + module + ".VALUE)' >" + out.string() + " 2>&1";
    (void)std::system(cmd.c_str());
    auto text = ReadFile(out);
    return text.ok() ? *text : "";
  }

  TempDir t_;
  fs::path wheels_;
};

TEST_F(RealPipTest, BuildsOnceFromTheWheelhouseThenReusesQuickly) {
  // numpy is Debian's (python3-numpy): satisfied by the interpreter, not installed again.
  auto built = EnsurePythonEnv(Request({"stoker_tinytop", "numpy"}), nullptr);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(built->built);
  ASSERT_EQ(built->site_dirs.size(), 1u);
  EXPECT_EQ(Import(*built, "stoker_tinytop"), "42\n");
  EXPECT_TRUE(fs::exists(built->dir / "stoker-env.json"));
  for (const auto& e : fs::recursive_directory_iterator(built->dir)) {
    EXPECT_EQ(e.path().filename().string().find("numpy"), std::string::npos) << e.path();
  }

  auto again = EnsurePythonEnv(Request({"numpy", "stoker_tinytop", "numpy"}), nullptr);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->built);
  EXPECT_EQ(again->key, built->key);
  EXPECT_EQ(again->site_dirs, built->site_dirs);
  EXPECT_LT(again->elapsed_ms, 50);
  EXPECT_THAT(DescribePythonEnv(*again),
              HasSubstr("requirements [numpy, stoker_tinytop]: environment " +
                        built->key.substr(0, 12) + " reused in"));
  // The interpreter's own site-packages never got it.
  std::string cmd = std::string(kPython) + " -s -c 'import stoker_tinytop' 2>/dev/null";
  EXPECT_NE(std::system(cmd.c_str()), 0);
}

TEST_F(RealPipTest, ManyAtOnceBuildItOnce) {
  std::atomic<int> builds = 0, ok = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      auto env = EnsurePythonEnv(Request({"stoker_tinydep"}), nullptr);
      if (env.ok()) {
        ++ok;
        if (env->built) ++builds;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(builds, 1);
}

TEST_F(RealPipTest, AHalfBuiltEnvironmentIsBuiltAgain) {
  auto first = EnsurePythonEnv(Request({"stoker_tinydep"}), nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  fs::remove(first->dir / "stoker-env.json");  // as if the builder died before the end
  Write(first->dir / "junk", "x");
  auto second = EnsurePythonEnv(Request({"stoker_tinydep"}), nullptr);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->built);
  EXPECT_FALSE(fs::exists(second->dir / "junk"));
  EXPECT_EQ(Import(*second, "stoker_tinydep"), "41\n");
}

TEST_F(RealPipTest, AMissingRequirementFailsWithPipsWordsAndTheFixAndLeavesNothing) {
  auto env = EnsurePythonEnv(Request({"stoker_absent_pkg>=3"}), nullptr);
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), Code::kFailedPrecondition);
  const std::string& m = env.status().message();
  EXPECT_THAT(m, HasSubstr("requirements [stoker_absent_pkg>=3] could not be installed"));
  EXPECT_THAT(m, HasSubstr("No matching distribution found for stoker_absent_pkg"));
  EXPECT_THAT(m, HasSubstr("put wheels of them and of their dependencies into the wheelhouse " +
                           wheels_.string()));
  EXPECT_THAT(m, HasSubstr("python_packages.index_url"));
  for (const auto& e : fs::directory_iterator(t_.path() / "cache")) {
    EXPECT_FALSE(e.is_directory()) << e.path();  // lock and log only
  }
  // Adding the wheel is the fix: the next launch builds.
  WriteWheel(wheels_, "stoker_absent_pkg", "3.1", "VALUE = 3\n", {});
  auto fixed = EnsurePythonEnv(Request({"stoker_absent_pkg>=3"}), nullptr);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(Import(*fixed, "stoker_absent_pkg"), "3\n");
}

TEST_F(RealPipTest, ACancelStopsPipAndLeavesNoEnvironment) {
  std::atomic<int> polls = 0;
  auto env = EnsurePythonEnv(Request({"stoker_tinytop"}), [&] { return ++polls > 1; });
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), Code::kCancelled);
  for (const auto& e : fs::directory_iterator(t_.path() / "cache")) {
    EXPECT_FALSE(e.is_directory()) << e.path();
  }
}

TEST_F(RealPipTest, AnInterpreterWithoutPipIsNamedWithTheFix) {
  PythonEnvRequest r = Request({"stoker_tinydep"});
  fs::path fake = t_.path() / "nopip-python";
  Write(fake, "#!/bin/sh\necho '/usr/bin/python3: No module named pip' >&2\nexit 1\n");
  fs::permissions(fake, fs::perms::owner_all);
  r.python = fake.string();
  auto env = EnsurePythonEnv(r, nullptr);
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("has no pip"));
  EXPECT_THAT(env.status().message(), HasSubstr("apt-get install python3-pip"));
}

}  // namespace
}  // namespace stoker::runner
