// `stoker jobs submit training JOB_ID`: the flags of `gcloud ai-platform
// jobs submit training` (reference §5.5). The flags become a trainingInput
// (spec/ai_platform.h), local packages are packed and staged, and the Job is
// sent to the AI Platform route POST /v1/projects/{p}/jobs. The job is then a
// custom job like any other, or with trainingInput.hyperparameters a tuning
// job whose trials are custom jobs; either way `stoker jobs
// describe/logs/cancel JOB_ID` and `stoker ai-platform jobs ...` take the jobId.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/files.h"
#include "common/json_yaml.h"
#include "http/http.h"
#include "spec/ai_platform.h"
#include "spec/gcloud_flags.h"
#include "spec/study.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

constexpr char kPendingPackageUri[] = "gs://stoker-staging/pending-package.tar.gz";

// The --config Job: its trainingInput and labels.
Result<json> LoadLegacyConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return InvalidArgument("--config: cannot read " + path);
  STOKER_ASSIGN_OR_RETURN(json j, ParseYamlOrJson(*text, path));
  if (!j.is_object()) {
    return InvalidArgument("--config: " + path + " must hold a Job mapping {trainingInput: ...}");
  }
  return j;
}

Result<bool> ParseBool(const std::string& flag, const std::string& v) {
  if (v == "true" || v == "True" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "False" || v == "0" || v == "no") return false;
  return InvalidArgument(flag + ": expected true or false, got '" + v + "'");
}

bool IsLocalArchive(const std::string& p) { return p.rfind("gs://", 0) != 0; }

}  // namespace

namespace {

// The job's labels: the config file's, then --labels over them.
Result<std::map<std::string, std::string>> LabelsOf(const json& config,
                                                    const LegacySubmitFlags& f) {
  std::map<std::string, std::string> labels;
  if (config.contains("labels") && config["labels"].is_object()) {
    for (const auto& [k, v] : config["labels"].items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  if (f.labels) {
    STOKER_ASSIGN_OR_RETURN(auto parsed, ParseLabelsFlag(*f.labels));
    for (const auto& [k, v] : parsed) labels[k] = v;
  }
  return labels;
}

// gcloud ai-platform's flags as spec::TrainingInputFromFlags takes them
// (without the packages, which the caller sets). InvalidArgument for a bad
// --use-chief-in-tf-config.
Result<spec::LegacyFlags> LegacyFlagsOf(const Globals& g, const LegacySubmitFlags& f,
                                        const json& config) {
  spec::LegacyFlags flags;
  flags.job_dir = f.job_dir;
  flags.module_name = f.module_name;
  flags.region = f.region;
  if (!flags.region && !(config.contains("trainingInput") && config["trainingInput"].is_object() &&
                         config["trainingInput"].contains("region"))) {
    flags.region = g.region;  // gcloud falls back to its region property
  }
  flags.scale_tier = f.scale_tier;
  flags.master_machine_type = f.master_machine_type;
  flags.master_accelerator = f.master_accelerator;
  flags.worker_count = f.worker_count;
  flags.worker_machine_type = f.worker_machine_type;
  flags.worker_accelerator = f.worker_accelerator;
  flags.parameter_server_count = f.parameter_server_count;
  flags.parameter_server_machine_type = f.parameter_server_machine_type;
  flags.parameter_server_accelerator = f.parameter_server_accelerator;
  flags.master_image_uri = f.master_image_uri;
  flags.worker_image_uri = f.worker_image_uri;
  flags.parameter_server_image_uri = f.parameter_server_image_uri;
  flags.runtime_version = f.runtime_version;
  flags.python_version = f.python_version;
  if (f.use_chief_in_tf_config) {
    STOKER_ASSIGN_OR_RETURN(flags.use_chief_in_tf_config,
                            ParseBool("--use-chief-in-tf-config", *f.use_chief_in_tf_config));
  }
  flags.network = f.network;
  flags.service_account = f.service_account;
  if (f.enable_web_access) flags.enable_web_access = true;
  flags.kms_key = f.kms_key;
  if (!f.user_args.empty()) flags.user_args = f.user_args;
  return flags;
}

// Stages the packages: --package-path packed, --packages' local archives
// as they are; gs:// packages stay. Returns their URIs in --packages'
// order, the packed one first.
Result<std::vector<std::string>> StagePackages(Connection& conn, const std::string& package_path,
                                               const std::vector<std::string>& packages) {
  std::vector<std::string> uris;
  if (!package_path.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::string uri, StagePackage(conn, package_path));
    std::cerr << "Packed " << package_path << " into " << uri << "\n";
    uris.push_back(uri);
  }
  for (const std::string& p : packages) {
    if (!IsLocalArchive(p)) {
      uris.push_back(p);
      continue;
    }
    STOKER_ASSIGN_OR_RETURN(std::string uri, StageArchive(conn, p, "--packages"));
    uris.push_back(uri);
  }
  return uris;
}

}  // namespace

int LegacySubmitTraining(const Globals& g, const LegacySubmitFlags& f) {
  json config = json::object();
  if (!f.config.empty()) {
    auto loaded = LoadLegacyConfig(f.config);
    if (!loaded.ok()) return Report(loaded.status());
    config = std::move(loaded).value();
  }
  auto merged_labels = LabelsOf(config, f);
  if (!merged_labels.ok()) return Report(merged_labels.status());
  std::map<std::string, std::string> labels = std::move(merged_labels).value();
  if (f.staging_bucket && f.staging_bucket->rfind("gs://", 0) != 0) {
    return Report(
        InvalidArgument("--staging-bucket: must be a gs:// URI, got '" + *f.staging_bucket + "'"));
  }
  if (f.staging_bucket) {
    std::cerr << "WARNING: --staging-bucket " << *f.staging_bucket
              << " is not used: Stoker stages the packages in its own bucket, "
                 "gs://stoker-staging (leave the flag out to silence this)\n";
  }

  auto legacy_flags = LegacyFlagsOf(g, f, config);
  if (!legacy_flags.ok()) return Report(legacy_flags.status());
  spec::LegacyFlags flags = std::move(legacy_flags).value();

  // Packages: --package-path is packed, --packages' local archives are staged.
  std::vector<std::string> packages =
      f.packages ? spec::SplitGcloudList(*f.packages) : std::vector<std::string>{};
  bool any_packages = !f.package_path.empty() || f.packages;
  if (any_packages) {
    std::vector<std::string> pending;
    if (!f.package_path.empty()) pending.push_back(kPendingPackageUri);
    for (const std::string& p : packages) {
      if (!IsLocalArchive(p)) {
        pending.push_back(p);
        continue;
      }
      if (!(p.ends_with(".tar.gz") || p.ends_with(".tgz"))) {
        return Report(InvalidArgument("--packages: '" + p +
                                      "' is not a .tar.gz source archive; Stoker cannot install "
                                      "wheels or other archives"));
      }
      if (!ReadFile(p).ok()) return Report(InvalidArgument("--packages: cannot read " + p));
      pending.push_back(kPendingPackageUri);
    }
    flags.package_uris = pending;
  }

  json training_input = config.contains("trainingInput") ? config["trainingInput"] : json();
  auto ti = spec::TrainingInputFromFlags(flags, training_input);
  if (!ti.ok()) return Report(ti.status());
  // The whole conversion, before anything is uploaded.
  auto checked = spec::FromTrainingInput(f.job_id, *ti, "trainingInput", labels);
  if (!checked.ok()) return Report(checked.status());
  // trainingInput.hyperparameters makes it a tuning job: validate the study now too.
  std::optional<spec::StudyFromLegacy> study;
  if (!checked->hyperparameters.is_null()) {
    auto parsed =
        spec::ParseLegacyHyperparameters(checked->hyperparameters, "trainingInput.hyperparameters");
    if (!parsed.ok()) return Report(parsed.status());
    study = *parsed;
  }

  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  if (any_packages) {
    auto uris = StagePackages(**conn, f.package_path, packages);
    if (!uris.ok()) return Report(uris.status());
    flags.package_uris = std::move(uris).value();
    ti = spec::TrainingInputFromFlags(flags, training_input);
    if (!ti.ok()) return Report(ti.status());
  }

  if (study) {
    std::cerr << "trainingInput.hyperparameters: submitting " << f.job_id
              << " as a hyperparameter tuning job\n";
  }
  json body = {{"jobId", f.job_id}, {"trainingInput", *ti}};
  if (!labels.empty()) body["labels"] = labels;
  auto created = (*conn)->Call("POST", LegacyJobsPath(g), body.dump());
  if (!created.ok()) return Report(created.status());
  if (Structured(g)) PrintResource(g, *created);
  std::ostream& out = Structured(g) ? std::cerr : std::cout;
  out << "Job [" << f.job_id << "] submitted successfully.\n";
  if (!f.stream_logs) {
    out << "Your job is still active. You may view the status of your job with the command\n\n"
        << "  $ stoker jobs describe " << f.job_id << "\n\n"
        << "or continue streaming the logs with the command\n\n"
        << "  $ stoker jobs logs " << f.job_id << " --follow\n";
    if (!Structured(g)) {
      out << "jobId: " << f.job_id << "\nstate: " << (*created)["state"].get<std::string>() << "\n";
    }
    return 0;
  }
  if (study) {
    int rc = FollowLegacyTuningLogs(**conn, g, f.job_id, true);
    if (auto final_job = GetLegacyJob(**conn, g, f.job_id); final_job.ok()) {
      PrintLegacyJob(*final_job);
    }
    return rc;
  }
  std::string state;
  PrintLogs(**conn, g, f.job_id, "", true, &state);
  auto final_job = (*conn)->Call("GET", LegacyJobsPath(g) + "/" + http::UrlEncode(f.job_id));
  if (!final_job.ok()) return Report(final_job.status());
  std::string final_state = (*final_job)["state"];
  out << "Job [" << f.job_id << "] ended: " << final_state << "\n";
  if (final_job->contains("errorMessage")) {
    out << (*final_job)["errorMessage"].get<std::string>() << "\n";
  }
  return final_state == "SUCCEEDED" ? 0 : 1;
}

}  // namespace stoker::cli
