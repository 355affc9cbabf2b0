// Launching a placed attempt: the file-system work the launch needs (the
// output and checkpoint directories, nfsMounts links, the staged packages'
// check), then BuildJobLaunch (launch_builder.h) and the executor's Launch.
// Loop thread only.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "exec/environments.h"
#include "exec/executor.h"
#include "server/job_table.h"
#include "server/launch_builder.h"
#include "storage/buckets.h"
#include "store/store.h"

namespace stoker::server {

// The settings every replica of this daemon gets, from its config.
LaunchSettings DaemonLaunchSettings(const config::Config& config);

class Launcher {
 public:
  // Every reference must outlive the launcher. The daemon settings each
  // replica gets are built once, at the first launch (DaemonLaunchSettings).
  Launcher(const config::Config& config, storage::Buckets& buckets,
           const exec::Environments& environments, exec::Executor& executor, store::Store& store);

  // A launch built and its files made, not yet handed to the executor:
  // `launch` holds the error (with the field and the fix) when it could
  // not be built; `notes` are the job's launch events (which path runs each
  // pool's image, mounts left out).
  struct Prepared {
    Result<exec::JobLaunch> launch;
    std::vector<std::string> notes;
  };
  // Builds the launch of the attempt `a` holds, with `a.rec.allocation`
  // (whether or not it is stored yet), and makes what it needs on disk:
  // the output and checkpoint directories, nfsMounts links, the staged
  // packages checked. Idempotent, and reads or writes nothing in the store:
  // the scheduling pass runs it before the PENDING commit, so that it
  // overlaps the submission's own commit (decision 0048).
  Prepared Prepare(const ActiveJob& a);
  // Hands `prepared` to the executor (its build error, if any, is the
  // result), then writes its notes as the job's events: each is a
  // transaction, which the start path does not wait for. Idempotent, as
  // the executor's Launch. An error fails the job.
  Status Start(int64_t job_id, Prepared prepared);
  // Prepare, then Start: the attempt's allocation is stored.
  Status Launch(const ActiveJob& a);

  // The settings a replica of `job` gets (its grace: the preemption grace
  // when the job is preemptible).
  LaunchSettings SettingsFor(const spec::CustomJob& job);

 private:
  // `notes`: the job's events it found, for Launch to write.
  Result<exec::JobLaunch> Build(const ActiveJob& a, std::vector<std::string>& notes);
  // Links each worker pool's nfsMounts under nfs_mount_root when the share
  // is on this machine; a note for each that is not.
  Status LinkNfsMounts(const spec::CustomJobSpec& spec, std::vector<std::string>& notes) const;
  // For a package in the staging bucket: its content must still have the
  // SHA-256 its name says (checked once per version of the file).
  Status VerifyStaged(const std::string& uri, const std::filesystem::path& path,
                      const std::string& field);

  const config::Config& config_;
  storage::Buckets& buckets_;
  const exec::Environments& environments_;
  exec::Executor& executor_;
  store::Store& store_;
  std::optional<LaunchSettings> settings_;  // DaemonLaunchSettings(config_), once
  // Staged packages whose content was checked against their name, by path:
  // "inode:size:mtime" when checked (a changed file is checked again).
  std::map<std::string, std::string> verified_packages_;
};

}  // namespace stoker::server
