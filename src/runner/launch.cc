#include "runner/launch.h"

#include <csignal>
#include <cstring>

#include "common/time.h"

namespace stoker::runner {
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
  return replica::FormatStatus(
      {o.state, o.exit_code, o.signal, o.start_time_us, o.end_time_us, DescribeOutcome(o)});
}

}  // namespace stoker::runner
