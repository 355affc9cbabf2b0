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

  // Launches the attempt `a` holds (its allocation is stored). Idempotent,
  // as the executor's Launch. The job's launch events (which path runs each
  // pool's image, mounts left out) are written after the executor's launch:
  // each is a transaction, which the start path does not wait for. An
  // error (with the field and the fix) fails the job.
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
