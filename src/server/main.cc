// stokerd: the Stoker control plane. Builds every component (the one place
// that does) and runs until SIGTERM or SIGINT. Running replicas survive it.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "api/api.h"
#include "auth/auth_store.h"
#include "common/files.h"
#include "common/time.h"
#include "config/config.h"
#include "exec/command.h"
#include "exec/environments.h"
#include "exec/executor_registry.h"
#include "exec/gcs_mounts.h"
#include "exec/image_engine.h"
#include "http/http.h"
#include "resources/nvml.h"
#include "server/controller.h"
#include "server/listen_address.h"
#include "server/webhooks.h"
#include "storage/buckets.h"
#include "store/store.h"

namespace fs = std::filesystem;
using namespace stoker;

namespace {

fs::path ExeDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

// The first of the candidates that exists, or the first one.
// The first candidate that exists (a path we may not even stat counts as
// missing), else the first: the error then names where we looked first.
fs::path FirstExisting(const std::vector<fs::path>& candidates) {
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::exists(p, ec)) return p;
  }
  return candidates.front();
}

// Whether an account other than ours may reach `path`: every directory on
// the way searchable by others (o+x) and `path` itself readable by them.
// (A root daemon's trainers run as other accounts and import Stoker's
// Python helpers from there.)
bool OthersMayRead(const fs::path& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !(st.st_mode & S_IROTH)) return false;
  for (fs::path p = fs::absolute(path).parent_path();; p = p.parent_path()) {
    if (::stat(p.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
    if (p == p.root_path()) return true;
  }
}

int Fail(const std::string& what) {
  std::cerr << "stokerd: " << what << "\n";
  return 1;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The name of the account stokerd runs as: the local default admin.
std::string LocalUserName() {
  std::string name;
  if (passwd* pw = ::getpwuid(::geteuid())) name = pw->pw_name;
  if (!auth::ValidateUserName(name, "").ok()) name = "admin";
  return name;
}

// Which Unix account runs the replicas of a job `user` submitted
// (auth::TrainerAccount, with the name resolved here): nullopt = stokerd's
// own account.
Result<std::optional<exec::RunAs>> TrainerAccountFor(auth::AuthStore& users,
                                                     const auth::TrainerPolicy& policy,
                                                     const std::string& user) {
  std::string mapped;
  if (!user.empty()) {
    if (auto u = users.GetUser(user); u.ok()) mapped = u->unix_user;
  }
  STOKER_ASSIGN_OR_RETURN(std::optional<std::string> account, auth::TrainerAccount(policy, mapped));
  if (!account) return std::optional<exec::RunAs>();
  passwd pw;
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(account->c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return FailedPrecondition(
        "replicas of user '" + user + "' should run as Unix account '" + *account +
        "', which does not exist on this machine; create it, or map the user to another account "
        "(stoker admin users add NAME --unix-user U), or set default_unix_user in the config");
  }
  if (pw.pw_uid == 0 && !policy.allow_root_trainers) {
    return PermissionDenied("replicas would run as '" + *account +
                            "', which has uid 0; set allow_root_trainers: true to allow it");
  }
  exec::RunAs run_as{*account, pw.pw_uid, pw.pw_gid, {}, pw.pw_dir ? pw.pw_dir : ""};
  if (policy.bucket_gid) run_as.extra_gids.push_back(*policy.bucket_gid);
  return std::optional<exec::RunAs>(run_as);
}

// The group whose members may write buckets (config bucket_group), for a
// root daemon whose trainers run as other accounts: looked up, else made
// with groupadd --system. nullopt (buckets stay writable by root alone, and
// a warning says so) when it is off, not needed, or cannot be had.
std::optional<uint32_t> BucketWriterGroup(const std::string& name) {
  if (name.empty() || ::geteuid() != 0) return std::nullopt;
  auto lookup = [&name]() -> std::optional<uint32_t> {
    group gr;
    group* found = nullptr;
    std::vector<char> buf(16384);
    if (::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found) {
      return std::nullopt;
    }
    return gr.gr_gid;
  };
  if (auto gid = lookup()) return gid;
  auto made = exec::RunCommand({"groupadd", "--system", name}, 30, "");
  if (auto gid = lookup()) {
    spdlog::info("made the system group '{}' (gid {}): trainers get it to write buckets", name,
                 *gid);
    return gid;
  }
  spdlog::warn(
      "bucket_group '{}' does not exist and groupadd could not make it ({}): trainers can write "
      "only their own output directories in buckets; create the group or set bucket_group",
      name, made.ok() ? made->err : made.status().message());
  return std::nullopt;
}

// job_isolation (docs/security.md): each trainer's view of the file system
// hides the data dir (token, stoker.db, other jobs' directories) and the TLS
// key, and keeps the buckets, the interpreter links and Stoker's Python
// helpers; the executor adds the job's own directory (and the Slurm one its
// shared dir to what is hidden).
// Mode "off": an empty plan.
exec::IsolationPlan IsolationPlanFor(const config::Config& config, const fs::path& data) {
  exec::IsolationPlan plan;
  // The config loader accepts only the three names.
  auto mode = replica::ParseIsolationMode(config.job_isolation);
  plan.mode = mode.ok() ? *mode : exec::IsolationMode::kOff;
  if (plan.mode == exec::IsolationMode::kOff) {
    spdlog::info("job_isolation: off: trainers can read whatever their account can in {}",
                 data.string());
    return plan;
  }
  plan.hide = {data};
  if (!config.tls_key_file.empty()) plan.hide.push_back(fs::absolute(config.tls_key_file));
  plan.keep = {data / "buckets"};
  for (const auto& [name, dir] : config.buckets) plan.keep.push_back(fs::absolute(dir));
  plan.keep_read_only = {data / "envs", config.python_helpers};
  plan.bind = exec::GcsBinds(data, config.buckets);
  spdlog::info("/gcs: {}", exec::PrepareGcsMountPoints(data, config.buckets));
  for (const config::ImageRule& r : config.images) {
    fs::path python = fs::absolute(r.python).lexically_normal();
    auto rel = python.lexically_relative(data);
    if (r.python != "auto" && !rel.empty() && *rel.begin() != "..") {
      spdlog::warn(
          "images: the interpreter {} of '{}' lies inside the data dir, which trainers "
          "do not see (job_isolation); move that environment out of {}",
          r.python, r.match, data.string());
    }
  }
  return plan;
}

// One daemon per data dir: an exclusive lock on the pid file, held for
// life, and our pid in it. A previous instance that is still exiting (a
// restart right after a kill) holds the lock for a moment: waits up to 10 s.
Result<int> LockPidFile(const fs::path& data) {
  const fs::path file = data / "stokerd.pid";
  int pid_fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  bool locked = pid_fd >= 0 && ::flock(pid_fd, LOCK_EX | LOCK_NB) == 0;
  for (int i = 0; pid_fd >= 0 && !locked && i < 200; ++i) {
    ::usleep(50'000);
    locked = ::flock(pid_fd, LOCK_EX | LOCK_NB) == 0;
  }
  if (!locked) {
    return FailedPrecondition("another stokerd is running on " + data.string() + " (see " +
                              file.string() + ")");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(pid_fd, 0) != 0 || ::write(pid_fd, pid.data(), pid.size()) < 0) {
    return FailedPrecondition("cannot write " + file.string());
  }
  return pid_fd;
}

// The config file (--config, else DATA/config.yaml if there) with the
// command line's overrides and where stoker-run and the Python helpers are.
Result<config::Config> LoadDaemonConfig(const fs::path& data, const std::string& config_path,
                                        const std::string& listen, const std::string& runner) {
  bool explicit_config = !config_path.empty();
  fs::path config_file = explicit_config ? fs::path(config_path) : data / "config.yaml";
  STOKER_ASSIGN_OR_RETURN(config::Config config,
                          config::LoadConfig(data, config_file, explicit_config));
  if (!listen.empty()) config.listen = listen;
  fs::path exe_dir = ExeDir();
  config.runner = !runner.empty()
                      ? fs::path(runner)
                      : FirstExisting({exe_dir / "stoker-run", exe_dir / "../runner/stoker-run"});
  config.python_helpers = FirstExisting(
      {exe_dir / "../share/stoker/python", fs::path(STOKER_SOURCE_DIR) / "src/python"});
  if (::access(config.runner.c_str(), X_OK) != 0) {
    return FailedPrecondition("cannot run stoker-run at " + config.runner.string() + ": " +
                              std::strerror(errno) +
                              "; pass --runner PATH, or install stoker-run beside stokerd where "
                              "this account may run it");
  }
  return config;
}

// This machine: the config's inventory; GPUs declared there, else found
// through NVML.
resources::Node FindNode(const config::Config& config) {
  resources::Node node = config.inventory ? *config.inventory : resources::DetectLocalNode();
  if (!config.inventory || !config.inventory_declares_gpus) {
    std::string why;
    node.gpus = resources::DiscoverGpus(&why);
    if (node.gpus.empty()) spdlog::info("no GPUs found through NVML: {}", why);
    for (const resources::Gpu& g : node.gpus) {
      spdlog::info("GPU {}: {} ({:.1f} GB, {})", g.index, g.type,
                   g.memory_bytes / double(1ull << 30), g.uuid);
    }
  }
  spdlog::info("node {}: {} CPUs, {:.1f} GB, {} GPU(s)", node.name, node.cpus,
               node.memory_bytes / double(1ull << 30), node.gpus.size());
  return node;
}

// Images in the engine's store run in containers (docs/containers.md); what
// the store holds is kept current in the background (exec/image_catalog.h),
// so that admission and launch never run the engine. Returns the catalog
// (null without an engine), which must live as long as `environments`.
Result<std::shared_ptr<exec::ImageCatalog>> UseContainers(const config::Config& config,
                                                          exec::Environments& environments) {
  STOKER_ASSIGN_OR_RETURN(exec::ContainerEngine engine,
                          exec::DetectContainerEngine(config.container_engine));
  spdlog::info("containers: {}", engine.usable() ? engine.name + ": " + engine.why : engine.why);
  environments.UseEngine(engine);
  std::shared_ptr<exec::ImageCatalog> catalog;
  if (engine.usable()) {
    catalog = std::make_shared<exec::ImageCatalog>(exec::MakeCommandImageEngine(engine));
    catalog->Start();
    environments.UseCatalog(catalog);
  }
  environments.UsePulls(config.container_pull, config.insecure_registries);
  return catalog;
}

// Says which accounts run trainers when the daemon is root, and warns when
// they cannot read the Python helpers.
void LogTrainerPolicy(const auth::TrainerPolicy& policy, const config::Config& config) {
  if (!policy.daemon_is_root) return;
  spdlog::info(
      "stokerd runs as root: replicas run as their user's unix_user, else as '{}' "
      "(default_unix_user){}",
      policy.default_unix_user,
      policy.allow_root_trainers ? "; root allowed (allow_root_trainers)" : "");
  if (!OthersMayRead(config.python_helpers)) {
    spdlog::warn(
        "trainers running as other accounts cannot read Stoker's Python helpers in {} "
        "(a directory on the way is not searchable by others), so 'import hypertune' fails "
        "in them; install Stoker under a prefix others can read (or chmod o+rx the path)",
        config.python_helpers.string());
  }
}

// Bearer tokens must not cross the network in the clear: plain HTTP only on
// loopback unless the config says a TLS proxy is in front.
Status CheckPlainHttp(const config::Config& config, const std::string& host, const fs::path& data) {
  if (!config.tls_cert_file.empty() || IsLoopbackHost(host) || config.allow_insecure_http) {
    return OkStatus();
  }
  return FailedPrecondition(
      "refusing to serve plain HTTP on " + config.listen +
      ", which is not a loopback address: bearer tokens would cross the network in the "
      "clear. Set tls_cert_file and tls_key_file in " +
      (config.config_file.empty() ? (data / "config.yaml").string() : config.config_file.string()) +
      " (see docs/security.md), listen on 127.0.0.1, or set allow_insecure_http: true "
      "behind a TLS-terminating proxy");
}

// Where trainers on this machine reach the API (to push metrics): the
// bound address, with a wildcard host replaced by loopback.
std::string TrainerApiUrl(const std::string& scheme, const std::string& host, int port) {
  std::string h = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return scheme + h + ":" + std::to_string(port);
}

// The accounts database, the local admin's token (written at the first
// start) and the secret behind trial push keys (into `config`).
Result<std::unique_ptr<auth::AuthStore>> OpenUsers(const fs::path& data, config::Config& config) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<auth::AuthStore> users,
                          auth::AuthStore::Open(data / "stoker.db"));
  STOKER_ASSIGN_OR_RETURN(bool wrote_token,
                          auth::EnsureLocalAdmin(*users, LocalUserName(), data / "token"));
  if (wrote_token) {
    spdlog::info("wrote the token of local admin '{}' to {} (mode 0600)", LocalUserName(),
                 (data / "token").string());
  }
  STOKER_ASSIGN_OR_RETURN(config.push_secret, users->PushSecret());
  return users;
}

// The image rules (the config's, then the built-in ones) and the
// interpreters they name, checked in the background.
std::unique_ptr<exec::Environments> MakeEnvironments(const config::Config& config,
                                                     const fs::path& data) {
  std::vector<exec::ImageMatch> rules;
  for (const config::ImageRule& r : config.images)
    rules.push_back({r.match, r.python, r.framework});
  auto environments = std::make_unique<exec::Environments>(
      rules, data / "envs", config.python_helpers, config.config_file.string(),
      data / "cache" / "interpreters.json");
  environments->CheckInterpretersInBackground();
  spdlog::info("trainers for Vertex prebuilt images run with {} ({})", environments->auto_python(),
               environments->auto_reason());
  return environments;
}

// The executor the config names, built by the registry with everything it
// needs. `users` must outlive it.
Result<std::unique_ptr<exec::Executor>> MakeExecutor(const config::Config& config,
                                                     const fs::path& data, auth::AuthStore& users,
                                                     const auth::TrainerPolicy& policy) {
  exec::ExecutorConfig executor_config;
  executor_config.kind = config.executor;
  executor_config.data_dir = data;
  executor_config.runner = fs::absolute(config.runner);
  executor_config.trainer_accounts = [&users, policy](const std::string& user) {
    return TrainerAccountFor(users, policy, user);
  };
  executor_config.isolation = IsolationPlanFor(config, data);
  executor_config.slurm = config.slurm;  // the `slurm:` section's keys; the registry the rest
  return exec::ExecutorRegistry::WithBuiltins().Create(executor_config);
}

// The API's HTTP server for `deps`, listening on config.listen (TLS when
// configured); `url` gets the address it serves, config.api_url where
// trainers on this machine reach it.
Result<std::unique_ptr<http::Server>> ListenForApi(const api::ApiDeps& deps, config::Config& config,
                                                   const fs::path& data, std::string& url) {
  // Object uploads and package staging stream through the router, outside
  // the server's body limit (which stays for JSON requests).
  api::ApiHandlers handlers = api::MakeHandlers(deps);
  http::ServerOptions server_options;
  server_options.stream_router = std::move(handlers.stream_router);
  auto server =
      std::make_unique<http::Server>(std::move(handlers.handler), std::move(server_options));
  STOKER_ASSIGN_OR_RETURN(std::vector<server::ListenAddress> candidates,
                          server::ParseListenList(config.listen));
  for (const server::ListenAddress& a : candidates) {
    STOKER_RETURN_IF_ERROR(CheckPlainHttp(config, a.host, data));
  }
  const bool tls = !config.tls_cert_file.empty();
  if (tls) STOKER_RETURN_IF_ERROR(server->EnableTls(config.tls_cert_file, config.tls_key_file));
  int port = 0;
  auto chosen = server::BindFirstFree(
      candidates,
      [&](const server::ListenAddress& a) -> Status {
        auto bound = server->Listen(a.host, a.port);
        if (!bound.ok()) return bound.status();
        port = *bound;
        return OkStatus();
      },
      [](const std::string& note) { spdlog::warn("listen: {}", note); });
  if (!chosen.ok()) {
    return FailedPrecondition("cannot listen on " + config.listen + ": " +
                              chosen.status().message());
  }
  const std::string& host = candidates[*chosen].host;
  const std::string scheme = tls ? "https://" : "http://";
  url = scheme + server::ListenAddress{host, port}.ToString();
  config.api_url = TrainerApiUrl(scheme, host, port);
  return server;
}

// At a clean stop: no address file, and the pid file emptied while still
// holding its lock (removing it could let two daemons lock different
// files): no stale pid for a later `kill`.
void ReleaseDataDir(const fs::path& data, int pid_fd) {
  std::error_code ec;
  fs::remove(data / "stokerd.addr", ec);
  if (::ftruncate(pid_fd, 0) != 0) spdlog::warn("cannot empty {}", (data / "stokerd.pid").string());
}

// Blocks the stop signals before any thread starts (the image catalog's
// start early); main waits for one at the end: a thread made with them open
// would take a SIGTERM and end the daemon without its clean stop. One that
// comes during the start is taken once it is done. Every child sets its own
// mask before exec. Returns the set to wait on.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

}  // namespace

int main(int argc, char** argv) {
  sigset_t stop_signals = BlockStopSignals();
  CLI::App app{"stokerd: the Stoker training service daemon"};
  // launch.json and the replica directories are believed by stoker-run only
  // while no other account may write them: never looser than 022.
  ::umask(::umask(0) | 022);
  std::string data_dir = DefaultStokerHome().string();
  std::string listen;
  std::string config_path;
  std::string runner;
  app.add_option("--data-dir", data_dir, "Where the store, buckets and job files live")
      ->capture_default_str();
  app.add_option("--listen", listen,
                 "HOST:PORT to serve the API on (port 0 picks a free one; several, "
                 "comma-separated: the first free)");
  app.add_option("--config", config_path, "Config file (default: DATA_DIR/config.yaml)");
  app.add_option("--runner", runner, "The stoker-run binary (default: beside stokerd)");
  CLI11_PARSE(app, argc, argv);

  fs::path data = fs::absolute(data_dir);
  if (Status s = MakeDirs(data); !s.ok()) return Fail(s.message());
  Result<int> pid_fd = LockPidFile(data);
  if (!pid_fd.ok()) return Fail(pid_fd.status().message());
  auto config = LoadDaemonConfig(data, config_path, listen, runner);
  if (!config.ok()) return Fail(config.status().message());

  auto store = store::Store::Open(data);
  if (!store.ok()) return Fail(store.status().message());
  // No daemon secret may reach a trainer (they inherit nothing of our
  // environment, but make sure): the CLI's token variable goes first.
  ::unsetenv("STOKER_TOKEN");
  auto users = OpenUsers(data, *config);
  if (!users.ok()) return Fail(users.status().message());

  resources::Node node = FindNode(*config);
  std::unique_ptr<exec::Environments> environments = MakeEnvironments(*config, data);
  auto catalog = UseContainers(*config, *environments);
  if (!catalog.ok()) return Fail(catalog.status().message());

  std::optional<uint32_t> bucket_gid = BucketWriterGroup(config->bucket_group);
  storage::Buckets buckets(data, config->buckets, bucket_gid);
  if (auto shared = buckets.ShareWithWriters(); shared.ok() && *shared > 0) {
    spdlog::info("made {} bucket directories and objects writable by group '{}'", *shared,
                 config->bucket_group);
  }
  // One rule for both executors: which account runs a job's trainers.
  auth::TrainerPolicy policy{::geteuid() == 0, config->default_unix_user,
                             config->allow_root_trainers, bucket_gid};
  LogTrainerPolicy(policy, *config);
  auto made = MakeExecutor(*config, data, **users, policy);
  if (!made.ok()) return Fail(made.status().message());
  std::unique_ptr<exec::Executor> executor = std::move(*made);
  admission::Admission admission(
      {.buckets = &buckets,
       .environments = environments.get(),
       .node = &node,
       .policy = {config->cpu_oversubscription, config->accelerator_substitution},
       .machine_types = config->machine_types,
       .executor_places_replicas = executor->PlacesReplicas()});
  cost::NodeShape shape{.cpus = node.cpus};
  for (const resources::Gpu& gpu : node.gpus) shape.gpu_types.push_back(gpu.type);
  cost::Accountant accountant(*store->get(), config->catalog, shape, SystemClock());
  accountant.StartRefresher();  // budget states off the submit path and the control loop
  // GET /metrics: what the control loop and the HTTP handler count.
  metrics::DaemonMetrics daemon_metrics;
  server::Controller controller(
      {.config = &*config,
       .node = &node,
       .store = store->get(),
       .executor = executor.get(),
       .buckets = &buckets,
       .environments = environments.get(),
       .admission = &admission,
       .accountant = &accountant,
       // GPUs found through NVML are sampled for the node's gauges;
       // declared ones are not the physical GPUs of that index.
       .sample_gpus = config->inventory_declares_gpus
                          ? std::function<std::vector<resources::GpuUsage>()>()
                          : [] { return resources::QueryGpuUsage(); },
       .metrics = &daemon_metrics});

  server::WebhookSender webhooks(*store->get(), config->webhooks, SystemClock());
  api::ApiDeps deps{store->get(), &buckets,     &admission,          executor.get(),
                    &controller,  users->get(), config->push_secret, &accountant};
  deps.daemon_metrics = &daemon_metrics;
  deps.tls = !config->tls_cert_file.empty();
  deps.auth_policy = config->auth;
  deps.trainer_policy = policy;
  api::console::SignInLinks signin_links(NowMicros);
  deps.signin_links = &signin_links;
  ::signal(SIGPIPE, SIG_IGN);
  // Detached supervisors re-parent to us rather than to init while we run, so
  // the controller reaps them even where init does not (containers).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::string url;
  auto http_server = ListenForApi(deps, *config, data, url);
  if (!http_server.ok()) return Fail(http_server.status().message());
  if (Status s = controller.Start(); !s.ok()) return Fail(s.message());
  webhooks.Start();
  (*http_server)->Start();
  if (Status s = WriteFileAtomic(data / "stokerd.addr", url + "\n"); !s.ok())
    return Fail(s.message());
  spdlog::info("stokerd serving {} with data in {}", url, data.string());

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("stopping on signal {}; running replicas keep running", sig);
  (*http_server)->Stop();
  controller.Stop();
  webhooks.Stop();  // what is not delivered stays in the outbox for the next start
  ReleaseDataDir(data, *pid_fd);
  return 0;
}
