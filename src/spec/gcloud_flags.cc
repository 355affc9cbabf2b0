#include "spec/gcloud_flags.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string_view>
#include <utility>

#include "common/image_reference.h"
#include "spec/json_fields.h"

namespace stoker::spec {
namespace {

using internal::CanonicalAcceleratorType;
using internal::Contains;
using internal::Join;
using internal::JoinNames;
using internal::kAcceleratorTypes;
using internal::Names;
using nlohmann::json;

// Reference §5.1, in gcloud's help order.
const Names kPoolKeys = {"machine-type",        "replica-count",
                         "accelerator-type",    "accelerator-count",
                         "container-image-uri", "executor-image-uri",
                         "python-image-uri",    "python-module",
                         "local-package-path",  "script",
                         "requirements",        "extra-packages",
                         "extra-dirs",          "output-image-uri"};
const Names kHardwareKeys = {"machine-type", "replica-count", "accelerator-type",
                             "accelerator-count"};
// Keys that only mean something with local-package-path (autopackaging).
const Names kLocalOnlyKeys = {"script", "requirements", "extra-packages", "extra-dirs",
                              "output-image-uri"};

// gcloud's _TokenizeQuotedList: split on `delim`, a trailing delimiter adds nothing.
std::vector<std::string> SplitOn(const std::string& text, const std::string& delim) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t at = text.find(delim, start);
    if (at == std::string::npos) {
      if (start < text.size()) out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, at - start));
    start = at + delim.size();
    if (start == text.size()) break;
  }
  return out;
}

// Problems with one flag, reported together, one per line.
class FlagProblems {
 public:
  explicit FlagProblems(std::string prefix) : prefix_(std::move(prefix)) {}
  void Add(const std::string& message) { lines_.push_back(prefix_ + ": " + message); }
  void Append(const Status& s) {
    if (!s.ok()) lines_.push_back(s.message());
  }
  bool empty() const { return lines_.empty(); }
  Status ToStatus() const {
    std::string m;
    for (const auto& l : lines_) m += (m.empty() ? "" : "\n") + l;
    return InvalidArgument(m);
  }

 private:
  std::string prefix_;
  std::vector<std::string> lines_;
};

std::string FlagName(int index) { return "--worker-pool-spec[" + std::to_string(index) + "]"; }

// A whole number >= 1 given as a flag value.
std::optional<int64_t> ReadCount(const std::string& key, const std::string& text, FlagProblems& p) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    p.Add("'" + key + "' must be a whole number, got '" + text + "'");
    return std::nullopt;
  }
  if (n < 1) {
    p.Add("'" + key + "' must be at least 1, got " + text);
    return std::nullopt;
  }
  return n;
}

// The key=value pairs of one --worker-pool-spec value, in order (ArgDict).
std::map<std::string, std::string> ReadPairs(const std::string& value, FlagProblems& p) {
  std::map<std::string, std::string> pairs;
  for (const std::string& item : SplitGcloudList(value)) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      p.Add("'" + item + "' is not key=value; write the spec as key=value,key=value");
      continue;
    }
    std::string key = item.substr(0, eq);
    std::string val = item.substr(eq + 1);
    if (!Contains(kPoolKeys, key)) {
      std::string dashed = key;
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      if (dashed != key && Contains(kPoolKeys, dashed)) {
        p.Add("unknown key '" + key + "'; did you mean '" + dashed + "'?");
      } else {
        p.Add("unknown key '" + key + "'; the keys are " + JoinNames(kPoolKeys));
      }
      continue;
    }
    if (key == "python-image-uri") key = "executor-image-uri";  // gcloud's deprecated alias
    if (!pairs.emplace(key, val).second) {
      p.Add("'" + key + "' is given twice" +
            (key == "executor-image-uri" ? " (python-image-uri is its old name)" : ""));
    }
  }
  return pairs;
}

bool HasLocalPackagePath(const std::string& value) {
  for (const std::string& item : SplitGcloudList(value)) {
    if (item.rfind("local-package-path=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> SplitGcloudList(const std::string& value) {
  if (value.size() > 2 && value[0] == '^') {
    size_t close = value.find('^', 1);
    if (close != std::string::npos && close > 1) {
      return SplitOn(value.substr(close + 1), value.substr(1, close - 1));
    }
  }
  return SplitOn(value, ",");
}

namespace {

// A --worker-pool-spec's key=value pairs.
using PoolPairs = std::map<std::string, std::string>;

bool Has(const PoolPairs& kv, const char* key) { return kv.count(key) > 0; }

// The pool's machineSpec and replicaCount into `pool`.
void ReadPoolHardware(PoolPairs& kv, int index, FlagProblems& p, json& pool) {
  json machine = json::object();
  if (!Has(kv, "machine-type") || kv["machine-type"].empty()) {
    p.Add("'machine-type' is required, such as machine-type=n1-standard-8");
  } else {
    machine["machineType"] = kv["machine-type"];
  }
  if (Has(kv, "accelerator-type")) {
    const std::string t = CanonicalAcceleratorType(kv["accelerator-type"]);
    if (Contains(kAcceleratorTypes, t)) {
      machine["acceleratorType"] = t;
      machine["acceleratorCount"] = 1;
    } else if (t.rfind("NVIDIA", 0) != 0 && t.rfind("TPU", 0) != 0) {
      p.Add("'accelerator-type' must name an accelerator starting with NVIDIA or TPU, got '" + t +
            "'; use one of " + JoinNames(kAcceleratorTypes));
    } else {
      p.Add("'" + t + "' is not an accelerator type; use one of " + JoinNames(kAcceleratorTypes));
    }
  }
  if (Has(kv, "accelerator-count")) {
    if (!Has(kv, "accelerator-type")) {
      p.Add(
          "'accelerator-count' needs 'accelerator-type', such as accelerator-type=NVIDIA_TESLA_T4");
    } else if (auto n = ReadCount("accelerator-count", kv["accelerator-count"], p)) {
      if (machine.contains("acceleratorType")) machine["acceleratorCount"] = *n;
    }
  }
  pool["machineSpec"] = machine;
  int64_t replicas = 1;
  if (Has(kv, "replica-count")) {
    if (auto n = ReadCount("replica-count", kv["replica-count"], p)) replicas = *n;
    if (index == 0 && replicas != 1) {
      p.Add(
          "'replica-count' of the primary pool must be 1; give the other replicas a second "
          "--worker-pool-spec");
    }
  }
  pool["replicaCount"] = replicas;
}

// The first pool's local-package-path and the keys that go with it: the
// package `stoker` builds into an image before submitting.
LocalPackage ReadLocalPackage(PoolPairs& kv, FlagProblems& p) {
  LocalPackage pkg;
  pkg.path = kv["local-package-path"];
  if (pkg.path.empty()) p.Add("'local-package-path' must name a directory");
  if (!Has(kv, "executor-image-uri") || kv["executor-image-uri"].empty()) {
    p.Add(
        "'executor-image-uri' is required with 'local-package-path': it is the base image "
        "the package is built on");
  } else if (auto ref = ParseImageReference(kv["executor-image-uri"], "'executor-image-uri'");
             !ref.ok()) {
    p.Add(ref.status().message());
  }
  if (Has(kv, "container-image-uri")) {
    p.Add(
        "'container-image-uri' cannot be used with 'local-package-path'; give the base image "
        "as 'executor-image-uri'");
  }
  if (Has(kv, "python-module") == Has(kv, "script")) {
    p.Add("exactly one of 'python-module' or 'script' is required with 'local-package-path'");
  }
  pkg.executor_image_uri = kv["executor-image-uri"];
  pkg.python_module = kv["python-module"];
  pkg.script = kv["script"];
  pkg.requirements = SplitOn(kv["requirements"], ";");
  pkg.extra_packages = SplitOn(kv["extra-packages"], ";");
  pkg.extra_dirs = SplitOn(kv["extra-dirs"], ";");
  pkg.output_image_uri = kv["output-image-uri"];
  return pkg;
}

// A prebuilt task: containerSpec (container-image-uri) or pythonPackageSpec
// (executor-image-uri and python-module) into `pool`.
void ReadPoolTask(PoolPairs& kv, int index, FlagProblems& p, json& pool) {
  for (auto key : kLocalOnlyKeys) {
    if (!Has(kv, std::string(key).c_str())) continue;
    p.Add("'" + std::string(key) + "' is only allowed with 'local-package-path'" +
          (index == 0 ? "" : ", in the first --worker-pool-spec"));
  }
  bool container = Has(kv, "container-image-uri");
  bool python = Has(kv, "executor-image-uri");
  if (container == python) {
    p.Add(container ? "'container-image-uri' and 'executor-image-uri' cannot both be given; "
                      "give exactly one"
                    : "exactly one of 'container-image-uri' or 'executor-image-uri' is "
                      "required");
  }
  if (container && Has(kv, "python-module")) {
    p.Add("'python-module' cannot be used with 'container-image-uri'");
  }
  if (python && !Has(kv, "python-module")) {
    p.Add(
        "'python-module' is required with 'executor-image-uri', such as "
        "python-module=trainer.task");
  }
  for (const char* key : {"container-image-uri", "executor-image-uri"}) {
    if (!Has(kv, key)) continue;
    if (kv[key].empty()) {
      p.Add("'" + std::string(key) + "' must name an image");
    } else if (auto ref = ParseImageReference(kv[key], "'" + std::string(key) + "'"); !ref.ok()) {
      p.Add(ref.status().message());
    }
  }
  if (container) {
    pool["containerSpec"] = {{"imageUri", kv["container-image-uri"]}};
  } else if (python) {
    json py = {{"executorImageUri", kv["executor-image-uri"]}};
    if (Has(kv, "python-module")) py["pythonModule"] = kv["python-module"];
    pool["pythonPackageSpec"] = py;
  }
}

}  // namespace

Result<WorkerPoolFlag> ParseWorkerPoolSpecFlag(const std::string& value, int index,
                                               bool autopackaging) {
  FlagProblems p(FlagName(index));
  WorkerPoolFlag out;
  out.pool = json::object();
  PoolPairs kv = ReadPairs(value, p);
  if (kv.empty() && p.empty()) {
    if (index == 0) {
      p.Add(
          "the first --worker-pool-spec (the primary pool) cannot be empty; give machine-type "
          "and container-image-uri, or executor-image-uri and python-module");
      return p.ToStatus();
    }
    return out;  // an empty pool: keeps the positions of the later ones
  }
  ReadPoolHardware(kv, index, p, out.pool);

  bool local = Has(kv, "local-package-path");
  if (local && index != 0) {
    p.Add("'local-package-path' is only allowed in the first --worker-pool-spec");
  }
  if (index > 0 && autopackaging) {
    for (const auto& [key, val] : kv) {
      if (Contains(kHardwareKeys, key) || key == "local-package-path") continue;
      p.Add("'" + key +
            "' is not allowed: the first --worker-pool-spec has 'local-package-path', whose "
            "image runs in every pool; give only " +
            JoinNames(kHardwareKeys) + " here");
    }
  } else if (local && index == 0) {
    out.local = ReadLocalPackage(kv, p);
  } else {
    ReadPoolTask(kv, index, p, out.pool);
  }
  if (!p.empty()) return p.ToStatus();
  return out;
}

Result<WorkerPoolFlags> ParseWorkerPoolSpecFlags(const std::vector<std::string>& values) {
  WorkerPoolFlags out;
  bool autopackaging = !values.empty() && HasLocalPackagePath(values[0]);
  FlagProblems p("--worker-pool-spec");
  for (size_t i = 0; i < values.size(); ++i) {
    auto r = ParseWorkerPoolSpecFlag(values[i], static_cast<int>(i), autopackaging);
    if (!r.ok()) {
      p.Append(r.status());
      continue;
    }
    out.pools.push_back(std::move(r->pool));
    if (i == 0) out.local = std::move(r->local);
  }
  if (!p.empty()) return p.ToStatus();
  return out;
}

std::vector<std::string> ScriptCommand(const std::string& script) {
  bool py = script.size() >= 3 && script.compare(script.size() - 3, 3, ".py") == 0;
  return {py ? "python3" : "bash", script};
}

Result<json> MergeGcloudFlags(json config_spec, const GcloudJobFlags& flags) {
  if (!config_spec.is_null() && !config_spec.is_object()) {
    return InvalidArgument("--config: must hold a CustomJobSpec object {workerPoolSpecs: [...]}");
  }
  json whole;  // set when the config is a whole CustomJob
  json spec = config_spec.is_null() ? json::object() : std::move(config_spec);
  if (spec.contains("jobSpec")) {
    whole = std::move(spec);
    spec = whole["jobSpec"].is_null() ? json::object() : whole["jobSpec"];
    if (!spec.is_object()) return InvalidArgument("--config: jobSpec must be an object");
  }
  if (!flags.worker_pools.empty()) spec["workerPoolSpecs"] = flags.worker_pools;
  auto pools_it = spec.find("workerPoolSpecs");
  if (pools_it == spec.end() || pools_it->is_null() ||
      (pools_it->is_array() && pools_it->empty())) {
    return InvalidArgument(
        "no worker pool is given; give --config or --worker-pool-spec (at least the primary "
        "pool)");
  }
  FlagProblems p("--python-package-uris");  // python pools from flags that lack their packages
  json& pools = *pools_it;
  bool any_container = false;
  bool any_python = false;
  if (pools.is_array()) {  // otherwise ParseCustomJob reports the config's mistake
    for (size_t i = 0; i < pools.size(); ++i) {
      json& pool = pools[i];
      if (!pool.is_object()) continue;
      if (auto c = pool.find("containerSpec"); c != pool.end() && c->is_object()) {
        any_container = true;
        if (flags.args) (*c)["args"] = *flags.args;
        if (flags.command) (*c)["command"] = *flags.command;
      }
      if (auto py = pool.find("pythonPackageSpec"); py != pool.end() && py->is_object()) {
        any_python = true;
        if (flags.args) (*py)["args"] = *flags.args;
        if (flags.python_package_uris) {
          (*py)["packageUris"] = *flags.python_package_uris;
        } else if (!flags.worker_pools.empty() && !py->contains("packageUris")) {
          p.Add("required: " + FlagName(static_cast<int>(i)) +
                " runs python-module from executor-image-uri; give the gs:// URIs of the "
                "packages it installs");
        }
      }
    }
  }
  if (flags.command && pools.is_array() && !any_container) {
    FlagProblems q("--command");
    q.Add(
        "no worker pool runs a container (container-image-uri or containerSpec); --command "
        "only replaces the command of container pools");
    return q.ToStatus();
  }
  if (flags.python_package_uris && pools.is_array() && !any_python) {
    FlagProblems q("--python-package-uris");
    q.Add(
        "no worker pool is a python pool (executor-image-uri and python-module, or "
        "pythonPackageSpec); the URIs have nothing to apply to");
    return q.ToStatus();
  }
  if (!p.empty()) return p.ToStatus();
  if (flags.network) spec["network"] = *flags.network;
  if (flags.service_account) spec["serviceAccount"] = *flags.service_account;
  if (flags.enable_web_access) spec["enableWebAccess"] = *flags.enable_web_access;
  if (flags.enable_dashboard_access) {
    spec["enableDashboardAccess"] = *flags.enable_dashboard_access;
  }
  if (flags.persistent_resource_id) spec["persistentResourceId"] = *flags.persistent_resource_id;
  if (whole.is_null()) return spec;
  whole["jobSpec"] = std::move(spec);
  return whole;
}

}  // namespace stoker::spec
