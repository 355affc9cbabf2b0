#include "runner/slurm_task.h"

#include <nlohmann/json.hpp>

namespace stoker::runner {
namespace {

using nlohmann::json;

// Pool index of "workerpool<P>-<I>" and its index; false if not that form.
bool SplitReplicaName(const std::string& name, int* pool, int* index) {
  return std::sscanf(name.c_str(), "workerpool%d-%d", pool, index) == 2;
}

// The node (host) that runs task `t` with block distribution.
Result<std::string> HostOfTask(const SlurmTask& task, int t) {
  int first = 0;
  for (size_t n = 0; n < task.tasks_per_node.size() && n < task.hosts.size(); ++n) {
    if (t < first + task.tasks_per_node[n]) return task.hosts[n];
    first += task.tasks_per_node[n];
  }
  return InvalidArgument("SLURM_STEP_TASKS_PER_NODE: places only " + std::to_string(first) +
                         " tasks on " + std::to_string(task.hosts.size()) + " node(s); task " +
                         std::to_string(t) + " has none");
}

// Rewrites the address lists of `cluster` (role -> [host:port]) for the pools
// that `role_pool` maps each role to.
Status RewriteCluster(json& cluster, const std::map<std::string, int>& role_pool,
                      const std::map<std::pair<int, int>, std::string>& address,
                      const std::string& var) {
  if (!cluster.is_object()) return InvalidArgument(var + ": \"cluster\" is not an object");
  for (auto& [role, list] : cluster.items()) {
    int pool = -1;
    if (auto it = role_pool.find(role); it != role_pool.end()) pool = it->second;
    if (pool < 0 || !list.is_array()) {
      return InvalidArgument(var + ": unexpected cluster entry '" + role + "'");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      auto a = address.find({pool, static_cast<int>(i)});
      if (a == address.end()) {
        return InvalidArgument(var + ": " + role + "[" + std::to_string(i) +
                               "] has no Slurm task (slurm.json lists fewer replicas)");
      }
      list[i] = a->second;
    }
  }
  return OkStatus();
}

}  // namespace

int SlurmBasePort(int64_t job_id) { return 20000 + static_cast<int>(job_id % 20000); }

Result<std::vector<int>> ParseTasksPerNode(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int count = 0, repeat = 1;
    char close = 0;
    int fields = std::sscanf(item.c_str(), "%d(x%d%c", &count, &repeat, &close);
    bool ok = (fields == 1 && item.find('(') == std::string::npos) || (fields == 3 && close == ')');
    if (!ok || count < 0 || repeat < 1) {
      return InvalidArgument("SLURM_STEP_TASKS_PER_NODE: cannot read '" + text + "'");
    }
    out.insert(out.end(), repeat, count);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) return InvalidArgument("SLURM_STEP_TASKS_PER_NODE: empty");
  return out;
}

Result<std::string> SlurmReplica(const SlurmTask& task, const std::vector<std::string>& replicas) {
  if (task.ntasks != static_cast<int>(replicas.size())) {
    return InvalidArgument("SLURM_STEP_NUM_TASKS: the step has " + std::to_string(task.ntasks) +
                           " tasks but slurm.json lists " + std::to_string(replicas.size()) +
                           " replicas; run one task per replica");
  }
  if (task.procid < 0 || task.procid >= task.ntasks) {
    return InvalidArgument("SLURM_PROCID: " + std::to_string(task.procid) + " is not below " +
                           std::to_string(task.ntasks));
  }
  return replicas[task.procid];
}

Result<std::map<std::string, std::string>> SlurmTaskEnv(
    const std::map<std::string, std::string>& env, const std::vector<std::string>& replicas,
    const SlurmTask& task) {
  STOKER_RETURN_IF_ERROR(SlurmReplica(task, replicas).status());
  int port = SlurmBasePort(task.job_id);
  std::map<std::pair<int, int>, std::string> address;  // (pool, index) -> host:port
  for (int t = 0; t < static_cast<int>(replicas.size()); ++t) {
    int pool = 0, index = 0;
    if (!SplitReplicaName(replicas[t], &pool, &index)) {
      return InvalidArgument("slurm.json: replica '" + replicas[t] +
                             "' is not named workerpool<P>-<I>");
    }
    STOKER_ASSIGN_OR_RETURN(std::string host, HostOfTask(task, t));
    address[{pool, index}] = host + ":" + std::to_string(port + t);
  }

  std::map<std::string, std::string> out = env;
  auto get = [&](const std::string& var) -> Result<std::string> {
    auto it = env.find(var);
    if (it == env.end()) return InvalidArgument(var + ": missing from launch.json's env");
    return it->second;
  };
  STOKER_ASSIGN_OR_RETURN(std::string rank, get("RANK"));
  STOKER_ASSIGN_OR_RETURN(std::string world, get("WORLD_SIZE"));
  if (rank != std::to_string(task.procid) || world != std::to_string(task.ntasks)) {
    return InvalidArgument("RANK/WORLD_SIZE: launch.json says " + rank + "/" + world +
                           " but this is Slurm task " + std::to_string(task.procid) + " of " +
                           std::to_string(task.ntasks) +
                           "; slurm.json must list replicas in rank order");
  }

  std::map<std::string, int> pools;
  for (const auto& [key, unused] : address)
    pools["workerpool" + std::to_string(key.first)] = key.first;
  const std::map<std::string, int> tf_roles = {{"chief", 0}, {"worker", 1}, {"ps", 2}};
  for (const auto& [var, roles] : {std::pair{std::string("CLUSTER_SPEC"), pools},
                                   std::pair{std::string("TF_CONFIG"), tf_roles}}) {
    auto it = env.find(var);
    if (it == env.end()) continue;
    json doc = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("cluster")) {
      return InvalidArgument(var + ": not a JSON object with a \"cluster\"");
    }
    STOKER_RETURN_IF_ERROR(RewriteCluster(doc["cluster"], roles, address, var));
    out[var] = doc.dump();
  }

  STOKER_ASSIGN_OR_RETURN(std::string master, HostOfTask(task, 0));
  out["MASTER_ADDR"] = master;
  out["MASTER_PORT"] = std::to_string(port);
  out["LOCAL_RANK"] = std::to_string(task.localid);
  // Tasks on this node: the entry of the node that runs this task.
  int first = 0, local_world = 1, node = 0;
  for (; node < static_cast<int>(task.tasks_per_node.size()); ++node) {
    int n = task.tasks_per_node[node];
    if (task.procid < first + n) {
      local_world = n;
      break;
    }
    first += n;
  }
  out["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
  out["CUDA_VISIBLE_DEVICES"] = task.gpus;
  // Slurm's own view, consistent with the above (rank = task), for trainers
  // and frameworks that read it.
  out["SLURM_JOB_ID"] = std::to_string(task.job_id);
  out["SLURM_PROCID"] = std::to_string(task.procid);
  out["SLURM_LOCALID"] = std::to_string(task.localid);
  out["SLURM_NODEID"] = std::to_string(node);
  out["SLURM_NTASKS"] = std::to_string(task.ntasks);
  return out;
}

}  // namespace stoker::runner
