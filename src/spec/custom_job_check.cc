// The rules on a CustomJobSpec (custom_job.h), shared by parsing and
// Validate: pools, machines, tasks, their command lines and environments,
// and scheduling.
#include "spec/custom_job_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <string_view>

#include "common/files.h"

namespace stoker::spec::internal {
namespace {

using nlohmann::json;

constexpr size_t kMaxPools = 4;
constexpr size_t kMaxEnv = 100;
constexpr size_t kMaxPackageUris = 100;
// A replica's command line and environment end up in one execve: Linux
// refuses a single string of 128 KiB or more (MAX_ARG_STRLEN) and all of them
// together past ARG_MAX (2 MiB by default, shared with what Stoker adds), so
// a job is refused at submission rather than failing at launch.
constexpr size_t kMaxArgBytes = 128 * 1024 - 1;
constexpr size_t kMaxCommandLineBytes = 1024 * 1024;

// Reference §1.7, without STRATEGY_UNSPECIFIED (which means STANDARD); the
// deprecated ON_DEMAND and LOW_COST last, so that advice starts with the others.
const Names kStrategies = [] {
  Names names = EnumNames(kStrategyEnum, /*with_zero=*/false);
  std::stable_partition(names.begin(), names.end(),
                        [](std::string_view n) { return n != "ON_DEMAND" && n != "LOW_COST"; });
  return names;
}();

bool IsEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

void CheckEnv(const std::vector<EnvVar>& env, const std::string& path, Problems& p) {
  std::string fp = Join(path, "env");
  if (env.size() > kMaxEnv) {
    p.AddUnlessCovered(fp, "at most " + std::to_string(kMaxEnv) + " variables are allowed, got " +
                               std::to_string(env.size()));
  }
  for (size_t i = 0; i < env.size(); ++i) {
    std::string np = Join(At(fp, i), "name");
    const std::string& name = env[i].name;
    if (name.empty()) {
      p.AddUnlessCovered(np, "required; give the variable's name");
    } else if (!IsEnvName(name)) {
      p.AddUnlessCovered(np, "'" + name +
                                 "' is not a valid variable name; use letters, digits and '_', "
                                 "not starting with a digit");
    } else {
      for (size_t k = 0; k < i; ++k) {
        if (env[k].name == name) {
          p.AddUnlessCovered(
              np, "'" + name + "' is already set by " + At(fp, k) + "; give each variable once");
          break;
        }
      }
    }
  }
}

// Bounds on a task's command, args and env (kMaxArgBytes, kMaxCommandLineBytes).
// The length of `text` after $(VAR) expansion (exec::ExpandVars' grammar:
// "$$(" gives "$(", "$(NAME)" the value of a defined NAME, anything else
// itself), with `lengths` the expanded lengths of the variables defined so
// far. Counted, never built, and saturating at 2^40, so that nested
// references (each level multiplying the size) cost nothing to check.
uint64_t ExpandedLength(const std::string& text, const std::map<std::string, uint64_t>& lengths) {
  constexpr uint64_t kCap = uint64_t{1} << 40;
  uint64_t out = 0;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "$$(") == 0) {
      out += 2;
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "$(") == 0) {
      size_t close = text.find(')', i + 2);
      if (close != std::string::npos) {
        auto it = lengths.find(text.substr(i + 2, close - i - 2));
        if (it != lengths.end()) {
          out = std::min(kCap, out + it->second);
          i = close + 1;
          continue;
        }
      }
    }
    ++out;
    ++i;
  }
  return std::min(kCap, out);
}

void CheckCommandLine(const std::vector<std::string>* command, const std::vector<std::string>& args,
                      const std::vector<EnvVar>& env, const std::string& path, Problems& p) {
  uint64_t total = 0;
  // `what`: how the message names the string ("NAME=value " for a variable).
  // Sizes are those after $(VAR) expansion: the limits are the kernel's, on
  // what the trainer's execve gets.
  auto one = [&](uint64_t bytes, bool expanded, const std::string& field,
                 const std::string& what = "") {
    total += bytes + 1;
    if (bytes > kMaxArgBytes) {
      p.AddUnlessCovered(field, what + "is " + std::to_string(bytes) + " bytes long" +
                                    (expanded ? " after $(VAR) expansion" : "") +
                                    "; one argument or variable may have at most " +
                                    std::to_string(kMaxArgBytes) +
                                    " (Linux's MAX_ARG_STRLEN); pass large inputs as files "
                                    "(gs://BUCKET/...)");
    }
  };
  // Variables expand against those defined before them (service variables
  // are not known yet and count as undefined); command and args against all.
  std::map<std::string, uint64_t> lengths;
  for (size_t i = 0; i < env.size(); ++i) {
    uint64_t n = ExpandedLength(env[i].value, lengths);
    lengths[env[i].name] = n;
    // execve counts NAME=value as one string, so the limit is on both.
    one(env[i].name.size() + 1 + n, n != env[i].value.size(), At(Join(path, "env"), i),
        (env[i].name.size() <= 64 ? env[i].name : "NAME") + "=value ");
  }
  auto list = [&](const std::vector<std::string>& strings, const std::string& field) {
    for (size_t i = 0; i < strings.size(); ++i) {
      uint64_t n = ExpandedLength(strings[i], lengths);
      one(n, n != strings[i].size(), At(Join(path, field), i));
    }
  };
  if (command) list(*command, "command");
  list(args, "args");
  if (total > kMaxCommandLineBytes) {
    p.AddUnlessCovered(path, "command, args and env take " + std::to_string(total) +
                                 " bytes; at most " + std::to_string(kMaxCommandLineBytes) +
                                 " are allowed (they share one execve's ARG_MAX); pass large "
                                 "inputs as files (gs://BUCKET/...)");
  }
}

// An acceleratorCount as written: "2", "0.25".
std::string FormatCount(double count) {
  if (count == std::floor(count)) return std::to_string(static_cast<int64_t>(count));
  json j = count;
  return j.dump();
}

void CheckMachine(const MachineSpec& m, const std::string& path, Problems& p) {
  if (m.machine_type.empty()) {
    p.AddUnlessCovered(Join(path, "machineType"),
                       "required; give a machine type such as 'n1-standard-8'");
  }
  std::string type_path = Join(path, "acceleratorType");
  std::string count_path = Join(path, "acceleratorCount");
  bool type_ok = !m.accelerator_type.empty() && Contains(kAcceleratorTypes, m.accelerator_type);
  if (!m.accelerator_type.empty() && !type_ok) {
    p.AddUnlessCovered(type_path, "'" + m.accelerator_type +
                                      "' is not an accelerator type; use one of " +
                                      JoinNames(kAcceleratorTypes));
  }
  if (m.accelerator_count < 0) {
    p.AddUnlessCovered(count_path, "must be at least 0, got " + FormatCount(m.accelerator_count));
  } else if (!m.accelerator_type.empty() && m.accelerator_count == 0) {
    p.AddUnlessCovered(count_path, "must be at least 1 when acceleratorType is set");
  } else if (m.accelerator_type.empty() && m.accelerator_count > 0) {
    p.AddUnlessCovered(type_path, "required when acceleratorCount is set; use one of " +
                                      JoinNames(kAcceleratorTypes));
  }
  if (m.extra.is_object() && m.extra.contains("gpuPartitionSize") && m.accelerator_count != 1) {
    p.AddUnlessCovered(Join(path, "gpuPartitionSize"),
                       "requires acceleratorCount 1, got " + FormatCount(m.accelerator_count));
  }
}

// True for dotted Python identifiers ("trainer.task"): letters, digits and
// '_' (any non-ASCII byte too: Python 3 names may be Unicode), no part
// empty or starting with a digit.
bool IsPythonModuleName(const std::string& name) {
  size_t start = 0;
  while (true) {
    size_t end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    if (end == start) return false;
    if (name[start] >= '0' && name[start] <= '9') return false;
    for (size_t i = start; i < end; ++i) {
      auto c = static_cast<unsigned char>(name[i]);
      if (!(c >= 0x80 || std::isalnum(c) || c == '_')) return false;
    }
    if (end == name.size()) return true;
    start = end + 1;
  }
}

void CheckContainer(const ContainerSpec& c, const std::string& cpath, Problems& p) {
  if (c.image_uri.empty()) {
    p.AddUnlessCovered(Join(cpath, "imageUri"), "required; give the container image to run");
  }
  CheckEnv(c.env, cpath, p);
  CheckCommandLine(&c.command, c.args, c.env, cpath, p);
}

void CheckPythonPackage(const PythonPackageSpec& py, const std::string& ppath, Problems& p) {
  if (py.executor_image_uri.empty()) {
    p.AddUnlessCovered(Join(ppath, "executorImageUri"),
                       "required; give the prebuilt training image that runs the package");
  }
  std::string uris = Join(ppath, "packageUris");
  if (py.package_uris.empty()) {
    p.AddUnlessCovered(uris, "required; give at least one gs:// URI of a Python source package");
  } else if (py.package_uris.size() > kMaxPackageUris) {
    p.AddUnlessCovered(uris, "at most " + std::to_string(kMaxPackageUris) +
                                 " URIs are allowed, got " +
                                 std::to_string(py.package_uris.size()));
  }
  for (size_t i = 0; i < py.package_uris.size(); ++i) {
    if (py.package_uris[i].rfind("gs://", 0) != 0) {
      p.AddUnlessCovered(At(uris, i), "'" + py.package_uris[i] +
                                          "' is not a gs:// URI; give the package as "
                                          "gs://BUCKET/path/package.tar.gz");
    }
  }
  if (py.python_module.empty()) {
    p.AddUnlessCovered(Join(ppath, "pythonModule"),
                       "required; give the module to run, such as 'trainer.task'");
  } else if (!IsPythonModuleName(py.python_module)) {
    p.AddUnlessCovered(Join(ppath, "pythonModule"),
                       "'" + py.python_module +
                           "' is not a Python module name; give dotted identifiers such as "
                           "'trainer.task' (no '/', '..' or spaces)");
  }
  CheckEnv(py.env, ppath, p);
  CheckCommandLine(nullptr, py.args, py.env, ppath, p);
}

// The pool's nfsMounts (kept verbatim in pool.extra, shape-checked by the parser).
void CheckNfsMounts(const WorkerPoolSpec& pool, const std::string& path, Problems& p) {
  if (!pool.extra.is_object() || !pool.extra.contains("nfsMounts") ||
      !pool.extra["nfsMounts"].is_array()) {
    return;
  }
  const json& mounts = pool.extra["nfsMounts"];
  for (size_t i = 0; i < mounts.size(); ++i) {
    const json& m = mounts[i];
    if (m.is_object() && m.contains("path") && m["path"].is_string() &&
        m["path"].get<std::string>().rfind('/', 0) != 0) {
      p.AddUnlessCovered(Join(At(Join(path, "nfsMounts"), i), "path"),
                         "must start with '/', got '" + m["path"].get<std::string>() + "'");
    }
    if (m.is_object() && m.contains("mountPoint") && m["mountPoint"].is_string() &&
        !IsFileName(m["mountPoint"].get<std::string>())) {
      // Vertex mounts the share at /mnt/nfs/<mountPoint>: one name below
      // that root, never a path that leaves it.
      p.AddUnlessCovered(Join(At(Join(path, "nfsMounts"), i), "mountPoint"),
                         "must be one directory name (no '/', not '.' or '..', at most 255 "
                         "bytes), such as 'data'; the share appears at "
                         "<nfs_mount_root>/<mountPoint>");
    }
  }
}

void CheckPool(const WorkerPoolSpec& pool, const std::string& path, bool primary, Problems& p) {
  if (pool.empty) {
    if (primary) {
      p.AddUnlessCovered(path,
                         "the primary pool cannot be empty; give its machineSpec and a "
                         "containerSpec or pythonPackageSpec");
    }
    return;
  }
  std::string replicas = Join(path, "replicaCount");
  if (primary && pool.replica_count != 1) {
    p.AddUnlessCovered(replicas,
                       "the primary pool runs exactly one replica; put more replicas in " +
                           At(path.substr(0, path.rfind('[')), 1));
  } else if (pool.replica_count < 0) {
    p.AddUnlessCovered(replicas, "must be at least 0, got " + std::to_string(pool.replica_count));
  }
  CheckMachine(pool.machine_spec, Join(path, "machineSpec"), p);

  std::string cpath = Join(path, "containerSpec");
  std::string ppath = Join(path, "pythonPackageSpec");
  bool has_c = pool.container_spec.has_value();
  bool has_p = pool.python_package_spec.has_value();
  if (has_c == has_p && !p.Covered(cpath) && !p.Covered(ppath)) {
    p.Add(path, std::string(has_c ? "both containerSpec and pythonPackageSpec are given"
                                  : "no task is given") +
                    "; set exactly one of containerSpec or pythonPackageSpec");
  }
  if (has_c) CheckContainer(*pool.container_spec, cpath, p);
  if (has_p) CheckPythonPackage(*pool.python_package_spec, ppath, p);
  CheckNfsMounts(pool, path, p);
}

}  // namespace

void CheckSpec(const CustomJobSpec& spec, const std::string& path, Problems& p) {
  std::string pools = Join(path, "workerPoolSpecs");
  if (spec.worker_pool_specs.empty()) {
    p.AddUnlessCovered(pools,
                       "required; give at least the primary pool, workerPoolSpecs[0], with its "
                       "machineSpec and a containerSpec or pythonPackageSpec");
  } else if (spec.worker_pool_specs.size() > kMaxPools) {
    p.AddUnlessCovered(pools,
                       "at most 4 pools are allowed (primary, workers, servers, "
                       "evaluators), got " +
                           std::to_string(spec.worker_pool_specs.size()));
  }
  for (size_t i = 0; i < spec.worker_pool_specs.size(); ++i) {
    CheckPool(spec.worker_pool_specs[i], At(pools, i), i == 0, p);
  }
  std::string sched = Join(path, "scheduling");
  if (spec.scheduling.timeout_seconds <= 0) {
    p.AddUnlessCovered(Join(sched, "timeout"),
                       "must be positive, got " + FormatSeconds(spec.scheduling.timeout_seconds));
  }
  if (spec.scheduling.max_wait_seconds && *spec.scheduling.max_wait_seconds < 0) {
    p.AddUnlessCovered(Join(sched, "maxWaitDuration"), "must not be negative");
  }
  const std::string& strategy = spec.scheduling.strategy;
  if (!strategy.empty() && !Contains(kStrategies, strategy)) {
    p.AddUnlessCovered(
        Join(sched, "strategy"),
        "'" + strategy + "' is not a scheduling strategy; use one of " + JoinNames(kStrategies));
  }
}

}  // namespace stoker::spec::internal
