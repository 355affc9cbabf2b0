// Requirement environments (python_env.h): the key, pip run into the cache
// (or in an image), and the marker that finishes an environment.
#include "runner/python_env.h"

#include <fcntl.h>
#include <ftw.h>
#include <openssl/sha.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/image_reference.h"
#include "common/time.h"
#include "replica/launch.h"
#include "runner/python_env_text.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The marker of a finished environment, written last, inside it.
constexpr char kMarker[] = "stoker-env.json";
// How many bytes of pip's output are kept for messages (its tail).
constexpr size_t kOutputKeep = 64 * 1024;

std::string Hex(const unsigned char* d, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[d[i] >> 4];
    out += kDigits[d[i] & 15];
  }
  return out;
}

}  // namespace

std::string EnvKey(const EnvKeyInputs& in) {
  std::string canon = "stoker-pip-env-v1";
  for (const std::string* part : {&in.python, &in.python_id, &in.sources}) canon += '\0' + *part;
  for (const std::string& r : in.requirements) canon += '\0' + r;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canon.data()), canon.size(), digest);
  return Hex(digest, sizeof digest);
}

std::vector<std::string> PipInstallArgv(const std::string& python, const fs::path& prefix,
                                        const std::vector<fs::path>& find_links,
                                        const std::string& index_url,
                                        const std::vector<std::string>& requirements) {
  std::vector<std::string> a = {python,
                                "-s",
                                "-m",
                                "pip",
                                "install",
                                "--no-input",
                                "--disable-pip-version-check",
                                "--no-cache-dir",
                                "--no-warn-script-location",
                                "--only-binary=:all:",
                                "--prefix",
                                prefix.string()};
  if (index_url.empty()) {
    a.push_back("--no-index");
  } else {
    a.push_back("--index-url");
    a.push_back(index_url);
  }
  for (const fs::path& dir : find_links) {
    a.push_back("--find-links");
    a.push_back(dir.string());
  }
  a.push_back("--");
  a.insert(a.end(), requirements.begin(), requirements.end());
  return a;
}

std::string DescribePythonEnv(const PythonEnv& env) {
  std::string line = "requirements [" + env_text::Join(env.requirements, ", ") + "]: environment " +
                     env.key.substr(0, 12);
  char t[64];
  if (env.built) {
    std::snprintf(t, sizeof t, " built in %.1f s", static_cast<double>(env.elapsed_ms) / 1000);
  } else {
    std::snprintf(t, sizeof t, " reused in %lld ms", static_cast<long long>(env.elapsed_ms));
  }
  line += t;
  if (env.waited && !env.built) line += " (after waiting for its build by another replica)";
  return line;
}

namespace {

// The interpreter's identity for the key: its real path and what changes
// when it is replaced or upgraded.
Result<std::string> InterpreterId(const std::string& python) {
  std::error_code ec;
  fs::path real = fs::canonical(python, ec);
  struct stat st = {};
  if (ec || ::stat(real.c_str(), &st) != 0) {
    return FailedPrecondition("the interpreter " + python + " does not exist");
  }
  return real.string() + ':' + std::to_string(st.st_ino) + ':' + std::to_string(st.st_size) + ':' +
         std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
}

// What a container engine's client gets: no variable of the caller's
// (which could name the engine's own settings) but where to find its
// programs and its user's files, and proxies for a registry.
std::vector<std::string> EngineEnv() {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"};
  for (const char* keep : {"HOME", "XDG_RUNTIME_DIR", "http_proxy", "https_proxy", "no_proxy",
                           "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}) {
    if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
  }
  return env;
}

// What the engine says the image's ID is ("sha256:..." or the bare hex).
// The engine is asked with the image's parsed form after "--" only.
Result<std::string> ImageId(const PythonEnvRequest::Image& c) {
  STOKER_ASSIGN_OR_RETURN(ImageReference ref,
                          ParseImageReference(c.image, "launch.json: container.image"));
  STOKER_ASSIGN_OR_RETURN(CapturedRun run, RunCapturing({c.engine, "image", "inspect", "--format",
                                                         "{{.Id}}", "--", ref.ToString()},
                                                        EngineEnv(), "/", nullptr));
  std::string id(env_text::Trim(run.output));
  if (!WIFEXITED(run.exit_status) || WEXITSTATUS(run.exit_status) != 0 || id.empty() ||
      id.find('\n') != std::string::npos) {
    return FailedPrecondition("cannot read the ID of image " + c.image + " from " + c.engine +
                              ": " + OutputTail(run.output, 2));
  }
  return "image " + c.image + " " + id;
}

// The index and what each wheelhouse holds (names and sizes: a wheel's name
// carries its version), so that adding wheels makes a new environment.
std::string SourcesId(const std::vector<fs::path>& find_links, const std::string& index_url) {
  std::string out = "index=" + index_url;
  for (const fs::path& dir : find_links) {
    out += "\nlinks=" + dir.string();
    std::vector<std::string> entries;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code e;
      uintmax_t size = it->is_regular_file(e) ? it->file_size(e) : 0;
      entries.push_back(it->path().filename().string() + ' ' + std::to_string(size));
    }
    if (ec) out += " (unreadable)";
    std::sort(entries.begin(), entries.end());
    for (const std::string& e : entries) out += '\n' + e;
  }
  return out;
}

// Reads a finished environment's marker; nullopt when there is none.
std::optional<PythonEnv> ReadMarker(const fs::path& dir) {
  Result<std::string> text = ReadFile(dir / kMarker);
  if (!text.ok()) return std::nullopt;
  json doc = json::parse(*text, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  PythonEnv env;
  env.dir = dir;
  if (auto s = doc.find("site_dirs"); s != doc.end() && s->is_array()) {
    for (const json& d : *s) {
      if (d.is_string()) env.site_dirs.push_back(dir / d.get<std::string>());
    }
  }
  if (auto b = doc.find("bin_dir");
      b != doc.end() && b->is_string() && !b->get<std::string>().empty()) {
    env.bin_dir = dir / b->get<std::string>();
  }
  return env;
}

// site-packages / dist-packages directories pip made under `prefix`
// (lib/pythonX.Y/site-packages; Debian's pip: local/lib/pythonX.Y/dist-packages).
std::vector<std::string> FindSiteDirs(const fs::path& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(prefix, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    std::string name = it->path().filename().string();
    if (name == "site-packages" || name == "dist-packages") {
      out.push_back(it->path().lexically_relative(prefix).string());
      it.disable_recursion_pending();
    } else if (it.depth() >= 4) {
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The account pip runs as in an image: the image's code is the job
// submitter's, so not root (which would share the host's uid 0, and with
// the host network its abstract sockets), and not an account that runs
// trainers (nobody), which could write the environment while it is built.
// No account has this uid; `dir` is its own while pip runs, root's after.
constexpr uint32_t kPipUid = 2147483000;

// Gives `dir` and everything under it (links themselves, never followed;
// not across mounts) to root, so that no trainer account can change a
// finished environment.
Status OwnTreeAsRoot(const fs::path& dir) {
  static int failed_errno;
  failed_errno = 0;
  auto own = [](const char* path, const struct stat*, int, struct FTW*) {
    if (::lchown(path, 0, 0) != 0) failed_errno = errno;
    return 0;
  };
  if (::nftw(dir.c_str(), own, 32, FTW_PHYS | FTW_MOUNT) != 0 || failed_errno != 0) {
    return Internal("cannot give " + dir.string() +
                    " to root: " + std::strerror(failed_errno ? failed_errno : errno));
  }
  return OkStatus();
}

// The environment pip gets: none of the caller's PIP_* settings or pip
// configuration files (the wheelhouse and index are ours to give), nor its
// PYTHONPATH; certificates and proxies for an index pass through.
std::vector<std::string> PipEnv(const fs::path& home) {
  std::vector<std::string> env = {
      "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home.string(),       "LANG=C.UTF-8",
      "PIP_CONFIG_FILE=/dev/null",         "PIP_ROOT_USER_ACTION=ignore", "PYTHONNOUSERSITE=1"};
  for (const char* keep :
       {"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_CERT"}) {
    if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
  }
  return env;
}

std::string PathList(const std::vector<fs::path>& dirs) {
  std::string out;
  for (const fs::path& d : dirs) out += (out.empty() ? "" : ", ") + d.string();
  return out;
}

}  // namespace

std::vector<std::string> PipInContainerArgv(const PythonEnvRequest::Image& image,
                                            const std::string& name, const fs::path& dir,
                                            const std::vector<fs::path>& find_links,
                                            const std::string& index_url,
                                            const std::vector<std::string>& pip_argv,
                                            const std::vector<std::string>& pip_env) {
  ContainerSpec spec;
  spec.engine = image.engine;
  spec.image = image.image;
  spec.name = name;
  spec.entrypoint = std::vector<std::string>{pip_argv[0]};
  spec.args.assign(pip_argv.begin() + 1, pip_argv.end());
  spec.mounts = {dir};
  spec.mounts_read_only = find_links;
  ContainerRun run;
  run.container = &spec;
  run.run_as = RunAs{.user = "stoker-pip", .uid = kPipUid, .gid = kPipUid};
  run.network = index_url.empty() ? "none" : "host";
  run.ulimits = image.ulimits;
  run.cgroup_parent = image.cgroup_parent;
  for (const std::string& kv : pip_env) {
    if (kv.rfind("PATH=", 0) != 0) run.env_inline.push_back(kv);
  }
  return ContainerRunArgv(run);
}

Result<CapturedRun> RunCapturing(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const fs::path& cwd,
                                 const std::function<bool()>& cancelled,
                                 const std::vector<int>& cgroup_fds) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> args, envp;
  std::vector<std::string> a = argv, e = env;
  for (std::string& s : a) args.push_back(s.data());
  args.push_back(nullptr);
  for (std::string& s : e) envp.push_back(s.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    for (int fd : cgroup_fds) {
      if (::write(fd, "0", 1) != 1) ::_exit(127);
    }
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
    ::umask(022);  // the environment is read by trainers of every account
    int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::dup2(p[1], STDOUT_FILENO);
    ::dup2(p[1], STDERR_FILENO);
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::execve(args[0], args.data(), envp.data());
    dprintf(STDERR_FILENO, "cannot execute %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(p[1]);
  if (pid < 0) {
    ::close(p[0]);
    return Internal("cannot fork " + argv[0] + ": " + std::strerror(errno));
  }
  CapturedRun run;
  char buf[8192];
  bool open = true;
  while (open) {
    pollfd pfd = {p[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, 100);
    if (n > 0) {
      ssize_t got = ::read(p[0], buf, sizeof buf);
      if (got > 0) {
        run.output.append(buf, static_cast<size_t>(got));
        if (run.output.size() > 2 * kOutputKeep)
          run.output.erase(0, run.output.size() - kOutputKeep);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        open = false;
      }
    }
    if (!run.cancelled && cancelled && cancelled()) {
      run.cancelled = true;
      ::kill(-pid, SIGKILL);
    }
  }
  ::close(p[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL);  // anything pip left in its session
  run.exit_status = st;
  return run;
}

std::string OutputTail(const std::string& output, size_t lines) {
  std::vector<std::string> all;
  for (std::string_view l : env_text::Lines(output)) {
    std::string_view t = env_text::Trim(l);
    if (!t.empty()) all.emplace_back(t.substr(0, 300));
  }
  std::vector<std::string> errors;
  for (const std::string& l : all) {
    if (l.rfind("ERROR", 0) == 0) errors.push_back(l);
  }
  const std::vector<std::string>& from = errors.empty() ? all : errors;
  size_t start = from.size() > lines ? from.size() - lines : 0;
  std::string out;
  for (size_t i = start; i < from.size(); ++i) out += (out.empty() ? "" : "\n") + from[i];
  return out;
}

namespace {

// Takes the key's lock on `lock` (the open `lock_path`; flock, polled so
// that a cancel stops the wait); *waited when another replica held it.
// Closes `lock` when it fails: Cancelled when a cancel came while waiting.
Status WaitForLock(int lock, const fs::path& lock_path, const std::function<bool()>& cancelled,
                   bool* waited) {
  while (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      ::close(lock);
      return Internal("cannot lock " + lock_path.string() + ": " + std::strerror(err));
    }
    *waited = true;
    if (cancelled && cancelled()) {
      ::close(lock);
      return Status(Code::kCancelled, "cancelled while another replica built the environment");
    }
    ::usleep(20000);
  }
  return OkStatus();
}

// Runs pip for `requirements` into the empty `dir` (in the image for a
// container request, as pip's own account), its output also kept in
// <cache_dir>/<key>.log.
Result<CapturedRun> RunPip(const PythonEnvRequest& req, const std::string& key, const fs::path& dir,
                           const std::vector<std::string>& requirements,
                           const std::function<bool()>& cancelled) {
  std::vector<std::string> argv =
      PipInstallArgv(req.python, dir, req.find_links, req.index_url, requirements);
  std::vector<std::string> pip_env = PipEnv(dir);
  std::string container_name;
  if (req.container) {
    container_name = "stoker-pip-" + key.substr(0, 12) + "-" + std::to_string(::getpid());
    argv = PipInContainerArgv(*req.container, container_name, dir, req.find_links, req.index_url,
                              argv, pip_env);
    pip_env = EngineEnv();
    if (::chown(dir.c_str(), kPipUid, kPipUid) != 0) {
      return Internal("cannot give " + dir.string() + " to pip's account: " + std::strerror(errno));
    }
  }
  STOKER_ASSIGN_OR_RETURN(CapturedRun run,
                          RunCapturing(argv, pip_env, req.cache_dir, cancelled, req.cgroup_fds));
  if (run.cancelled && req.container) {
    // The client is gone; its container may still run pip.
    (void)RunCapturing({req.container->engine, "rm", "--force", container_name}, EngineEnv(),
                       req.cache_dir, nullptr);
  }
  // pip's whole output, for whoever wants more than the message's tail.
  (void)WriteFileAtomic(req.cache_dir / (key + ".log"), run.output, Durability::kNoSync);
  return run;
}

// Why pip (exited non-zero or killed: `run`) could not install the
// requirements `list`, and the fix: FailedPrecondition.
Status PipFailed(const PythonEnvRequest& req, const CapturedRun& run, const std::string& list,
                 const std::string& key) {
  std::string how = WIFEXITED(run.exit_status)
                        ? "exited with code " + std::to_string(WEXITSTATUS(run.exit_status))
                        : "was killed by signal " + std::to_string(WTERMSIG(run.exit_status));
  if (req.container && run.output.find("No module named pip") != std::string::npos) {
    return FailedPrecondition(
        "requirements " + list + ": image " + req.container->image +
        " has no pip (`python3 -m pip` fails in it), which installs them: add "
        "`RUN apt-get update && apt-get install -y python3-pip` (or your base image's way) to "
        "its Dockerfile and build it again, or install the requirements in the image itself");
  }
  if (req.container && WIFEXITED(run.exit_status) && WEXITSTATUS(run.exit_status) >= 125) {
    return FailedPrecondition("requirements " + list + ": " + req.container->engine +
                              " could not run pip in image " + req.container->image + " (" + how +
                              "):\n" + OutputTail(run.output, 4));
  }
  if (run.output.find("No module named pip") != std::string::npos) {
    return FailedPrecondition(
        "requirements " + list + ": the interpreter " + req.python + " has no pip (`" + req.python +
        " -m pip --version` fails), which installs them: "
        "install it for that interpreter (Debian: apt-get install python3-pip), or map the "
        "image to an interpreter that has pip (images: in the config)");
  }
  std::string where = req.find_links.empty() ? "a wheelhouse directory (python_packages.wheelhouse)"
                                             : "the wheelhouse " + PathList(req.find_links);
  return FailedPrecondition(
      "requirements " + list + " could not be installed: pip " + how + ":\n" +
      OutputTail(run.output, 6) + "\nFix: put wheels of them and of their dependencies into " +
      where +
      " (`pip download --only-binary=:all: -d DIR REQUIREMENT` where there is network; only "
      "wheels are installed, never built), or set python_packages.index_url (" +
      req.config_hint + "); pip's whole output is in " + (req.cache_dir / (key + ".log")).string());
}

// Finishes the environment pip built in `dir`: root's (built in an image),
// its marker written last. Returns its site and script directories.
Result<PythonEnv> FinishEnv(const PythonEnvRequest& req, const std::string& key,
                            const fs::path& dir, const std::vector<std::string>& requirements) {
  if (req.container) STOKER_RETURN_IF_ERROR(OwnTreeAsRoot(dir));
  std::vector<std::string> site_dirs = FindSiteDirs(dir);
  std::string bin_dir;
  std::error_code ec;
  for (const char* b : {"bin", "local/bin"}) {
    if (fs::is_directory(dir / b, ec)) bin_dir = b;
  }
  json marker = {{"key", key},
                 {"python", req.python},
                 {"requirements", requirements},
                 {"site_dirs", site_dirs},
                 {"bin_dir", bin_dir},
                 {"built_us", NowMicros()}};
  STOKER_RETURN_IF_ERROR(WriteFileAtomic(dir / kMarker, marker.dump(2) + "\n"));
  ::chmod((dir / kMarker).c_str(), 0644);
  PythonEnv env;
  for (const std::string& s : site_dirs) env.site_dirs.push_back(dir / s);
  if (!bin_dir.empty()) env.bin_dir = dir / bin_dir;
  return env;
}

}  // namespace

Result<PythonEnv> EnsurePythonEnv(const PythonEnvRequest& req,
                                  const std::function<bool()>& cancelled) {
  const int64_t start_ms = MonotonicMs();
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> requirements,
                          NormaliseRequirements(req.requirements, ""));
  std::string python_id;
  if (req.container) {
    STOKER_ASSIGN_OR_RETURN(python_id, ImageId(*req.container));
  } else {
    STOKER_ASSIGN_OR_RETURN(python_id, InterpreterId(req.python));
  }
  EnvKeyInputs in{req.python, python_id, requirements, SourcesId(req.find_links, req.index_url)};
  const std::string key = EnvKey(in);
  const fs::path dir = req.cache_dir / key;
  auto done = [&](PythonEnv env, bool built, bool waited) {
    env.key = key;
    env.dir = dir;
    env.requirements = requirements;
    env.built = built;
    env.waited = waited;
    env.elapsed_ms = MonotonicMs() - start_ms;
    return env;
  };
  // The common case, without a lock: a finished environment never changes.
  if (auto env = ReadMarker(dir)) return done(std::move(*env), false, false);

  std::error_code exists_ec;
  if (!fs::is_directory(req.cache_dir, exists_ec)) {
    STOKER_RETURN_IF_ERROR(MakeDirs(req.cache_dir));
    ::chmod(req.cache_dir.c_str(), 0755);  // trainers of every account read environments
  }
  fs::path lock_path = req.cache_dir / (key + ".lock");
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (lock < 0) return Internal("cannot open " + lock_path.string() + ": " + std::strerror(errno));
  const std::string list = "[" + env_text::Join(requirements, ", ") + "]";
  if (req.on_slow) {
    req.on_slow("installing requirements " + list + " (environment " + key.substr(0, 12) + ")");
  }
  bool waited = false;
  STOKER_RETURN_IF_ERROR(WaitForLock(lock, lock_path, cancelled, &waited));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (auto env = ReadMarker(dir)) return done(std::move(*env), false, waited);

  // Whatever is there was left by a builder that died: start afresh.
  STOKER_RETURN_IF_ERROR(RemoveTreeNoFollow(dir));
  if (::mkdir(dir.c_str(), 0755) != 0 || ::chmod(dir.c_str(), 0755) != 0) {
    return Internal("cannot create " + dir.string() + ": " + std::strerror(errno));
  }
  STOKER_ASSIGN_OR_RETURN(CapturedRun run, RunPip(req, key, dir, requirements, cancelled));
  if (run.cancelled) {
    (void)RemoveTreeNoFollow(dir);
    return Status(Code::kCancelled, "cancelled while pip installed requirements " + list);
  }
  if (!WIFEXITED(run.exit_status) || WEXITSTATUS(run.exit_status) != 0) {
    (void)RemoveTreeNoFollow(dir);
    return PipFailed(req, run, list, key);
  }
  STOKER_ASSIGN_OR_RETURN(PythonEnv env, FinishEnv(req, key, dir, requirements));
  return done(std::move(env), true, waited);
}

}  // namespace stoker::runner
