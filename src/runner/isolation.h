// Filesystem isolation of one trainer (docs/security.md, "Trainers";
// docs/decisions/0011-job-isolation.md).
//
// stoker-run gives each trainer a private view of the file system in which
// every hidden directory (the daemon's data dir: its token, stoker.db, the
// other jobs' directories) is an empty, read-only directory that nobody can
// list, and every hidden file (a TLS key) cannot be opened. What the trainer
// needs is put back at the same paths: its own job's directory, the buckets,
// Stoker's interpreter links. Paths are the same as outside, so nothing else
// about the trainer's environment changes.
//
// How: the trainer's process enters a new user namespace and a new mount
// namespace (CLONE_NEWUSER | CLONE_NEWNS), makes every mount private, opens
// the paths to keep (O_PATH), mounts a tmpfs over each hidden directory,
// binds the kept paths back through /proc/self/fd/N (and the spec's `bind`
// directories at their second path: the buckets at /gcs), binds /dev/null with
// `nodev` over each hidden file, and makes the tmpfs read-only. The user
// namespace maps ids to themselves, so files keep their owners: every id
// when stoker-run is root (only the parent namespace may write such maps,
// so the supervisor makes that namespace before the fork and the child joins
// it), the one uid and gid otherwise (the child makes it itself, with
// setgroups denied, as the kernel requires). The user namespace is what
// keeps other processes of the same account out: the kernel lets no process
// reach into another user namespace's processes (/proc/PID/root,
// /proc/PID/fd, ptrace) without CAP_SYS_PTRACE there, so trainers of two
// jobs that share an account cannot read each other's view, and a trainer
// cannot read stokerd's. The trainer keeps no capability after exec (its
// uid is not 0), so it cannot undo the mounts; any namespace it makes later
// gets them locked.
//
// Not isolated: trainers that run as root (they could undo it); /tmp,
// /dev/shm, the network and abstract sockets, which stay shared.
//
// Use, in two steps because the second runs between fork and exec:
//   Isolation isolation(spec, trainer_is_root);  // supervisor: may allocate
//   const char* error = isolation.Enter(note_fd); // forked child: syscalls only
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "replica/replica_contract.h"

namespace stoker::runner {

// launch.json's "isolation" (mode off | auto | required, hide, keep,
// keep_read_only): the replica contract's types and parser.
using replica::IsolationMode;
using replica::IsolationSpec;
using replica::ParseIsolationSpec;

class Isolation {
 public:
  // Resolves the spec against the file system (which paths exist, are
  // directories, lie under which hidden directory) and prepares every string
  // Enter needs. `trainer_is_root`: the trainer will run as uid 0.
  // When stoker-run is root, also makes the trainer's user namespace (see
  // MakeRootUserNamespace), so that Enter only has to join it.
  Isolation(const IsolationSpec& spec, bool trainer_is_root);
  ~Isolation();  // closes the namespace fd, reaps the helper process
  Isolation(const Isolation&) = delete;
  Isolation& operator=(const Isolation&) = delete;

  // Puts the calling process into the isolated view. Call it in the child
  // between fork and exec, single-threaded, before dropping privileges (it
  // needs stoker-run's own credentials); it only makes system calls.
  //
  // Returns nullptr when the trainer may start: isolated, or mode off, or
  // mode auto and isolation is impossible here (no user namespaces, no
  // permission to mount, a trainer running as root); in that last case the
  // view is left (or put back) as it was and one line saying why goes to
  // `note_fd` (-1: nowhere). Returns a message naming job_isolation when the
  // trainer must not start: mode required and isolation is impossible, or a
  // failure after which the view cannot be put back. The message lives in
  // this object.
  const char* Enter(int note_fd);

  // What Enter will do, for tests and logs: "hide " + each path that becomes
  // empty (a directory) or unopenable (a file), then each path bound back
  // ("ro " or "rw " + target, and " <- " + source where they differ).
  std::vector<std::string> Describe() const;

 private:
  struct Bind {
    std::string source;  // the path to open (symlinks followed)
    std::string target;  // where it appears: under a hidden directory
    bool is_dir = true;
    bool read_only = false;
    int fd = -1;  // set in Enter
  };
  struct MountPoint {
    std::string path;  // inside a hidden directory's tmpfs
    bool is_dir = true;
  };

  // The constructor's steps, after binds_ and hide_dirs_ are known: the
  // tmpfs mount points binds_ need, and extra_binds_ from the spec's `bind`.
  void PlanMountPoints();
  void PlanSecondPaths(const std::vector<replica::BindSpec>& binds);

  // Enter's steps; each false return leaves the reason in message_.
  bool Unshare();
  void MakeRootUserNamespace();
  bool Mount();
  // Undoes Mount's mounts (auto mode, after a failure).
  void Unmount();
  // A root trainer (never isolated, auto mode): a mount namespace with only
  // the spec's `bind` second paths. Best effort: a failure leaves them out.
  void BindSecondPathsOnly();
  const char* Fail(int note_fd, bool can_fall_back);
  void SetMessage(const char* step, const char* path, int err);

  IsolationMode mode_;
  bool trainer_is_root_;
  bool root_;                    // stoker-run's euid is 0
  bool changed_ = false;         // Enter made a namespace (it cannot be left)
  bool user_namespace_ = false;  // ... a user namespace with its ids mapped
  std::string uid_map_, gid_map_;
  // Root: the trainer's user namespace, made by the constructor; or why not.
  int userns_fd_ = -1;
  pid_t helper_ = -1;  // the process created in it; killed, reaped by the destructor
  alignas(64) char helper_stack_[8192];  // its stack (it shares our memory)
  const char* userns_step_ = "clone(CLONE_NEWUSER)";
  int userns_errno_ = 0;
  std::vector<std::string> hide_dirs_;    // canonical; get a tmpfs
  std::vector<std::string> hide_files_;   // canonical; get /dev/null, nodev
  std::vector<Bind> binds_;               // parents first
  std::vector<MountPoint> mount_points_;  // in creation order
  // The spec's `bind`: directories shown at a second path that exists on
  // the host (/gcs), parents first, bound after binds_.
  std::vector<Bind> extra_binds_;
  int mounted_extra_ = 0;
  int mounted_dirs_ = 0;  // how many of hide_dirs_ carry our tmpfs
  int mounted_files_ = 0;
  char message_[1024] = {};
};

// A view made in a helper process and held for another process to join
// (a warm trainer: runner/warm_start.h): the helper's user and mount
// namespaces as fds (-1 where they are this process's own), and what its
// `enter` step noted.
struct HeldView {
  int userns_fd = -1;
  int mntns_fd = -1;
  std::string note;
};
// Forks a helper that runs `enter` (in the child: it may drop privileges,
// unshare and mount; it returns "" or why it failed, and may set *note),
// then holds its namespaces until they are opened here; the helper is
// killed and reaped before this returns. FailedPrecondition("isolation:
// WHY") when `enter` failed; Internal when the helper died. The calling
// process must be single-threaded (it forks); the caller closes the fds.
Result<HeldView> HoldViewInHelper(const std::function<std::string(std::string* note)>& enter);

// For `stoker-run --probe-isolation DIR`: tries, in this (single-threaded,
// throwaway) process, what a trainer would get with `DIR` hidden and
// DIR/jobs kept. OK, or why isolation is impossible here.
Status ProbeIsolation(const std::filesystem::path& dir);

}  // namespace stoker::runner
