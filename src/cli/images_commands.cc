// `stoker images ...`: container images on this machine (docs/images.md).
//
// Each verb runs the node's container engine (podman or docker, chosen as
// stokerd chooses it: containers.engine in $STOKER_HOME/config.yaml, see
// exec/containers.h) in the foreground on the machine where the CLI runs,
// never through --server: in the one-machine setup that is the daemon's
// machine, whose engine the jobs' containers run on. The engine's own output
// streams through unchanged; the CLI adds what it checked before (paths
// named on the line) and one line after (what was built, or what failed and
// what to do). A failing engine's exit code is the command's exit code.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "common/files.h"
#include "common/image_reference.h"
#include "config/config.h"
#include "exec/command.h"
#include "exec/containers.h"
#include "replica/launch.h"

namespace stoker::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kListTimeoutSeconds = 120;

// The engine config.yaml names (containers.engine), found and checked; an
// error that says why there is none and how to get one.
Result<exec::ContainerEngine> EngineForCli() {
  fs::path home = DefaultStokerHome();
  fs::path file = home / "config.yaml";
  STOKER_ASSIGN_OR_RETURN(config::Config config,
                          config::LoadConfig(home, file, /*file_is_explicit=*/false));
  STOKER_ASSIGN_OR_RETURN(exec::ContainerEngine engine,
                          exec::DetectContainerEngine(config.container_engine));
  if (engine.usable()) return engine;
  if (config.container_engine == "none") {
    return FailedPrecondition("no container engine: " + engine.why + " in " + file.string() +
                              "; set containers: {engine: auto} (or podman, docker) there");
  }
  return FailedPrecondition(
      engine.why +
      "; install podman (apt-get install podman runc catatonit) or docker, or name the one to "
      "use with containers: {engine: podman|docker} in " +
      file.string());
}

// Runs `args` (args[0] an absolute path) with this process's stdin, stdout
// and stderr, and waits: its exit code, or 128 + the signal that ended it.
// While it runs, ^C and ^\ go to it alone (as system(3) does), so that the
// CLI outlives it and reports. Errors only when it cannot be started.
Result<int> RunForeground(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  struct sigaction ignore = {}, old_int = {}, old_quit = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "ERROR: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  int saved_errno = errno;
  int status = 0;
  pid_t waited = -1;
  if (pid > 0) {
    while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (pid < 0) return Internal("cannot start " + args[0] + ": " + std::strerror(saved_errno));
  if (waited < 0) return Internal("lost " + args[0] + ": " + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

// "podman build exited with 3" / "podman build was killed by signal 9".
std::string Ended(const exec::ContainerEngine& engine, const std::string& verb, int code) {
  std::string what = engine.name + " " + verb;
  if (code > 128) return what + " was killed by signal " + std::to_string(code - 128);
  return what + " exited with " + std::to_string(code);
}

// Runs the engine with `args` in the foreground; on failure prints
// "ERROR: <engine verb> exited with N: <advice>" (advice from `why`, given
// the exit code) and returns the engine's code.
template <typename Why>
int RunEngine(const exec::ContainerEngine& engine, const std::string& verb,
              const std::vector<std::string>& args, Why&& why) {
  auto code = RunForeground(exec::EngineCommand(engine, args));
  if (!code.ok()) return Report(code.status());
  if (*code != 0) {
    std::cerr << "ERROR: " << Ended(engine, verb, *code) << ": " << why(*code) << "\n";
  }
  return *code;
}

// A path named on the command line (`what`: "DIR", "-f", "FILE") must be
// there before the engine runs.
Status CheckPath(const std::string& what, const std::string& path, bool directory) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    return NotFound(what + ": " + path + " does not exist" +
                    (fs::path(path).is_relative()
                         ? " (relative to " + fs::current_path(ec).string() + ")"
                         : ""));
  }
  if (directory && !fs::is_directory(st)) {
    return InvalidArgument(what + ": " + path + " is not a directory");
  }
  if (!directory && fs::is_directory(st)) {
    return InvalidArgument(what + ": " + path + " is a directory; give a file");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return InvalidArgument(what + ": " + path + " cannot be read: " + std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace

int ImagesBuild(const BuildFlags& f) {
  if (Status s = CheckPath("DIR", f.dir, /*directory=*/true); !s.ok()) return Report(s);
  std::string dockerfile = f.file;
  if (dockerfile.empty()) {
    std::error_code ec;
    // podman's order; naming the one found keeps docker to the same file.
    for (const char* name : {"Containerfile", "Dockerfile"}) {
      fs::path candidate = fs::path(f.dir) / name;
      if (dockerfile.empty() && fs::is_regular_file(candidate, ec)) dockerfile = candidate.string();
    }
    if (dockerfile.empty()) {
      return Report(NotFound("DIR: " + f.dir +
                             " holds no Dockerfile (nor Containerfile); write one there or "
                             "name it with -f FILE"));
    }
  } else if (Status s = CheckPath("-f", dockerfile, /*directory=*/false); !s.ok()) {
    return Report(s);
  }
  auto tag = ParseImageReference(f.tag, "-t");
  if (!tag.ok()) return Report(tag.status());
  for (const std::string& a : f.build_args) {
    if (a.empty() || a[0] == '=') {
      return Report(InvalidArgument("--build-arg " + a + ": give NAME=VALUE (or NAME, for " +
                                    "the value in this environment)"));
    }
  }
  auto engine = EngineForCli();
  if (!engine.ok()) return Report(engine.status());

  // podman runs each RUN step's container under this process's limits, and
  // its defaults exceed what a machine may grant: without these every step
  // fails (replica/launch.h). dockerd runs them under its own, and a docker
  // client speaking to podman's socket has its build refused with them.
  std::vector<std::string> args = {"build"};
  if (engine->name == "podman") {
    for (const std::string& u : runner::ContainerUlimitFlags()) args.push_back(u);
  }
  args.push_back("--tag=" + tag->ToString());
  for (const std::string& extra : f.extra_tags) {
    auto also = ParseImageReference(extra, "-t");
    if (!also.ok()) return Report(also.status());
    args.push_back("--tag=" + also->ToString());
  }
  args.push_back("--file=" + dockerfile);
  for (const std::string& a : f.build_args) args.push_back("--build-arg=" + a);
  args.insert(args.end(), {"--", f.dir});

  auto start = std::chrono::steady_clock::now();
  int code = RunEngine(*engine, "build", args, [&](int c) -> std::string {
    if (engine->name == "podman" && c == 125) {
      return "podman stopped outside the steps; its Error: line above says why (often a FROM "
             "image that is neither here, see `stoker images list`, nor pullable, or a line "
             "of " +
             dockerfile + " it cannot read)";
    }
    if (engine->name == "podman") {
      return "a step of " + dockerfile + " failed with exit code " + std::to_string(c) +
             "; its output is above: fix that step and build again";
    }
    return "a step of " + dockerfile + " failed or docker refused the build; its output is " +
           "above: fix what it names and build again";
  });
  if (code != 0) return code;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", seconds);
  std::cout << "Built " << f.tag << " in " << took << " (" << engine->name << ")\n";
  return 0;
}

namespace {

// ---- list ------------------------------------------------------------------

std::string Rfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm = {};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Seconds since the epoch of an RFC 3339 time (docker's Created:
// "2024-01-02T03:04:05.123456789Z" or with an offset); 0 when it does not
// parse.
int64_t UnixSeconds(const std::string& rfc3339) {
  std::tm tm = {};
  const char* rest = ::strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return 0;
  int64_t t = ::timegm(&tm);
  while (*rest == '.' || (*rest >= '0' && *rest <= '9')) ++rest;
  int sign = *rest == '+' ? -1 : *rest == '-' ? 1 : 0;
  int hh = 0, mm = 0;
  if (sign != 0 && std::sscanf(rest + 1, "%d:%d", &hh, &mm) == 2) t += sign * (hh * 3600 + mm * 60);
  return t;
}

// One entry per name (an image with several tags is listed under each, as
// the engines list it; one with none as "<none>"): {name, id, size (bytes),
// created (RFC 3339 UTC)}, with the engine's own record reshaped.
void AddEntries(const std::vector<std::string>& names, const std::string& id, int64_t size,
                int64_t created, std::vector<json>* out) {
  std::string bare = id.rfind("sha256:", 0) == 0 ? id.substr(7) : id;
  for (const std::string& n : names.empty() ? std::vector<std::string>{"<none>"} : names) {
    out->push_back({{"name", n}, {"id", bare}, {"size", size}, {"created", Rfc3339(created)}});
  }
}

std::vector<std::string> Strings(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const json& s : j) {
    if (s.is_string() && s.get<std::string>() != "<none>:<none>") out.push_back(s);
  }
  return out;
}

Result<std::string> Capture(const exec::ContainerEngine& engine, const std::string& verb,
                            const std::vector<std::string>& args) {
  STOKER_ASSIGN_OR_RETURN(exec::CommandResult r,
                          exec::RunCommand(exec::EngineCommand(engine, args), kListTimeoutSeconds));
  if (r.exit_code != 0) {
    std::string said = r.err.empty() ? r.out : r.err;
    while (!said.empty() && said.back() == '\n') said.pop_back();
    return FailedPrecondition(Ended(engine, verb, r.exit_code < 0 ? 137 : r.exit_code) + ": " +
                              said);
  }
  return r.out;
}

// The engine's images, newest first: one listing.
Result<std::vector<json>> ListImagesOnce(const exec::ContainerEngine& engine) {
  std::vector<json> out;
  try {
    if (engine.name == "podman") {
      STOKER_ASSIGN_OR_RETURN(std::string text,
                              Capture(engine, "images", {"images", "--format", "json"}));
      json all = json::parse(text.empty() ? "[]" : text);
      for (const json& i : all) {
        AddEntries(Strings(i.value("Names", json())), i.value("Id", ""),
                   i.value("Size", int64_t{0}), i.value("Created", int64_t{0}), &out);
      }
    } else {
      // docker's `images --format` gives sizes for people and local times;
      // `image inspect` gives bytes and RFC 3339.
      STOKER_ASSIGN_OR_RETURN(std::string ids,
                              Capture(engine, "images", {"images", "-q", "--no-trunc"}));
      std::vector<std::string> args = {"image", "inspect"};
      std::set<std::string> seen;
      size_t start = 0;
      while (start < ids.size()) {
        size_t end = ids.find('\n', start);
        if (end == std::string::npos) end = ids.size();
        std::string id = ids.substr(start, end - start);
        if (!id.empty() && seen.insert(id).second) args.push_back(id);
        start = end + 1;
      }
      if (args.size() > 2) {
        STOKER_ASSIGN_OR_RETURN(std::string text, Capture(engine, "image inspect", args));
        for (const json& i : json::parse(text)) {
          AddEntries(Strings(i.value("RepoTags", json())), i.value("Id", ""),
                     i.value("Size", int64_t{0}), UnixSeconds(i.value("Created", "")), &out);
        }
      }
    }
  } catch (const json::exception& e) {
    return Internal(engine.path + " answered with JSON Stoker cannot read (" + e.what() +
                    "); run `" + engine.name + " images` to see its images");
  }
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a["created"].get<std::string>() > b["created"].get<std::string>();
  });
  return out;
}

// The engine's images, newest first. A failed listing is asked again, five
// times in all, 0.1, 0.2, 0.4 and 0.8 s apart: podman fails its whole
// listing when another process removes an image under it ("image not
// known", or a manifest that "does not exist": podman issue #24800), docker
// when an id from `images -q` is gone by `inspect`. A store that is really
// broken fails all five.
Result<std::vector<json>> ListImages(const exec::ContainerEngine& engine) {
  for (int attempt = 1;; ++attempt) {
    Result<std::vector<json>> listed = ListImagesOnce(engine);
    if (listed.ok() || attempt == 5) return listed;
    std::this_thread::sleep_for(std::chrono::milliseconds(100 << (attempt - 1)));
  }
}

// "270 MB", "1.36 GB": as the engines print sizes (powers of 1000, three
// significant digits).
std::string DecimalSize(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 999.5 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

int ImagesList(const Globals& g) {
  auto engine = EngineForCli();
  if (!engine.ok()) return Report(engine.status());
  auto images = ListImages(*engine);
  if (!images.ok()) return Report(images.status());
  bool printed = false;
  auto selected = SelectForList(g, *images, &printed);
  if (!selected.ok()) return Report(selected.status());
  if (printed) return 0;
  size_t width = 4;
  for (const json& i : *selected) width = std::max(width, i["name"].get<std::string>().size());
  std::string header = "NAME";
  header.resize(width + 2, ' ');
  std::cout << header << "ID            SIZE      CREATED\n";
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const json& i : *selected) {
    std::string name = i["name"];
    name.resize(width + 2, ' ');
    std::string id = i["id"].get<std::string>().substr(0, 12);
    id.resize(14, ' ');
    std::string size = DecimalSize(i["size"].get<double>());
    size.resize(10, ' ');
    int64_t age = now - UnixSeconds(i["created"]);
    std::cout << name << id << size << (age < 0 ? "just now" : Span(age) + " ago") << "\n";
  }
  return 0;
}

// ---- import, load, rm ------------------------------------------------------

int ImagesImport(const std::string& file, const std::string& image,
                 const std::vector<std::string>& changes) {
  bool url = file.rfind("http://", 0) == 0 || file.rfind("https://", 0) == 0;
  if (!url && file != "-") {
    if (Status s = CheckPath("FILE", file, /*directory=*/false); !s.ok()) return Report(s);
  }
  auto ref = ParseImageReference(image, "IMAGE");
  if (!ref.ok()) return Report(ref.status());
  auto engine = EngineForCli();
  if (!engine.ok()) return Report(engine.status());
  std::vector<std::string> args = {"import"};
  for (const std::string& c : changes) args.push_back("--change=" + c);
  args.insert(args.end(), {"--", file, ref->ToString()});
  int code = RunEngine(*engine, "import", args, [&](int) -> std::string {
    return "its words are above; FILE must be a tar archive of a root file system (e.g. from "
           "mmdebstrap or `" +
           engine->name + " export`), and an archive from `" + engine->name +
           " save` goes through `stoker images load -i FILE`";
  });
  if (code == 0)
    std::cout << "Imported " << file << " as " << image << " (" << engine->name << ")\n";
  return code;
}

int ImagesLoad(const std::string& file) {
  if (Status s = CheckPath("-i", file, /*directory=*/false); !s.ok()) return Report(s);
  auto engine = EngineForCli();
  if (!engine.ok()) return Report(engine.status());
  return RunEngine(*engine, "load", {"load", "-i", file}, [&](int) -> std::string {
    return "its words are above; FILE must be an archive from `docker save` or `podman save`, "
           "and a root file system's tarball goes through `stoker images import FILE IMAGE`";
  });
}

// IMAGE may be a name or an image id; an id (hex digits, or sha256:HEX)
// is a reference too, so every one is parsed and passed after "--".
int ImagesRemove(const std::vector<std::string>& images, bool force) {
  std::vector<std::string> args = {"rmi"};
  if (force) args.push_back("--force");
  args.push_back("--");
  for (const std::string& image : images) {
    auto ref = ParseImageReference(image, "IMAGE");
    if (!ref.ok()) return Report(ref.status());
    args.push_back(ref->ToString());
  }
  auto engine = EngineForCli();
  if (!engine.ok()) return Report(engine.status());
  return RunEngine(*engine, "rmi", args, [&](int) -> std::string {
    return std::string("its words are above; `stoker images list` shows the images here") +
           (force ? "" : ", and --force removes one that containers still use");
  });
}

}  // namespace

void RegisterImagesCommands(CLI::App& app, Globals& g, int& rc) {
  auto* images = app.add_subcommand(
      "images",
      "Container images on this machine: build, list, import, load, rm. Runs the container "
      "engine (podman or docker; containers.engine in $STOKER_HOME/config.yaml) where this "
      "CLI runs, which is the daemon's machine when both are on one; not through --server");
  images->require_subcommand(1);

  auto bf = std::make_shared<BuildFlags>();
  auto* build = images->add_subcommand(
      "build",
      "Build an image from DIR and its Dockerfile with the engine on this machine (docker "
      "build; gcloud builds submit --tag), streaming the engine's output");
  build->add_option("-t,--tag", bf->tag, "The image's name, e.g. localhost/trainer:1")->required();
  build->add_option("-f,--file", bf->file,
                    "The Dockerfile (default: DIR/Containerfile, else DIR/Dockerfile)");
  build
      ->add_option("--build-arg", bf->build_args,
                   "NAME=VALUE for an ARG of the Dockerfile (repeat for more)")
      ->allow_extra_args(false);
  build->add_option("DIR", bf->dir, "The build context: the directory the Dockerfile copies from")
      ->required();
  build->callback([bf, &rc] { rc = ImagesBuild(*bf); });

  images
      ->add_subcommand("list",
                       "The engine's images on this machine: name, id, size, created "
                       "(--format json: a JSON array of {name, id, size, created})")
      ->callback([&g, &rc] { rc = ImagesList(g); });

  auto import_file = std::make_shared<std::string>();
  auto import_image = std::make_shared<std::string>();
  auto changes = std::make_shared<std::vector<std::string>>();
  auto* import_cmd = images->add_subcommand(
      "import",
      "Make IMAGE from a tarball of a root file system (mmdebstrap, `podman export`) on this "
      "machine");
  import_cmd->add_option("FILE", *import_file, "The tarball (- for stdin, or an http(s) URL)")
      ->required();
  import_cmd->add_option("IMAGE", *import_image, "The new image's name, e.g. localhost/base:1")
      ->required();
  import_cmd
      ->add_option("-c,--change", *changes,
                   "A Dockerfile instruction to apply, e.g. 'ENTRYPOINT [\"/bin/sh\"]' (repeat)")
      ->allow_extra_args(false);
  import_cmd->callback([=, &rc] { rc = ImagesImport(*import_file, *import_image, *changes); });

  auto load_file = std::make_shared<std::string>();
  auto* load = images->add_subcommand(
      "load", "Load the images of an archive from `docker save` or `podman save` on this machine");
  load->add_option("-i,--input", *load_file, "The archive")->required();
  load->callback([=, &rc] { rc = ImagesLoad(*load_file); });

  auto rm_images = std::make_shared<std::vector<std::string>>();
  auto rm_force = std::make_shared<bool>(false);
  auto* rm = images->add_subcommand("rm", "Remove images from this machine (the engine's rmi)");
  rm->add_option("IMAGE", *rm_images, "Names or ids")->required();
  rm->add_flag("--force", *rm_force, "Also remove the containers that use them");
  rm->callback([=, &rc] { rc = ImagesRemove(*rm_images, *rm_force); });
}

}  // namespace stoker::cli
