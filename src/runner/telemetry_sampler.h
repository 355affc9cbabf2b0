// The supervisor's resource sampler: what the trainer's processes use.
//
// A thread of stoker-run that, every `interval` (the first time after one
// second, so that short runs get a point too), reads the CPU time and
// resident memory of every process below the supervisor (the trainer and
// whatever it started) from /proc, the machine's CPU and memory, and, for
// the GPUs in the trainer's CUDA_VISIBLE_DEVICES, NVML's device figures and
// the per-process memory and SM use of the trainer's own processes; and
// appends one telemetry::Point to DIR/telemetry.jsonl. Past
// telemetry::kMaxPoints it rewrites the file compacted (atomically), so
// the file stays bounded however long the run. Each point carries the
// sampler's own CPU time so far: its overhead is on record.
//
// The file is the supervisor's (the daemon's account), in the replica
// directory the trainer cannot write: what stokerd reads is what was
// measured. A sample that cannot be taken (a process gone mid-read, NVML
// failing) is taken without that part, never retried in a loop.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "replica/replica_cgroup.h"
#include "replica/replica_contract.h"
#include "replica/replica_processes.h"
#include "telemetry/telemetry.h"

namespace stoker::runner {

// The NVML indices in a CUDA_VISIBLE_DEVICES value: numbers as they are,
// "GPU-..." UUIDs looked up in `uuids` (index -> uuid, NVML order); entries
// that match nothing are skipped. Pure.
std::vector<int> VisibleGpuIndices(const std::string& cuda_visible_devices,
                                   const std::vector<std::string>& uuids);

// The processes below a root, found without reading every process's stat
// file at every sample: the table remembers each process's parent, so a
// sample lists /proc and reads the stat files of new processes and of the
// root's own tree only (a node running a thousand replicas runs a thousand
// samplers). Not thread-safe.
class ProcessTable {
 public:
  // Every live process below `root`, with its stat line.
  std::vector<std::pair<pid_t, ProcStat>> Below(pid_t root);

 private:
  std::map<pid_t, pid_t> ppid_;  // pid -> parent, as of the last listing
};

class TelemetrySampler {
 public:
  // Samples the processes below `root` (the supervisor) into `file`; with
  // `include_root`, `root` itself too (a warm trainer, which is not the
  // supervisor's child: runner/warm_start.h).
  TelemetrySampler(std::filesystem::path file, replica::TelemetrySpec spec,
                   std::vector<int> gpu_indices, pid_t root, bool include_root = false);
  ~TelemetrySampler();  // Stop()
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  // Also samples the processes below the pid that `pid_file` will hold
  // (podman's --conmon-pidfile: a container's processes are the engine
  // monitor's children, not the supervisor's), read until it appears.
  // Before Start().
  void AlsoSampleBelowPidIn(std::filesystem::path pid_file) {
    also_pid_file_ = std::move(pid_file);
  }

  // Samples the processes in `cgroup` (replica_cgroup.h) instead of those
  // below the root: a process that left the tree is still the replica's,
  // and the CPU time of members that have exited is counted. `cgroup`
  // outlives the sampler. Before Start().
  void UseCgroup(const ReplicaCgroup* cgroup) { cgroup_ = cgroup; }

  void Start();
  // Stops and joins the thread; idempotent. No sample is taken after it returns.
  void Stop();

 private:
  void Loop();
  telemetry::Point Sample();
  void Write(const telemetry::Point& p);
  // The sampled processes: below root_, and root_ with include_root_.
  std::vector<std::pair<pid_t, ProcStat>> Tree();

  const std::filesystem::path file_;
  const replica::TelemetrySpec spec_;
  const std::vector<int> gpu_indices_;
  const pid_t root_;
  const bool include_root_;
  std::filesystem::path also_pid_file_;  // "" = none
  pid_t also_root_ = 0;                  // read from also_pid_file_ once it is there
  const ReplicaCgroup* cgroup_ = nullptr;
  uint64_t last_cgroup_ns_ = 0;  // the cgroup's CPU time at the previous sample

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;

  // Owned by the sampling thread.
  ProcessTable table_;
  std::vector<telemetry::Point> points_;
  double last_time_ = 0;  // unix seconds of the previous sample
  uint64_t last_tree_ticks_ = 0;
  bool have_tree_ticks_ = false;
  uint64_t last_machine_busy_ = 0, last_machine_total_ = 0;
  std::vector<std::pair<int, uint64_t>> first_energy_mj_;  // per GPU index
  std::set<uint32_t> seen_pids_;  // the processes some point has named (new_pids)
};

}  // namespace stoker::runner
