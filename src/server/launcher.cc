#include "server/launcher.h"

#include <sys/stat.h>

#include "common/files.h"
#include "exec/gcs_mounts.h"
#include "server/preemption.h"

namespace stoker::server {

using nlohmann::json;

Launcher::Launcher(const config::Config& config, storage::Buckets& buckets,
                   const exec::Environments& environments, exec::Executor& executor,
                   store::Store& store)
    : config_(config),
      buckets_(buckets),
      environments_(environments),
      executor_(executor),
      store_(store) {}

LaunchSettings DaemonLaunchSettings(const config::Config& config) {
  LaunchSettings s = {config.cancel_grace_seconds, config.log_max_bytes,
                      config.log_max_files,        config.api_url,
                      config.push_secret,          config.telemetry_seconds};
  s.instance = InstanceTag(std::filesystem::absolute(config.data_dir).string());
  s.warm = {config.warm_starts.enabled,
            config.warm_starts.preload,
            config.warm_starts.idle_seconds,
            (config.data_dir / "warm").string(),
            (config.python_helpers / "stoker_zygote.py").string(),
            config.warm_starts.max_per_user,
            config.warm_starts.max_total};
  s.preemption = config.preemption;  // the executor's own preemption (Slurm)
  s.container_mounts = {(config.data_dir / "buckets").string()};
  for (const auto& [name, dir] : config.buckets) {
    s.container_mounts.push_back(std::filesystem::absolute(dir).string());
  }
  s.container_binds = exec::GcsBinds(config.data_dir, config.buckets);
  s.container_user_namespace = config.container_user_namespace;
  s.container_mounts_read_only = {(config.data_dir / "envs").string(),
                                  config.python_helpers.string()};
  s.python_packages.cache_dir =
      std::filesystem::absolute(config.data_dir / "envs" / "pip").string();
  for (const std::filesystem::path& w : config.python_packages.wheelhouse) {
    s.python_packages.wheelhouse.push_back(std::filesystem::absolute(w).string());
  }
  s.python_packages.index_url = config.python_packages.index_url;
  return s;
}

LaunchSettings Launcher::SettingsFor(const spec::CustomJob& job) {
  // Built at the first launch: the daemon completes its config (the API's
  // address) after the control loop is made.
  if (!settings_) settings_ = DaemonLaunchSettings(config_);
  LaunchSettings s = *settings_;
  // A preemptible job's SIGTERM -> SIGKILL grace is the preemption grace
  // (for a user's cancel too): the time it has to save a checkpoint.
  if (config_.preemption.enabled && IsPreemptible(job, config_.preemption)) {
    s.grace_seconds = config_.preemption.grace_seconds;
  }
  return s;
}

Launcher::Prepared Launcher::Prepare(const ActiveJob& a) {
  std::vector<std::string> notes;
  Result<exec::JobLaunch> launch = Build(a, notes);
  return {std::move(launch), std::move(notes)};
}

Status Launcher::Start(int64_t job_id, Prepared prepared) {
  Status s = prepared.launch.ok() ? executor_.Launch(*prepared.launch) : prepared.launch.status();
  for (const std::string& note : prepared.notes) (void)store_.AddEvent(job_id, note);
  return s;
}

Status Launcher::Launch(const ActiveJob& a) { return Start(a.rec.id, Prepare(a)); }

Result<exec::JobLaunch> Launcher::Build(const ActiveJob& a, std::vector<std::string>& notes) {
  const spec::CustomJobSpec& spec = a.job.job_spec;
  LaunchInputs in;
  in.rec = &a.rec;
  in.job = &a.job;
  in.requests = &a.requests;
  in.settings = SettingsFor(a.job);
  in.rewrite_uris = [this](const std::string& s) { return storage::RewriteGsUris(s, buckets_); };

  std::string output_uri = OutputUri(a.job, a.rec.id);
  auto parsed = storage::ParseGsUri(output_uri, "jobSpec.baseOutputDirectory.outputUriPrefix");
  if (!parsed.ok()) return parsed.status();
  if (parsed->bucket == storage::kOutputsBucket)
    STOKER_RETURN_IF_ERROR(buckets_.Create(storage::kOutputsBucket));
  // Made as every bucket directory is: shared with the trainers' group.
  STOKER_ASSIGN_OR_RETURN(
      std::filesystem::path output_dir,
      buckets_.MakeDir(output_uri, "jobSpec.baseOutputDirectory.outputUriPrefix"));
  in.output_dir = output_dir.string();
  // AIP_CHECKPOINT_DIR: made now, the same for every attempt, so that a
  // trainer resuming after a preemption or a retry finds it; one that cannot
  // be made fails the launch with its path.
  auto checkpoints = buckets_.MakeDir(output_uri + "checkpoints",
                                      "AIP_CHECKPOINT_DIR (jobSpec.baseOutputDirectory)");
  if (!checkpoints.ok()) {
    return FailedPrecondition(
        "AIP_CHECKPOINT_DIR " + (output_dir / "checkpoints").string() +
        " cannot be made: " + checkpoints.status().message() +
        "; remove what is in the way or set jobSpec.baseOutputDirectory to a writable place");
  }
  STOKER_RETURN_IF_ERROR(LinkNfsMounts(spec, notes));

  // Each pool's environment and package files; each replica's metric file.
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const spec::WorkerPoolSpec& pool = spec.worker_pool_specs[p];
    std::string field = "jobSpec.workerPoolSpecs[" + std::to_string(p) + "]";
    in.environments.emplace_back();
    in.packages.emplace_back();
    if (pool.empty) continue;
    std::string image = pool.python_package_spec ? pool.python_package_spec->executor_image_uri
                                                 : pool.container_spec->image_uri;
    // The framework was checked when the job was submitted.
    STOKER_ASSIGN_OR_RETURN(in.environments.back(),
                            environments_.ForImage(image, field, /*check_framework=*/false));
    // Which path runs the image (a container or an interpreter) and why.
    notes.push_back("workerpool" + std::to_string(p) + ": " + in.environments.back().note);
    if (!pool.python_package_spec) continue;
    for (size_t i = 0; i < pool.python_package_spec->package_uris.size(); ++i) {
      const std::string& uri = pool.python_package_spec->package_uris[i];
      std::string pkg_field = field + ".pythonPackageSpec.packageUris[" + std::to_string(i) + "]";
      STOKER_ASSIGN_OR_RETURN(std::filesystem::path pkg, buckets_.Resolve(uri, pkg_field));
      STOKER_RETURN_IF_ERROR(VerifyStaged(uri, pkg, pkg_field));
      in.packages.back().push_back(pkg.string());
    }
  }
  for (const json& r : a.rec.allocation["replicas"]) {
    std::string name = r["name"].get<std::string>();
    in.metric_files[name] = executor_.MetricFilePath(a.rec.id, a.rec.attempt, name).string();
  }
  return BuildJobLaunch(in);
}

Status Launcher::LinkNfsMounts(const spec::CustomJobSpec& spec,
                               std::vector<std::string>& notes) const {
  // nfsMounts: Vertex mounts each share at /mnt/nfs/<mountPoint>. Here the
  // share is honoured when its path exists on this machine (already mounted
  // there), by a link at the same place; otherwise the job is told why not.
  for (size_t p = 0; p < spec.worker_pool_specs.size(); ++p) {
    const json& mounts = spec.worker_pool_specs[p].extra.value("nfsMounts", json::array());
    for (size_t i = 0; i < mounts.size(); ++i) {
      std::string field =
          "jobSpec.workerPoolSpecs[" + std::to_string(p) + "].nfsMounts[" + std::to_string(i) + "]";
      std::filesystem::path source = mounts[i].value("path", "");
      std::string point = mounts[i].value("mountPoint", "");
      if (!IsFileName(point)) {
        // Checked at submission; a job stored before that check still must
        // not make root create anything outside nfs_mount_root.
        return InvalidArgument(field + ".mountPoint: must be one directory name, got '" + point +
                               "'");
      }
      std::filesystem::path target = std::filesystem::path(config_.nfs_mount_root) / point;
      std::error_code ec;
      if (!std::filesystem::is_directory(source, ec)) {
        notes.push_back("warning: " + field + " not mounted: " + source.string() +
                        " does not exist on this machine");
        continue;
      }
      if (std::filesystem::is_symlink(target, ec)) {
        if (std::filesystem::read_symlink(target, ec) == source) continue;
      } else if (std::filesystem::exists(target, ec) &&
                 std::filesystem::equivalent(target, source, ec)) {
        continue;
      }
      std::filesystem::create_directories(target.parent_path(), ec);
      if (std::filesystem::exists(target, ec) || std::filesystem::is_symlink(target, ec) ||
          (std::filesystem::create_symlink(source, target, ec), ec)) {
        return FailedPrecondition(field + ".mountPoint: cannot make " + target.string() +
                                  " point at " + source.string() +
                                  (ec ? ": " + ec.message() : ": it exists and is something else") +
                                  "; use another mountPoint or remove it");
      }
    }
  }
  return OkStatus();
}

Status Launcher::VerifyStaged(const std::string& uri, const std::filesystem::path& path,
                              const std::string& field) {
  auto parsed = storage::ParseGsUri(uri, field);
  if (!parsed.ok() || parsed->bucket != storage::kStagingBucket) return OkStatus();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return FailedPrecondition(field + ": " + uri + " is gone from the staging bucket; stage the " +
                              "package again");
  }
  std::string version = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                        std::to_string(st.st_mtim.tv_sec) + "." +
                        std::to_string(st.st_mtim.tv_nsec);
  auto known = verified_packages_.find(path.string());
  if (known != verified_packages_.end() && known->second == version) return OkStatus();
  STOKER_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  STOKER_RETURN_IF_ERROR(storage::CheckStagedContent(*parsed, bytes, field));
  verified_packages_[path.string()] = version;
  return OkStatus();
}

}  // namespace stoker::server
