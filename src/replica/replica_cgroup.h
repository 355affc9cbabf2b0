// One cgroup per replica (docs/security.md "Containment",
// docs/decisions/0034-one-cgroup-per-replica.md).
//
// stoker-run makes the replica's cgroup before anything of the replica runs
// and puts every process of the replica into it: the cold trainer (it joins
// between fork and exec), the warm trainer (moved before its go byte), the
// container (podman's --cgroup-parent), image pulls and pip builds. A process
// cannot leave a cgroup by setsid(), double forks, an empty environment or
// re-parenting, so ending the replica ends every process it started: the
// cgroup is frozen, each member killed, thawed, and waited for until empty
// (cgroup v2's cgroup.kill does it in one write where the kernel has it).
//
// Where: cgroup v2 when /sys/fs/cgroup is the unified hierarchy; otherwise
// cgroup v1's freezer (required), pids, memory and cpuacct (each where
// mounted and writable). The replica's cgroup is
//   <hierarchy>/<stoker-run's own cgroup there>/stoker/<ReplicaCgroupName>
// so a daemon inside a service's or a Slurm step's cgroup stays inside it.
// Without root (or a delegated hierarchy) no cgroup can be made; the caller
// then falls back to its process-tree clean up and says so.
//
// Memory: the replica's limit is its machine type's memory clamped to the
// node (what the scheduler booked); swap is not allowed past it. An OOM kill
// is told by the kernel's counters (v1 memory.oom_control "oom_kill", v2
// memory.events "oom_kill").
//
// Thread safety: none; a ReplicaCgroup is used by one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stoker::runner {

// Where the node's cgroup hierarchies are and where replica cgroups go.
struct CgroupLayout {
  enum class Kind { kNone, kV1, kV2 };
  Kind kind = Kind::kNone;
  // The directory under which replica cgroups are made ("<mount><own>/stoker"):
  // v2: "unified"; v1: one per controller ("freezer", "pids", "memory",
  // "cpuacct"). The freezer's is always there for v1.
  std::map<std::string, std::filesystem::path> parents;
  // The parent relative to its hierarchy's root, as podman's --cgroup-parent
  // takes it (v1: the freezer's), e.g. "/stoker".
  std::string relative_parent;
  // The mount point of every cgroup hierarchy whose root is shown (v1
  // controllers, named ones such as name=systemd, and a hybrid's cgroup2),
  // each once: podman makes a container's cgroups at
  // relative_parent/<name> in all of them, not only in those in `parents`.
  std::vector<std::filesystem::path> mounts;
  std::string why_none;  // Kind::kNone: why (for the start note)
};

// The layout read from /proc/self/cgroup and /proc/self/mountinfo texts.
// Pure: says nothing of whether the directories can be written.
CgroupLayout ParseCgroupLayout(std::string_view proc_self_cgroup, std::string_view mountinfo);

// This process's layout (ParseCgroupLayout of its /proc files).
CgroupLayout DetectCgroupLayout();

// DetectCgroupLayout, read the first time it is asked for in this process
// and kept: a supervisor serves one replica, and a standby supervisor asks
// before it waits for its replica (runner/main.cc), off the start path.
const CgroupLayout& ThisProcessCgroupLayout();

// The cgroup's name for the replica whose cookie (ReplicaCookie) is given:
// "r-<16 hex of the cookie's hash>-<last path component>", at most 64
// characters of [A-Za-z0-9_.-]. The same string in stoker-run and stokerd.
std::string ReplicaCgroupName(std::string_view cookie);

// The name of the cgroup a standby supervisor makes before it knows its
// replica, and renames to the replica's (ReplicaCgroup::Rename): "s-<pid>".
std::string StandbyCgroupName(pid_t pid);

// Removes the standby cgroups (StandbyCgroupName) whose process is gone: a
// standby killed before its replica came left one behind. Best effort.
void RemoveStaleStandbyCgroups(const CgroupLayout& layout);

// "15 GB": a byte count as the OOM message states it (GiB, one decimal
// below 10). Pure.
std::string MemoryAmount(uint64_t bytes);

class ReplicaCgroup {
 public:
  // Makes (or reuses) the replica's cgroup in every hierarchy of `layout`,
  // with `memory_limit_bytes` (0 = none) where a memory controller is there.
  // FailedPrecondition when the freezer's (v1) or the unified (v2) one
  // cannot be made: not root, read-only, no such hierarchy.
  static Result<ReplicaCgroup> Create(const CgroupLayout& layout, const std::string& name,
                                      uint64_t memory_limit_bytes);
  // Gives the cgroup the name `name` in every hierarchy (a rename, ~10 us,
  // where making one costs ~20-90 us) and sets `memory_limit_bytes` as
  // Create does: for a cgroup a standby supervisor made ahead, before it
  // knew its replica. No process may be in it yet. On an error (a cgroup of
  // that name exists) it keeps its old name everywhere.
  Status Rename(const std::string& name, uint64_t memory_limit_bytes);
  // The existing cgroup `name` (stokerd's clean up of a replica whose
  // supervisor died); nullopt when it does not exist.
  static std::optional<ReplicaCgroup> Open(const CgroupLayout& layout, const std::string& name);

  // Open write ends of each hierarchy's cgroup.procs, close-on-exec, for a
  // forked child to join with JoinFromChild; the caller closes them.
  std::vector<int> OpenJoinFds() const;
  // Writes "0" to each fd: moves the calling process into the cgroup.
  // Async-signal-safe (for the time between fork and exec). False when a
  // write failed (errno set).
  static bool JoinFromChild(const std::vector<int>& fds);
  // Moves `pid` (and, in v1, only it: its threads follow) into the cgroup.
  Status Add(pid_t pid) const;

  // The processes in the cgroup and every cgroup below it (podman's).
  std::vector<pid_t> Pids() const;
  // Kills every process in the cgroup and below it, as a unit: frozen (no
  // fork can race the kill), SIGKILL each, thawed; then waits up to
  // `timeout_ms` for the cgroup to be empty. Returns how many were killed,
  // or -1 when some were still there at the deadline. Never signals the
  // calling process.
  int KillAll(int64_t timeout_ms) const;
  // Removes the cgroup (and those below it) from every hierarchy; the
  // processes must be gone. Best effort: an error only says what is left.
  Status Remove() const;

  // Whether the kernel killed a member for exceeding the memory limit.
  bool OomKilled() const;
  // Memory in use now (bytes; 0 when no memory controller) and CPU time
  // used so far (ns; nullopt when no CPU accounting): for telemetry.
  uint64_t MemoryBytes() const;
  std::optional<uint64_t> CpuNanos() const;

  uint64_t memory_limit() const { return memory_limit_; }
  // podman's --cgroup-parent for a container of this replica ("" = none):
  // the replica's cgroup relative to the hierarchy root.
  std::string ContainerParent() const;
  const std::string& name() const { return name_; }

 private:
  CgroupLayout layout_;
  std::string name_;
  std::map<std::string, std::filesystem::path> dirs_;  // like layout_.parents, one level down
  // Where podman puts a container of this replica in each hierarchy
  // (mount + ContainerParent()), where that is not in dirs_.
  std::vector<std::filesystem::path> ContainerDirs() const;
  // Sets the memory limit (and no swap past it) where a memory controller is.
  void SetMemoryLimit(uint64_t bytes);
  uint64_t memory_limit_ = 0;
};

}  // namespace stoker::runner
