// Reading a legacy AI Platform Training job (ai_platform.h): a trainingInput
// becomes a CustomJob, and a CustomJob's state is shown as a legacy Job. The
// tables (scale tiers, machine names, images) are in ai_platform_tables.cc;
// the gcloud flags in ai_platform_flags.cc.
#include "spec/ai_platform.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "common/time.h"
#include "spec/ai_platform_internal.h"
#include "spec/json_fields.h"

namespace stoker::spec {
namespace {

using internal::CanonicalAcceleratorType;
using internal::CheckKeys;
using internal::Contains;
using internal::ExecutorImage;
using internal::FindLegacyGpuMachine;
using internal::FindTier;
using internal::Get;
using internal::HasBuiltInGpu;
using internal::IsTpu;
using internal::Join;
using internal::JoinNames;
using internal::kGpuTypes;
using internal::kNoTpu;
using internal::kRoles;
using internal::kScaleTiers;
using internal::LegacyGpuMachine;
using internal::Names;
using internal::ParseLabels;
using internal::ParseRuntimeVersion;
using internal::Problems;
using internal::ReadBool;
using internal::ReadDuration;
using internal::ReadInteger;
using internal::ReadOptionalStringList;
using internal::ReadString;
using internal::ReadStringList;
using internal::Role;
using internal::ScaleTierName;
using internal::Tier;
using internal::TierPool;
using internal::TypeName;
using nlohmann::json;

// Reference §6, TrainingInput, in the discovery document's order.
const Names kTrainingInputFields = {"scaleTier",
                                    "masterType",
                                    "masterConfig",
                                    "workerType",
                                    "workerConfig",
                                    "workerCount",
                                    "parameterServerType",
                                    "parameterServerConfig",
                                    "parameterServerCount",
                                    "evaluatorType",
                                    "evaluatorConfig",
                                    "evaluatorCount",
                                    "packageUris",
                                    "pythonModule",
                                    "args",
                                    "hyperparameters",
                                    "region",
                                    "jobDir",
                                    "runtimeVersion",
                                    "pythonVersion",
                                    "scheduling",
                                    "network",
                                    "serviceAccount",
                                    "useChiefInTfConfig",
                                    "encryptionConfig",
                                    "enableWebAccess"};
const Names kReplicaConfigFields = {"acceleratorConfig", "imageUri",   "containerCommand",
                                    "containerArgs",     "diskConfig", "tpuTfVersion"};
const Names kAcceleratorConfigFields = {"count", "type"};
const Names kDiskConfigFields = {"bootDiskType", "bootDiskSizeGb"};
const Names kLegacySchedulingFields = {"maxRunningTime", "maxWaitTime", "priority"};
const Names kLegacyJobFields = {"jobId", "trainingInput", "labels", "etag"};
// Output-only legacy Job fields: dropped on input so `describe` output can be resubmitted.
const Names kLegacyJobOutputOnly = {"createTime",   "startTime",      "endTime",    "state",
                                    "errorMessage", "trainingOutput", "jobPosition"};
constexpr double kMinMaxWaitSeconds = 1800;  // §6 Scheduling.maxWaitTime minimum
constexpr size_t kMaxJobId = 128;
// Counts (workerCount, acceleratorConfig.count) are int64s; ParseCustomJob bounds them further.
constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// A ReplicaConfig (§6) as read.
struct ReplicaConfig {
  std::string accelerator_type;  // "" = none
  int64_t accelerator_count = 0;
  bool has_accelerator_config = false;
  std::string image_uri;
  std::optional<std::vector<std::string>> command;
  std::optional<std::vector<std::string>> args;
  json disk;  // diskConfig verbatim, or null
};

ReplicaConfig ParseReplicaConfig(const json& v, const std::string& path, Problems& p,
                                 std::vector<std::string>* unhonoured) {
  ReplicaConfig c;
  if (!v.is_object()) {
    p.Add(path, "must be an object {acceleratorConfig, imageUri, ...}, got " + TypeName(v));
    return c;
  }
  CheckKeys(v, path, kReplicaConfigFields, p);
  if (const json* a = Get(v, "acceleratorConfig")) {
    std::string ap = Join(path, "acceleratorConfig");
    if (!a->is_object()) {
      p.Add(ap, "must be an object {count, type}, got " + TypeName(*a));
    } else {
      c.has_accelerator_config = true;
      CheckKeys(*a, ap, kAcceleratorConfigFields, p);
      ReadString(*a, "type", ap, p, &c.accelerator_type);
      c.accelerator_type = CanonicalAcceleratorType(c.accelerator_type);
      if (c.accelerator_type == "ACCELERATOR_TYPE_UNSPECIFIED") c.accelerator_type.clear();
      std::optional<int64_t> count;
      if (const json* n = Get(*a, "count")) {
        count = ReadInteger(*n, Join(ap, "count"), 0, kMaxCount, p);
      }
      if (IsTpu(c.accelerator_type)) {
        p.Add(Join(ap, "type"), kNoTpu);
      } else if (!c.accelerator_type.empty() && !Contains(kGpuTypes, c.accelerator_type)) {
        p.Add(Join(ap, "type"), "'" + c.accelerator_type +
                                    "' is not an accelerator type; use one of " +
                                    JoinNames(kGpuTypes));
      }
      if (c.accelerator_type.empty() && count.value_or(0) > 0) {
        p.Add(Join(ap, "type"), "required when count is set; use one of " + JoinNames(kGpuTypes));
      } else if (!c.accelerator_type.empty() && count && *count == 0) {
        p.Add(Join(ap, "count"), "must be at least 1 when type is set");
      }
      c.accelerator_count = count.value_or(c.accelerator_type.empty() ? 0 : 1);
    }
  }
  ReadImageReference(v, "imageUri", path, p, &c.image_uri);
  c.command = ReadOptionalStringList(v, "containerCommand", path, p);
  c.args = ReadOptionalStringList(v, "containerArgs", path, p);
  if (const json* d = Get(v, "diskConfig")) {
    std::string dp = Join(path, "diskConfig");
    if (!d->is_object()) {
      p.Add(dp, "must be an object {bootDiskType, bootDiskSizeGb}, got " + TypeName(*d));
    } else {
      CheckKeys(*d, dp, kDiskConfigFields, p);
      c.disk = *d;  // Vertex diskSpec has the same fields; ParseCustomJob checks their values
    }
  }
  std::string tpu_version;
  if (ReadString(v, "tpuTfVersion", path, p, &tpu_version)) {
    unhonoured->push_back(Join(path, "tpuTfVersion"));
  }
  return c;
}

bool IsJobIdChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

void CheckJobId(const std::string& id, Problems& p) {
  if (id.empty()) {
    p.Add("jobId", "required; name the job with letters, digits and underscores");
  } else if (!std::isalpha(static_cast<unsigned char>(id[0])) ||
             !std::all_of(id.begin(), id.end(), IsJobIdChar)) {
    p.Add("jobId", "'" + id +
                       "' must start with a letter and use only letters, digits and "
                       "underscores");
  } else if (id.size() > kMaxJobId) {
    p.Add("jobId", "is " + std::to_string(id.size()) + " characters long; at most 128 are allowed");
  }
}

// trainingInput.scaleTier: BASIC (the proto default) when absent; "" when
// it names no tier (then reported).
std::string ReadScaleTier(const json& ti, const std::string& prefix, Problems& p) {
  std::string tier = "BASIC";
  if (ReadString(ti, "scaleTier", prefix, p, &tier) && !Contains(kScaleTiers, tier)) {
    std::string upper = ScaleTierName(tier);
    p.Add(Join(prefix, "scaleTier"),
          "'" + tier + "' is not a scale tier; use one of " + JoinNames(kScaleTiers) +
              (Contains(kScaleTiers, upper) ? " (here: " + upper + ")" : ""));
    tier.clear();
  }
  return tier;
}

// The trainingInput fields that every pool shares.
struct CommonFields {
  std::vector<std::string> package_uris;
  std::string module;
  std::optional<std::vector<std::string>> args;
  std::string job_dir;
  std::optional<std::pair<int, int>> runtime;
};

// Reads the shared fields, and into `out` region, hyperparameters,
// useChiefInTfConfig and the unhonoured runtime and Python versions.
CommonFields ReadCommonFields(const json& ti, const std::string& prefix, Problems& p,
                              LegacyTraining& out) {
  CommonFields f;
  ReadStringList(ti, "packageUris", prefix, p, &f.package_uris);
  ReadString(ti, "pythonModule", prefix, p, &f.module);
  f.args = ReadOptionalStringList(ti, "args", prefix, p);
  ReadString(ti, "region", prefix, p, &out.region);
  ReadString(ti, "jobDir", prefix, p, &f.job_dir);
  std::string runtime_text;
  if (ReadString(ti, "runtimeVersion", prefix, p, &runtime_text)) {
    f.runtime = ParseRuntimeVersion(runtime_text);
    if (!f.runtime) {  // quiet after "must be a string"
      p.AddUnlessCovered(Join(prefix, "runtimeVersion"),
                         "'" + runtime_text + "' is not a runtime version like '2.11'");
    }
    out.unhonoured.push_back(Join(prefix, "runtimeVersion"));
  }
  std::string python_version;
  if (ReadString(ti, "pythonVersion", prefix, p, &python_version)) {
    out.unhonoured.push_back(Join(prefix, "pythonVersion"));
  }
  if (const json* h = Get(ti, "hyperparameters")) {
    if (!h->is_object()) {
      p.Add(Join(prefix, "hyperparameters"),
            "must be an object {goal, params, ...}, got " + TypeName(*h));
    }
    out.hyperparameters = *h;
  }
  ReadBool(ti, "useChiefInTfConfig", prefix, p, &out.use_chief_in_tf_config);
  return f;
}

// The replica roles as read, indexed like kRoles.
struct Roles {
  std::array<std::string, 4> type;
  std::array<int64_t, 4> count = {1, 0, 0, 0};
  std::array<ReplicaConfig, 4> config;
  std::array<bool, 4> count_given = {false, false, false, false};
};

Roles ReadRoles(const json& ti, const std::string& prefix, Problems& p,
                std::vector<std::string>* unhonoured) {
  Roles roles;
  for (size_t r = 0; r < kRoles.size(); ++r) {
    const Role& role = kRoles[r];
    ReadString(ti, role.type_key, prefix, p, &roles.type[r]);
    if (role.count_key != nullptr) {
      if (const json* n = Get(ti, role.count_key)) {
        if (auto x = ReadInteger(*n, Join(prefix, role.count_key), 0, kMaxCount, p)) {
          roles.count[r] = *x;
          roles.count_given[r] = true;
        }
      }
    }
    if (const json* c = Get(ti, role.config_key)) {
      roles.config[r] = ParseReplicaConfig(*c, Join(prefix, role.config_key), p, unhonoured);
    }
  }
  return roles;
}

// CUSTOM needs the machine types it runs; a predefined tier decides the
// machines, counts and accelerators itself (given ones are problems).
void ApplyScaleTier(const std::string& tier, Roles& roles, const std::string& prefix, Problems& p) {
  auto path = [&](std::string_view key) { return Join(prefix, key); };
  if (tier == "BASIC_TPU") {
    p.Add(path("scaleTier"), std::string("BASIC_TPU runs on a Cloud TPU; ") + kNoTpu);
  } else if (tier == "CUSTOM") {
    if (roles.type[0].empty()) {
      p.Add(path("masterType"),
            "required when scaleTier is CUSTOM; give a machine type such as n1-standard-8");
    }
    for (size_t r = 1; r < kRoles.size(); ++r) {
      if (roles.count[r] > 0 && roles.type[r].empty()) {
        p.Add(path(kRoles[r].type_key), std::string("required when ") + kRoles[r].count_key +
                                            " is " + std::to_string(roles.count[r]));
      }
    }
  } else if (const Tier* t = FindTier(tier)) {
    std::string why = "only allowed with scaleTier CUSTOM; scaleTier " + tier +
                      " decides the machines (set scaleTier: CUSTOM to choose them)";
    for (size_t r = 0; r < kRoles.size(); ++r) {
      if (!roles.type[r].empty()) p.Add(path(kRoles[r].type_key), why);
      if (roles.count_given[r] && roles.count[r] > 0) p.Add(path(kRoles[r].count_key), why);
      if (roles.config[r].has_accelerator_config) {
        p.Add(Join(path(kRoles[r].config_key), "acceleratorConfig"), why);
      }
      const TierPool tp = r < t->pools.size() ? t->pools[r] : TierPool{};
      roles.type[r] = std::string(tp.machine_type);
      roles.count[r] = tp.count;
      roles.config[r].accelerator_type = std::string(tp.accelerator);
      roles.config[r].accelerator_count = tp.accelerator.empty() ? 0 : 1;
    }
  }
}

// Container fields, checked for every *Config given, whether or not its pool runs.
void CheckContainerFields(const Roles& roles, const CommonFields& common, const std::string& prefix,
                          Problems& p) {
  const ReplicaConfig& master = roles.config[0];
  for (size_t r = 0; r < kRoles.size(); ++r) {
    const ReplicaConfig& c = roles.config[r];
    std::string cpath = Join(prefix, kRoles[r].config_key);
    if (c.args && common.args) {
      p.Add(Join(cpath, "containerArgs"), "cannot be used with " + Join(prefix, "args") +
                                              "; give the program's arguments in one");
    }
    bool has_image = !c.image_uri.empty() || (r > 0 && !master.image_uri.empty());
    if (!has_image && c.command) {
      p.Add(Join(cpath, "containerCommand"), "only allowed with imageUri (a custom container)");
    }
    if (!has_image && c.args) {
      p.Add(Join(cpath, "containerArgs"), "only allowed with imageUri (a custom container)");
    }
  }
}

// The Vertex worker pool of role `r`: its machine (a legacy GPU name becomes
// the machine it was built on plus its GPUs) and its task, a containerSpec
// when it or the master has an image, else a pythonPackageSpec (then
// *python_needed is set).
json BuildPool(size_t r, const Roles& roles, const CommonFields& common, const std::string& prefix,
               Problems& p, bool* python_needed) {
  const ReplicaConfig& c = roles.config[r];
  const ReplicaConfig& master = roles.config[0];
  std::string machine_type = roles.type[r];
  std::string accelerator = c.accelerator_type;
  int64_t accelerators = c.accelerator_count;
  if (IsTpu(machine_type)) p.Add(Join(prefix, kRoles[r].type_key), kNoTpu);
  if (const LegacyGpuMachine* m = FindLegacyGpuMachine(machine_type)) {
    machine_type = std::string(m->machine_type);
    if (accelerator.empty()) {  // an explicit acceleratorConfig wins
      accelerator = std::string(m->accelerator);
      accelerators = m->count;
    }
  }
  json machine = {{"machineType", machine_type}};
  if (!accelerator.empty()) {
    machine["acceleratorType"] = accelerator;
    machine["acceleratorCount"] = accelerators;
  }
  json pool = {{"machineSpec", machine}, {"replicaCount", roles.count[r]}};
  if (!c.disk.is_null()) pool["diskSpec"] = c.disk;

  std::vector<std::string> pool_args;
  // A pool without its own image runs the master's, with the master's command and
  // arguments unless it gives its own.
  bool own_image = !c.image_uri.empty();
  const std::string& image = own_image || r == 0 ? c.image_uri : master.image_uri;
  if (!image.empty()) {
    const auto& command = c.command || own_image ? c.command : master.command;
    const auto& container_args = c.args || own_image ? c.args : master.args;
    pool_args = container_args ? *container_args : common.args.value_or(std::vector<std::string>{});
    if (!common.job_dir.empty()) pool_args.push_back("--job-dir=" + common.job_dir);
    json cs = {{"imageUri", image}};
    if (command) cs["command"] = *command;
    if (!pool_args.empty()) cs["args"] = pool_args;
    pool["containerSpec"] = cs;
  } else {
    *python_needed = true;
    pool_args = common.args.value_or(std::vector<std::string>{});
    if (!common.job_dir.empty()) pool_args.push_back("--job-dir=" + common.job_dir);
    bool gpu = !accelerator.empty() || HasBuiltInGpu(machine_type);
    json py = {{"executorImageUri", ExecutorImage(common.runtime, gpu)},
               {"packageUris", common.package_uris},
               {"pythonModule", common.module}};
    if (!pool_args.empty()) py["args"] = pool_args;
    pool["pythonPackageSpec"] = py;
  }
  return pool;
}

// workerPoolSpecs: the roles that run, in their positions, up to the last
// one (an absent middle pool is {}). The package and module are required
// when a pool runs them, and unhonoured when none does.
json BuildWorkerPools(const Roles& roles, const CommonFields& common, const std::string& prefix,
                      Problems& p, std::vector<std::string>* unhonoured) {
  std::array<json, 4> pools;
  bool python_needed = false;
  for (size_t r = 0; r < kRoles.size(); ++r) {
    pools[r] = json::object();
    if (roles.count[r] == 0 || roles.type[r].empty()) continue;
    pools[r] = BuildPool(r, roles, common, prefix, p, &python_needed);
  }
  if (python_needed) {
    if (common.package_uris.empty()) {
      p.Add(Join(prefix, "packageUris"),
            "required: give the gs:// URIs of the trainer package, or masterConfig.imageUri to "
            "run a custom container");
    }
    if (common.module.empty()) {
      p.Add(Join(prefix, "pythonModule"),
            "required: give the module to run, such as trainer.task, or masterConfig.imageUri "
            "to run a custom container");
    }
  } else {
    if (!common.package_uris.empty()) unhonoured->push_back(Join(prefix, "packageUris"));
    if (!common.module.empty()) unhonoured->push_back(Join(prefix, "pythonModule"));
  }
  json pool_list = json::array();
  size_t last = 0;
  for (size_t r = 0; r < pools.size(); ++r) {
    if (!pools[r].empty()) last = r;
  }
  for (size_t r = 0; r <= last; ++r) pool_list.push_back(pools[r]);
  return pool_list;
}

// trainingInput.scheduling as the jobSpec's scheduling; empty when nothing is set.
json ReadScheduling(const json& s, const std::string& sp, Problems& p) {
  json sched = json::object();
  if (!s.is_object()) {
    p.Add(sp, "must be an object {maxRunningTime, maxWaitTime, priority}, got " + TypeName(s));
    return sched;
  }
  CheckKeys(s, sp, kLegacySchedulingFields, p);
  if (auto t = ReadDuration(s, "maxRunningTime", sp, p)) {
    if (*t <= 0) {
      p.Add(Join(sp, "maxRunningTime"), "must be positive");
    } else {
      sched["timeout"] = FormatDuration(*t);
    }
  }
  if (auto w = ReadDuration(s, "maxWaitTime", sp, p)) {
    if (*w < kMinMaxWaitSeconds) {
      p.Add(Join(sp, "maxWaitTime"), "must be at least 1800s, got " + FormatDuration(*w));
    } else {
      sched["maxWaitDuration"] = FormatDuration(*w);
    }
  }
  if (const json* pr = Get(s, "priority")) {
    if (!pr->is_number_integer() || pr->get<int64_t>() < 0 || pr->get<int64_t>() > 1000) {
      p.Add(Join(sp, "priority"), "must be a whole number from 0 to 1000, got " + pr->dump());
    } else if (pr->get<int64_t>() != 0) {
      sched["priority"] = pr->get<int64_t>();  // Stoker's jobSpec.scheduling.priority
    }
  }
  return sched;
}

// network, serviceAccount and enableWebAccess: kept in the jobSpec, not acted on.
void ReadKeptSpecFields(const json& ti, const std::string& prefix, Problems& p, json& spec,
                        std::vector<std::string>* unhonoured) {
  std::string text;
  if (ReadString(ti, "network", prefix, p, &text)) {
    spec["network"] = text;
    unhonoured->push_back(Join(prefix, "network"));
  }
  if (ReadString(ti, "serviceAccount", prefix, p, &text)) {
    spec["serviceAccount"] = text;
    unhonoured->push_back(Join(prefix, "serviceAccount"));
  }
  if (Get(ti, "enableWebAccess") != nullptr) {
    bool web = false;
    ReadBool(ti, "enableWebAccess", prefix, p, &web);
    spec["enableWebAccess"] = web;
    if (web) unhonoured->push_back(Join(prefix, "enableWebAccess"));
  }
}

// encryptionConfig becomes the job's encryptionSpec (kept, not acted on).
void ReadEncryptionConfig(const json& e, const std::string& ep, Problems& p, json& job,
                          std::vector<std::string>* unhonoured) {
  if (!e.is_object()) {
    p.Add(ep, "must be an object {kmsKeyName}, got " + TypeName(e));
    return;
  }
  std::string key;
  CheckKeys(e, ep, {"kmsKeyName"}, p);
  ReadString(e, "kmsKeyName", ep, p, &key);
  job["encryptionSpec"] = {{"kmsKeyName", key}};
  unhonoured->push_back(ep);
}

// ParseCustomJob of the converted job, for the checks the legacy fields do
// not make (label syntax, disk sizes, ...); each of its problems is named
// as the CustomJob field, under `prefix`.
Result<CustomJob> ParseConverted(const json& job, const std::string& prefix) {
  Result<CustomJob> parsed = ParseCustomJob(job);
  if (parsed.ok()) return parsed;
  std::string m;
  const std::string& msg = parsed.status().message();
  size_t start = 0;
  while (start <= msg.size()) {
    size_t end = msg.find('\n', start);
    if (end == std::string::npos) end = msg.size();
    m += (m.empty() ? "" : "\n") + prefix + " (as the CustomJob field " +
         msg.substr(start, end - start) + ")";
    start = end + 1;
  }
  return InvalidArgument(m);
}

}  // namespace

Result<LegacyTraining> FromTrainingInput(const std::string& job_id, const json& ti,
                                         const std::string& prefix,
                                         const std::map<std::string, std::string>& labels) {
  Problems p;
  LegacyTraining out;
  CheckJobId(job_id, p);
  if (!ti.is_object()) {
    p.Add(prefix,
          "must be an object {scaleTier, masterType, packageUris, pythonModule, ...}, got " +
              TypeName(ti));
    return p.ToStatus();
  }
  CheckKeys(ti, prefix, kTrainingInputFields, p);
  std::string tier = ReadScaleTier(ti, prefix, p);
  CommonFields common = ReadCommonFields(ti, prefix, p, out);
  Roles roles = ReadRoles(ti, prefix, p, &out.unhonoured);
  ApplyScaleTier(tier, roles, prefix, p);
  CheckContainerFields(roles, common, prefix, p);

  json spec = {{"workerPoolSpecs", BuildWorkerPools(roles, common, prefix, p, &out.unhonoured)}};
  if (const json* s = Get(ti, "scheduling")) {
    json sched = ReadScheduling(*s, Join(prefix, "scheduling"), p);
    if (!sched.empty()) spec["scheduling"] = sched;
  }
  if (!common.job_dir.empty()) spec["baseOutputDirectory"] = {{"outputUriPrefix", common.job_dir}};
  ReadKeptSpecFields(ti, prefix, p, spec, &out.unhonoured);

  json job = {{"displayName", job_id}, {"jobSpec", spec}};
  if (!labels.empty()) job["labels"] = labels;
  if (const json* e = Get(ti, "encryptionConfig")) {
    ReadEncryptionConfig(*e, Join(prefix, "encryptionConfig"), p, job, &out.unhonoured);
  }
  if (!p.empty()) return p.ToStatus();
  Result<CustomJob> parsed = ParseConverted(job, prefix);
  if (!parsed.ok()) return parsed.status();
  out.job = std::move(parsed).value();
  return out;
}

Result<LegacyTraining> FromLegacyJob(const json& job) {
  if (!job.is_object()) {
    return InvalidArgument("(top level): must be a Job object {jobId, trainingInput, labels}");
  }
  Problems p;
  if (job.contains("predictionInput")) {
    p.Add("predictionInput", "prediction jobs are not supported; Stoker runs training jobs only");
  }
  Names ignored = kLegacyJobOutputOnly;
  ignored.push_back("predictionInput");
  CheckKeys(job, "", kLegacyJobFields, p, /*misplaced=*/{}, ignored);
  std::string id;
  ReadString(job, "jobId", "", p, &id);
  std::map<std::string, std::string> labels;
  ParseLabels(job, p, &labels);
  const json* ti = Get(job, "trainingInput");
  if (ti == nullptr) p.Add("trainingInput", "required; give the training job's trainingInput");
  if (!p.empty()) return p.ToStatus();
  return FromTrainingInput(id, *ti, "trainingInput", labels);
}

std::string LegacyStateName(const std::string& vertex_state) {
  std::string s = vertex_state;
  if (s.rfind("JOB_STATE_", 0) == 0) s = s.substr(10);
  if (s == "QUEUED" || s == "RUNNING" || s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLING" ||
      s == "CANCELLED") {
    return s;
  }
  if (s == "PENDING") return "PREPARING";
  if (s == "PAUSED") return "QUEUED";
  if (s == "UPDATING") return "RUNNING";
  if (s == "PARTIALLY_SUCCEEDED") return "SUCCEEDED";
  if (s == "EXPIRED") return "FAILED";
  return "STATE_UNSPECIFIED";
}

json ToLegacyJob(const std::string& job_id, const json& training_input,
                 const LegacyJobStatus& status) {
  json out = {{"jobId", job_id}};
  out["trainingInput"] = training_input.is_null() ? json::object() : training_input;
  if (!status.create_time.empty()) out["createTime"] = status.create_time;
  if (!status.start_time.empty()) out["startTime"] = status.start_time;
  if (!status.end_time.empty()) out["endTime"] = status.end_time;
  out["state"] = LegacyStateName(status.vertex_state);
  if (!status.error_message.empty()) out["errorMessage"] = status.error_message;
  out["trainingOutput"] =
      status.training_output.is_null() ? json::object() : status.training_output;
  if (!status.labels.empty()) out["labels"] = status.labels;
  if (!status.etag.empty()) out["etag"] = status.etag;
  return out;
}

json ToLegacyJob(const std::string& job_id, const json& training_input,
                 const std::string& vertex_state, const std::string& create_time,
                 const std::string& start_time, const std::string& end_time,
                 const std::string& error_message) {
  LegacyJobStatus s;
  s.vertex_state = vertex_state;
  s.create_time = create_time;
  s.start_time = start_time;
  s.end_time = end_time;
  s.error_message = error_message;
  return ToLegacyJob(job_id, training_input, s);
}

}  // namespace stoker::spec
