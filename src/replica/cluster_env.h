// The distributed variables of a replica (reference/vertex.md §3.2, §3.4):
// one builder, used by the daemon for the replicas it places and by
// `stoker-run --slurm` once Slurm has placed them (slurm_task.h). Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::replica {

// Where every replica of a job listens: addresses[p][i] is "host:port" of
// workerpool<p>-<i>, one list per pool of the job (an empty pool `{}` has an
// empty list); addresses[0][0] is the chief.
using ClusterAddresses = std::vector<std::vector<std::string>>;

// Which replica the variables are for, and what of the job they carry;
// launch.json keeps it ("cluster") so that a replica placed by Slurm gets
// its variables from the same builder.
struct ClusterTask {
  int pool = 0;
  int index = 0;
  std::string trial;  // the trial's id in a study, else ""
  std::string job;    // CLUSTER_SPEC's and TF_CONFIG's "job": a JSON string
  // Processes of the job on this replica's node and this one's place among
  // them: each replica is its own node (0 and 1) unless Slurm put several
  // tasks on one node.
  int local_rank = 0;
  int local_world_size = 1;
};

// "workerpool<pool>-<index>", the replica's name in logs and CLUSTER_SPEC.
std::string ReplicaName(int pool, int index);
// The inverse; false for any other name.
bool ParseReplicaName(const std::string& name, int* pool, int* index);

// The variables, with N_p the replica count of pool p:
//   CLUSTER_SPEC  {"cluster": {"workerpool<p>": [host:port, ...]} for the
//                 non-empty pools, "task": {"type": "workerpool<p>", "index": i
//                 [, "trial": id]}, "environment": "cloud", "job": task.job}
//   TF_CONFIG     the same with chief/worker/ps; evaluators (pool 3) are not in
//                 "cluster" and get task.type "evaluator"
//   MASTER_ADDR, MASTER_PORT  host and port of workerpool0[0]
//   WORLD_SIZE    N_0 + N_1 + N_2 + N_3: every replica of every pool
//   RANK          node rank: chief 0, workerpool1[i] 1+i, workerpool2[i]
//                 1+N_1+i, workerpool3[i] 1+N_1+N_2+i
//   LOCAL_RANK, LOCAL_WORLD_SIZE  task.local_rank, task.local_world_size
// InvalidArgument when the task is not in `addresses` or the chief's
// address is not host:port.
Result<std::map<std::string, std::string>> ClusterEnv(const ClusterAddresses& addresses,
                                                      const ClusterTask& task);

}  // namespace stoker::replica
