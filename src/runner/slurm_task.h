// stoker-run --slurm: which replica a Slurm task is, and the environment it
// gets. SlurmTaskEnv is pure: a function of Slurm's task identity, the ports
// the tasks exchanged and the environment the daemon built, so it is unit
// tested without Slurm.
//
// The daemon builds every replica's environment before Slurm decides where
// the replicas run, with placeholder addresses (127.0.0.1:0). Task i of the
// step is the i-th replica of slurm.json (rank order: chief, workers,
// parameter servers, evaluators); the task builds what depends on the
// placement again, with the daemon's builder (cluster_env.h) from
// launch.json's "cluster" and the addresses below:
//   CLUSTER_SPEC, TF_CONFIG  every replica at <node of its task>:<port of its task>
//   MASTER_ADDR, MASTER_PORT the node and port of task 0 (the same in every task)
//   WORLD_SIZE, RANK         the tasks, and this one's (rank = task index)
//   LOCAL_RANK               SLURM_LOCALID
//   LOCAL_WORLD_SIZE         tasks of this step on this node
//   CUDA_VISIBLE_DEVICES     the GPUs Slurm bound to the task ("" if none)
//   SLURM_JOB_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS
//                            Slurm's view of the same, for frameworks that read it
//
// Ports (docs/decisions/0007, amended): every task reserves a port on its own
// node by binding port 0 (the kernel picks one that no socket uses), writes
// it to <job dir>/slurm-<job id>-ports/<task> (atomic rename), and waits for
// the files of all tasks. It holds the bound socket until every task has
// published, so tasks sharing a node (of this job or of another) never get
// the same port, and releases it right before its trainer's fork (after the
// packages are unpacked: SupervisorHooks::before_fork): a trainer binding
// without SO_REUSEADDR must find the port free. From the release to
// the trainer's own bind the port is merely unused, as for local replicas.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "replica/cluster_env.h"

namespace stoker::runner {

struct SlurmTask {
  int64_t job_id = 0;               // SLURM_JOB_ID
  int procid = 0;                   // SLURM_PROCID: the task index in the step
  int localid = 0;                  // SLURM_LOCALID: the index among this node's tasks
  int ntasks = 0;                   // SLURM_STEP_NUM_TASKS (or SLURM_NTASKS)
  std::vector<std::string> hosts;   // SLURM_STEP_NODELIST expanded, in order
  std::vector<int> tasks_per_node;  // SLURM_STEP_TASKS_PER_NODE expanded
  std::string gpus;  // CUDA_VISIBLE_DEVICES as Slurm set it, else SLURM_STEP_GPUS, else ""
  std::vector<int> gpu_indexes;  // the same as NVML indexes (launch.json's gpu_indexes)
  std::vector<int> ports;        // the port each task reserved, by task (AwaitPorts)
};

// A TCP port held for this process: bound on every address with
// SO_REUSEADDR, not listening, close-on-exec. While held, the kernel hands
// the port to no other socket asking for port 0 and no outgoing connection
// (so no other job on the node gets it); Release (or destruction) frees it
// for the trainer. Not copyable; movable.
class PortReservation {
 public:
  // Unavailable (with errno's text) when no socket could be bound.
  static Result<PortReservation> Bind();
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation() { Release(); }

  int port() const { return port_; }
  void Release();

 private:
  PortReservation(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

// Where the tasks of Slurm job `slurm_job_id` exchange ports:
// <job_dir>/slurm-<id>-ports. Per Slurm job, so that files of an earlier
// submission of the same attempt never count.
std::filesystem::path SlurmPortDir(const std::filesystem::path& job_dir, int64_t slurm_job_id);

// Writes `port` to <port_dir>/<task> (the directory created if missing) by an
// atomic rename: readers see no file or the whole number.
Status PublishPort(const std::filesystem::path& port_dir, int task, int port);

// How long a task waits for the other tasks' ports: srun starts every task
// of the step at once, but on NFS a file created on one node may take up to
// the attribute cache time (acdirmax, 60 s by default) to appear on another.
constexpr double kSlurmPortWaitSeconds = 180;

// The port of every task 0..ntasks-1 from <port_dir>, polling until all are
// there. DeadlineExceeded, naming the tasks that are missing, after
// `timeout_seconds`; Cancelled as soon as `stop()` returns true (checked
// every poll). InvalidArgument when a file holds no port.
Result<std::vector<int>> AwaitPorts(const std::filesystem::path& port_dir, int ntasks,
                                    double timeout_seconds, const std::function<bool()>& stop);

// Expands Slurm's task counts: "2(x3),1" -> {2, 2, 2, 1}. InvalidArgument
// when it does not parse.
Result<std::vector<int>> ParseTasksPerNode(const std::string& text);

// The replica task `task.procid` runs: replicas[procid]. InvalidArgument when
// the step has another number of tasks than there are replicas.
Result<std::string> SlurmReplica(const SlurmTask& task, const std::vector<std::string>& replicas);

// `env` (the replica's launch.json environment) with the variables above
// built for `task` and `cluster` (launch.json's). InvalidArgument, naming
// what disagrees, when the task layout, slurm.json and launch.json do (a
// hand-edited file, a step with another task count, a launch.json without
// "cluster" from an older stokerd) or `task.ports` has not one port per task.
Result<std::map<std::string, std::string>> SlurmTaskEnv(
    const std::map<std::string, std::string>& env,
    const std::optional<replica::ClusterTask>& cluster, const std::vector<std::string>& replicas,
    const SlurmTask& task);

}  // namespace stoker::runner
