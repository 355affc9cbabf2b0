// The Vertex AI CustomJob model: parse, validate, normalize, print.
//
// Input is the JSON form of a job file (YAML is converted by
// common/json_yaml.h first). Accepted shapes: a whole `CustomJob`
// (`displayName`, `jobSpec`, `labels`, ...) or a bare `CustomJobSpec`
// (`workerPoolSpecs`, ...), as gcloud's --config accepts. Keys are the REST
// camelCase names of ../shared/reference/vertex.md; a snake_case key is an
// error whose message gives the camelCase spelling. Unknown keys are errors.
// Fields that Stoker accepts but cannot honour on its own machines are kept
// verbatim in `passthrough` and listed by UnhonouredFields().
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

namespace stoker::spec {

struct EnvVar {
  std::string name;
  std::string value;

  bool operator==(const EnvVar&) const = default;
};

struct MachineSpec {
  std::string machine_type;      // required for non-empty pools
  std::string accelerator_type;  // enum name; "" = none
  // Vertex: an int32. Stoker's extension: a number in (0, 1) asks for that
  // share of one GPU and of its memory (several small jobs pack onto one GPU).
  // Counts of 1 or more are whole numbers.
  double accelerator_count = 0;
  // gpuPartitionSize, tpuTopology, reservationAffinity kept verbatim.
  nlohmann::json extra = nlohmann::json::object();

  bool operator==(const MachineSpec&) const = default;
};

struct ContainerSpec {
  std::string image_uri;  // required
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;

  bool operator==(const ContainerSpec&) const = default;
};

struct PythonPackageSpec {
  std::string executor_image_uri;         // required
  std::vector<std::string> package_uris;  // required, gs:// URIs
  std::string python_module;              // required
  std::vector<std::string> args;
  std::vector<EnvVar> env;

  bool operator==(const PythonPackageSpec&) const = default;
};

struct WorkerPoolSpec {
  // True for a placeholder pool given as `{}` (keeps positions 1..3).
  bool empty = false;
  MachineSpec machine_spec;
  int64_t replica_count = 1;
  std::optional<ContainerSpec> container_spec;  // exactly one of these two
  std::optional<PythonPackageSpec> python_package_spec;
  // diskSpec, nfsMounts, lustreMounts kept verbatim (JSON object or null).
  nlohmann::json extra = nlohmann::json::object();

  bool operator==(const WorkerPoolSpec&) const = default;
};

struct Scheduling {
  double timeout_seconds = 7 * 24 * 3600.0;  // Vertex default: 7 days
  bool restart_job_on_worker_restart = false;
  std::string strategy;  // "" = unspecified
  bool disable_retries = false;
  std::optional<double> max_wait_seconds;
  // Stoker's extensions (docs/formats.md): queue priority, higher first, in
  // [-1000, 1000]; and how many times a job that failed by its own fault
  // (a replica exiting non-zero or killed) is run again (0 = never).
  int priority = 0;
  int max_retries = 0;

  bool operator==(const Scheduling&) const = default;
};

struct CustomJobSpec {
  std::vector<WorkerPoolSpec> worker_pool_specs;  // trailing empty pools dropped
  Scheduling scheduling;
  std::string base_output_directory;  // baseOutputDirectory.outputUriPrefix; "" = unset
  // Other known CustomJobSpec fields (serviceAccount, network, tensorboard, ...), verbatim.
  nlohmann::json passthrough = nlohmann::json::object();

  bool operator==(const CustomJobSpec&) const = default;
};

struct CustomJob {
  std::string display_name;  // required, <= 128 characters
  std::map<std::string, std::string> labels;
  CustomJobSpec job_spec;
  // Other known CustomJob input fields (encryptionSpec), verbatim.
  nlohmann::json passthrough = nlohmann::json::object();

  // Field-by-field equality; the round-trip contract of ToJson is stated with it.
  bool operator==(const CustomJob&) const = default;
};

// Parses and validates a CustomJob or a bare CustomJobSpec. A bare spec gets
// an empty display_name, which the caller fills (from --display-name) before
// calling Validate(). Every problem found is reported in one InvalidArgument
// status, one problem per line, each starting with its field path
// ("workerPoolSpecs[0].machineSpec.machineType: required; ...").
Result<CustomJob> ParseCustomJob(const nlohmann::json& j);

// Parses a CustomJobSpec object found at `path` (used for trialJobSpec too).
Result<CustomJobSpec> ParseCustomJobSpec(const nlohmann::json& j, const std::string& path);

// Checks the rules that need the whole job (displayName present, pool 0
// present with replicaCount 1, ...). ParseCustomJob does not call it when
// the input was a bare spec without displayName.
Status Validate(const CustomJob& job);

// Canonical Vertex JSON (camelCase, replicaCount as a string, durations as
// "Ns", enums by name). ParseCustomJob(ToJson(job)) == job.
nlohmann::json ToJson(const CustomJob& job);
nlohmann::json ToJson(const CustomJobSpec& spec);

// gcloud reads a --config file more loosely than the Vertex API does: a
// `workerPoolSpecs` that is one mapping (the form of a widely copied
// tutorial) is a list of that one pool. Rewrites such forms in `j` (a
// CustomJob, a bare CustomJobSpec, or a HyperparameterTuningJob's
// trialJobSpec) into the API's and returns one warning per rewrite, naming
// the field ("jobSpec.workerPoolSpecs is one mapping; ..."); what is not
// such a form is left for the parser to judge.
std::vector<std::string> AcceptGcloudForms(nlohmann::json& j);

// Field paths that were given but that Stoker does not act on
// (e.g. "jobSpec.network"), for a warning event on the job.
std::vector<std::string> UnhonouredFields(const CustomJob& job);

}  // namespace stoker::spec
