#include "exec/replica_env.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace stoker::exec {
namespace {

using nlohmann::json;

std::string JoinPath(const std::string& dir, const std::string& leaf) {
  if (dir.empty()) return "";
  std::string d = dir;
  if (d.back() != '/') d += '/';
  return d + leaf + "/";
}

}  // namespace

std::optional<std::string> ExpandVars(const std::string& text,
                                      const std::map<std::string, std::string>& vars,
                                      size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (size_t i = 0; i < text.size();) {
    if (out.size() > max_bytes) return std::nullopt;
    if (text.compare(i, 3, "$$(") == 0) {
      out += "$(";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "$(") == 0) {
      size_t close = text.find(')', i + 2);
      if (close != std::string::npos) {
        std::string name = text.substr(i + 2, close - i - 2);
        auto it = vars.find(name);
        if (it != vars.end()) {
          if (out.size() + it->second.size() > max_bytes) return std::nullopt;
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

Result<ReplicaCommand> BuildReplicaCommand(const ReplicaEnvInput& in) {
  const spec::CustomJobSpec& spec = *in.spec;
  const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[in.place.pool];
  auto rewrite = [&](const std::string& s) { return in.rewrite_uris ? in.rewrite_uris(s) : s; };

  ReplicaCommand cmd;
  std::map<std::string, std::string>& env = cmd.env;
  env = in.base_env;

  // Job description as the prebuilt images' runner sees it (a JSON string).
  json job_desc = {
      {"python_module", ""}, {"package_uris", json::array()}, {"job_args", json::array()}};
  if (pool.python_package_spec) {
    job_desc["python_module"] = pool.python_package_spec->python_module;
    job_desc["package_uris"] = pool.python_package_spec->package_uris;
    job_desc["job_args"] = pool.python_package_spec->args;
  } else if (pool.container_spec) {
    job_desc["job_args"] = pool.container_spec->args;
  }

  cmd.cluster = {in.place.pool, in.place.index, in.trial_id, job_desc.dump()};
  STOKER_ASSIGN_OR_RETURN(auto cluster_env, replica::ClusterEnv(in.addresses, cmd.cluster));
  for (auto& [k, v] : cluster_env) env[k] = std::move(v);

  std::string gpus;
  for (int g : in.place.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  env["CUDA_VISIBLE_DEVICES"] = gpus;  // empty: no GPU for this replica
  // GPU indexes are NVML's, which are PCI bus order; make CUDA count the same way.
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";

  if (!in.output_dir.empty()) {
    env["AIP_MODEL_DIR"] = JoinPath(in.output_dir, "model");
    env["AIP_CHECKPOINT_DIR"] = JoinPath(in.output_dir, "checkpoints");
    env["AIP_TENSORBOARD_LOG_DIR"] = JoinPath(in.output_dir, "logs");
  }
  env["CLOUD_ML_JOB_ID"] = in.job_id;
  if (!in.trial_id.empty()) env["CLOUD_ML_TRIAL_ID"] = in.trial_id;
  env["CLOUD_ML_PROJECT_ID"] = in.project;
  env["CLOUD_ML_REGION"] = in.location;
  env["CLOUD_ML_HP_METRIC_FILE"] = in.metric_file;

  const std::vector<spec::EnvVar>& spec_env =
      pool.python_package_spec ? pool.python_package_spec->env : pool.container_spec->env;
  const std::string spec_path = "jobSpec.workerPoolSpecs[" + std::to_string(in.place.pool) + "]." +
                                (pool.python_package_spec ? "pythonPackageSpec" : "containerSpec");
  // Submission checked the sizes with the service variables unknown; their
  // real values can make the expansion larger, so it is bounded again here.
  auto too_long = [&](const std::string& field) {
    return InvalidArgument(field + ": longer than " + std::to_string(kMaxExpandedBytes) +
                           " bytes after $(VAR) expansion (Linux's MAX_ARG_STRLEN); reference "
                           "fewer or smaller variables");
  };
  for (size_t i = 0; i < spec_env.size(); ++i) {
    std::optional<std::string> v = ExpandVars(spec_env[i].value, env, kMaxExpandedBytes);
    if (!v)
      return too_long(spec_path + ".env[" + std::to_string(i) + "] (" + spec_env[i].name + ")");
    env[spec_env[i].name] = rewrite(*v);
  }

  auto expand_all = [&](const std::vector<std::string>& in_args, const char* name,
                        std::vector<std::string>& out) -> Status {
    for (size_t i = 0; i < in_args.size(); ++i) {
      std::optional<std::string> v = ExpandVars(in_args[i], env, kMaxExpandedBytes);
      if (!v) return too_long(spec_path + "." + name + "[" + std::to_string(i) + "]");
      out.push_back(rewrite(*v));
    }
    return OkStatus();
  };
  if (pool.python_package_spec) {
    cmd.argv = {in.python, "-m", pool.python_package_spec->python_module};
    cmd.command_size = cmd.argv.size();
    STOKER_RETURN_IF_ERROR(expand_all(pool.python_package_spec->args, "args", cmd.argv));
  } else {
    STOKER_RETURN_IF_ERROR(expand_all(pool.container_spec->command, "command", cmd.argv));
    cmd.command_size = cmd.argv.size();
    STOKER_RETURN_IF_ERROR(expand_all(pool.container_spec->args, "args", cmd.argv));
  }
  size_t total = 0;
  for (const std::string& a : cmd.argv) total += a.size() + 1;
  for (const auto& [k, v] : env) total += k.size() + v.size() + 2;
  if (total > kMaxCommandBytes) {
    return InvalidArgument(spec_path + ": command, args and env take " + std::to_string(total) +
                           " bytes after $(VAR) expansion; at most " +
                           std::to_string(kMaxCommandBytes) + " (one execve's ARG_MAX)");
  }
  return cmd;
}

}  // namespace stoker::exec
