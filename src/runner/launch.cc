#include "runner/launch.h"

#include <cmath>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/time.h"

namespace stoker::runner {
namespace {

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

}  // namespace

Result<LaunchSpec> ParseLaunchSpec(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("launch.json: not valid JSON");
  if (!doc.is_object()) return InvalidArgument("launch.json: must be a JSON object");
  LaunchSpec spec;

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
  if (auto it = doc.find("run_as"); it != doc.end() && !it->is_null()) {
    const json& r = *it;
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
      return InvalidArgument(
          "launch.json: run_as: must be {\"user\": NAME, \"uid\": N, \"gid\": N}");
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
    spec.run_as = run_as;
  }
  if (auto it = doc.find("isolation"); it != doc.end()) {
    STOKER_ASSIGN_OR_RETURN(spec.isolation, ParseIsolationSpec(*it));
  }
  return spec;
}

std::vector<std::string> BuildTrainerEnv(
    const std::map<std::string, std::string>& env,
    const std::vector<std::filesystem::path>& python_path_prefix) {
  std::map<std::string, std::string> merged = env;
  if (!python_path_prefix.empty()) {
    std::string pp;
    for (const auto& dir : python_path_prefix) {
      if (!pp.empty()) pp += ':';
      pp += dir.string();
    }
    auto it = merged.find("PYTHONPATH");
    if (it != merged.end() && !it->second.empty()) pp += ':' + it->second;
    merged["PYTHONPATH"] = pp;
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> ExecCandidates(const std::string& program, const std::string& path_var) {
  if (program.find('/') != std::string::npos) return {program};
  std::string path = path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var;
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    if (dir.empty()) dir = ".";
    out.push_back(dir + "/" + program);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
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

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

std::string DescribeOutcome(const Outcome& o) {
  auto stopped = [&o]() {
    std::string s = "stopped with " + SignalName(o.stop_signal);
    if (o.stop_signal == SIGKILL) s += " after " + FormatDuration(o.grace_seconds) + " grace";
    return s;
  };
  switch (o.state) {
    case EndState::kExited:
      return "exited with code " + std::to_string(o.exit_code.value_or(-1));
    case EndState::kSignaled: {
      int sig = o.signal.value_or(0);
      return "killed by signal " + std::to_string(sig) + " (" + SignalName(sig) + ")";
    }
    case EndState::kTimeout:
      return "timed out after " + FormatDuration(o.timeout_seconds) + "; " + stopped();
    case EndState::kCancelled:
      if (o.stop_signal == 0) return "cancelled before the trainer started";
      return "cancelled; " + stopped();
    case EndState::kLaunchFailed:
      return "launch failed: " + o.message;
  }
  return o.message;
}

std::string FormatStatusJson(const Outcome& o) {
  json doc = {
      {"state", std::string(EndStateName(o.state))},
      {"exit_code", o.exit_code ? json(*o.exit_code) : json(nullptr)},
      {"signal", o.signal ? json(*o.signal) : json(nullptr)},
      {"start_time_us", o.start_time_us},
      {"end_time_us", o.end_time_us},
      {"message", DescribeOutcome(o)},
  };
  return doc.dump(2) + "\n";
}

}  // namespace stoker::runner
