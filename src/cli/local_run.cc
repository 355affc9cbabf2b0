// `stoker ai custom-jobs local-run`: gcloud's command for trying a trainer
// before submitting it. gcloud builds a container from the executor image
// with the package in it and runs it in the foreground; here the executor
// image maps to a local interpreter through the same rules a job's replica
// gets (the `images:` rules of $STOKER_HOME/config.yaml over the built-in
// ones, exec/environments.h), the requirements are installed into a cached
// environment under $STOKER_HOME/envs/pip (runner/python_env.h), and the
// trainer runs in the package directory in the foreground, replacing this
// process.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/local_run_container.h"
#include "common/files.h"
#include "config/config.h"
#include "exec/environments.h"
#include "exec/gcs_mounts.h"
#include "replica/launch.h"
#include "runner/python_env.h"
#include "storage/buckets.h"

extern char** environ;

namespace stoker::cli {

namespace fs = std::filesystem;

namespace {

// Stoker's Python helpers (hypertune), installed or in the source tree.
fs::path PythonHelpers() {
  std::error_code ec;
  fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (const fs::path& p :
       {exe_dir / "../share/stoker/python", fs::path(STOKER_SOURCE_DIR) / "src/python"}) {
    if (fs::is_directory(p, ec)) return p;
  }
  return {};
}

// Writes `text` to the /proc file `path`; false on failure.
bool WriteProc(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// The buckets at /gcs/BUCKET, as a job's trainer sees them (exec/gcs_mounts.h),
// in a mount namespace of this process's own (a user namespace mapping only
// this account first, when not root). Only where the host has /gcs to mount
// on; best effort: says on stderr what the trainer gets.
void ShowBucketsAtGcs(const fs::path& home, const config::Config& config) {
  std::error_code ec;
  if (!fs::is_directory(exec::kGcsRoot, ec)) {
    std::cerr << "local-run: no /gcs on this host (a root stokerd makes it); use gs:// paths\n";
    return;
  }
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  bool ok = uid == 0 ? ::unshare(CLONE_NEWNS) == 0
                     : ::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 &&
                           WriteProc("/proc/self/setgroups", "deny") &&
                           WriteProc("/proc/self/uid_map",
                                     std::to_string(uid) + " " + std::to_string(uid) + " 1\n") &&
                           WriteProc("/proc/self/gid_map",
                                     std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
  ok = ok && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  for (const replica::BindSpec& b : exec::GcsBinds(home, config.buckets)) {
    if (!ok) break;
    if (!fs::is_directory(b.source, ec)) continue;
    ok = ::mount(b.source.c_str(), b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
  }
  if (ok) {
    std::cerr << "local-run: the buckets of " << (home / "buckets").string() << " at /gcs\n";
  } else {
    std::cerr << "local-run: no /gcs for the trainer (" << std::strerror(errno)
              << "); use gs:// paths\n";
  }
}

// The requirements (--requirements and what the package declares) in a
// cached environment under $STOKER_HOME/envs/pip, from the configured
// wheelhouse or index, for `python` (or, with `image`, the image's own
// Python); nullopt when there are none.
Result<std::optional<runner::PythonEnv>> RequirementEnv(
    const LocalRunFlags& f, const fs::path& package, const fs::path& home,
    const config::Config& config, const std::string& python,
    std::optional<runner::PythonEnvRequest::Image> image) {
  runner::DeclaredRequirements declared = runner::ReadDeclaredRequirements(package);
  if (!declared.note.empty())
    std::cerr << "WARNING: " << package.string() << ": " << declared.note << "\n";
  std::vector<std::string> requirements = declared.requirements;
  requirements.insert(requirements.end(), f.requirements.begin(), f.requirements.end());
  if (requirements.empty()) return std::optional<runner::PythonEnv>();
  STOKER_RETURN_IF_ERROR(runner::NormaliseRequirements(requirements, "--requirements: ").status());
  runner::PythonEnvRequest req;
  req.cache_dir = home / "envs" / "pip";
  req.python = python;
  req.container = std::move(image);
  req.find_links = config.python_packages.wheelhouse;
  req.index_url = config.python_packages.index_url;
  req.requirements = requirements;
  req.config_hint = "python_packages in " + (home / "config.yaml").string();
  std::cerr << "local-run: installing requirements with "
            << (req.container ? "the Python of image " + req.container->image : python) << " ...\n";
  STOKER_ASSIGN_OR_RETURN(runner::PythonEnv built, runner::EnsurePythonEnv(req, nullptr));
  std::cerr << "local-run: " << runner::DescribePythonEnv(built) << "\n";
  return std::optional<runner::PythonEnv>(std::move(built));
}

// local-run in the executor image: the package mounted at its own path as
// the working directory, the command python3 SCRIPT or -m MODULE with ARGS.
// Requirements are installed by the image's own pip (as for a job's
// container), after a pull of an image the engine lacks.
int RunInContainer(const LocalRunFlags& f, const fs::path& package, const fs::path& home,
                   const config::Config& config, const exec::ContainerEngine& engine,
                   const exec::Environment& env) {
  runner::ContainerSpec image;
  image.engine = engine.path;
  image.image = env.container_image;
  image.tls_verify = !env.insecure_registry;
  if (env.pull) {
    std::cerr << "local-run: pulling " << env.container_image << " ...\n";
    // The user's own engine, with the user's own settings.
    std::vector<std::string> user_env;
    for (char** e = environ; *e != nullptr; ++e) user_env.emplace_back(*e);
    auto pulled = runner::RunCapturing(runner::ContainerPullArgv(image), user_env, "/", nullptr);
    if (!pulled.ok()) return Report(pulled.status());
    if (!WIFEXITED(pulled->exit_status) || WEXITSTATUS(pulled->exit_status) != 0) {
      return Report(FailedPrecondition("--executor-image-uri: " + engine.name + " could not pull " +
                                       env.container_image + ": " +
                                       runner::OutputTail(pulled->output, 3) +
                                       "\nFix: check the name and tag, or "
                                       "build it with `stoker images build -t " +
                                       env.container_image + " DIR`"));
    }
  }
  auto requirement_env =
      RequirementEnv(f, package, home, config, "python3",
                     runner::PythonEnvRequest::Image{engine.path, env.container_image,
                                                     runner::ContainerUlimitFlags()});
  if (!requirement_env.ok()) return Report(requirement_env.status());
  LocalContainerRun run;
  run.image = env.container_image;
  run.pull = env.pull;
  run.insecure_registry = env.insecure_registry;
  run.package = package;
  run.gpu = f.gpu;
  const bool entrypoint = f.script.empty() && f.python_module.empty();
  if (entrypoint) {
    run.image_args = f.args;  // `docker run IMAGE ARGS`: the image's ENTRYPOINT
  } else {
    run.command = {"python3"};
    if (!f.script.empty()) {
      run.command.push_back(f.script);
    } else {
      run.command.insert(run.command.end(), {"-m", f.python_module});
    }
    run.command.insert(run.command.end(), f.args.begin(), f.args.end());
  }
  run.env["PYTHONPATH"] = package.string();
  if (*requirement_env) {
    std::string dirs;
    for (const fs::path& d : (*requirement_env)->site_dirs) dirs += d.string() + ":";
    run.env["PYTHONPATH"] = dirs + package.string();
    run.read_only.push_back((*requirement_env)->dir);
  }
  run.env["PYTHONUNBUFFERED"] = "1";
  if (!f.gpu) run.env["CUDA_VISIBLE_DEVICES"] = "";
  if (!f.service_account_key_file.empty()) {
    std::error_code ec;
    fs::path key = fs::absolute(f.service_account_key_file, ec);
    run.env["GOOGLE_APPLICATION_CREDENTIALS"] = key.string();
    run.read_only.push_back(key);
  }
  if (entrypoint) {
    std::cerr << "local-run: the ENTRYPOINT of " << env.container_image << " (" << engine.name
              << "), " << package.string() << " mounted at its own path\n";
  } else {
    std::cerr << "local-run: " << (f.script.empty() ? "-m " + f.python_module : f.script) << " in "
              << package.string() << " in a container of " << env.container_image << " ("
              << engine.name << ")\n";
  }
  return ExecLocalContainer(engine, run);
}

// Checks local-run's flags before anything runs; returns the package's
// directory (absolute): --local-package-path, else the working directory.
// InvalidArgument naming the flag.
Result<fs::path> CheckLocalRunFlags(const LocalRunFlags& f) {
  // Neither: the image's own ENTRYPOINT, for an image in the engine's store.
  if (!f.script.empty() && !f.python_module.empty()) {
    return InvalidArgument(
        "--script, --python-module: give one, e.g. --script=trainer/task.py or "
        "--python-module=trainer.task (or neither, to run the image's ENTRYPOINT)");
  }
  std::error_code ec;
  fs::path package =
      f.local_package_path.empty() ? fs::current_path(ec) : fs::path(f.local_package_path);
  if (!fs::is_directory(package, ec)) {
    return InvalidArgument("--local-package-path: " + package.string() +
                           " is not a directory; give the trainer's directory");
  }
  package = fs::absolute(package, ec);
  if (!f.script.empty() && !fs::is_regular_file(package / f.script, ec)) {
    return InvalidArgument("--script: " + f.script + " is not a file in " + package.string() +
                           "; give a path relative to it");
  }
  if (!f.extra_packages.empty()) {
    return InvalidArgument(
        "--extra-packages: local-run installs nothing; install them into the interpreter "
        "(pip install ARCHIVE) or submit a job with them in packageUris");
  }
  if (!f.service_account_key_file.empty() && !fs::is_regular_file(f.service_account_key_file, ec)) {
    return InvalidArgument("--service-account-key-file: " + f.service_account_key_file +
                           " is not a file");
  }
  return package;
}

}  // namespace

int AiCustomJobsLocalRun(const Globals&, const LocalRunFlags& f) {
  auto checked = CheckLocalRunFlags(f);
  if (!checked.ok()) return Report(checked.status());
  const fs::path package = *checked;
  std::error_code ec;

  fs::path home = DefaultStokerHome();
  auto config = config::LoadConfig(home, home / "config.yaml", /*file_is_explicit=*/false);
  if (!config.ok()) return Report(config.status());
  std::vector<exec::ImageMatch> rules;
  for (const config::ImageRule& r : config->images)
    rules.push_back({r.match, r.python, r.framework});
  exec::Environments environments(rules, home / "envs", PythonHelpers(),
                                  config->config_file.string());
  // An image in the engine's store runs in a container, as a job's would.
  auto engine = exec::DetectContainerEngine(config->container_engine);
  if (!engine.ok()) return Report(engine.status());
  environments.UseEngine(*engine);
  environments.UsePulls(config->container_pull, config->insecure_registries);
  auto env = environments.ForImage(f.executor_image_uri, "--executor-image-uri");
  if (!env.ok()) return Report(env.status());
  if (!env->container_image.empty())
    return RunInContainer(f, package, home, *config, *engine, *env);
  if (f.script.empty() && f.python_module.empty()) {
    return Report(InvalidArgument(
        "--script, --python-module: give one, e.g. --python-module=trainer.task: image " +
        f.executor_image_uri + " runs with a local interpreter here (" + env->note +
        "), which has no ENTRYPOINT to run; to run an image's own ENTRYPOINT, build it "
        "(`stoker images build -t " +
        f.executor_image_uri + " DIR`) or pull it"));
  }

  // The requirements (--requirements and what the package declares) go
  // into the same kind of cached environment a job's replica gets.
  auto requirement_env = RequirementEnv(f, package, home, *config, env->python, std::nullopt);
  if (!requirement_env.ok()) return Report(requirement_env.status());
  std::vector<fs::path> requirement_dirs;
  fs::path requirement_bin;
  if (*requirement_env) {
    requirement_dirs = (*requirement_env)->site_dirs;
    requirement_bin = (*requirement_env)->bin_dir;
  }

  // The user's environment, with the job's interpreter first on PATH and the
  // package importable; without --gpu the trainer sees no GPU, as in
  // gcloud's container.
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env->base_env) {
    if (k == "HOME" || k == "USER" || k == "LOGNAME") continue;
    vars[k] = v;
  }
  std::string python_path;
  for (const fs::path& d : requirement_dirs) python_path += d.string() + ":";
  vars["PYTHONPATH"] = python_path + package.string() +
                       (env->base_env.count("PYTHONPATH") ? ":" + env->base_env["PYTHONPATH"] : "");
  if (!requirement_bin.empty()) vars["PATH"] += ":" + requirement_bin.string();
  if (!f.gpu) vars["CUDA_VISIBLE_DEVICES"] = "";
  if (!f.service_account_key_file.empty()) {
    vars["GOOGLE_APPLICATION_CREDENTIALS"] = fs::absolute(f.service_account_key_file, ec).string();
  }

  std::vector<std::string> args = {env->python};
  if (!f.script.empty()) {
    args.push_back(f.script);
  } else {
    args.push_back("-m");
    args.push_back(f.python_module);
  }
  // gs:// arguments name the local buckets' files, as a job's replica sees
  // them (storage::RewriteGsUris: buckets that do not exist stay as written).
  storage::Buckets buckets(home, config->buckets);
  for (const std::string& a : f.args) {
    std::string mapped = storage::RewriteGsUris(a, buckets);
    if (mapped != a) std::cerr << "local-run: " << a << " -> " << mapped << "\n";
    args.push_back(std::move(mapped));
  }
  std::cerr << "local-run: " << (f.script.empty() ? "-m " + f.python_module : f.script) << " in "
            << package.string() << " with " << env->python << " (the interpreter of "
            << f.executor_image_uri << "; no container)\n";

  ShowBucketsAtGcs(home, *config);
  if (::chdir(package.c_str()) != 0) {
    return Report(Internal("cannot enter " + package.string() + ": " + std::strerror(errno)));
  }
  std::vector<std::string> env_text;
  for (const auto& [k, v] : vars) env_text.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  ::execve(env->python.c_str(), argv.data(), envp.data());
  return Report(FailedPrecondition("cannot run " + env->python + ": " + std::strerror(errno)));
}

}  // namespace stoker::cli
