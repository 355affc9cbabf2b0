#include "replica/replica_contract.h"

#include <cmath>

#include "common/image_reference.h"

namespace stoker::replica {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

Result<double> ParseSeconds(const json& doc, const char* field, double fallback) {
  auto it = doc.find(field);
  if (it == doc.end() || it->is_null()) return fallback;
  if (!it->is_number()) {
    return InvalidArgument(std::string("launch.json: ") + field + ": must be a number of seconds");
  }
  double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(std::string("launch.json: ") + field + ": must be >= 0, got " +
                           it->dump());
  }
  return v;
}

// An absolute path (a JSON string); InvalidArgument naming `at`.
Result<fs::path> AbsolutePath(const json& p, const std::string& at) {
  if (!p.is_string()) return InvalidArgument(at + ": must be a string");
  std::string s = p.get<std::string>();
  if (s.empty() || s[0] != '/' || s.find('\0') != std::string::npos) {
    return InvalidArgument(at + ": must be an absolute path, got \"" + s + "\"");
  }
  return fs::path(std::move(s));
}

Result<std::vector<fs::path>> PathList(const json& doc, const char* key,
                                       const char* section = "isolation") {
  std::vector<fs::path> out;
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return out;
  std::string where = std::string("launch.json: ") + section + "." + key;
  if (!it->is_array()) return InvalidArgument(where + ": must be an array of absolute paths");
  for (size_t i = 0; i < it->size(); ++i) {
    STOKER_ASSIGN_OR_RETURN(fs::path p,
                            AbsolutePath((*it)[i], where + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(p));
  }
  return out;
}

// [{"source": ABS, "target": ABS}, ...] at doc[key]; empty when absent.
Result<std::vector<BindSpec>> BindList(const json& doc, const char* key, const char* section) {
  std::vector<BindSpec> out;
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return out;
  std::string where = std::string("launch.json: ") + section + "." + key;
  if (!it->is_array()) return InvalidArgument(where + ": must be an array of {source, target}");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& b = (*it)[i];
    std::string at = where + "[" + std::to_string(i) + "]";
    if (!b.is_object()) return InvalidArgument(at + ": must be {\"source\": ..., \"target\": ...}");
    STOKER_ASSIGN_OR_RETURN(fs::path source,
                            AbsolutePath(b.value("source", json()), at + ".source"));
    STOKER_ASSIGN_OR_RETURN(fs::path target,
                            AbsolutePath(b.value("target", json()), at + ".target"));
    out.push_back({std::move(source), std::move(target)});
  }
  return out;
}

json BindStrings(const std::vector<BindSpec>& binds) {
  json out = json::array();
  for (const BindSpec& b : binds) out.push_back({{"source", b.source}, {"target", b.target}});
  return out;
}

// An integer field, 0 when absent or of another type.
int64_t IntField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::optional<int> OptionalInt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  int64_t v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) return std::nullopt;
  return static_cast<int>(v);
}

Result<json> ParseObject(std::string_view text, const char* file) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(std::string(file) + ": not valid JSON");
  if (!doc.is_object()) return InvalidArgument(std::string(file) + ": must be a JSON object");
  return doc;
}

json PathStrings(const std::vector<fs::path>& paths) {
  json out = json::array();
  for (const fs::path& p : paths) out.push_back(p.string());
  return out;
}

}  // namespace

std::string_view IsolationModeName(IsolationMode mode) {
  switch (mode) {
    case IsolationMode::kOff:
      return "off";
    case IsolationMode::kAuto:
      return "auto";
    case IsolationMode::kRequired:
      return "required";
  }
  return "off";
}

Result<IsolationMode> ParseIsolationMode(std::string_view name) {
  for (IsolationMode m : {IsolationMode::kOff, IsolationMode::kAuto, IsolationMode::kRequired}) {
    if (IsolationModeName(m) == name) return m;
  }
  return InvalidArgument("must be off, auto or required, got \"" + std::string(name) + "\"");
}

Result<IsolationSpec> ParseIsolationSpec(const json& value) {
  IsolationSpec spec;
  if (value.is_null()) return spec;
  if (!value.is_object()) {
    return InvalidArgument(
        "launch.json: isolation: must be {\"mode\": ..., \"hide\": [...], \"keep\": [...], "
        "\"keep_read_only\": [...]}");
  }
  // A missing or null mode is off; anything but one of the three strings is
  // refused here (json::value would throw on a number or a boolean).
  auto mode_it = value.find("mode");
  if (mode_it != value.end() && !mode_it->is_null() && !mode_it->is_string()) {
    return InvalidArgument("launch.json: isolation.mode: must be off, auto or required, got " +
                           mode_it->dump());
  }
  std::string mode =
      mode_it == value.end() || mode_it->is_null() ? "off" : mode_it->get<std::string>();
  auto parsed = ParseIsolationMode(mode);
  if (!parsed.ok()) {
    return InvalidArgument("launch.json: isolation.mode: must be off, auto or required, got \"" +
                           mode + "\"");
  }
  spec.mode = *parsed;
  STOKER_ASSIGN_OR_RETURN(spec.hide, PathList(value, "hide"));
  STOKER_ASSIGN_OR_RETURN(spec.keep, PathList(value, "keep"));
  STOKER_ASSIGN_OR_RETURN(spec.keep_read_only, PathList(value, "keep_read_only"));
  STOKER_ASSIGN_OR_RETURN(spec.bind, BindList(value, "bind", "isolation"));
  return spec;
}

bool IsWarmStartupVar(std::string_view name) {
  if (name == "LANG" || name == "LC_ALL" || name == "LC_CTYPE" || name == "PYTHONHASHSEED") {
    return true;
  }
  for (std::string_view prefix : {"OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

namespace {

// launch.json's "run_as" (not null).
Result<RunAs> ParseRunAs(const json& r) {
  auto id = [&r](const char* key) -> Result<uint32_t> {
    auto v = r.find(key);
    if (v == r.end() || !v->is_number_unsigned() || v->get<uint64_t>() > 0xFFFFFFFEu) {
      return InvalidArgument(std::string("launch.json: run_as.") + key +
                             ": must be a numeric id from 0 to 4294967294");
    }
    return static_cast<uint32_t>(v->get<uint64_t>());
  };
  if (!r.is_object() || !r.contains("user") || !r["user"].is_string() ||
      r["user"].get<std::string>().empty() || HasNul(r["user"].get<std::string>())) {
    return InvalidArgument("launch.json: run_as: must be {\"user\": NAME, \"uid\": N, \"gid\": N}");
  }
  RunAs run_as;
  run_as.user = r["user"].get<std::string>();
  STOKER_ASSIGN_OR_RETURN(run_as.uid, id("uid"));
  STOKER_ASSIGN_OR_RETURN(run_as.gid, id("gid"));
  if (auto g = r.find("extra_gids"); g != r.end() && !g->is_null()) {
    if (!g->is_array() || g->size() > 16) {
      return InvalidArgument("launch.json: run_as.extra_gids: must be a list of at most 16 ids");
    }
    for (const json& v : *g) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFEu) {
        return InvalidArgument(
            "launch.json: run_as.extra_gids: must hold numeric ids from 0 to 4294967294");
      }
      run_as.extra_gids.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
    }
  }
  if (auto h = r.find("home"); h != r.end() && h->is_string() && !HasNul(h->get<std::string>())) {
    run_as.home = h->get<std::string>();
  }
  return run_as;
}

// launch.json's "warm" (not null).
Result<WarmSpec> ParseWarmSpec(const json& value) {
  const char* shape =
      "launch.json: warm: must be {\"preload\": [MODULE...], \"dir\": ABS_PATH, "
      "\"zygote\": ABS_PATH, \"python\": ABS_PATH, \"idle_seconds\": N} or "
      "{\"cold_reason\": TEXT}";
  if (!value.is_object()) return InvalidArgument(shape);
  WarmSpec w;
  w.requested = true;
  auto str = [&](const char* key) -> std::optional<std::string> {
    auto f = value.find(key);
    if (f == value.end() || !f->is_string() || HasNul(f->get<std::string>())) return std::nullopt;
    return f->get<std::string>();
  };
  if (auto r = str("cold_reason")) w.cold_reason = *r;
  if (auto p = value.find("preload"); p != value.end() && p->is_array()) {
    for (const json& m : *p) {
      if (!m.is_string() || HasNul(m.get<std::string>())) return InvalidArgument(shape);
      w.preload.push_back(m.get<std::string>());
    }
  }
  if (auto d = str("dir")) w.dir = *d;
  if (auto z = str("zygote")) w.zygote = *z;
  if (auto py = str("python")) w.python = *py;
  STOKER_ASSIGN_OR_RETURN(w.idle_seconds, ParseSeconds(value, "idle_seconds", 600));
  if (auto u = str("user")) w.user = *u;
  if (auto d = value.find("defaults"); d != value.end() && !d->is_null()) {
    if (!d->is_object()) return InvalidArgument("launch.json: warm.defaults: must be an object");
    for (const auto& [k, v] : d->items()) {
      if (!v.is_string() || !IsWarmStartupVar(k) || HasNul(v.get<std::string>())) {
        return InvalidArgument("launch.json: warm.defaults." + k +
                               ": must be a start-up variable with a string value");
      }
      w.defaults[k] = v.get<std::string>();
    }
  }
  for (auto [key, field] : {std::pair<const char*, int*>{"max_per_user", &w.max_per_user},
                            {"max_total", &w.max_total}}) {
    auto f = value.find(key);
    if (f == value.end()) continue;
    if (!f->is_number_integer() || f->get<int64_t>() < 1 || f->get<int64_t>() > 100000) {
      return InvalidArgument(std::string("launch.json: warm.") + key +
                             ": must be an integer of at least 1");
    }
    *field = f->get<int>();
  }
  if (w.cold_reason.empty() &&
      (!w.dir.is_absolute() || !w.zygote.is_absolute() || w.python.empty() || w.python[0] != '/')) {
    return InvalidArgument(shape);
  }
  return w;
}

}  // namespace

namespace {

// launch.json's command: argv (required), env and packages.
Status ParseCommand(const json& doc, LaunchSpec& spec) {
  auto argv = doc.find("argv");
  if (argv == doc.end() || !argv->is_array() || argv->empty()) {
    return InvalidArgument("launch.json: argv: must be a non-empty array of strings");
  }
  for (size_t i = 0; i < argv->size(); ++i) {
    const json& a = (*argv)[i];
    std::string where = "launch.json: argv[" + std::to_string(i) + "]";
    if (!a.is_string()) return InvalidArgument(where + ": must be a string");
    std::string s = a.get<std::string>();
    if (HasNul(s)) return InvalidArgument(where + ": contains a NUL character");
    spec.argv.push_back(std::move(s));
  }
  if (spec.argv[0].empty()) return InvalidArgument("launch.json: argv[0]: must not be empty");

  auto env = doc.find("env");
  if (env != doc.end() && !env->is_null()) {
    if (!env->is_object()) return InvalidArgument("launch.json: env: must be an object of strings");
    for (const auto& [k, v] : env->items()) {
      std::string where = "launch.json: env." + k;
      if (k.empty() || k.find('=') != std::string::npos || HasNul(k)) {
        return InvalidArgument(where + ": not a valid variable name");
      }
      if (!v.is_string()) return InvalidArgument(where + ": must be a string");
      std::string s = v.get<std::string>();
      if (HasNul(s)) return InvalidArgument(where + ": contains a NUL character");
      spec.env[k] = std::move(s);
    }
  }

  auto packages = doc.find("packages");
  if (packages != doc.end() && !packages->is_null()) {
    if (!packages->is_array()) {
      return InvalidArgument("launch.json: packages: must be an array of paths");
    }
    for (size_t i = 0; i < packages->size(); ++i) {
      const json& p = (*packages)[i];
      std::string where = "launch.json: packages[" + std::to_string(i) + "]";
      if (!p.is_string()) return InvalidArgument(where + ": must be a string");
      std::string s = p.get<std::string>();
      if (s.empty() || s[0] != '/' || HasNul(s)) {
        return InvalidArgument(where + ": must be an absolute path, got \"" + s + "\"");
      }
      spec.packages.emplace_back(std::move(s));
    }
  }
  return OkStatus();
}

// launch.json's bounds: timeout and grace, the log's rotation limits, the
// telemetry sampler's settings and the memory limit.
Status ParseBounds(const json& doc, LaunchSpec& spec) {
  STOKER_ASSIGN_OR_RETURN(spec.timeout_seconds, ParseSeconds(doc, "timeout_seconds", 0));
  STOKER_ASSIGN_OR_RETURN(spec.grace_seconds, ParseSeconds(doc, "grace_seconds", 10));
  if (auto it = doc.find("log_max_bytes"); it != doc.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return InvalidArgument("launch.json: log_max_bytes: must be a whole number >= 0, got " +
                             it->dump());
    }
    spec.log_limits.max_bytes = it->get<uint64_t>();
  }
  if (auto it = doc.find("log_max_files"); it != doc.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1000) {
      return InvalidArgument(
          "launch.json: log_max_files: must be a whole number from 1 to 1000, got " + it->dump());
    }
    spec.log_limits.max_files = it->get<int>();
  }
  if (auto it = doc.find("telemetry"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) {
      return InvalidArgument(
          "launch.json: telemetry: must be {\"interval_seconds\": N, \"cpus\": N, "
          "\"memory_bytes\": N}");
    }
    STOKER_ASSIGN_OR_RETURN(spec.telemetry.interval_seconds,
                            ParseSeconds(*it, "interval_seconds", 0));
    STOKER_ASSIGN_OR_RETURN(spec.telemetry.cpus, ParseSeconds(*it, "cpus", 0));
    if (auto m = it->find("memory_bytes"); m != it->end() && m->is_number_unsigned()) {
      spec.telemetry.memory_bytes = m->get<uint64_t>();
    }
  }
  if (auto it = doc.find("limits"); it != doc.end() && !it->is_null()) {
    auto m = it->is_object() ? it->find("memory_bytes") : it->end();
    if (!it->is_object() || m == it->end() || !m->is_number_unsigned()) {
      return InvalidArgument(
          "launch.json: limits: must be {\"memory_bytes\": N, \"machine_type\": NAME}");
    }
    spec.limits.memory_bytes = m->get<uint64_t>();
    if (auto t = it->find("machine_type"); t != it->end() && t->is_string()) {
      spec.limits.machine_type = t->get<std::string>();
    }
  }
  return OkStatus();
}

// launch.json's "cluster": the replica's place, {pool, index, trial, job}.
Result<ClusterTask> ParseClusterTask(const json& it) {
  auto whole = [&](const char* key) -> std::optional<int> {
    auto f = it.find(key);
    if (f == it.end() || !f->is_number_integer()) return std::nullopt;
    int64_t v = f->get<int64_t>();
    if (v < 0 || v > 1'000'000) return std::nullopt;
    return static_cast<int>(v);
  };
  auto text = [&](const char* key) -> std::optional<std::string> {
    auto f = it.find(key);
    if (f == it.end()) return std::string();
    if (!f->is_string()) return std::nullopt;
    return f->get<std::string>();
  };
  std::optional<int> pool = it.is_object() ? whole("pool") : std::nullopt;
  std::optional<int> index = it.is_object() ? whole("index") : std::nullopt;
  std::optional<std::string> trial = it.is_object() ? text("trial") : std::nullopt;
  std::optional<std::string> job = it.is_object() ? text("job") : std::nullopt;
  if (!pool || !index || !trial || !job) {
    return InvalidArgument(
        "launch.json: cluster: must be {\"pool\": N, \"index\": N, \"trial\": ID, \"job\": "
        "TEXT}");
  }
  return ClusterTask{*pool, *index, *trial, *job};
}

// launch.json's "gpu_indexes": [0, 1, ...].
Result<std::vector<int>> ParseGpuIndexes(const json& it) {
  const char* shape = "launch.json: gpu_indexes: must be a list of GPU indexes [0, 1, ...]";
  if (!it.is_array()) return InvalidArgument(shape);
  std::vector<int> out;
  for (const json& g : it) {
    if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() > 1023) {
      return InvalidArgument(shape);
    }
    out.push_back(g.get<int>());
  }
  return out;
}

}  // namespace

Result<LaunchSpec> ParseLaunchSpec(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("launch.json: not valid JSON");
  if (!doc.is_object()) return InvalidArgument("launch.json: must be a JSON object");
  LaunchSpec spec;
  STOKER_RETURN_IF_ERROR(ParseCommand(doc, spec));
  STOKER_RETURN_IF_ERROR(ParseBounds(doc, spec));
  if (auto it = doc.find("run_as"); it != doc.end() && !it->is_null()) {
    STOKER_ASSIGN_OR_RETURN(spec.run_as, ParseRunAs(*it));
  }
  if (auto it = doc.find("isolation"); it != doc.end()) {
    STOKER_ASSIGN_OR_RETURN(spec.isolation, ParseIsolationSpec(*it));
  }
  if (auto it = doc.find("warm"); it != doc.end() && !it->is_null()) {
    STOKER_ASSIGN_OR_RETURN(spec.warm, ParseWarmSpec(*it));
  }
  if (auto it = doc.find("container"); it != doc.end()) {
    STOKER_ASSIGN_OR_RETURN(spec.container, ParseContainerSpec(*it));
  }
  if (auto it = doc.find("python_env"); it != doc.end()) {
    STOKER_ASSIGN_OR_RETURN(spec.python_env, ParsePythonEnvSpec(*it));
  }
  if (auto it = doc.find("cluster"); it != doc.end() && !it->is_null()) {
    STOKER_ASSIGN_OR_RETURN(spec.cluster, ParseClusterTask(*it));
  }
  if (auto it = doc.find("gpu_indexes"); it != doc.end() && !it->is_null()) {
    STOKER_ASSIGN_OR_RETURN(spec.gpu_indexes, ParseGpuIndexes(*it));
  }
  return spec;
}

Result<std::optional<PythonEnvSpec>> ParsePythonEnvSpec(const json& value) {
  if (value.is_null()) return std::optional<PythonEnvSpec>();
  const char* shape =
      "launch.json: python_env: must be {\"cache_dir\": ABS_PATH, \"python\": PATH, "
      "\"find_links\": [ABS_PATH...], \"index_url\": URL, \"requirements\": [TEXT...]}";
  if (!value.is_object()) return InvalidArgument(shape);
  auto absolute = [&](const char* key) -> std::optional<std::string> {
    auto f = value.find(key);
    if (f == value.end() || !f->is_string()) return std::nullopt;
    std::string s = f->get<std::string>();
    if (s.empty() || s[0] != '/' || HasNul(s)) return std::nullopt;
    return s;
  };
  PythonEnvSpec p;
  std::optional<std::string> cache_dir = absolute("cache_dir");
  auto python = value.find("python");
  if (!cache_dir || python == value.end() || !python->is_string() ||
      python->get<std::string>().empty() || HasNul(python->get<std::string>())) {
    return InvalidArgument(shape);
  }
  p.cache_dir = *cache_dir;
  p.python = python->get<std::string>();
  STOKER_ASSIGN_OR_RETURN(p.find_links, PathList(value, "find_links", "python_env"));
  if (auto f = value.find("index_url"); f != value.end() && !f->is_null()) {
    if (!f->is_string() || HasNul(f->get<std::string>())) return InvalidArgument(shape);
    p.index_url = f->get<std::string>();
  }
  if (auto f = value.find("requirements"); f != value.end() && !f->is_null()) {
    if (!f->is_array()) return InvalidArgument(shape);
    for (const json& r : *f) {
      if (!r.is_string() || HasNul(r.get<std::string>())) return InvalidArgument(shape);
      p.requirements.push_back(r.get<std::string>());
    }
  }
  return std::optional<PythonEnvSpec>(std::move(p));
}

Result<std::optional<ContainerSpec>> ParseContainerSpec(const json& value) {
  if (value.is_null()) return std::optional<ContainerSpec>();
  const char* shape =
      "launch.json: container: must be {\"engine\": ABS_PATH, \"image\": NAME, \"name\": "
      "NAME[, \"entrypoint\": [ARG...]], \"args\": [ARG...], \"mounts\": [ABS_PATH...], "
      "\"mounts_read_only\": [ABS_PATH...][, \"pull\": BOOL, \"pull_if_missing\": BOOL, "
      "\"tls_verify\": BOOL, \"user_namespace\": BOOL]}";
  if (!value.is_object()) return InvalidArgument(shape);
  auto strings = [&](const char* key) -> std::optional<std::vector<std::string>> {
    auto f = value.find(key);
    if (f == value.end() || !f->is_array()) return std::nullopt;
    std::vector<std::string> out;
    for (const json& a : *f) {
      if (!a.is_string() || HasNul(a.get<std::string>())) return std::nullopt;
      out.push_back(a.get<std::string>());
    }
    return out;
  };
  ContainerSpec c;
  for (auto [key, out] : {std::pair{"engine", &c.engine}, {"image", &c.image}, {"name", &c.name}}) {
    auto f = value.find(key);
    if (f == value.end() || !f->is_string() || f->get<std::string>().empty() ||
        HasNul(f->get<std::string>())) {
      return InvalidArgument(shape);
    }
    *out = f->get<std::string>();
  }
  // A name starting with '-' would be read as an engine option.
  if (c.engine[0] != '/' || c.name[0] == '-') return InvalidArgument(shape);
  // The image is parsed again here, whatever stokerd checked, and only its
  // parsed form is kept: the engine never reads a transport or an option
  // in it (common/image_reference.h).
  Result<ImageReference> image = ParseImageReference(c.image, "launch.json: container.image");
  if (!image.ok()) return image.status();
  c.image = image->ToString();
  if (value.contains("entrypoint")) {
    c.entrypoint = strings("entrypoint");
    if (!c.entrypoint || c.entrypoint->empty()) return InvalidArgument(shape);
  }
  auto args = strings("args");
  if (!args) return InvalidArgument(shape);
  c.args = std::move(*args);
  STOKER_ASSIGN_OR_RETURN(c.mounts, PathList(value, "mounts", "container"));
  STOKER_ASSIGN_OR_RETURN(c.mounts_read_only, PathList(value, "mounts_read_only", "container"));
  STOKER_ASSIGN_OR_RETURN(c.binds, BindList(value, "binds", "container"));
  for (auto [key, out] : {std::pair{"pull", &c.pull},
                          {"pull_if_missing", &c.pull_if_missing},
                          {"tls_verify", &c.tls_verify},
                          {"user_namespace", &c.user_namespace}}) {
    if (auto f = value.find(key); f != value.end()) {
      if (!f->is_boolean()) return InvalidArgument(shape);
      *out = f->get<bool>();
    }
  }
  return std::optional<ContainerSpec>(std::move(c));
}

std::string FormatLaunchSpec(const LaunchSpec& s) {
  json packages = json::array();
  for (const fs::path& p : s.packages) packages.push_back(p.string());
  json doc = {{"argv", s.argv},
              {"env", s.env},
              {"packages", packages},
              {"timeout_seconds", s.timeout_seconds},
              {"grace_seconds", s.grace_seconds},
              {"log_max_bytes", s.log_limits.max_bytes},
              {"log_max_files", s.log_limits.max_files}};
  if (s.run_as) {
    doc["run_as"] = {{"user", s.run_as->user},
                     {"uid", s.run_as->uid},
                     {"gid", s.run_as->gid},
                     {"extra_gids", s.run_as->extra_gids},
                     {"home", s.run_as->home}};
  }
  if (s.isolation.mode != IsolationMode::kOff) {
    doc["isolation"] = {{"mode", std::string(IsolationModeName(s.isolation.mode))},
                        {"hide", PathStrings(s.isolation.hide)},
                        {"keep", PathStrings(s.isolation.keep)},
                        {"keep_read_only", PathStrings(s.isolation.keep_read_only)}};
    if (!s.isolation.bind.empty()) doc["isolation"]["bind"] = BindStrings(s.isolation.bind);
  }
  if (s.telemetry.interval_seconds > 0) {
    doc["telemetry"] = {{"interval_seconds", s.telemetry.interval_seconds},
                        {"cpus", s.telemetry.cpus},
                        {"memory_bytes", s.telemetry.memory_bytes}};
  }
  if (s.limits.memory_bytes > 0) {
    doc["limits"] = {{"memory_bytes", s.limits.memory_bytes},
                     {"machine_type", s.limits.machine_type}};
  }
  if (s.warm.requested) {
    if (!s.warm.cold_reason.empty()) {
      doc["warm"] = {{"cold_reason", s.warm.cold_reason}};
    } else {
      doc["warm"] = {{"preload", s.warm.preload},
                     {"dir", s.warm.dir.string()},
                     {"zygote", s.warm.zygote.string()},
                     {"python", s.warm.python},
                     {"idle_seconds", s.warm.idle_seconds}};
      json& w = doc["warm"];
      w["user"] = s.warm.user;
      w["defaults"] = s.warm.defaults;
      w["max_per_user"] = s.warm.max_per_user;
      w["max_total"] = s.warm.max_total;
    }
  }
  if (s.container) {
    const ContainerSpec& c = *s.container;
    doc["container"] = {{"engine", c.engine},
                        {"image", c.image},
                        {"name", c.name},
                        {"args", c.args},
                        {"mounts", PathStrings(c.mounts)},
                        {"mounts_read_only", PathStrings(c.mounts_read_only)}};
    if (!c.binds.empty()) doc["container"]["binds"] = BindStrings(c.binds);
    if (c.entrypoint) doc["container"]["entrypoint"] = *c.entrypoint;
    if (c.pull) doc["container"]["pull"] = true;
    if (c.pull_if_missing) doc["container"]["pull_if_missing"] = true;
    if (!c.tls_verify) doc["container"]["tls_verify"] = false;
    if (!c.user_namespace) doc["container"]["user_namespace"] = false;
  }
  if (s.python_env) {
    const PythonEnvSpec& p = *s.python_env;
    doc["python_env"] = {{"cache_dir", p.cache_dir.string()},
                         {"python", p.python},
                         {"find_links", PathStrings(p.find_links)},
                         {"index_url", p.index_url},
                         {"requirements", p.requirements}};
  }
  if (s.cluster) {
    doc["cluster"] = {{"pool", s.cluster->pool},
                      {"index", s.cluster->index},
                      {"trial", s.cluster->trial},
                      {"job", s.cluster->job}};
  }
  if (!s.gpu_indexes.empty()) doc["gpu_indexes"] = s.gpu_indexes;
  return doc.dump(2);
}

std::string_view EndStateName(EndState state) {
  switch (state) {
    case EndState::kExited:
      return "exited";
    case EndState::kSignaled:
      return "signaled";
    case EndState::kTimeout:
      return "timeout";
    case EndState::kCancelled:
      return "cancelled";
    case EndState::kLaunchFailed:
      return "launch_failed";
  }
  return "launch_failed";
}

std::optional<EndState> ParseEndState(std::string_view name) {
  for (EndState s : {EndState::kExited, EndState::kSignaled, EndState::kTimeout,
                     EndState::kCancelled, EndState::kLaunchFailed}) {
    if (EndStateName(s) == name) return s;
  }
  return std::nullopt;
}

std::string FormatStatus(const FinalStatus& s) {
  json doc = {
      {"state", std::string(EndStateName(s.state))},
      {"exit_code", s.exit_code ? json(*s.exit_code) : json(nullptr)},
      {"signal", s.signal ? json(*s.signal) : json(nullptr)},
      {"start_time_us", s.start_time_us},
      {"end_time_us", s.end_time_us},
      {"message", s.message},
  };
  if (s.oom_killed) doc["oom_killed"] = true;
  if (s.permanent) doc["permanent"] = true;
  return doc.dump(2) + "\n";
}

Result<FinalStatus> ParseStatus(std::string_view text) {
  STOKER_ASSIGN_OR_RETURN(json doc, ParseObject(text, kStatusFile));
  FinalStatus s;
  auto state = doc.find("state");
  std::optional<EndState> parsed;
  if (state != doc.end() && state->is_string()) parsed = ParseEndState(state->get<std::string>());
  if (!parsed) {
    return InvalidArgument(std::string(kStatusFile) +
                           ": state: must be one of exited, signaled, "
                           "timeout, cancelled, launch_failed");
  }
  s.state = *parsed;
  s.exit_code = OptionalInt(doc, "exit_code");
  s.signal = OptionalInt(doc, "signal");
  s.start_time_us = IntField(doc, "start_time_us");
  s.end_time_us = IntField(doc, "end_time_us");
  if (auto m = doc.find("message"); m != doc.end() && m->is_string()) s.message = *m;
  if (auto o = doc.find("oom_killed"); o != doc.end() && o->is_boolean()) s.oom_killed = *o;
  if (auto p = doc.find("permanent"); p != doc.end() && p->is_boolean()) s.permanent = *p;
  return s;
}

std::string FormatTrainerInfo(const TrainerInfo& info) {
  json doc = {{"pid", info.pid}, {"pgid", info.pgid}, {"start_time_us", info.start_time_us}};
  if (!info.start_note.empty()) doc["start_note"] = info.start_note;
  return doc.dump() + "\n";
}

Result<TrainerInfo> ParseTrainerInfo(std::string_view text) {
  STOKER_ASSIGN_OR_RETURN(json doc, ParseObject(text, kTrainerFile));
  TrainerInfo info{IntField(doc, "pid"), IntField(doc, "pgid"), IntField(doc, "start_time_us"), ""};
  if (auto n = doc.find("start_note"); n != doc.end() && n->is_string()) info.start_note = *n;
  return info;
}

std::string FormatRunnerInfo(const RunnerInfo& info) {
  json doc = {{"pid", info.pid}, {"start_time_us", info.start_time_us}};
  return doc.dump() + "\n";
}

Result<RunnerInfo> ParseRunnerInfo(std::string_view text) {
  STOKER_ASSIGN_OR_RETURN(json doc, ParseObject(text, kRunnerFile));
  return RunnerInfo{IntField(doc, "pid"), IntField(doc, "start_time_us")};
}

std::string FormatPreparingInfo(const PreparingInfo& info) {
  json doc = {{"note", info.note}, {"since_us", info.since_us}};
  return doc.dump() + "\n";
}

Result<PreparingInfo> ParsePreparingInfo(std::string_view text) {
  STOKER_ASSIGN_OR_RETURN(json doc, ParseObject(text, kPreparingFile));
  PreparingInfo info;
  if (auto n = doc.find("note"); n != doc.end() && n->is_string()) info.note = *n;
  info.since_us = IntField(doc, "since_us");
  return info;
}

}  // namespace stoker::replica
