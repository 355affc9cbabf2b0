#include "server/launch_builder.h"

#include <cmath>

#include "auth/auth.h"
#include "common/fnv1a.h"
#include "exec/replica_env.h"
#include "server/job_table.h"

namespace stoker::server {
namespace {

using nlohmann::json;

// The container a replica of an image in the engine's store runs in.
replica::ContainerSpec ContainerFor(const LaunchInputs& in, const exec::Environment& env,
                                    const std::string& replica, const exec::ReplicaCommand& cmd) {
  const store::JobRecord& rec = *in.rec;
  replica::ContainerSpec c;
  c.engine = env.engine;
  c.image = env.container_image;
  c.name = "stoker-" + std::to_string(rec.id) + "-" + std::to_string(rec.attempt) + "-" + replica +
           (in.settings.instance.empty() ? "" : "-" + in.settings.instance);
  // No command: the image's ENTRYPOINT (and its CMD unless args are given).
  if (cmd.command_size > 0) {
    c.entrypoint.emplace(cmd.argv.begin(), cmd.argv.begin() + cmd.command_size);
  }
  c.args.assign(cmd.argv.begin() + cmd.command_size, cmd.argv.end());
  c.mounts.assign(in.settings.container_mounts.begin(), in.settings.container_mounts.end());
  c.mounts_read_only.assign(in.settings.container_mounts_read_only.begin(),
                            in.settings.container_mounts_read_only.end());
  c.binds = in.settings.container_binds;
  c.pull = env.pull;
  c.pull_if_missing = env.pull_if_missing;
  c.tls_verify = !env.insecure_registry;
  c.user_namespace = in.settings.container_user_namespace;
  return c;
}

// Stoker's own variables for a replica (`r`: its allocation entry): the
// attempt, a GPU share's limits, a trial's push URL.
void AddReplicaVariables(const LaunchInputs& in, const json& r,
                         std::map<std::string, std::string>& env) {
  const store::JobRecord& rec = *in.rec;
  // Which attempt this is (1-based) and why it restarted, so that a
  // trainer knows to resume from AIP_CHECKPOINT_DIR (docs/preemption.md).
  env["STOKER_ATTEMPT"] = std::to_string(rec.attempt + 1);
  if (!rec.restart_reason.empty()) env["STOKER_RESTART_REASON"] = rec.restart_reason;
  // A share of one GPU: the trainer is told its share and memory limit.
  // Nothing below CUDA enforces it: PyTorch trainers apply it with
  // torch.cuda.set_per_process_memory_fraction(float(STOKER_GPU_FRACTION));
  // JAX reads XLA_PYTHON_CLIENT_MEM_FRACTION itself (and would otherwise
  // take 75% of the GPU at start).
  for (const json& g : r.value("gpu_shares", json::array())) {
    if (g.value("fraction", 1.0) < 1.0) {
      env["STOKER_GPU_FRACTION"] = Num(g.value("fraction", 1.0));
      env["STOKER_GPU_MEMORY_LIMIT_BYTES"] = std::to_string(g.value("memory_bytes", uint64_t{0}));
      env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = Num(g.value("fraction", 1.0));
    }
  }
  if (rec.study_id != 0 && !in.settings.api_url.empty()) {
    // Trainers in any language may POST measurements here instead of
    // writing the hypertune file.
    env["STOKER_METRICS_URL"] =
        in.settings.api_url + "/v1/projects/" + rec.project + "/locations/" + rec.location +
        "/studies/" + std::to_string(rec.study_id) + "/trials/" + rec.trial_id +
        ":addTrialMeasurement?key=" +
        auth::TrialPushKey(in.settings.push_secret, std::to_string(rec.study_id), rec.trial_id);
  }
}

// Whether a replica asks for a warm start (the job's label, on by default
// for trials) and with what; stoker-run judges whether its command can.
replica::WarmSpec WarmFor(const LaunchInputs& in, const exec::Environment& env) {
  replica::WarmSpec warm;
  if (!in.settings.warm.enabled || env.python.empty() || !env.container_image.empty()) return warm;
  auto label = in.job->labels.find(kWarmStartLabel);
  std::string opt = label == in.job->labels.end() ? "" : label->second;
  if (opt != "true" && (in.rec->study_id == 0 || opt == "false")) return warm;
  warm.requested = true;
  warm.preload = in.settings.warm.preload;
  warm.idle_seconds = in.settings.warm.idle_seconds;
  warm.dir = in.settings.warm.dir;
  warm.zygote = in.settings.warm.zygote;
  warm.python = env.python;
  warm.user = in.rec->user;
  warm.max_per_user = in.settings.warm.max_per_user;
  warm.max_total = in.settings.warm.max_total;
  // The node's start-up variables (the daemon's LANG, LC_ALL): the zygote
  // runs with these, never with a job's.
  for (const auto& [k, v] : env.base_env) {
    if (replica::IsWarmStartupVar(k)) warm.defaults[k] = v;
  }
  return warm;
}

}  // namespace

std::string InstanceTag(const std::string& absolute_data_dir) {
  return Fnv1aHex(absolute_data_dir).substr(0, 8);
}

Result<exec::JobLaunch> BuildJobLaunch(const LaunchInputs& in) {
  const store::JobRecord& rec = *in.rec;
  const spec::CustomJobSpec& spec = in.job->job_spec;
  exec::JobLaunch launch;
  launch.job_id = rec.id;
  launch.user = rec.user;
  launch.attempt = rec.attempt;
  launch.labels = in.job->labels;
  launch.priority = spec.scheduling.priority;
  launch.preemptible = IsPreemptible(*in.job, in.settings.preemption);
  std::map<std::string, const scheduler::ReplicaRequest*> requests;
  for (const scheduler::ReplicaRequest& q : *in.requests) requests[q.name] = &q;

  std::vector<std::vector<std::string>> addresses(spec.worker_pool_specs.size());
  for (const json& r : rec.allocation["replicas"]) {
    int pool = r["pool"].get<int>();
    addresses[pool].push_back("127.0.0.1:" + std::to_string(r["port"].get<int>()));
  }

  for (const json& r : rec.allocation["replicas"]) {
    int pool_index = r["pool"].get<int>();
    exec::ReplicaLaunch rl;
    rl.name = r["name"].get<std::string>();
    const exec::Environment& env = in.environments.at(pool_index);
    exec::ReplicaEnvInput e;
    e.job_id = std::to_string(rec.id);
    e.trial_id = rec.trial_id;
    e.project = rec.project;
    e.location = rec.location;
    e.spec = &spec;
    e.place = {pool_index, r["index"].get<int>(), r["gpus"].get<std::vector<int>>()};
    e.addresses = addresses;
    e.output_dir = in.output_dir;
    auto metric_file = in.metric_files.find(rl.name);
    if (metric_file != in.metric_files.end()) e.metric_file = metric_file->second;
    e.base_env = env.base_env;
    e.python = env.python;
    e.rewrite_uris = in.rewrite_uris;
    STOKER_ASSIGN_OR_RETURN(exec::ReplicaCommand cmd, exec::BuildReplicaCommand(e));
    if (!env.container_image.empty()) {
      rl.container = ContainerFor(in, env, rl.name, cmd);
      if (cmd.argv.empty()) cmd.argv = {env.container_image};  // argv shows the image's command
    }
    rl.argv = std::move(cmd.argv);
    rl.env = std::move(cmd.env);
    rl.cluster = std::move(cmd.cluster);
    rl.gpu_indexes = e.place.gpus;
    AddReplicaVariables(in, r, rl.env);
    rl.packages = in.packages.at(pool_index);
    if (!rl.packages.empty() && !in.settings.python_packages.cache_dir.empty() &&
        !env.python.empty()) {
      // The packages' requirements, which stoker-run reads from them.
      replica::PythonEnvSpec p;
      p.cache_dir = in.settings.python_packages.cache_dir;
      p.python = env.python;
      p.find_links.assign(in.settings.python_packages.wheelhouse.begin(),
                          in.settings.python_packages.wheelhouse.end());
      p.index_url = in.settings.python_packages.index_url;
      rl.python_env = std::move(p);
    }
    rl.timeout_seconds = spec.scheduling.timeout_seconds;
    rl.grace_seconds = in.settings.grace_seconds;
    if (auto q = requests.find(rl.name); q != requests.end()) {
      rl.cpus = q->second->ask.cpus;
      rl.memory_bytes = q->second->ask.memory_bytes;
      rl.machine_type = spec.worker_pool_specs[pool_index].machine_spec.machine_type;
      rl.gpus = static_cast<int>(std::ceil(q->second->ask.gpus));
    }
    rl.log_max_bytes = in.settings.log_max_bytes;
    rl.log_max_files = in.settings.log_max_files;
    rl.telemetry_seconds = in.settings.telemetry_seconds;
    rl.warm = WarmFor(in, env);
    launch.replicas.push_back(std::move(rl));
  }
  return launch;
}

}  // namespace stoker::server
