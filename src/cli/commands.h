// The CLI's commands, shared between main.cc (flag wiring) and the files
// that implement them. Every command returns the process exit code.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/connection.h"
#include "common/status.h"

namespace stoker::cli {

inline constexpr char kDefaultImage[] =
    "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest";

struct Globals {
  std::string server;
  std::string project = "local";
  std::string region = "local";
  std::string format = "text";
};

// The one place where error codes become exit codes: 0 ok; 1 failure; 2 bad
// input; 3 not found; 4 daemon unavailable.
int ExitCodeFor(const Status& s);
// Prints "ERROR: message" to stderr and returns the exit code.
int Report(const Status& s);

std::string JobsPath(const Globals& g);
std::string IdOf(const nlohmann::json& job);
// "12.3s" or "4m05s" between two RFC 3339 times.
std::string Since(const std::string& a, const std::string& b);
Result<std::unique_ptr<Connection>> Connect(const Globals& g);

// Packs a trainer package directory as an sdist and stages it; returns its gs:// URI.
Result<std::string> StagePackage(Connection& conn, const std::string& package_path);

// Streams a job's logs (all replicas, prefixed when several, or `only`);
// with `follow`, until the job has ended and its logs are drained.
void PrintLogs(Connection& conn, const Globals& g, const std::string& id, const std::string& only,
               bool follow, std::string* final_state);

struct SubmitFlags {
  std::string config;
  std::string display_name;
  std::vector<std::string> args;
  bool args_given = false;
  std::string package_path;
  std::string module_name;
  std::string machine_type = "n1-standard-4";
  std::string executor_image = kDefaultImage;
  bool follow = false;
};
int Submit(const Globals& g, const SubmitFlags& f);
// Submits a complete CustomJob JSON; prints it or follows it like Submit.
int SubmitJobJson(const Globals& g, Connection& conn, const nlohmann::json& job, bool follow);
int List(const Globals& g, const std::string& filter);
int Describe(const Globals& g, const std::string& id);
int Cancel(const Globals& g, const std::string& id);
int Logs(const Globals& g, const std::string& id, const std::string& replica, bool follow);

struct HptuningFlags {
  std::string config;
  std::string display_name;
  int max_trial_count = 0;       // 0 = from the file
  int parallel_trial_count = 0;  // 0 = from the file
  std::string algorithm;         // grid-search, random-search, algorithm-unspecified
  bool follow = false;
};
int HptuningSubmit(const Globals& g, const HptuningFlags& f);
int HptuningDescribe(const Globals& g, const std::string& id);
int HptuningList(const Globals& g);
int HptuningCancel(const Globals& g, const std::string& id);
int HptuningLogs(const Globals& g, const std::string& id, const std::string& trial, bool follow);

int StorageCp(const Globals& g, const std::string& src, const std::string& dst);
int StorageLs(const Globals& g, const std::string& uri);
int StorageMb(const Globals& g, const std::string& uri);

}  // namespace stoker::cli
