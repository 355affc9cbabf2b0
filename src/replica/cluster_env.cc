#include "replica/cluster_env.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace stoker::replica {
namespace {

using nlohmann::json;

// TensorFlow role of a pool (reference §3.2): chief, worker, ps, evaluator.
const char* TfRole(int pool) {
  static const char* kRoles[] = {"chief", "worker", "ps", "evaluator"};
  return pool >= 0 && pool < 4 ? kRoles[pool] : "worker";
}

}  // namespace

std::string ReplicaName(int pool, int index) {
  return "workerpool" + std::to_string(pool) + "-" + std::to_string(index);
}

bool ParseReplicaName(const std::string& name, int* pool, int* index) {
  int p = -1, i = -1, end = 0;
  if (std::sscanf(name.c_str(), "workerpool%d-%d%n", &p, &i, &end) != 2) return false;
  if (p < 0 || i < 0 || static_cast<size_t>(end) != name.size()) return false;
  if (ReplicaName(p, i) != name) return false;  // no "+1", "01" or spaces
  *pool = p;
  *index = i;
  return true;
}

Result<std::map<std::string, std::string>> ClusterEnv(const ClusterAddresses& addresses,
                                                      const ClusterTask& task) {
  if (task.pool < 0 || static_cast<size_t>(task.pool) >= addresses.size() || task.index < 0 ||
      static_cast<size_t>(task.index) >= addresses[task.pool].size()) {
    return InvalidArgument("cluster: " + ReplicaName(task.pool, task.index) +
                           " is not a replica of the job");
  }
  if (addresses[0].empty()) return InvalidArgument("cluster: the job has no chief (workerpool0)");
  json cluster = json::object();
  json tf_cluster = json::object();
  int world_size = 0;
  int rank = 0;
  for (size_t p = 0; p < addresses.size(); ++p) {
    if (static_cast<int>(p) == task.pool) rank = world_size + task.index;
    world_size += static_cast<int>(addresses[p].size());
    if (addresses[p].empty()) continue;
    cluster["workerpool" + std::to_string(p)] = addresses[p];
    if (p != 3) tf_cluster[TfRole(static_cast<int>(p))] = addresses[p];
  }
  json spec_task = {{"type", "workerpool" + std::to_string(task.pool)}, {"index", task.index}};
  json tf_task = {{"type", TfRole(task.pool)}, {"index", task.index}};
  if (!task.trial.empty()) {
    spec_task["trial"] = task.trial;
    tf_task["trial"] = task.trial;
  }
  const std::string& master = addresses[0][0];
  size_t colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == master.size()) {
    return InvalidArgument("cluster: the chief's address '" + master + "' is not host:port");
  }
  std::map<std::string, std::string> env;
  env["CLUSTER_SPEC"] = json{
      {"cluster", cluster},
      {"environment", "cloud"},
      {"task", spec_task},
      {"job", task.job}}.dump();
  env["TF_CONFIG"] = json{
      {"cluster", tf_cluster},
      {"environment", "cloud"},
      {"task", tf_task},
      {"job", task.job}}.dump();
  env["MASTER_ADDR"] = master.substr(0, colon);
  env["MASTER_PORT"] = master.substr(colon + 1);
  env["WORLD_SIZE"] = std::to_string(world_size);
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(task.local_rank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(task.local_world_size);
  return env;
}

}  // namespace stoker::replica
