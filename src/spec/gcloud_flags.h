// The flags of `gcloud ai custom-jobs create` (reference §5.1), as pure
// functions: parse each --worker-pool-spec value into a Vertex WorkerPoolSpec
// and merge the flags with a --config CustomJobSpec.
//
// The CLI reads argv and files; these functions only turn strings and JSON
// into JSON. Their output is meant for ParseCustomJob (custom_job.h), which
// does the Vertex-level validation; the checks here are the ones gcloud makes
// on the flags themselves, and their messages name the flag
// ("--worker-pool-spec[1]: 'python-module' cannot be used with
// 'container-image-uri'").
//
// All functions are pure and thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::spec {

// Splits a gcloud list value (ArgList, as in `--args=--epochs=10,--lr=0.01`)
// on commas, as gcloud does: a trailing delimiter adds no empty item
// ("a,b," -> [a, b]), an inner empty item is kept ("a,,b" -> [a, "", b]),
// and "" is the empty list. gcloud's escape for values that hold commas is
// supported (`gcloud topic escaping`): a value that starts with `^X^` uses
// the string X as the delimiter instead, so `^:^--tags=a,b:--lr=0.1` gives
// [--tags=a,b, --lr=0.1]. X may be several characters; `^^...` (an empty X)
// is not an escape and the value is split on commas.
std::vector<std::string> SplitGcloudList(const std::string& value);

// The `local-package-path` request of the first --worker-pool-spec
// (gcloud's autopackaging): the CLI packs `path` into an image built on
// `executor_image_uri` and turns every non-empty pool into a containerSpec
// running it. Exactly one of python_module / script is set.
struct LocalPackage {
  std::string path;                         // local-package-path
  std::string executor_image_uri;           // the base image (required)
  std::string python_module;                // python-module, run as `python3 -m`
  std::string script;                       // script, relative to `path`; see ScriptCommand
  std::vector<std::string> requirements;    // PyPI requirements to install
  std::vector<std::string> extra_packages;  // archives relative to `path`
  std::vector<std::string> extra_dirs;      // directories to copy along
  std::string output_image_uri;             // "" = the CLI picks a name

  bool operator==(const LocalPackage&) const = default;
};

// One parsed --worker-pool-spec value.
struct WorkerPoolFlag {
  // The WorkerPoolSpec in Vertex JSON (camelCase): `{}` for an empty value;
  // otherwise machineSpec, replicaCount (a number) and, without a local
  // package, containerSpec {imageUri} or pythonPackageSpec {executorImageUri,
  // pythonModule} (packageUris come from --python-package-uris at merge).
  // With a local package the pool holds only its hardware: the CLI adds the
  // containerSpec of the image it builds.
  nlohmann::json pool;
  std::optional<LocalPackage> local;  // only ever set for index 0
};

// Parses one --worker-pool-spec value, the `index`-th one given (0-based).
// `autopackaging` says whether the first spec has local-package-path; it
// matters for index > 0 only, where such specs may then carry only hardware
// keys (machine-type, replica-count, accelerator-type, accelerator-count).
// InvalidArgument lists every problem of the value, one per line, each
// starting with "--worker-pool-spec[index]: ".
Result<WorkerPoolFlag> ParseWorkerPoolSpecFlag(const std::string& value, int index,
                                               bool autopackaging = false);

// All --worker-pool-spec values, in order.
struct WorkerPoolFlags {
  std::vector<nlohmann::json> pools;  // one per value, `{}` for empty ones
  std::optional<LocalPackage> local;  // from the first value
};

// Parses every --worker-pool-spec value with the rules between them (the
// first one decides autopackaging). What the CLI should call. Problems of all
// values are reported together.
Result<WorkerPoolFlags> ParseWorkerPoolSpecFlags(const std::vector<std::string>& values);

// The command that runs `script` (a LocalPackage::script) in the packed
// image: ["python3", script] for a `.py` file, ["bash", script] otherwise,
// as gcloud's generated ENTRYPOINT does.
std::vector<std::string> ScriptCommand(const std::string& script);

// The job-level flags of `gcloud ai custom-jobs create` that change the
// CustomJobSpec. --display-name, --labels and the KMS flags go on the
// CustomJob and are the CLI's; --region picks the endpoint.
struct GcloudJobFlags {
  std::vector<nlohmann::json> worker_pools;         // parsed --worker-pool-spec values, in order
  std::optional<std::vector<std::string>> args;     // --args
  std::optional<std::vector<std::string>> command;  // --command
  std::optional<std::vector<std::string>> python_package_uris;  // --python-package-uris
  std::optional<std::string> network;                           // --network
  std::optional<std::string> service_account;                   // --service-account
  std::optional<bool> enable_web_access;                        // --enable-web-access
  std::optional<bool> enable_dashboard_access;                  // --enable-dashboard-access
  std::optional<std::string> persistent_resource_id;            // --persistent-resource-id
};

// Merges the flags into the --config spec as gcloud does (§5.1):
// - `config_spec` (a CustomJobSpec, or null when --config was not given) is
//   the base. A whole CustomJob (with `jobSpec`) is accepted too; the merge
//   then happens inside its jobSpec and the CustomJob is returned.
// - worker pools from flags replace the whole workerPoolSpecs list;
// - --args replaces `args` of every container and python pool;
// - --command replaces `command` of every container pool (an error when no
//   pool runs a container);
// - --python-package-uris becomes `packageUris` of every python pool (an
//   error when no pool is a python pool);
// - --network, --service-account, --enable-web-access,
//   --enable-dashboard-access, --persistent-resource-id override.
// Pools without a task yet (autopackaging: the CLI adds their containerSpec)
// are left alone, so the CLI fills them in before merging. The result is not
// validated beyond the flags; pass it to ParseCustomJob. InvalidArgument when
// no pool is given at all ("give --config or --worker-pool-spec"), when the
// config is not an object, or when a flag has nothing to apply to.
Result<nlohmann::json> MergeGcloudFlags(nlohmann::json config_spec, const GcloudJobFlags& flags);

}  // namespace stoker::spec
