// Legacy AI Platform Training (ml.googleapis.com/v1, reference §6) and its
// CLI, `gcloud ai-platform jobs submit training` (§5.5), on top of the
// Vertex CustomJob model: a `trainingInput` becomes a CustomJob, and a
// CustomJob's state is shown back as a legacy `Job`.
//
// How a trainingInput becomes a CustomJob:
// - displayName = the jobId; Job labels are kept.
// - scaleTier (default BASIC) expands to pools: 0 master, 1 workers,
//   2 parameter servers, 3 evaluators (an absent middle pool is `{}`). The
//   predefined tiers' machines are in one table in ai_platform_tables.cc; BASIC_TPU
//   and every TPU are refused (Stoker runs no TPUs). CUSTOM needs masterType,
//   and workerType / parameterServerType / evaluatorType for counts > 0.
// - Machine types: Compute Engine and legacy names (standard, large_model,
//   complex_model_s/m/l, standard_gpu, complex_model_m_gpu) pass through (the
//   resources catalog knows them); the GPU variants that catalog lacks
//   (standard_p100, standard_v100, large_model_v100, complex_model_m_p100,
//   complex_model_m_v100, complex_model_l_v100, complex_model_l_gpu) become
//   the Compute Engine machine they were built on plus their GPUs.
// - A pool whose *Config has imageUri runs a containerSpec. Workers, servers
//   and evaluators without an imageUri run masterConfig's image, with its
//   containerCommand / containerArgs unless they give their own. Any other
//   pool runs a pythonPackageSpec of packageUris + pythonModule on a prebuilt
//   TensorFlow image chosen from runtimeVersion (see ExecutorImage in ai_platform_tables.cc).
// - args (or containerArgs) are the program's arguments; jobDir becomes
//   baseOutputDirectory and is appended to every pool's args as
//   `--job-dir=<jobDir>`, as the service passes it.
// - scheduling.maxRunningTime -> scheduling.timeout, maxWaitTime ->
//   maxWaitDuration; network, serviceAccount, enableWebAccess go to the
//   jobSpec and encryptionConfig to the job's encryptionSpec (all kept, not
//   acted on; see LegacyTraining::unhonoured).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "spec/custom_job.h"

namespace stoker::spec {

// A legacy training job as Stoker runs it.
struct LegacyTraining {
  CustomJob job;                   // validated (ParseCustomJob of the converted JSON)
  std::string region;              // trainingInput.region; "" when absent (the caller's default)
  nlohmann::json hyperparameters;  // trainingInput.hyperparameters verbatim; null when absent
  bool use_chief_in_tf_config = false;  // TF_CONFIG says "chief" instead of "master"
  // Field paths that were given and are kept but not acted on (beyond the
  // image choice of runtimeVersion/pythonVersion), for warning events:
  // "trainingInput.runtimeVersion", "trainingInput.scheduling.priority", ...
  std::vector<std::string> unhonoured;
};

// Converts a trainingInput (JSON; YAML goes through common/json_yaml.h
// first) into a CustomJob named `job_id`. `path_prefix` starts every field
// path in messages ("trainingInput" for a REST body). InvalidArgument lists
// every problem found, one per line, each starting with its field path
// ("trainingInput.workerType: required when workerCount is 2").
Result<LegacyTraining> FromTrainingInput(const std::string& job_id,
                                         const nlohmann::json& training_input,
                                         const std::string& path_prefix = "trainingInput",
                                         const std::map<std::string, std::string>& labels = {});

// Converts a whole legacy `Job` body ({jobId, trainingInput, labels}); the
// output-only fields (state, createTime, trainingOutput, ...) are dropped so
// a `describe` output can be resubmitted. predictionInput is refused.
Result<LegacyTraining> FromLegacyJob(const nlohmann::json& job);

// The legacy Job.state name of a Vertex JobState name ("JOB_STATE_PENDING" or
// "PENDING"): QUEUED, PREPARING (from PENDING), RUNNING, SUCCEEDED, FAILED,
// CANCELLING, CANCELLED. The Vertex-only states map to the nearest legacy
// one (PAUSED -> QUEUED, UPDATING -> RUNNING, PARTIALLY_SUCCEEDED ->
// SUCCEEDED, EXPIRED -> FAILED); anything else is STATE_UNSPECIFIED.
std::string LegacyStateName(const std::string& vertex_state);

// What the legacy Job shows besides its jobId and trainingInput.
struct LegacyJobStatus {
  std::string vertex_state;  // JobState name, mapped by LegacyStateName
  std::string create_time;   // RFC 3339; "" = not yet (left out)
  std::string start_time;
  std::string end_time;
  std::string error_message;  // "" = none
  std::map<std::string, std::string> labels;
  std::string etag;  // "" = left out
  // Filled by the caller for tuning jobs (trials, completedTrialCount, ...).
  nlohmann::json training_output = nlohmann::json::object();
};

// The legacy `Job` JSON: {jobId, trainingInput (verbatim), createTime,
// startTime, endTime, state, errorMessage, trainingOutput, labels, etag};
// empty optional fields are left out, trainingOutput is always present.
nlohmann::json ToLegacyJob(const std::string& job_id, const nlohmann::json& training_input,
                           const LegacyJobStatus& status);
nlohmann::json ToLegacyJob(const std::string& job_id, const nlohmann::json& training_input,
                           const std::string& vertex_state, const std::string& create_time,
                           const std::string& start_time, const std::string& end_time,
                           const std::string& error_message);

// The flags of `gcloud ai-platform jobs submit training` that shape the
// trainingInput (§5.5). Unset = not given. Local packaging (--package-path,
// --packages, --staging-bucket) is the CLI's: it passes the staged URIs.
struct LegacyFlags {
  std::optional<std::string> job_dir;                        // --job-dir
  std::optional<std::vector<std::string>> package_uris;      // staged gs:// URIs
  std::optional<std::string> module_name;                    // --module-name
  std::optional<std::string> region;                         // --region
  std::optional<std::string> scale_tier;                     // --scale-tier: basic, standard-1, ...
  std::optional<std::string> master_machine_type;            // --master-machine-type
  std::optional<std::string> master_accelerator;             // --master-accelerator type=T,count=N
  std::optional<int64_t> worker_count;                       // --worker-count
  std::optional<std::string> worker_machine_type;            // --worker-machine-type
  std::optional<std::string> worker_accelerator;             // --worker-accelerator
  std::optional<int64_t> parameter_server_count;             // --parameter-server-count
  std::optional<std::string> parameter_server_machine_type;  // --parameter-server-machine-type
  std::optional<std::string> parameter_server_accelerator;   // --parameter-server-accelerator
  std::optional<std::string> master_image_uri;               // --master-image-uri
  std::optional<std::string> worker_image_uri;               // --worker-image-uri
  std::optional<std::string> parameter_server_image_uri;     // --parameter-server-image-uri
  std::optional<std::string> runtime_version;                // --runtime-version
  std::optional<std::string> python_version;                 // --python-version
  std::optional<bool> use_chief_in_tf_config;                // --use-chief-in-tf-config
  std::optional<std::string> network;                        // --network
  std::optional<std::string> service_account;                // --service-account
  std::optional<bool> enable_web_access;                     // --enable-web-access
  std::optional<std::string> kms_key;                        // --kms-key (full key name)
  std::optional<std::vector<std::string>> user_args;         // after `--`
};

// The trainingInput of a submission: `config_training_input` (the
// `trainingInput` of the --config Job, or null) overridden by each flag
// given. Rules of §5.5: --scale-tier takes the CLI spelling (the enum name is
// accepted too); a custom tier needs --master-machine-type (or masterType in
// the config); --worker-count > 0 needs a worker machine type, and likewise
// for parameter servers; accelerators are `type=ENUM,count=N` with both keys
// and N > 0; --master-image-uri excludes --runtime-version; --module-name is
// required unless the master runs a custom container. Machine-type flags
// without any scale tier imply custom. InvalidArgument names the flag
// ("--master-accelerator: 'count' must be at least 1, got 0"); the result
// still goes through FromTrainingInput for the rest.
Result<nlohmann::json> TrainingInputFromFlags(const LegacyFlags& flags,
                                              nlohmann::json config_training_input);

}  // namespace stoker::spec
