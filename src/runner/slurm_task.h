// stoker-run --slurm: which replica a Slurm task is, and the environment it
// gets. Pure: a function of Slurm's task identity and the environment the
// daemon built, so it is unit tested without Slurm.
//
// The daemon builds every replica's environment before Slurm decides where
// the replicas run, with placeholder addresses (127.0.0.1:0). Task i of the
// step is the i-th replica of slurm.json (rank order: chief, workers,
// parameter servers, evaluators); the task rewrites what depends on the
// placement:
//   CLUSTER_SPEC, TF_CONFIG  every address becomes <node of its task>:<port>
//   MASTER_ADDR              the node of task 0
//   MASTER_PORT              20000 + slurm_job_id % 20000 (the same in every
//                            task; jobs sharing a node differ in id)
//   replica ports            MASTER_PORT + task index (in CLUSTER_SPEC)
//   LOCAL_RANK               SLURM_LOCALID
//   LOCAL_WORLD_SIZE         tasks of this step on this node
//   CUDA_VISIBLE_DEVICES     the GPUs Slurm bound to the task ("" if none)
//   SLURM_JOB_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS
//                            Slurm's view of the same, for frameworks that read it
// RANK and WORLD_SIZE must already agree with the task (rank = task index).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::runner {

struct SlurmTask {
  int64_t job_id = 0;               // SLURM_JOB_ID
  int procid = 0;                   // SLURM_PROCID: the task index in the step
  int localid = 0;                  // SLURM_LOCALID: the index among this node's tasks
  int ntasks = 0;                   // SLURM_STEP_NUM_TASKS (or SLURM_NTASKS)
  std::vector<std::string> hosts;   // SLURM_STEP_NODELIST expanded, in order
  std::vector<int> tasks_per_node;  // SLURM_STEP_TASKS_PER_NODE expanded
  std::string gpus;  // CUDA_VISIBLE_DEVICES as Slurm set it, else SLURM_STEP_GPUS, else ""
};

// The port of every task's address: 20000 + job_id % 20000.
int SlurmBasePort(int64_t job_id);

// Expands Slurm's task counts: "2(x3),1" -> {2, 2, 2, 1}. InvalidArgument
// when it does not parse.
Result<std::vector<int>> ParseTasksPerNode(const std::string& text);

// The replica task `task.procid` runs: replicas[procid]. InvalidArgument when
// the step has another number of tasks than there are replicas.
Result<std::string> SlurmReplica(const SlurmTask& task, const std::vector<std::string>& replicas);

// `env` (the replica's launch.json environment) with the variables above
// rewritten for `task`. InvalidArgument, naming the variable, when the task
// layout and the environment disagree (a hand-edited launch.json, a step
// with another task count).
Result<std::map<std::string, std::string>> SlurmTaskEnv(
    const std::map<std::string, std::string>& env, const std::vector<std::string>& replicas,
    const SlurmTask& task);

}  // namespace stoker::runner
