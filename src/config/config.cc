#include "config/config.h"

#include <algorithm>
#include <cctype>

#include "common/files.h"
#include "common/json_yaml.h"
#include "exec/executor_registry.h"

namespace stoker::config {

std::vector<ImageRule> DefaultImageRules() {
  std::vector<ImageRule> rules;
  for (const char* registry :
       {"*-docker.pkg.dev/vertex-ai/training/", "gcr.io/cloud-aiplatform/training/"}) {
    // Each prebuilt image's framework, which its interpreter must import.
    for (auto [image, module] : {std::pair{"pytorch-*", "torch"},
                                 {"tf-*", "tensorflow"},
                                 {"tf2-*", "tensorflow"},
                                 {"scikit-learn-*", "sklearn"},
                                 {"sklearn-*", "sklearn"},
                                 {"xgboost-*", "xgboost"}}) {
      rules.push_back({std::string(registry) + image, "auto", module});
    }
  }
  return rules;
}

namespace {

// The `slurm:` mapping. Errors name the key (slurm.<key>).
Status ParseSlurmConfig(const nlohmann::json& value, const std::string& where,
                        exec::SlurmOptions& out) {
  if (!value.is_object()) return InvalidArgument(where + "slurm: must be a mapping");
  for (auto& [key, v] : value.items()) {
    std::string field = where + "slurm." + key;
    if (key == "partition" || key == "account" || key == "qos" || key == "shared_dir" ||
        key == "preemptible_partition" || key == "preemptible_qos") {
      if (!v.is_string()) return InvalidArgument(field + ": must be a string");
      std::string s = v.get<std::string>();
      if (key == "partition") out.partition = s;
      if (key == "account") out.account = s;
      if (key == "qos") out.qos = s;
      if (key == "preemptible_partition") out.preemptible_partition = s;
      if (key == "preemptible_qos") out.preemptible_qos = s;
      if (key == "shared_dir") {
        if (!s.empty() && s[0] != '/') {
          return InvalidArgument(field + ": '" + s +
                                 "' must be an absolute path that every Slurm node sees");
        }
        out.shared_dir = s;
      }
    } else if (key == "sbatch_extra_args") {
      if (!v.is_array()) return InvalidArgument(field + ": must be a list of strings");
      for (const auto& a : v) {
        if (!a.is_string()) return InvalidArgument(field + ": must be a list of strings");
        out.sbatch_extra_args.push_back(a.get<std::string>());
      }
    } else if (key == "grace_seconds") {
      if (!v.is_number() || v.get<double>() < 0) {
        return InvalidArgument(field + ": must be a number of seconds, 0 or more");
      }
      out.grace_seconds = v.get<double>();
    } else {
      return InvalidArgument(field +
                             ": unknown key (known: partition, account, qos, "
                             "preemptible_partition, preemptible_qos, shared_dir, "
                             "sbatch_extra_args, grace_seconds)");
    }
  }
  return OkStatus();
}

// preemption: {enabled, priority_margin, grace_seconds, min_run_seconds,
// preemptible_below}.
Status ParsePreemption(const nlohmann::json& value, const std::string& where,
                       PreemptionConfig& out) {
  const std::string at = where + "preemption";
  if (!value.is_object()) {
    return InvalidArgument(at + ": must be a mapping, e.g. {enabled: true, priority_margin: 100}");
  }
  for (auto& [k, v] : value.items()) {
    const std::string field = at + "." + k;
    if (k == "enabled") {
      if (!v.is_boolean()) return InvalidArgument(field + ": must be true or false");
      out.enabled = v.get<bool>();
    } else if (k == "priority_margin" || k == "preemptible_below") {
      if (!v.is_number_integer() || v.get<int64_t>() < -2000 || v.get<int64_t>() > 2000) {
        return InvalidArgument(
            field + ": must be a whole number (priorities run -1000..1000), got " + v.dump());
      }
      if (k == "priority_margin") {
        if (v.get<int>() < 1) {
          return InvalidArgument(field +
                                 ": must be at least 1, so that a preempted job can never "
                                 "preempt back");
        }
        out.priority_margin = v.get<int>();
      } else {
        out.preemptible_below = v.get<int>();
      }
    } else if (k == "grace_seconds" || k == "min_run_seconds") {
      if (!v.is_number() || v.get<double>() < 0) {
        return InvalidArgument(field + ": must be a number of seconds, 0 or more, got " + v.dump());
      }
      (k == "grace_seconds" ? out.grace_seconds : out.min_run_seconds) = v.get<double>();
    } else {
      return InvalidArgument(field +
                             ": unknown key (known: enabled, priority_margin, grace_seconds, "
                             "min_run_seconds, preemptible_below)");
    }
  }
  return OkStatus();
}

}  // namespace

namespace {

// quotas: {user: {max_gpus: N, max_running_jobs: N}, ...}.
Status ParseQuotas(const nlohmann::json& value, const std::string& where,
                   std::map<std::string, scheduler::Quota>& out) {
  const std::string example = " (e.g. quotas: {alice: {max_gpus: 2, max_running_jobs: 4}})";
  if (!value.is_object()) return InvalidArgument(where + "quotas: must be a mapping" + example);
  for (auto& [user, limits] : value.items()) {
    std::string at = where + "quotas." + user;
    if (!limits.is_object()) return InvalidArgument(at + ": must be a mapping" + example);
    scheduler::Quota q;
    for (auto& [k, v] : limits.items()) {
      if (k == "max_gpus" && v.is_number() && v.get<double>() >= 0) {
        q.max_gpus = v.get<double>();
      } else if (k == "max_running_jobs" && v.is_number_integer() && v.get<int64_t>() >= 0) {
        q.max_running_jobs = v.get<int>();
      } else if (k == "max_gpus" || k == "max_running_jobs") {
        return InvalidArgument(at + "." + k + ": must be a number of at least 0, got " + v.dump());
      } else {
        return InvalidArgument(at + ": unknown key '" + k +
                               "' (known: max_gpus, max_running_jobs)");
      }
    }
    out[user] = q;
  }
  return OkStatus();
}

// `machine_types: {NAME: {vcpus, memory_gb, gpu_type, gpu_count}}`.
Status ParseMachineTypes(const nlohmann::json& value, const std::string& where,
                         resources::MachineCatalog& out) {
  const std::string example =
      " (e.g. machine_types: {lab-box: {vcpus: 16, memory_gb: 64, gpu_type: NVIDIA_L4, "
      "gpu_count: 2}})";
  if (!value.is_object()) {
    return InvalidArgument(where + "machine_types: must be a mapping" + example);
  }
  for (auto& [name, v] : value.items()) {
    std::string at = where + "machine_types." + name;
    if (!v.is_object()) return InvalidArgument(at + ": must be a mapping" + example);
    resources::MachineShape shape{name, 0, 0, "", 0};
    for (auto& [k, x] : v.items()) {
      if ((k == "vcpus" || k == "memory_gb") && x.is_number() && x.get<double>() > 0) {
        (k == "vcpus" ? shape.vcpus : shape.memory_gb) = x.get<double>();
      } else if (k == "vcpus" || k == "memory_gb") {
        return InvalidArgument(at + "." + k + ": must be a number above 0, got " + x.dump());
      } else if (k == "gpu_type" && x.is_string() &&
                 resources::AcceleratorMemoryBytes(x.get<std::string>()) > 0) {
        shape.gpu_type = x.get<std::string>();
      } else if (k == "gpu_type") {
        return InvalidArgument(at + ".gpu_type: " + x.dump() +
                               " is not a Vertex GPU type (e.g. NVIDIA_TESLA_T4, NVIDIA_L4, "
                               "NVIDIA_H100_80GB)");
      } else if (k == "gpu_count" && x.is_number_integer() && x.get<int64_t>() >= 0 &&
                 x.get<int64_t>() <= 64) {
        shape.gpu_count = x.get<int>();
      } else if (k == "gpu_count") {
        return InvalidArgument(at + ".gpu_count: must be a whole number from 0 to 64, got " +
                               x.dump());
      } else {
        return InvalidArgument(at + ": unknown key '" + k +
                               "' (known: vcpus, memory_gb, gpu_type, gpu_count)");
      }
    }
    if (shape.vcpus == 0 || shape.memory_gb == 0) {
      return InvalidArgument(at + ": needs vcpus and memory_gb" + example);
    }
    if ((shape.gpu_count > 0) != !shape.gpu_type.empty()) {
      return InvalidArgument(at + ": give gpu_type and gpu_count together, or neither" + example);
    }
    out[name] = shape;
  }
  return OkStatus();
}

Status ParsePythonPackages(const nlohmann::json& value, const std::string& where,
                           PythonPackagesConfig& out) {
  if (!value.is_object()) {
    return InvalidArgument(where +
                           "python_packages: must be a mapping, e.g. {wheelhouse: /srv/wheels, "
                           "index_url: https://pypi.example.com/simple}");
  }
  for (auto& [k, v] : value.items()) {
    if (k == "wheelhouse") {
      std::vector<std::string> dirs;
      if (v.is_string()) {
        dirs.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const auto& d : v) dirs.push_back(d.is_string() ? d.get<std::string>() : d.dump());
      } else {
        return InvalidArgument(where +
                               "python_packages.wheelhouse: must be a directory or a list of them");
      }
      out.wheelhouse.clear();
      for (const std::string& d : dirs) {
        if (d.empty()) {
          return InvalidArgument(where + "python_packages.wheelhouse: an empty directory name");
        }
        out.wheelhouse.push_back(std::filesystem::absolute(d).lexically_normal());
      }
    } else if (k == "index_url") {
      out.index_url = v.is_string() ? v.get<std::string>() : v.dump();
      if (!out.index_url.empty() && out.index_url.rfind("https://", 0) != 0 &&
          out.index_url.rfind("http://", 0) != 0 && out.index_url.rfind("file://", 0) != 0) {
        return InvalidArgument(where + "python_packages.index_url: '" + out.index_url +
                               "' is not an http(s):// or file:// URL of a package index "
                               "(PEP 503 simple API, e.g. https://pypi.org/simple)");
      }
    } else {
      return InvalidArgument(where + "python_packages: unknown key '" + k +
                             "' (known: wheelhouse, index_url)");
    }
  }
  return OkStatus();
}

}  // namespace

namespace {

using nlohmann::json;

// The config's top-level keys, each with the parser that sets its part of
// the Config or says, after `where` ("FILE: "), what is wrong and how to fix
// it. One table: the unknown-key error lists its names.
struct KeyParser {
  const char* key;
  Status (*parse)(const json& value, const std::string& where, Config& c);
};

Status ParseImages(const json& value, const std::string& where, Config& c) {
  for (size_t i = 0; i < value.size(); ++i) {
    const json& r = value[i];
    if (!r.contains("match") || !r.contains("python")) {
      return InvalidArgument(where + "images[" + std::to_string(i) +
                             "]: needs 'match' (an image glob) and 'python' (a path or auto)");
    }
    c.images.push_back({r["match"].get<std::string>(), r["python"].get<std::string>(),
                        r.value("framework", std::string())});
  }
  return OkStatus();
}

Status ParseInventory(const json& value, const std::string&, Config& c) {
  resources::Node node = resources::DetectLocalNode();
  if (value.contains("cpus")) node.cpus = value["cpus"].get<double>();
  if (value.contains("memory_gb")) {
    node.memory_bytes = static_cast<uint64_t>(value["memory_gb"].get<double>() * (1ull << 30));
  }
  int index = 0;
  c.inventory_declares_gpus = value.contains("gpus");
  for (const auto& g : value.value("gpus", json::array())) {
    resources::Gpu gpu;
    gpu.index = index++;
    gpu.type = g.at("type").get<std::string>();
    gpu.memory_bytes = g.contains("memory_gb")
                           ? static_cast<uint64_t>(g["memory_gb"].get<double>() * (1ull << 30))
                           : resources::AcceleratorMemoryBytes(gpu.type);
    node.gpus.push_back(gpu);
  }
  c.inventory = node;
  return OkStatus();
}

// A number of at least 0 into `out`.
Status NonNegative(const json& value, const std::string& where, const char* key, double& out) {
  if (!value.is_number() || value.get<double>() < 0) {
    return InvalidArgument(where + key + ": must be a number of at least 0, got " + value.dump());
  }
  out = value.get<double>();
  return OkStatus();
}

Status ParseLogMaxBytes(const json& value, const std::string& where, Config& c) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    return InvalidArgument(where +
                           "log_max_bytes: must be a whole number of bytes (0 = never rotate), "
                           "got " +
                           value.dump());
  }
  c.log_max_bytes = value.get<uint64_t>();
  if (c.log_max_bytes != 0 && c.log_max_bytes < 1024) {
    return InvalidArgument(where + "log_max_bytes: must be 0 or at least 1024, got " +
                           value.dump());
  }
  return OkStatus();
}

Status ParseRetention(const json& value, const std::string& where, Config& c) {
  if (!value.is_object()) {
    return InvalidArgument(where +
                           "retention: must be a mapping, e.g. "
                           "{replica_dirs_days: 7, max_finished_replica_dirs: 10000}");
  }
  for (auto& [k, v] : value.items()) {
    if (k == "replica_dirs_days") {
      c.retention.replica_dirs_days = v.get<double>();
    } else if (k == "max_finished_replica_dirs") {
      c.retention.max_finished_replica_dirs = v.get<int64_t>();
    } else if (k == "scan_interval_seconds") {
      c.retention.scan_interval_seconds = v.get<double>();
    } else {
      return InvalidArgument(where + "retention: unknown key '" + k +
                             "' (known: replica_dirs_days, max_finished_replica_dirs, "
                             "scan_interval_seconds)");
    }
  }
  return OkStatus();
}

Status ParseContainers(const json& value, const std::string& where, Config& c) {
  if (!value.is_object()) {
    return InvalidArgument(where + "containers: must be a mapping, e.g. {engine: auto}");
  }
  for (auto& [k, v] : value.items()) {
    std::string e = v.is_string() ? v.get<std::string>() : v.dump();
    if (k == "engine") {
      if (e != "auto" && e != "podman" && e != "docker" && e != "none") {
        return InvalidArgument(where +
                               "containers.engine: must be one of auto, podman, docker, none; "
                               "got " +
                               v.dump());
      }
      c.container_engine = e;
    } else if (k == "pull") {
      if (e != "missing" && e != "never") {
        return InvalidArgument(where +
                               "containers.pull: must be missing (pull an image the engine "
                               "lacks) or never; got " +
                               v.dump());
      }
      c.container_pull = e == "missing";
    } else if (k == "insecure_registries") {
      bool ok = v.is_array();
      for (const auto& r : ok ? v : json::array()) {
        ok = ok && r.is_string() && !r.get<std::string>().empty() &&
             r.get<std::string>().find('/') == std::string::npos;
        if (ok) c.insecure_registries.push_back(r.get<std::string>());
      }
      if (!ok) {
        return InvalidArgument(where +
                               "containers.insecure_registries: must be a list of registries as "
                               "image names write them, e.g. [\"localhost:5000\"]; got " +
                               v.dump());
      }
    } else if (k == "user_namespace") {
      if (!v.is_boolean()) {
        return InvalidArgument(where +
                               "containers.user_namespace: must be true (the image's root is "
                               "the trainer's account) or false; got " +
                               v.dump());
      }
      c.container_user_namespace = v.get<bool>();
    } else {
      return InvalidArgument(where + "containers." + k +
                             ": unknown key; the keys are engine (auto, podman, docker, none), "
                             "pull (missing, never), insecure_registries and user_namespace "
                             "(true, false)");
    }
  }
  return OkStatus();
}

Status ParseWarmStartPreload(const json& value, const std::string& where, Config& c) {
  if (!value.is_array()) {
    return InvalidArgument(where +
                           "warm_start_preload: must be a list of module names, e.g. "
                           "[torch, numpy]");
  }
  c.warm_starts.preload.clear();
  for (const auto& m : value) {
    std::string name = m.is_string() ? m.get<std::string>() : m.dump();
    bool ok = !name.empty() && name.front() != '.' && name.back() != '.';
    for (char ch : name) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.');
    }
    if (!ok) {
      return InvalidArgument(where + "warm_start_preload: '" + name +
                             "' is not a module name (letters, digits, _ and .)");
    }
    c.warm_starts.preload.push_back(name);
  }
  return OkStatus();
}

// warm_start_max_per_user and warm_start_max_total: 1 to 10000.
Status WarmLimit(const json& value, const std::string& where, const char* key, int& out) {
  int n = value.is_number_integer() ? value.get<int>() : 0;
  if (n < 1 || n > 10000) {
    return InvalidArgument(where + key +
                           ": must be a whole number from 1 to 10000 (live warm interpreters), "
                           "got " +
                           value.dump());
  }
  out = n;
  return OkStatus();
}

Status ParseExecutor(const json& value, const std::string& where, Config& c) {
  c.executor = value.get<std::string>();
  std::vector<std::string> kinds = exec::ExecutorRegistry::WithBuiltins().Kinds();
  if (std::find(kinds.begin(), kinds.end(), c.executor) != kinds.end()) return OkStatus();
  std::string known;
  for (const std::string& k : kinds) known += (known.empty() ? "" : " or ") + k;
  return InvalidArgument(where + "executor: '" + c.executor + "' is not an executor (use " + known +
                         ")");
}

template <typename T>
Status Set(const json& value, T& out) {
  out = value.get<T>();
  return OkStatus();
}

Status ParseJobIsolation(const json& v, const std::string& where, Config& c) {
  c.job_isolation = v.is_string() ? v.get<std::string>() : v.dump();
  if (c.job_isolation == "auto" || c.job_isolation == "required" || c.job_isolation == "off") {
    return OkStatus();
  }
  return InvalidArgument(where + "job_isolation: must be auto, required or off, got " + v.dump());
}

Status ParseHalfLife(const json& v, const std::string& where, Config& c) {
  STOKER_RETURN_IF_ERROR(
      NonNegative(v, where, "fair_share_half_life_hours", c.fair_share_half_life_hours));
  return c.fair_share_half_life_hours > 0
             ? OkStatus()
             : InvalidArgument(where + "fair_share_half_life_hours: must be above 0");
}

Status ParseCost(const json& v, const std::string& where, Config& c) {
  // JSON is YAML: the catalog reads the section as the file wrote it.
  Status applied = c.catalog.Apply(YAML::Load(v.dump()));
  return applied.ok() ? OkStatus() : InvalidArgument(where + applied.message());
}

Status ParseWebhookList(const json& v, const std::string& where, Config& c) {
  auto hooks = ParseWebhooks(v);
  if (!hooks.ok()) return InvalidArgument(where + hooks.status().message());
  c.webhooks = std::move(hooks).value();
  return OkStatus();
}

Status ParseLogMaxFiles(const json& v, const std::string& where, Config& c) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000) {
    return InvalidArgument(where + "log_max_files: must be a whole number from 1 to 1000, got " +
                           v.dump());
  }
  return Set(v, c.log_max_files);
}

const std::vector<KeyParser>& KeyParsers() {
  using W = const std::string&;
  static const std::vector<KeyParser> kKeys = {
      {"listen", [](const json& v, W, Config& c) { return Set(v, c.listen); }},
      {"images", ParseImages},
      {"buckets",
       [](const json& v, W, Config& c) {
         for (auto& [name, path] : v.items()) c.buckets[name] = path.get<std::string>();
         return OkStatus();
       }},
      {"inventory", ParseInventory},
      {"cpu_oversubscription",
       [](const json& v, W where, Config& c) {
         c.cpu_oversubscription = v.get<double>();
         return c.cpu_oversubscription >= 1
                    ? OkStatus()
                    : InvalidArgument(where + "cpu_oversubscription: must be at least 1");
       }},
      {"machine_types", [](const json& v, W where,
                           Config& c) { return ParseMachineTypes(v, where, c.machine_types); }},
      {"accelerator_substitution",
       [](const json& v, W, Config& c) { return Set(v, c.accelerator_substitution); }},
      {"cancel_grace_seconds",
       [](const json& v, W, Config& c) { return Set(v, c.cancel_grace_seconds); }},
      {"poll_interval_ms", [](const json& v, W, Config& c) { return Set(v, c.poll_interval_ms); }},
      {"quotas", [](const json& v, W where, Config& c) { return ParseQuotas(v, where, c.quotas); }},
      {"fair_share_half_life_hours", ParseHalfLife},
      {"aging_hours",
       [](const json& v, W where, Config& c) {
         return NonNegative(v, where, "aging_hours", c.aging_hours);
       }},
      {"backfill", [](const json& v, W, Config& c) { return Set(v, c.backfill); }},
      {"hang_timeout_seconds",
       [](const json& v, W where, Config& c) {
         return NonNegative(v, where, "hang_timeout_seconds", c.hang_timeout_seconds);
       }},
      {"nfs_mount_root", [](const json& v, W, Config& c) { return Set(v, c.nfs_mount_root); }},
      {"log_max_bytes", ParseLogMaxBytes},
      {"log_max_files", ParseLogMaxFiles},
      {"retention", ParseRetention},
      {"tls_cert_file", [](const json& v, W, Config& c) { return Set(v, c.tls_cert_file); }},
      {"tls_key_file", [](const json& v, W, Config& c) { return Set(v, c.tls_key_file); }},
      {"allow_insecure_http",
       [](const json& v, W, Config& c) { return Set(v, c.allow_insecure_http); }},
      {"default_unix_user",
       [](const json& v, W, Config& c) { return Set(v, c.default_unix_user); }},
      {"allow_root_trainers",
       [](const json& v, W, Config& c) { return Set(v, c.allow_root_trainers); }},
      {"bucket_group", [](const json& v, W, Config& c) { return Set(v, c.bucket_group); }},
      {"job_isolation", ParseJobIsolation},
      {"containers", ParseContainers},
      {"python_packages",
       [](const json& v, W where, Config& c) {
         return ParsePythonPackages(v, where, c.python_packages);
       }},
      {"warm_starts", [](const json& v, W, Config& c) { return Set(v, c.warm_starts.enabled); }},
      {"warm_start_preload", ParseWarmStartPreload},
      {"warm_start_idle_seconds",
       [](const json& v, W where, Config& c) {
         c.warm_starts.idle_seconds = v.get<double>();
         return c.warm_starts.idle_seconds >= 1
                    ? OkStatus()
                    : InvalidArgument(where + "warm_start_idle_seconds: must be at least 1");
       }},
      {"warm_start_max_per_user",
       [](const json& v, W where, Config& c) {
         return WarmLimit(v, where, "warm_start_max_per_user", c.warm_starts.max_per_user);
       }},
      {"warm_start_max_total",
       [](const json& v, W where, Config& c) {
         return WarmLimit(v, where, "warm_start_max_total", c.warm_starts.max_total);
       }},
      {"preemption",
       [](const json& v, W where, Config& c) { return ParsePreemption(v, where, c.preemption); }},
      {"auth", [](const json& v, W where,
                  Config& c) { return auth::ParseAuthPolicy(v, where + "auth", c.auth); }},
      {"executor", ParseExecutor},
      {"slurm",
       [](const json& v, W where, Config& c) { return ParseSlurmConfig(v, where, c.slurm); }},
      {"cost", ParseCost},
      {"gpu_telemetry_seconds",
       [](const json& v, W where, Config& c) {
         return NonNegative(v, where, "gpu_telemetry_seconds", c.gpu_telemetry_seconds);
       }},
      {"telemetry_seconds",
       [](const json& v, W where, Config& c) {
         return NonNegative(v, where, "telemetry_seconds", c.telemetry_seconds);
       }},
      {"webhooks", ParseWebhookList},
  };
  return kKeys;
}

// Applies the file's keys to `c`.
Status ApplyKeys(const json& j, const std::string& where, Config& c) {
  for (auto& [key, value] : j.items()) {
    const KeyParser* parser = nullptr;
    for (const KeyParser& k : KeyParsers()) {
      if (key == k.key) parser = &k;
    }
    if (parser == nullptr) {
      std::string known;
      for (const KeyParser& k : KeyParsers())
        known += (known.empty() ? "" : ", ") + std::string(k.key);
      return InvalidArgument(where + "unknown key '" + key + "' (known: " + known + ")");
    }
    try {
      STOKER_RETURN_IF_ERROR(parser->parse(value, where, c));
    } catch (const json::exception& e) {
      return InvalidArgument(where + key + ": wrong type of value: " + e.what());
    }
  }
  return OkStatus();
}

}  // namespace

Result<Config> LoadConfig(const std::filesystem::path& data_dir, const std::filesystem::path& file,
                          bool file_is_explicit) {
  Config c;
  c.data_dir = data_dir;
  c.images.clear();  // the file's rules first, then the built-in ones
  auto text = ReadFile(file);
  if (!text.ok()) {
    if (file_is_explicit) return NotFound("config file " + file.string() + " cannot be read");
  } else {
    c.config_file = file;
    STOKER_ASSIGN_OR_RETURN(json j, ParseYamlOrJson(*text, file.string()));
    if (j.is_null()) j = json::object();
    if (!j.is_object()) return InvalidArgument(file.string() + ": the config must be a mapping");
    STOKER_RETURN_IF_ERROR(ApplyKeys(j, file.string() + ": ", c));
  }
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return InvalidArgument(file.string() +
                           ": tls_cert_file and tls_key_file: give both (a PEM certificate chain "
                           "and its private key) or neither");
  }
  for (ImageRule& r : DefaultImageRules()) c.images.push_back(std::move(r));
  if (c.python_packages.wheelhouse.empty())
    c.python_packages.wheelhouse = {data_dir / "wheelhouse"};
  return c;
}

}  // namespace stoker::config
