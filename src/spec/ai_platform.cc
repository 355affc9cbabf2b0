#include "spec/ai_platform.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "common/time.h"
#include "spec/gcloud_flags.h"
#include "spec/json_fields.h"

namespace stoker::spec {
namespace {

using internal::CanonicalAcceleratorType;
using internal::CheckKeys;
using internal::Contains;
using internal::Get;
using internal::Join;
using internal::JoinNames;
using internal::Names;
using internal::ParseLabels;
using internal::Problems;
using internal::ReadBool;
using internal::ReadDuration;
using internal::ReadInteger;
using internal::ReadOptionalStringList;
using internal::ReadString;
using internal::ReadStringList;
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
const Names kSchedulingFields = {"maxRunningTime", "maxWaitTime", "priority"};
const Names kScaleTiers = {"BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU", "CUSTOM"};
const Names kScaleTierFlags = {"basic",     "standard-1", "premium-1",
                               "basic-gpu", "basic-tpu",  "custom"};
const Names kJobFields = {"jobId", "trainingInput", "labels", "etag"};
// Output-only legacy Job fields: dropped on input so `describe` output can be resubmitted.
const Names kJobOutputOnly = {"createTime",   "startTime",      "endTime",    "state",
                              "errorMessage", "trainingOutput", "jobPosition"};
// GPU types a legacy acceleratorConfig may name: the legacy enum's NVIDIA types (§6) and,
// as a Stoker extension, the newer Vertex ones (§1.8). TPUs are refused.
const Names kGpuTypes = {"NVIDIA_TESLA_K80",      "NVIDIA_TESLA_P100",  "NVIDIA_TESLA_V100",
                         "NVIDIA_TESLA_P4",       "NVIDIA_TESLA_T4",    "NVIDIA_TESLA_A100",
                         "NVIDIA_A100_80GB",      "NVIDIA_L4",          "NVIDIA_H100_80GB",
                         "NVIDIA_H100_MEGA_80GB", "NVIDIA_H200_141GB",  "NVIDIA_B200",
                         "NVIDIA_GB200",          "NVIDIA_RTX_PRO_6000"};
constexpr double kMinMaxWaitSeconds = 1800;  // §6 Scheduling.maxWaitTime minimum
constexpr size_t kMaxJobId = 128;
// Counts (workerCount, acceleratorConfig.count) are int64s; ParseCustomJob bounds them further.
constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// One pool of a predefined scale tier; count 0 = no such pool.
struct TierPool {
  std::string_view machine_type;
  int64_t count = 0;
  std::string_view accelerator;  // "" = none
};
struct Tier {
  std::string_view name;
  std::array<TierPool, 3> pools;  // master, workers, parameter servers
};
// The predefined scale tiers. UNCONFIRMED (reference §5.5 and §8): the
// service never published exact machines or replica counts; these are the
// historically documented ones (BASIC_GPU's K80 is deprecated but still a
// valid enum). Change them here only.
const std::array<Tier, 4> kTiers = {{
    {"BASIC", {{{"n1-standard-4", 1, ""}, {}, {}}}},
    {"BASIC_GPU", {{{"n1-standard-8", 1, "NVIDIA_TESLA_K80"}, {}, {}}}},
    {"STANDARD_1", {{{"n1-highcpu-8", 1, ""}, {"n1-highcpu-8", 4, ""}, {"n1-standard-4", 3, ""}}}},
    {"PREMIUM_1",
     {{{"n1-highcpu-16", 1, ""}, {"n1-highcpu-16", 19, ""}, {"n1-highmem-8", 11, ""}}}},
}};

// Legacy machine names with GPUs that the resources catalog does not know:
// the Compute Engine machine each was built on, and its GPUs (from the old
// AI Platform machine-type table). standard_gpu and complex_model_m_gpu are
// in the catalog and pass through.
struct LegacyGpuMachine {
  std::string_view name;
  std::string_view machine_type;
  std::string_view accelerator;
  int count;
};
const std::array<LegacyGpuMachine, 7> kLegacyGpuMachines = {{
    {"standard_p100", "n1-standard-8", "NVIDIA_TESLA_P100", 1},
    {"complex_model_m_p100", "n1-standard-16", "NVIDIA_TESLA_P100", 4},
    {"standard_v100", "n1-standard-8", "NVIDIA_TESLA_V100", 1},
    {"large_model_v100", "n1-highmem-8", "NVIDIA_TESLA_V100", 1},
    {"complex_model_m_v100", "n1-standard-16", "NVIDIA_TESLA_V100", 4},
    {"complex_model_l_v100", "n1-standard-32", "NVIDIA_TESLA_V100", 8},
    {"complex_model_l_gpu", "n1-standard-32", "NVIDIA_TESLA_K80", 8},
}};

// Machine types that carry GPUs without an acceleratorConfig (for the image choice).
bool HasBuiltInGpu(const std::string& machine_type) {
  for (std::string_view prefix : {"a2-", "a3-", "g2-"}) {
    if (machine_type.rfind(prefix, 0) == 0) return true;
  }
  return machine_type == "standard_gpu" || machine_type == "complex_model_m_gpu";
}

// The four replica roles of a trainingInput and their Vertex pool positions (§1.5).
struct Role {
  const char* name;        // for messages
  const char* type_key;    // masterType
  const char* config_key;  // masterConfig
  const char* count_key;   // nullptr: the master is always one replica
  const char* type_flag;   // the gcloud flag that sets type_key ("" = none)
};
const std::array<Role, 4> kRoles = {{
    {"master", "masterType", "masterConfig", nullptr, "--master-machine-type"},
    {"worker", "workerType", "workerConfig", "workerCount", "--worker-machine-type"},
    {"parameter server", "parameterServerType", "parameterServerConfig", "parameterServerCount",
     "--parameter-server-machine-type"},
    {"evaluator", "evaluatorType", "evaluatorConfig", "evaluatorCount", ""},
}};

bool IsTpu(std::string_view s) { return s.rfind("TPU", 0) == 0 || s == "cloud_tpu"; }

const char* kNoTpu =
    "TPUs are not supported on Stoker; use an NVIDIA GPU (acceleratorConfig type such as "
    "NVIDIA_TESLA_T4) with scaleTier CUSTOM";

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

// "2.11" -> {2, 11}; nullopt when not MAJOR.MINOR.
std::optional<std::pair<int, int>> ParseRuntimeVersion(const std::string& v) {
  size_t dot = v.find('.');
  if (dot == std::string::npos) return std::nullopt;
  int major = 0;
  int minor = 0;
  auto [e1, c1] = std::from_chars(v.data(), v.data() + dot, major);
  auto [e2, c2] = std::from_chars(v.data() + dot + 1, v.data() + v.size(), minor);
  if (dot == 0 || c1 != std::errc() || e1 != v.data() + dot || c2 != std::errc() ||
      e2 != v.data() + v.size() || dot + 1 == v.size()) {
    return std::nullopt;
  }
  return std::make_pair(major, minor);
}

// The prebuilt Vertex TensorFlow image that stands in for an AI Platform
// runtime version: tf-cpu or tf-gpu by whether the pool has GPUs; runtime 1.x
// -> 1-15 (the last 1.x image), 2.N -> 2-N, none -> 2-11. Images from 2.11 on
// carry a Python suffix. Stoker's default image rules match
// `*-docker.pkg.dev/vertex-ai/training/tf-*`.
std::string ExecutorImage(const std::optional<std::pair<int, int>>& runtime, bool gpu) {
  int major = runtime ? runtime->first : 2;
  int minor = runtime ? runtime->second : 11;
  if (major <= 1) minor = 15;
  std::string version = major <= 1 ? "1-15" : std::to_string(major) + "-" + std::to_string(minor);
  bool py310 = major > 2 || (major == 2 && minor >= 11);
  return std::string("us-docker.pkg.dev/vertex-ai/training/tf-") + (gpu ? "gpu" : "cpu") + "." +
         version + (py310 ? ".py310" : "") + ":latest";
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
  auto path = [&](std::string_view key) { return Join(prefix, key); };

  std::string tier = "BASIC";  // the proto default
  if (ReadString(ti, "scaleTier", prefix, p, &tier) && !Contains(kScaleTiers, tier)) {
    std::string upper = tier;
    for (char& c : upper) c = c == '-' ? '_' : static_cast<char>(std::toupper(c));
    p.Add(path("scaleTier"), "'" + tier + "' is not a scale tier; use one of " +
                                 JoinNames(kScaleTiers) +
                                 (Contains(kScaleTiers, upper) ? " (here: " + upper + ")" : ""));
    tier.clear();
  }

  // Common fields.
  std::vector<std::string> package_uris;
  ReadStringList(ti, "packageUris", prefix, p, &package_uris);
  std::string module;
  ReadString(ti, "pythonModule", prefix, p, &module);
  std::optional<std::vector<std::string>> args = ReadOptionalStringList(ti, "args", prefix, p);
  ReadString(ti, "region", prefix, p, &out.region);
  std::string job_dir;
  ReadString(ti, "jobDir", prefix, p, &job_dir);
  std::string runtime_text;
  std::optional<std::pair<int, int>> runtime;
  if (ReadString(ti, "runtimeVersion", prefix, p, &runtime_text)) {
    runtime = ParseRuntimeVersion(runtime_text);
    if (!runtime) {  // quiet after "must be a string"
      p.AddUnlessCovered(path("runtimeVersion"),
                         "'" + runtime_text + "' is not a runtime version like '2.11'");
    }
    out.unhonoured.push_back(path("runtimeVersion"));
  }
  std::string python_version;
  if (ReadString(ti, "pythonVersion", prefix, p, &python_version)) {
    out.unhonoured.push_back(path("pythonVersion"));
  }
  if (const json* h = Get(ti, "hyperparameters")) {
    if (!h->is_object()) {
      p.Add(path("hyperparameters"), "must be an object {goal, params, ...}, got " + TypeName(*h));
    }
    out.hyperparameters = *h;
  }
  ReadBool(ti, "useChiefInTfConfig", prefix, p, &out.use_chief_in_tf_config);

  // Roles.
  std::array<std::string, 4> type;
  std::array<int64_t, 4> count = {1, 0, 0, 0};
  std::array<ReplicaConfig, 4> config;
  std::array<bool, 4> count_given = {false, false, false, false};
  for (size_t r = 0; r < kRoles.size(); ++r) {
    const Role& role = kRoles[r];
    ReadString(ti, role.type_key, prefix, p, &type[r]);
    if (role.count_key != nullptr) {
      if (const json* n = Get(ti, role.count_key)) {
        if (auto x = ReadInteger(*n, path(role.count_key), 0, kMaxCount, p)) {
          count[r] = *x;
          count_given[r] = true;
        }
      }
    }
    if (const json* c = Get(ti, role.config_key)) {
      config[r] = ParseReplicaConfig(*c, path(role.config_key), p, &out.unhonoured);
    }
  }
  if (tier == "BASIC_TPU") {
    p.Add(path("scaleTier"), std::string("BASIC_TPU runs on a Cloud TPU; ") + kNoTpu);
  } else if (tier == "CUSTOM") {
    if (type[0].empty()) {
      p.Add(path("masterType"),
            "required when scaleTier is CUSTOM; give a machine type such as n1-standard-8");
    }
    for (size_t r = 1; r < kRoles.size(); ++r) {
      if (count[r] > 0 && type[r].empty()) {
        p.Add(path(kRoles[r].type_key), std::string("required when ") + kRoles[r].count_key +
                                            " is " + std::to_string(count[r]));
      }
    }
  } else if (!tier.empty()) {
    const Tier& t =
        *std::find_if(kTiers.begin(), kTiers.end(), [&](const Tier& x) { return x.name == tier; });
    std::string why = "only allowed with scaleTier CUSTOM; scaleTier " + tier +
                      " decides the machines (set scaleTier: CUSTOM to choose them)";
    for (size_t r = 0; r < kRoles.size(); ++r) {
      if (!type[r].empty()) p.Add(path(kRoles[r].type_key), why);
      if (count_given[r] && count[r] > 0) p.Add(path(kRoles[r].count_key), why);
      if (config[r].has_accelerator_config) {
        p.Add(Join(path(kRoles[r].config_key), "acceleratorConfig"), why);
      }
      const TierPool tp = r < t.pools.size() ? t.pools[r] : TierPool{};
      type[r] = std::string(tp.machine_type);
      count[r] = tp.count;
      config[r].accelerator_type = std::string(tp.accelerator);
      config[r].accelerator_count = tp.accelerator.empty() ? 0 : 1;
    }
  }

  // Container fields, checked for every *Config given, whether or not its pool runs.
  const ReplicaConfig& master = config[0];
  for (size_t r = 0; r < kRoles.size(); ++r) {
    const ReplicaConfig& c = config[r];
    std::string cpath = path(kRoles[r].config_key);
    if (c.args && args) {
      p.Add(Join(cpath, "containerArgs"),
            "cannot be used with " + path("args") + "; give the program's arguments in one");
    }
    bool has_image = !c.image_uri.empty() || (r > 0 && !master.image_uri.empty());
    if (!has_image && c.command) {
      p.Add(Join(cpath, "containerCommand"), "only allowed with imageUri (a custom container)");
    }
    if (!has_image && c.args) {
      p.Add(Join(cpath, "containerArgs"), "only allowed with imageUri (a custom container)");
    }
  }

  // Pools.
  std::array<json, 4> pools;
  bool python_needed = false;
  for (size_t r = 0; r < kRoles.size(); ++r) {
    pools[r] = json::object();
    if (count[r] == 0 || type[r].empty()) continue;
    const Role& role = kRoles[r];
    const ReplicaConfig& c = config[r];
    json machine = json::object();
    std::string machine_type = type[r];
    std::string accelerator = c.accelerator_type;
    int64_t accelerators = c.accelerator_count;
    if (IsTpu(machine_type)) {
      p.Add(path(role.type_key), kNoTpu);
    }
    for (const auto& m : kLegacyGpuMachines) {
      if (m.name != machine_type) continue;
      machine_type = std::string(m.machine_type);
      if (accelerator.empty()) {  // an explicit acceleratorConfig wins
        accelerator = std::string(m.accelerator);
        accelerators = m.count;
      }
    }
    machine["machineType"] = machine_type;
    if (!accelerator.empty()) {
      machine["acceleratorType"] = accelerator;
      machine["acceleratorCount"] = accelerators;
    }
    json pool = {{"machineSpec", machine}, {"replicaCount", count[r]}};
    if (!c.disk.is_null()) pool["diskSpec"] = c.disk;

    std::vector<std::string> pool_args;
    // A pool without its own image runs the master's, with the master's command and
    // arguments unless it gives its own.
    bool own_image = !c.image_uri.empty();
    const std::string& image = own_image || r == 0 ? c.image_uri : master.image_uri;
    if (!image.empty()) {
      const auto& command = c.command || own_image ? c.command : master.command;
      const auto& container_args = c.args || own_image ? c.args : master.args;
      pool_args = container_args ? *container_args : args.value_or(std::vector<std::string>{});
      if (!job_dir.empty()) pool_args.push_back("--job-dir=" + job_dir);
      json cs = {{"imageUri", image}};
      if (command) cs["command"] = *command;
      if (!pool_args.empty()) cs["args"] = pool_args;
      pool["containerSpec"] = cs;
    } else {
      python_needed = true;
      pool_args = args.value_or(std::vector<std::string>{});
      if (!job_dir.empty()) pool_args.push_back("--job-dir=" + job_dir);
      bool gpu = !accelerator.empty() || HasBuiltInGpu(machine_type);
      json py = {{"executorImageUri", ExecutorImage(runtime, gpu)},
                 {"packageUris", package_uris},
                 {"pythonModule", module}};
      if (!pool_args.empty()) py["args"] = pool_args;
      pool["pythonPackageSpec"] = py;
    }
    pools[r] = std::move(pool);
  }
  if (python_needed) {
    if (package_uris.empty()) {
      p.Add(path("packageUris"),
            "required: give the gs:// URIs of the trainer package, or masterConfig.imageUri to "
            "run a custom container");
    }
    if (module.empty()) {
      p.Add(path("pythonModule"),
            "required: give the module to run, such as trainer.task, or masterConfig.imageUri "
            "to run a custom container");
    }
  } else {
    if (!package_uris.empty()) out.unhonoured.push_back(path("packageUris"));
    if (!module.empty()) out.unhonoured.push_back(path("pythonModule"));
  }

  json spec = json::object();
  json pool_list = json::array();
  size_t last = 0;
  for (size_t r = 0; r < pools.size(); ++r) {
    if (!pools[r].empty()) last = r;
  }
  for (size_t r = 0; r <= last; ++r) pool_list.push_back(pools[r]);
  spec["workerPoolSpecs"] = pool_list;

  if (const json* s = Get(ti, "scheduling")) {
    std::string sp = path("scheduling");
    if (!s->is_object()) {
      p.Add(sp, "must be an object {maxRunningTime, maxWaitTime, priority}, got " + TypeName(*s));
    } else {
      CheckKeys(*s, sp, kSchedulingFields, p);
      json sched = json::object();
      if (auto t = ReadDuration(*s, "maxRunningTime", sp, p)) {
        if (*t <= 0) {
          p.Add(Join(sp, "maxRunningTime"), "must be positive");
        } else {
          sched["timeout"] = FormatDuration(*t);
        }
      }
      if (auto w = ReadDuration(*s, "maxWaitTime", sp, p)) {
        if (*w < kMinMaxWaitSeconds) {
          p.Add(Join(sp, "maxWaitTime"), "must be at least 1800s, got " + FormatDuration(*w));
        } else {
          sched["maxWaitDuration"] = FormatDuration(*w);
        }
      }
      if (const json* pr = Get(*s, "priority")) {
        if (!pr->is_number_integer() || pr->get<int64_t>() < 0 || pr->get<int64_t>() > 1000) {
          p.Add(Join(sp, "priority"), "must be a whole number from 0 to 1000, got " + pr->dump());
        } else if (pr->get<int64_t>() != 0) {
          sched["priority"] = pr->get<int64_t>();  // Stoker's jobSpec.scheduling.priority
        }
      }
      if (!sched.empty()) spec["scheduling"] = sched;
    }
  }
  if (!job_dir.empty()) spec["baseOutputDirectory"] = {{"outputUriPrefix", job_dir}};
  std::string text;
  if (ReadString(ti, "network", prefix, p, &text)) {
    spec["network"] = text;
    out.unhonoured.push_back(path("network"));
  }
  if (ReadString(ti, "serviceAccount", prefix, p, &text)) {
    spec["serviceAccount"] = text;
    out.unhonoured.push_back(path("serviceAccount"));
  }
  if (Get(ti, "enableWebAccess") != nullptr) {
    bool web = false;
    ReadBool(ti, "enableWebAccess", prefix, p, &web);
    spec["enableWebAccess"] = web;
    if (web) out.unhonoured.push_back(path("enableWebAccess"));
  }

  json job = {{"displayName", job_id}, {"jobSpec", spec}};
  if (!labels.empty()) job["labels"] = labels;
  if (const json* e = Get(ti, "encryptionConfig")) {
    std::string ep = path("encryptionConfig");
    std::string key;
    if (!e->is_object()) {
      p.Add(ep, "must be an object {kmsKeyName}, got " + TypeName(*e));
    } else {
      CheckKeys(*e, ep, {"kmsKeyName"}, p);
      ReadString(*e, "kmsKeyName", ep, p, &key);
      job["encryptionSpec"] = {{"kmsKeyName", key}};
      out.unhonoured.push_back(ep);
    }
  }
  if (!p.empty()) return p.ToStatus();

  Result<CustomJob> parsed = ParseCustomJob(job);
  if (!parsed.ok()) {
    // Checks the legacy fields above do not make (label syntax, disk sizes, ...).
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
  Names ignored = kJobOutputOnly;
  ignored.push_back("predictionInput");
  CheckKeys(job, "", kJobFields, p, /*misplaced=*/{}, ignored);
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

namespace {

// "type=NVIDIA_TESLA_T4,count=2" -> acceleratorConfig {type, count}.
std::optional<json> ReadAcceleratorFlag(const std::string& flag, const std::string& value,
                                        Problems& p) {
  std::string type;
  std::string count_text;
  bool ok = true;
  for (const std::string& item : SplitGcloudList(value)) {
    size_t eq = item.find('=');
    std::string key = eq == std::string::npos ? item : item.substr(0, eq);
    std::string val = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos) {
      p.Add(flag, "'" + item + "' is not key=value; write type=NVIDIA_TESLA_T4,count=1");
      ok = false;
    } else if (key == "type") {
      type = CanonicalAcceleratorType(val);  // gcloud's nvidia-tesla-k80
    } else if (key == "count") {
      count_text = val;
    } else {
      p.Add(flag, "unknown key '" + key + "'; the keys are type and count");
      ok = false;
    }
  }
  if (type.empty()) {
    p.Add(flag, "'type' is required, such as type=NVIDIA_TESLA_T4,count=1");
    ok = false;
  } else if (IsTpu(type)) {
    p.Add(flag, kNoTpu);
    ok = false;
  } else if (!Contains(kGpuTypes, type)) {
    p.Add(flag, "'" + type + "' is not an accelerator type; use one of " + JoinNames(kGpuTypes));
    ok = false;
  }
  int64_t count = 0;
  if (count_text.empty()) {
    p.Add(flag, "'count' is required, such as type=NVIDIA_TESLA_T4,count=1");
    ok = false;
  } else {
    auto [end, ec] =
        std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (ec != std::errc() || end != count_text.data() + count_text.size()) {
      p.Add(flag, "'count' must be a whole number, got '" + count_text + "'");
      ok = false;
    } else if (count < 1) {
      p.Add(flag, "'count' must be at least 1, got " + count_text);
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return json{{"type", type}, {"count", std::to_string(count)}};
}

// The config object `key` of `ti`, created when absent.
json& ConfigObject(json& ti, const char* key) {
  if (!ti.contains(key) || !ti[key].is_object()) ti[key] = json::object();
  return ti[key];
}

}  // namespace

Result<json> TrainingInputFromFlags(const LegacyFlags& flags, json ti) {
  Problems p;
  if (ti.is_null()) ti = json::object();
  if (!ti.is_object()) {
    return InvalidArgument("--config: trainingInput must be an object {scaleTier, ...}, got " +
                           TypeName(ti));
  }

  std::optional<std::string> tier;
  if (flags.scale_tier) {
    std::string upper = *flags.scale_tier;
    for (char& c : upper) c = c == '-' ? '_' : static_cast<char>(std::toupper(c));
    if (!Contains(kScaleTiers, upper)) {
      p.Add("--scale-tier", "'" + *flags.scale_tier + "' is not a scale tier; use one of " +
                                JoinNames(kScaleTierFlags));
    } else if (upper == "BASIC_TPU") {
      p.Add("--scale-tier", std::string("basic-tpu runs on a Cloud TPU; ") + kNoTpu);
    } else {
      tier = upper;
    }
  }
  bool machine_flags =
      flags.master_machine_type || flags.worker_machine_type || flags.parameter_server_machine_type;
  if (!tier && machine_flags && !ti.contains("scaleTier")) tier = "CUSTOM";
  if (tier) ti["scaleTier"] = *tier;
  std::string effective_tier = ti.contains("scaleTier") && ti["scaleTier"].is_string()
                                   ? ti["scaleTier"].get<std::string>()
                                   : "BASIC";

  if (flags.master_image_uri && flags.runtime_version) {
    p.Add("--master-image-uri",
          "cannot be used with --runtime-version: a custom container brings its own runtime");
  }
  if (flags.job_dir) ti["jobDir"] = *flags.job_dir;
  if (flags.package_uris) ti["packageUris"] = *flags.package_uris;
  if (flags.module_name) ti["pythonModule"] = *flags.module_name;
  if (flags.region) ti["region"] = *flags.region;
  if (flags.runtime_version) ti["runtimeVersion"] = *flags.runtime_version;
  if (flags.python_version) ti["pythonVersion"] = *flags.python_version;
  if (flags.use_chief_in_tf_config) ti["useChiefInTfConfig"] = *flags.use_chief_in_tf_config;
  if (flags.network) ti["network"] = *flags.network;
  if (flags.service_account) ti["serviceAccount"] = *flags.service_account;
  if (flags.enable_web_access) ti["enableWebAccess"] = *flags.enable_web_access;
  if (flags.kms_key) ti["encryptionConfig"] = {{"kmsKeyName", *flags.kms_key}};
  if (flags.user_args) ti["args"] = *flags.user_args;

  struct RoleFlags {
    const std::optional<std::string>& machine_type;
    const std::optional<std::string>& accelerator;
    const std::optional<std::string>& image_uri;
    const char* accelerator_flag;
    const char* count_flag;  // nullptr for the master
    const std::optional<int64_t>* count;
  };
  const std::array<RoleFlags, 3> roles = {{
      {flags.master_machine_type, flags.master_accelerator, flags.master_image_uri,
       "--master-accelerator", nullptr, nullptr},
      {flags.worker_machine_type, flags.worker_accelerator, flags.worker_image_uri,
       "--worker-accelerator", "--worker-count", &flags.worker_count},
      {flags.parameter_server_machine_type, flags.parameter_server_accelerator,
       flags.parameter_server_image_uri, "--parameter-server-accelerator",
       "--parameter-server-count", &flags.parameter_server_count},
  }};
  for (size_t r = 0; r < roles.size(); ++r) {
    const Role& role = kRoles[r];
    const RoleFlags& f = roles[r];
    if (f.machine_type) {
      if (effective_tier != "CUSTOM") {
        p.Add(role.type_flag,
              "only allowed with --scale-tier=custom (the scale tier is " + effective_tier + ")");
      }
      ti[role.type_key] = *f.machine_type;
    }
    if (f.count && *f.count) {
      if (**f.count < 0) {
        p.Add(f.count_flag, "must be at least 0, got " + std::to_string(**f.count));
      }
      ti[role.count_key] = std::to_string(**f.count);
    }
    if (f.accelerator) {
      if (auto a = ReadAcceleratorFlag(f.accelerator_flag, *f.accelerator, p)) {
        ConfigObject(ti, role.config_key)["acceleratorConfig"] = *a;
      }
    }
    if (f.image_uri) ConfigObject(ti, role.config_key)["imageUri"] = *f.image_uri;
  }

  // The rules of a custom tier, named by the flag that fixes them.
  if (effective_tier == "CUSTOM") {
    if (!ti.contains("masterType")) {
      p.Add("--master-machine-type",
            "required when --scale-tier is custom (or give masterType in --config's "
            "trainingInput)");
    }
    for (size_t r = 1; r < roles.size(); ++r) {
      const Role& role = kRoles[r];
      int64_t n = 0;
      if (const json* c = Get(ti, role.count_key)) {
        if (c->is_number_integer()) n = c->get<int64_t>();
        if (c->is_string()) n = std::atoll(c->get<std::string>().c_str());
      }
      if (n > 0 && !ti.contains(role.type_key)) {
        p.Add(role.type_flag, std::string("required when ") + roles[r].count_flag + " is " +
                                  std::to_string(n) + " (or give " + role.type_key +
                                  " in --config's trainingInput)");
      }
    }
  }
  bool container = false;
  if (const json* m = Get(ti, "masterConfig"); m != nullptr && m->is_object()) {
    container = Get(*m, "imageUri") != nullptr;
  }
  if (!container) {
    if (!ti.contains("pythonModule")) {
      p.Add("--module-name",
            "required unless --master-image-uri runs a custom container; give the module to "
            "run, such as trainer.task");
    }
    if (!ti.contains("packageUris")) {
      p.Add("--package-path",
            "give --package-path or --packages (the trainer package), or --master-image-uri "
            "to run a custom container");
    }
  }
  if (!p.empty()) return p.ToStatus();
  return ti;
}

}  // namespace stoker::spec
