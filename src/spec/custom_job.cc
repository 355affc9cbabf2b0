// Parsing and printing the Vertex CustomJob (custom_job.h); the rules on the
// parsed model are in custom_job_check.cc.
#include "spec/custom_job.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "common/time.h"
#include "spec/custom_job_check.h"
#include "spec/json_fields.h"

namespace stoker::spec {
namespace {

using internal::At;
using internal::CanonicalAcceleratorType;
using internal::CheckDisplayName;
using internal::CheckKeys;
using internal::CheckLabels;
using internal::CheckSpec;
using internal::Contains;
using internal::FormatSeconds;
using internal::Get;
using internal::JobVerbatim;
using internal::Join;
using internal::Kind;
using internal::kInt32Max;
using internal::kInt32Min;
using internal::Misplaced;
using internal::Names;
using internal::ParseLabels;
using internal::Problems;
using internal::ReadBool;
using internal::ReadDuration;
using internal::ReadEnumName;
using internal::ReadInteger;
using internal::ReadString;
using internal::ReadStringList;
using internal::ReadVerbatim;
using internal::Shape;
using internal::SnakeToCamel;
using internal::TypeName;
using nlohmann::json;

const Names kJobFields = {"displayName", "jobSpec", "labels", "encryptionSpec"};
// Output-only CustomJob fields: accepted and dropped, so `describe` output can be resubmitted.
// `stoker` is Stoker's own output block (user, attempt, waitReason).
const Names kJobOutputOnly = {"name",         "state",        "createTime", "startTime",
                              "endTime",      "updateTime",   "error",      "webAccessUris",
                              "satisfiesPzs", "satisfiesPzi", "stoker"};
const Names kSpecFields = {"workerPoolSpecs",       "scheduling",
                           "serviceAccount",        "network",
                           "reservedIpRanges",      "pscInterfaceConfig",
                           "baseOutputDirectory",   "protectedArtifactLocationId",
                           "tensorboard",           "enableWebAccess",
                           "enableDashboardAccess", "experiment",
                           "experimentRun",         "models",
                           "persistentResourceId"};
const Names kPoolFields = {"containerSpec", "pythonPackageSpec", "machineSpec", "replicaCount",
                           "nfsMounts",     "lustreMounts",      "diskSpec"};
const Names kMachineFields = {"machineType",      "acceleratorType", "acceleratorCount",
                              "gpuPartitionSize", "tpuTopology",     "reservationAffinity"};
const Names kContainerFields = {"imageUri", "command", "args", "env"};
const Names kPythonFields = {"executorImageUri", "packageUris", "pythonModule", "args", "env"};
const Names kEnvFields = {"name", "value"};
const Names kSchedulingFields = {"timeout",        "restartJobOnWorkerRestart", "strategy",
                                 "disableRetries", "maxWaitDuration",           "priority",
                                 "maxRetries"};
constexpr int64_t kMaxPriority = 1000;
constexpr int64_t kMaxRetries = 100;

// Spec fields that Stoker keeps verbatim and does not act on.
const Names kUnhonouredSpecFields = {"serviceAccount",
                                     "network",
                                     "reservedIpRanges",
                                     "pscInterfaceConfig",
                                     "protectedArtifactLocationId",
                                     "tensorboard",
                                     "experiment",
                                     "experimentRun",
                                     "models",
                                     "persistentResourceId"};

// ---- Fields kept verbatim: checked for shape, then copied as given. ----

const std::vector<Shape>& SpecVerbatim() {
  static const std::vector<Shape> shapes = {
      {"serviceAccount", Kind::kString},
      {"network", Kind::kString},
      {"reservedIpRanges", Kind::kStrings},
      {"pscInterfaceConfig",
       Kind::kObject,
       {{"networkAttachment", Kind::kString},
        {"dnsPeeringConfigs",
         Kind::kObjects,
         {{"domain", Kind::kString},
          {"targetProject", Kind::kString},
          {"targetNetwork", Kind::kString}}}}},
      {"protectedArtifactLocationId", Kind::kString},
      {"tensorboard", Kind::kString},
      {"enableWebAccess", Kind::kBool},
      {"enableDashboardAccess", Kind::kBool},
      {"experiment", Kind::kString},
      {"experimentRun", Kind::kString},
      {"models", Kind::kStrings},
      {"persistentResourceId", Kind::kString},
  };
  return shapes;
}

const std::vector<Shape>& PoolVerbatim() {
  static const std::vector<Shape> shapes = {
      {"nfsMounts",
       Kind::kObjects,
       {{"server", Kind::kString}, {"path", Kind::kString}, {"mountPoint", Kind::kString}},
       {"server", "path", "mountPoint"}},
      {"lustreMounts",
       Kind::kObjects,
       {{"instanceIp", Kind::kString},
        {"volumeHandle", Kind::kString},
        {"filesystem", Kind::kString},
        {"mountPoint", Kind::kString}}},
      {"diskSpec",
       Kind::kObject,
       {{"bootDiskType", Kind::kString}, {"bootDiskSizeGb", Kind::kInt32}}},
  };
  return shapes;
}

const std::vector<Shape>& MachineVerbatim() {
  static const std::vector<Shape> shapes = {
      {"gpuPartitionSize", Kind::kString},
      {"tpuTopology", Kind::kString},
      {"reservationAffinity",
       Kind::kObject,
       {{"reservationAffinityType", Kind::kEnum, {}, {}, &kReservationAffinityTypeEnum},
        {"key", Kind::kString},
        {"values", Kind::kStrings}}},
  };
  return shapes;
}

// ---- Parsing: types and keys. Rules about values live in custom_job_check.cc. ----

std::vector<EnvVar> ParseEnv(const json& obj, const std::string& path, Problems& p) {
  std::vector<EnvVar> env;
  const json* v = Get(obj, "env");
  if (v == nullptr) return env;
  std::string fp = Join(path, "env");
  if (!v->is_array()) {
    p.Add(fp, "must be a list of {name, value} objects, got " + TypeName(*v));
    return env;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    std::string ep = At(fp, i);
    EnvVar var;
    if (!e.is_object()) {
      p.Add(ep, "must be an object {name, value}, got " + TypeName(e));
    } else {
      CheckKeys(e, ep, kEnvFields, p);
      ReadString(e, "name", ep, p, &var.name);
      ReadString(e, "value", ep, p, &var.value);
    }
    env.push_back(std::move(var));  // placeholders keep indices aligned with the input
  }
  return env;
}

ContainerSpec ParseContainer(const json& v, const std::string& path, Problems& p) {
  ContainerSpec c;
  if (!v.is_object()) {
    p.Add(path, "must be an object {imageUri, command, args, env}, got " + TypeName(v));
    return c;
  }
  CheckKeys(v, path, kContainerFields, p,
            {{"executorImageUri", "it belongs in pythonPackageSpec"},
             {"packageUris", "it belongs in pythonPackageSpec"},
             {"pythonModule", "it belongs in pythonPackageSpec"}});
  ReadImageReference(v, "imageUri", path, p, &c.image_uri);
  ReadStringList(v, "command", path, p, &c.command);
  ReadStringList(v, "args", path, p, &c.args);
  c.env = ParseEnv(v, path, p);
  return c;
}

PythonPackageSpec ParsePython(const json& v, const std::string& path, Problems& p) {
  PythonPackageSpec py;
  if (!v.is_object()) {
    p.Add(path, "must be an object {executorImageUri, packageUris, pythonModule, args, env}, got " +
                    TypeName(v));
    return py;
  }
  CheckKeys(
      v, path, kPythonFields, p,
      {{"imageUri", "a pythonPackageSpec names its image as 'executorImageUri'"},
       {"command", "a pythonPackageSpec runs 'pythonModule'; use containerSpec for a command"}});
  ReadImageReference(v, "executorImageUri", path, p, &py.executor_image_uri);
  ReadStringList(v, "packageUris", path, p, &py.package_uris);
  ReadString(v, "pythonModule", path, p, &py.python_module);
  ReadStringList(v, "args", path, p, &py.args);
  py.env = ParseEnv(v, path, p);
  return py;
}

MachineSpec ParseMachine(const json& v, const std::string& path, Problems& p) {
  MachineSpec m;
  if (!v.is_object()) {
    p.Add(path,
          "must be an object {machineType, acceleratorType, acceleratorCount}, got " + TypeName(v));
    return m;
  }
  CheckKeys(v, path, kMachineFields, p);
  ReadString(v, "machineType", path, p, &m.machine_type);
  ReadEnumName(v, "acceleratorType", path, kAcceleratorTypeEnum, p, &m.accelerator_type);
  m.accelerator_type = CanonicalAcceleratorType(m.accelerator_type);
  if (m.accelerator_type == "ACCELERATOR_TYPE_UNSPECIFIED") m.accelerator_type.clear();
  if (const json* c = Get(v, "acceleratorCount")) {
    std::string count_path = Join(path, "acceleratorCount");
    if (c->is_number_float()) {
      double x = c->get<double>();
      if ((x > 0 && x < 1) || (x >= 0 && x <= kInt32Max && x == std::floor(x))) {
        m.accelerator_count = x;  // below 1: a share of one GPU (Stoker's extension)
      } else {
        p.Add(count_path,
              "must be a whole number of GPUs, or a share of one GPU between 0 and 1 (such as "
              "0.25), got " +
                  c->dump());
      }
    } else if (auto n = ReadInteger(*c, count_path, kInt32Min, kInt32Max, p)) {
      m.accelerator_count = static_cast<double>(*n);
    }
  }
  ReadVerbatim(v, path, MachineVerbatim(), p, &m.extra);
  return m;
}

WorkerPoolSpec ParsePool(const json& v, const std::string& path, Problems& p) {
  WorkerPoolSpec pool;
  if (v.is_null() || (v.is_object() && v.empty())) {
    pool.empty = true;
    return pool;
  }
  if (!v.is_object()) {
    p.Add(path, "must be an object ({} for an unused pool), got " + TypeName(v));
    return pool;
  }
  CheckKeys(v, path, kPoolFields, p,
            {{"imageUri", "it belongs in containerSpec"},
             {"command", "it belongs in containerSpec"},
             {"args", "it belongs in containerSpec or pythonPackageSpec"},
             {"env", "it belongs in containerSpec or pythonPackageSpec"},
             {"executorImageUri", "it belongs in pythonPackageSpec"},
             {"packageUris", "it belongs in pythonPackageSpec"},
             {"pythonModule", "it belongs in pythonPackageSpec"},
             {"machineType", "it belongs in machineSpec"},
             {"acceleratorType", "it belongs in machineSpec"},
             {"acceleratorCount", "it belongs in machineSpec"}});
  if (const json* m = Get(v, "machineSpec")) {
    pool.machine_spec = ParseMachine(*m, Join(path, "machineSpec"), p);
  }
  if (const json* r = Get(v, "replicaCount")) {
    if (auto n = ReadInteger(*r, Join(path, "replicaCount"), std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(), p)) {
      pool.replica_count = *n;
    }
  }
  if (const json* c = Get(v, "containerSpec")) {
    pool.container_spec = ParseContainer(*c, Join(path, "containerSpec"), p);
  }
  if (const json* py = Get(v, "pythonPackageSpec")) {
    pool.python_package_spec = ParsePython(*py, Join(path, "pythonPackageSpec"), p);
  }
  ReadVerbatim(v, path, PoolVerbatim(), p, &pool.extra);
  return pool;
}

Scheduling ParseScheduling(const json& v, const std::string& path, Problems& p) {
  Scheduling s;
  if (!v.is_object()) {
    p.Add(path, "must be an object {timeout, strategy, ...}, got " + TypeName(v));
    return s;
  }
  CheckKeys(v, path, kSchedulingFields, p);
  if (auto t = ReadDuration(v, "timeout", path, p)) s.timeout_seconds = *t;
  ReadBool(v, "restartJobOnWorkerRestart", path, p, &s.restart_job_on_worker_restart);
  ReadEnumName(v, "strategy", path, kStrategyEnum, p, &s.strategy);
  if (s.strategy == "STRATEGY_UNSPECIFIED") s.strategy.clear();
  ReadBool(v, "disableRetries", path, p, &s.disable_retries);
  s.max_wait_seconds = ReadDuration(v, "maxWaitDuration", path, p);
  if (const json* n = Get(v, "priority")) {
    if (auto x = ReadInteger(*n, Join(path, "priority"), -kMaxPriority, kMaxPriority, p)) {
      s.priority = static_cast<int>(*x);
    }
  }
  if (const json* n = Get(v, "maxRetries")) {
    if (auto x = ReadInteger(*n, Join(path, "maxRetries"), 0, kMaxRetries, p)) {
      s.max_retries = static_cast<int>(*x);
    }
  }
  return s;
}

// ---- Top level. ----

// `also_known`: top-level keys that the caller reads itself (a bare spec's displayName).
CustomJobSpec ParseSpec(const json& v, const std::string& path, Problems& p,
                        const Names& also_known = {}) {
  CustomJobSpec spec;
  if (!v.is_object()) {
    p.Add(path, "must be an object {workerPoolSpecs: [...], ...}, got " + TypeName(v));
    return spec;
  }
  Names known = kSpecFields;
  known.insert(known.end(), also_known.begin(), also_known.end());
  CheckKeys(v, path, known, p,
            {{"displayName",
              "it is a CustomJob field; give the whole CustomJob with this spec "
              "under 'jobSpec'"},
             {"labels",
              "it is a CustomJob field; give the whole CustomJob with this spec under "
              "'jobSpec'"},
             {"encryptionSpec",
              "it is a CustomJob field; give the whole CustomJob with this "
              "spec under 'jobSpec'"},
             {"machineSpec", "it belongs in a workerPoolSpecs entry"},
             {"containerSpec", "it belongs in a workerPoolSpecs entry"},
             {"pythonPackageSpec", "it belongs in a workerPoolSpecs entry"},
             {"replicaCount", "it belongs in a workerPoolSpecs entry"},
             {"timeout", "it belongs in scheduling"}});
  std::string pools = Join(path, "workerPoolSpecs");
  if (const json* w = Get(v, "workerPoolSpecs")) {
    if (!w->is_array()) {
      p.Add(pools, "must be a list of worker pools, got " + TypeName(*w));
    } else {
      for (size_t i = 0; i < w->size(); ++i) {
        spec.worker_pool_specs.push_back(ParsePool((*w)[i], At(pools, i), p));
      }
      // Empty pools only hold later positions open; trailing ones hold nothing (as the SDK does).
      while (spec.worker_pool_specs.size() > 1 && spec.worker_pool_specs.back().empty) {
        spec.worker_pool_specs.pop_back();
      }
    }
  }
  if (const json* s = Get(v, "scheduling")) {
    spec.scheduling = ParseScheduling(*s, Join(path, "scheduling"), p);
  }
  if (const json* b = Get(v, "baseOutputDirectory")) {
    std::string bp = Join(path, "baseOutputDirectory");
    if (!b->is_object()) {
      p.Add(bp, "must be an object {outputUriPrefix: \"gs://BUCKET/dir\"}, got " + TypeName(*b));
    } else {
      CheckKeys(*b, bp, {"outputUriPrefix"}, p);
      if (!ReadString(*b, "outputUriPrefix", bp, p, &spec.base_output_directory) ||
          spec.base_output_directory.empty()) {
        p.AddUnlessCovered(Join(bp, "outputUriPrefix"),
                           "required; give the output directory, such as gs://BUCKET/dir");
      }
    }
  }
  ReadVerbatim(v, path, SpecVerbatim(), p, &spec.passthrough);
  CheckSpec(spec, path, p);
  return spec;
}

// A bare CustomJobSpec has no jobSpec but has a CustomJobSpec field at the top.
bool IsBareSpec(const json& j) {
  if (j.contains("jobSpec")) return false;
  for (const auto& [key, value] : j.items()) {
    if (Contains(kSpecFields, key) || Contains(kSpecFields, SnakeToCamel(key))) return true;
  }
  return false;
}

}  // namespace

Result<CustomJob> ParseCustomJob(const json& j) {
  if (!j.is_object()) {
    return InvalidArgument(
        "(top level): must be an object: a CustomJob {displayName, jobSpec: {workerPoolSpecs: "
        "[...]}} or a bare CustomJobSpec {workerPoolSpecs: [...]}, got " +
        TypeName(j));
  }
  Problems p;
  CustomJob job;
  if (IsBareSpec(j)) {
    // gcloud's --config form. displayName and labels may ride along at the top.
    bool named = ReadString(j, "displayName", "", p, &job.display_name);
    ParseLabels(j, p, &job.labels);
    job.job_spec = ParseSpec(j, "", p, {"displayName", "labels"});
    if (named) CheckDisplayName(job.display_name, p);
    CheckLabels(job.labels, p);
  } else {
    Misplaced misplaced;
    for (auto f : kSpecFields) misplaced.emplace_back(f, "it belongs in jobSpec");
    CheckKeys(j, "", kJobFields, p, misplaced, kJobOutputOnly);
    ReadString(j, "displayName", "", p, &job.display_name);
    ParseLabels(j, p, &job.labels);
    if (const json* spec = Get(j, "jobSpec")) {
      job.job_spec = ParseSpec(*spec, "jobSpec", p);
    } else {
      p.AddUnlessCovered("jobSpec",
                         "required; give a CustomJob {displayName, jobSpec: {workerPoolSpecs: "
                         "[...]}} or a bare CustomJobSpec {workerPoolSpecs: [...]}");
    }
    ReadVerbatim(j, "", JobVerbatim(), p, &job.passthrough);
    CheckDisplayName(job.display_name, p);
    CheckLabels(job.labels, p);
  }
  if (!p.empty()) return p.ToStatus();
  return job;
}

Result<CustomJobSpec> ParseCustomJobSpec(const json& j, const std::string& path) {
  Problems p;
  CustomJobSpec spec = ParseSpec(j, path, p);
  if (!p.empty()) return p.ToStatus();
  return spec;
}

Status Validate(const CustomJob& job) {
  Problems p;
  CheckDisplayName(job.display_name, p);
  CheckLabels(job.labels, p);
  CheckSpec(job.job_spec, "jobSpec", p);
  return p.empty() ? OkStatus() : p.ToStatus();
}

namespace {

json EnvToJson(const std::vector<EnvVar>& env) {
  json out = json::array();
  for (const auto& e : env) out.push_back({{"name", e.name}, {"value", e.value}});
  return out;
}

json PoolToJson(const WorkerPoolSpec& pool) {
  if (pool.empty) return json::object();
  json out = pool.extra.is_object() ? pool.extra : json::object();
  const MachineSpec& m = pool.machine_spec;
  json machine = m.extra.is_object() ? m.extra : json::object();
  if (!m.machine_type.empty()) machine["machineType"] = m.machine_type;
  if (!m.accelerator_type.empty()) machine["acceleratorType"] = m.accelerator_type;
  if (!m.accelerator_type.empty() || m.accelerator_count != 0) {
    if (m.accelerator_count == std::floor(m.accelerator_count)) {
      machine["acceleratorCount"] = static_cast<int64_t>(m.accelerator_count);
    } else {
      machine["acceleratorCount"] = m.accelerator_count;
    }
  }
  out["machineSpec"] = machine;
  out["replicaCount"] = std::to_string(pool.replica_count);
  if (pool.container_spec) {
    const ContainerSpec& c = *pool.container_spec;
    json cj = json::object();
    if (!c.image_uri.empty()) cj["imageUri"] = c.image_uri;
    if (!c.command.empty()) cj["command"] = c.command;
    if (!c.args.empty()) cj["args"] = c.args;
    if (!c.env.empty()) cj["env"] = EnvToJson(c.env);
    out["containerSpec"] = cj;
  }
  if (pool.python_package_spec) {
    const PythonPackageSpec& py = *pool.python_package_spec;
    json pj = json::object();
    if (!py.executor_image_uri.empty()) pj["executorImageUri"] = py.executor_image_uri;
    if (!py.package_uris.empty()) pj["packageUris"] = py.package_uris;
    if (!py.python_module.empty()) pj["pythonModule"] = py.python_module;
    if (!py.args.empty()) pj["args"] = py.args;
    if (!py.env.empty()) pj["env"] = EnvToJson(py.env);
    out["pythonPackageSpec"] = pj;
  }
  return out;
}

}  // namespace

json ToJson(const CustomJobSpec& spec) {
  json out = spec.passthrough.is_object() ? spec.passthrough : json::object();
  json pools = json::array();
  for (const auto& pool : spec.worker_pool_specs) pools.push_back(PoolToJson(pool));
  out["workerPoolSpecs"] = pools;
  const Scheduling& s = spec.scheduling;
  json sched = {{"timeout", FormatSeconds(s.timeout_seconds)}};
  if (s.restart_job_on_worker_restart) sched["restartJobOnWorkerRestart"] = true;
  if (!s.strategy.empty()) sched["strategy"] = s.strategy;
  if (s.disable_retries) sched["disableRetries"] = true;
  if (s.max_wait_seconds) sched["maxWaitDuration"] = FormatSeconds(*s.max_wait_seconds);
  if (s.priority != 0) sched["priority"] = s.priority;
  if (s.max_retries != 0) sched["maxRetries"] = s.max_retries;
  out["scheduling"] = sched;
  if (!spec.base_output_directory.empty()) {
    out["baseOutputDirectory"] = {{"outputUriPrefix", spec.base_output_directory}};
  }
  return out;
}

json ToJson(const CustomJob& job) {
  json out = job.passthrough.is_object() ? job.passthrough : json::object();
  out["displayName"] = job.display_name;
  if (!job.labels.empty()) out["labels"] = job.labels;
  out["jobSpec"] = ToJson(job.job_spec);
  return out;
}

std::vector<std::string> AcceptGcloudForms(json& j) {
  std::vector<std::string> warnings;
  if (!j.is_object()) return warnings;
  auto spec_at = [&j](const char* key) -> std::pair<json*, std::string> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_object()) return {nullptr, ""};
    return {&*it, std::string(key) + "."};
  };
  for (auto [spec, prefix] :
       {spec_at("jobSpec"), spec_at("trialJobSpec"), std::pair<json*, std::string>{&j, ""}}) {
    if (spec == nullptr) continue;
    auto pools = spec->find("workerPoolSpecs");
    if (pools == spec->end() || !pools->is_object()) continue;
    *pools = json::array({*pools});
    warnings.push_back(prefix +
                       "workerPoolSpecs is one mapping; read as a list of that one pool "
                       "(the Vertex API takes a list: put '- ' before its first key)");
  }
  return warnings;
}

std::vector<std::string> UnhonouredFields(const CustomJob& job) {
  std::vector<std::string> out;
  if (job.passthrough.is_object() && job.passthrough.contains("encryptionSpec")) {
    out.push_back("encryptionSpec");
  }
  const CustomJobSpec& spec = job.job_spec;
  const json& pt = spec.passthrough.is_object() ? spec.passthrough : json::object();
  for (auto f : kUnhonouredSpecFields) {
    std::string key(f);
    if (pt.contains(key)) out.push_back("jobSpec." + key);
  }
  for (const char* flag : {"enableWebAccess", "enableDashboardAccess"}) {
    if (pt.contains(flag) && pt[flag] == true) out.push_back(std::string("jobSpec.") + flag);
  }
  for (size_t i = 0; i < spec.worker_pool_specs.size(); ++i) {
    const WorkerPoolSpec& pool = spec.worker_pool_specs[i];
    if (pool.empty) continue;
    std::string path = At("jobSpec.workerPoolSpecs", i);
    const json& mx = pool.machine_spec.extra;
    for (const char* f : {"reservationAffinity", "tpuTopology"}) {
      if (mx.is_object() && mx.contains(f)) out.push_back(path + ".machineSpec." + f);
    }
    for (const char* f : {"lustreMounts", "diskSpec"}) {
      if (pool.extra.is_object() && pool.extra.contains(f)) out.push_back(path + "." + f);
    }
  }
  // SPOT makes a job preemptible (docs/preemption.md); FLEX_START's
  // delayed, capacity-bound start has no counterpart here.
  if (spec.scheduling.strategy == "FLEX_START") {
    out.push_back("jobSpec.scheduling.strategy");
  }
  return out;
}

}  // namespace stoker::spec
