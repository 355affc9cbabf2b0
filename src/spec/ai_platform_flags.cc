// `gcloud ai-platform jobs submit training` flags (reference §5.5) over the
// trainingInput of a --config file: TrainingInputFromFlags (ai_platform.h).
#include <array>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "spec/ai_platform.h"
#include "spec/ai_platform_internal.h"
#include "spec/gcloud_flags.h"
#include "spec/json_fields.h"

namespace stoker::spec {
namespace {

using internal::CanonicalAcceleratorType;
using internal::Contains;
using internal::Get;
using internal::IsTpu;
using internal::JoinNames;
using internal::kGpuTypes;
using internal::kNoTpu;
using internal::kRoles;
using internal::kScaleTierFlags;
using internal::kScaleTiers;
using internal::Problems;
using internal::Role;
using internal::ScaleTierName;
using internal::TypeName;
using nlohmann::json;

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

// Applies --scale-tier to ti.scaleTier (machine-type flags without any tier
// imply CUSTOM) and returns the tier in effect: the flag's, the config's, or
// BASIC, the proto default.
std::string ApplyScaleTierFlag(const LegacyFlags& flags, json& ti, Problems& p) {
  std::optional<std::string> tier;
  if (flags.scale_tier) {
    std::string upper = ScaleTierName(*flags.scale_tier);
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
  return ti.contains("scaleTier") && ti["scaleTier"].is_string()
             ? ti["scaleTier"].get<std::string>()
             : "BASIC";
}

// The flags that set one trainingInput field each, copied over the config's.
void ApplyFieldFlags(const LegacyFlags& flags, json& ti) {
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
}

// The flags of one replica role, in kRoles order (gcloud has no evaluator flags).
struct RoleFlags {
  const std::optional<std::string>& machine_type;
  const std::optional<std::string>& accelerator;
  const std::optional<std::string>& image_uri;
  const char* accelerator_flag;
  const char* count_flag;  // nullptr for the master
  const std::optional<int64_t>* count;
};

// Applies each role's machine type, count, accelerator and image flags to
// ti; a machine type outside a custom tier is a problem.
void ApplyRoleFlags(const std::array<RoleFlags, 3>& roles, const std::string& effective_tier,
                    json& ti, Problems& p) {
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
}

// The rules of a custom tier, named by the flag that fixes them.
void CheckCustomTier(const std::array<RoleFlags, 3>& roles, const json& ti, Problems& p) {
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

// Unless the master runs a custom container, the trainer package and its module are required.
void CheckTrainerGiven(const json& ti, Problems& p) {
  bool container = false;
  if (const json* m = Get(ti, "masterConfig"); m != nullptr && m->is_object()) {
    container = Get(*m, "imageUri") != nullptr;
  }
  if (container) return;
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

}  // namespace

Result<json> TrainingInputFromFlags(const LegacyFlags& flags, json ti) {
  Problems p;
  if (ti.is_null()) ti = json::object();
  if (!ti.is_object()) {
    return InvalidArgument("--config: trainingInput must be an object {scaleTier, ...}, got " +
                           TypeName(ti));
  }
  std::string effective_tier = ApplyScaleTierFlag(flags, ti, p);
  if (flags.master_image_uri && flags.runtime_version) {
    p.Add("--master-image-uri",
          "cannot be used with --runtime-version: a custom container brings its own runtime");
  }
  ApplyFieldFlags(flags, ti);
  const std::array<RoleFlags, 3> roles = {{
      {flags.master_machine_type, flags.master_accelerator, flags.master_image_uri,
       "--master-accelerator", nullptr, nullptr},
      {flags.worker_machine_type, flags.worker_accelerator, flags.worker_image_uri,
       "--worker-accelerator", "--worker-count", &flags.worker_count},
      {flags.parameter_server_machine_type, flags.parameter_server_accelerator,
       flags.parameter_server_image_uri, "--parameter-server-accelerator",
       "--parameter-server-count", &flags.parameter_server_count},
  }};
  ApplyRoleFlags(roles, effective_tier, ti, p);
  if (effective_tier == "CUSTOM") CheckCustomTier(roles, ti, p);
  CheckTrainerGiven(ti, p);
  if (!p.empty()) return p.ToStatus();
  return ti;
}

}  // namespace stoker::spec
