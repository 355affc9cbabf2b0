// Job commands: submit, list, describe, logs, cancel.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/log_stamper.h"
#include "common/files.h"
#include "common/json_yaml.h"
#include "common/time.h"
#include "http/http.h"
#include "spec/custom_job.h"
#include "spec/job_state.h"
#include "storage/archive.h"
#include "storage/buckets.h"

namespace stoker::cli {

namespace fs = std::filesystem;
using nlohmann::json;

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return 0;
    case Code::kInvalidArgument:
    case Code::kFailedPrecondition:
    case Code::kAlreadyExists:
      return 2;
    case Code::kNotFound:
      return 3;
    case Code::kUnavailable:
      return 4;
    default:
      return 1;
  }
}

int Report(const Status& s) {
  std::cerr << "ERROR: " << s.message() << "\n";
  return ExitCodeFor(s);
}

std::string JobsPath(const Globals& g) {
  return "/v1/projects/" + http::UrlEncode(g.project) + "/locations/" + http::UrlEncode(g.region) +
         "/customJobs";
}

std::string IdOf(const json& job) {
  std::string name = job.value("name", "");
  return name.substr(name.rfind('/') + 1);
}

std::string Span(double seconds) {
  char buf[32];
  long long s = static_cast<long long>(seconds);
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else if (s < 48 * 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd", s / 86400);
  }
  return buf;
}

std::string Since(const std::string& a, const std::string& b) {
  auto from = ParseRfc3339Micros(a), to = ParseRfc3339Micros(b);
  if (!from || !to || *to < *from) return "?";
  return Span((*to - *from) / 1e6);
}

Result<std::unique_ptr<Connection>> Connect(const Globals& g) {
  return Connection::Open({g.server, g.token, g.ca_file});
}

// ---- jobs submit ----------------------------------------------------------

static Result<json> LoadJobFile(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(json j, ReadConfigFile(path, "a CustomJob or CustomJobSpec mapping"));
  if (j.contains("workerPoolSpecs")) j = json{{"jobSpec", j}};  // a bare CustomJobSpec
  if (!j.contains("jobSpec")) {
    return InvalidArgument(
        path +
        ": expected a CustomJob (with 'jobSpec') or a CustomJobSpec (with 'workerPoolSpecs')");
  }
  return j;
}

Result<std::string> StagePackage(Connection& conn, const std::string& package_path) {
  fs::path dir = fs::absolute(package_path).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  if (!fs::is_directory(dir)) {
    return InvalidArgument("--package-path: " + package_path +
                           " is not a directory (give the trainer package, e.g. ./trainer)");
  }
  STOKER_ASSIGN_OR_RETURN(std::string archive,
                          storage::PackSdist(dir, dir.filename().string(), "0.0.0"));
  STOKER_ASSIGN_OR_RETURN(json staged, conn.Call("POST", "/v1/stoker/staging", archive));
  return staged["uri"].get<std::string>();
}

int Submit(const Globals& g, const SubmitFlags& f) {
  json job;
  if (!f.config.empty()) {
    auto loaded = LoadJobFile(f.config);
    if (!loaded.ok()) return Report(loaded.status());
    job = *loaded;
  } else if (!f.package_path.empty()) {
    job = {{"jobSpec",
            {{"workerPoolSpecs",
              {{{"machineSpec", {{"machineType", f.machine_type}}},
                {"replicaCount", 1},
                {"pythonPackageSpec",
                 {{"executorImageUri", f.executor_image},
                  {"packageUris", json::array()},
                  {"pythonModule", f.module_name}}}}}}}}};
  } else {
    return Report(
        InvalidArgument("give --config JOB_FILE, or --package-path DIR with --module-name MODULE"));
  }
  if (!f.display_name.empty()) job["displayName"] = f.display_name;
  if (!job.contains("displayName")) {
    if (!f.config.empty() && job["jobSpec"].is_object() && !job.contains("displayName")) {
      return Report(InvalidArgument(
          "displayName: required; pass --display-name NAME or set displayName in " + f.config));
    }
    job["displayName"] = fs::path(f.package_path).filename().string();
  }
  if (!f.package_path.empty() && f.module_name.empty()) {
    return Report(InvalidArgument(
        "--module-name: required with --package-path (e.g. --module-name trainer.task)"));
  }
  if (f.priority) {
    json& spec = job.contains("jobSpec") ? job["jobSpec"] : job;
    spec["scheduling"]["priority"] = *f.priority;
  }
  json& pools = job["jobSpec"]["workerPoolSpecs"];
  if (f.args_given && pools.is_array()) {
    for (json& pool : pools) {
      for (const char* kind : {"pythonPackageSpec", "containerSpec"}) {
        if (pool.is_object() && pool.contains(kind)) pool[kind]["args"] = f.args;
      }
    }
  }
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  if (!f.package_path.empty()) {
    bool any = false;
    for (json& pool : pools) {
      if (pool.is_object() && pool.contains("pythonPackageSpec")) any = true;
    }
    if (!any) {
      return Report(InvalidArgument(
          "--package-path: the job has no pythonPackageSpec pool to put the package in"));
    }
    // Validate before uploading anything.
    json probe = job;
    for (json& pool : probe["jobSpec"]["workerPoolSpecs"]) {
      if (pool.is_object() && pool.contains("pythonPackageSpec")) {
        pool["pythonPackageSpec"]["packageUris"] = {"gs://stoker-staging/pending.tar.gz"};
        if (!f.module_name.empty()) pool["pythonPackageSpec"]["pythonModule"] = f.module_name;
      }
    }
    auto parsed = spec::ParseCustomJob(probe);
    if (!parsed.ok()) return Report(parsed.status());
    auto uri = StagePackage(**conn, f.package_path);
    if (!uri.ok()) return Report(uri.status());
    for (json& pool : pools) {
      if (pool.is_object() && pool.contains("pythonPackageSpec")) {
        pool["pythonPackageSpec"]["packageUris"] = {*uri};
        pool["pythonPackageSpec"]["pythonModule"] = f.module_name;
      }
    }
    std::cerr << "Packed " << f.package_path << " into " << *uri << "\n";
  }
  return SubmitJobJson(g, **conn, job, f.follow);
}

// ---- jobs logs ------------------------------------------------------------

namespace {

// Says on stderr what a followed job waits for while it is queued or
// starting, once per change; asks the queue at most once a second.
class WaitReporter {
 public:
  WaitReporter(Connection& conn, const Globals& g, const std::string& id)
      : conn_(conn), g_(g), id_(id) {}

  void Update(const std::string& state) {
    if (state != "JOB_STATE_QUEUED" && state != "JOB_STATE_PENDING") return;
    auto now = std::chrono::steady_clock::now();
    if (state == last_state_ && now - asked_ < std::chrono::seconds(1)) return;
    asked_ = now;
    last_state_ = state;
    json entry;
    if (state == "JOB_STATE_QUEUED") {
      if (number_.empty()) {  // the queue names jobs by number, not by jobId
        auto job = conn_.Call("GET", JobsPath(g_) + "/" + http::UrlEncode(id_));
        if (!job.ok()) return;
        number_ = IdOf(*job);
      }
      auto queue = conn_.Call("GET", "/v1/stoker/queue");
      if (!queue.ok()) return;  // an older daemon: say only that it is queued
      for (const json& e : (*queue)["jobs"]) {
        if (e.value("jobId", "") == number_) entry = e;
      }
    }
    std::string line = WaitingLine(state, entry);
    if (!line.empty() && line != said_) std::cerr << line << "\n";
    said_ = line;
  }

 private:
  Connection& conn_;
  const Globals& g_;
  std::string id_, number_, last_state_, said_;
  std::chrono::steady_clock::time_point asked_;
};

}  // namespace

void PrintLogs(Connection& conn, const Globals& g, const std::string& id, const std::string& only,
               bool follow, std::string* final_state, const LogOptions& options) {
  std::map<std::string, uint64_t> offsets;
  std::map<std::string, std::string> partial;   // unterminated last line per replica
  std::map<std::string, LineStamper> stampers;  // with options.timestamps, per replica
  std::string base = JobsPath(g) + "/" + id + "/logs";
  WaitReporter waits(conn, g, id);
  if (final_state) final_state->clear();
  int idle_ms = 50;
  while (true) {
    auto listing = conn.Call("GET", base);
    if (!listing.ok()) {
      std::cerr << "ERROR: " << listing.status().message() << "\n";
      return;
    }
    std::string state = (*listing)["state"];
    bool ended = spec::IsTerminal(*spec::ParseJobState(state));
    if (follow && options.show_waiting) waits.Update(state);
    std::vector<std::string> names;
    for (const json& r : (*listing)["replicas"]) names.push_back(r["replica"]);
    bool prefix = only.empty() && names.size() > 1;
    bool got = false;
    for (const std::string& name : names) {
      if (!only.empty() && name != only) continue;
      while (true) {
        auto chunk = conn.Call("GET", base + "?replica=" + http::UrlEncode(name) +
                                          "&offset=" + std::to_string(offsets[name]) +
                                          (options.timestamps ? "&times=1" : ""));
        if (!chunk.ok()) break;
        std::string data = (*chunk)["data"];
        if (data.empty()) break;
        got = true;
        offsets[name] = (*chunk)["nextOffset"].get<uint64_t>();
        if (options.timestamps) {
          auto s = stampers.try_emplace(name, prefix ? name + ": " : "").first;
          std::cout << s->second.Add(data, chunk->value("times", json()));
        } else if (!prefix) {
          std::cout << data;
        } else {
          std::string text = partial[name] + data;
          size_t start = 0, nl;
          while ((nl = text.find('\n', start)) != std::string::npos) {
            std::cout << name << ": " << text.substr(start, nl - start + 1);
            start = nl + 1;
          }
          partial[name] = text.substr(start);
        }
        std::cout.flush();
      }
    }
    if (!follow || (ended && !got)) {
      for (auto& [name, rest] : partial) {
        if (!rest.empty()) std::cout << name << ": " << rest << "\n";
      }
      for (auto& [name, stamper] : stampers) std::cout << stamper.Flush();
      if (final_state) *final_state = state;
      return;
    }
    idle_ms = got ? 50 : std::min(idle_ms * 2, 500);
    std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
  }
}

// ---- jobs list / describe / cancel ----------------------------------------

// The legacy Job of tuning job `id` when a customJobs call for `id` failed
// with `failed` NotFound and `id` is an AI Platform jobId of a tuning job
// (those are studies, not custom jobs); nullopt otherwise.
static std::optional<json> TuningJobNamed(Connection& conn, const Globals& g, const std::string& id,
                                          const Status& failed) {
  if (failed.code() != Code::kNotFound) return std::nullopt;
  auto legacy = GetLegacyJob(conn, g, id);
  if (!legacy.ok() || !IsTuningJob(*legacy)) return std::nullopt;
  return *legacy;
}

Result<std::vector<json>> FetchAll(Connection& conn, const Globals& g, const std::string& path,
                                   const std::string& key) {
  std::vector<json> all;
  std::string token;
  const int64_t page_size = g.list.page_size.value_or(1000);
  do {
    std::string target = path + "?pageSize=" + std::to_string(page_size);
    if (!token.empty()) target += "&pageToken=" + http::UrlEncode(token);
    STOKER_ASSIGN_OR_RETURN(json page, conn.Call("GET", target));
    for (json& j : page.value(key, json::array())) all.push_back(std::move(j));
    token = page.value("nextPageToken", "");
  } while (!token.empty());
  return all;
}

int List(const Globals& g) {
  if (Status s = ValidateListFlags(g.list); !s.ok()) return Report(s);
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  // gcloud filters, sorts and limits on the client, over every job.
  auto fetched = FetchAll(**conn, g, JobsPath(g), "customJobs");
  if (!fetched.ok()) return Report(fetched.status());
  bool printed = false;
  auto all = SelectForList(g, std::move(*fetched), &printed);
  if (!all.ok()) return Report(all.status());
  if (printed) return 0;
  std::printf("%-6s %-24s %-22s %-28s %-9s %s\n", "ID", "NAME", "STATE", "CREATED", "DURATION",
              "WHY IT WAITS");
  for (const json& j : *all) {
    std::string dur = j.contains("startTime")
                          ? Since(j["startTime"], j.value("endTime", FormatRfc3339(NowMicros())))
                          : "-";
    std::string why = j.contains("stoker") ? j["stoker"].value("waitReason", "") : "";
    std::printf("%-6s %-24s %-22s %-28s %-9s %s\n", IdOf(j).c_str(),
                j["displayName"].get<std::string>().substr(0, 24).c_str(),
                j["state"].get<std::string>().c_str(), j["createTime"].get<std::string>().c_str(),
                dur.c_str(), why.c_str());
  }
  return 0;
}

int Describe(const Globals& g, const std::string& id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto job = (*conn)->Call("GET", JobsPath(g) + "/" + http::UrlEncode(id));
  if (!job.ok()) {
    // An AI Platform jobId may name a tuning job: its legacy Job, trials and all.
    auto legacy = TuningJobNamed(**conn, g, id, job.status());
    if (!legacy) return Report(job.status());
    if (Structured(g)) {
      PrintResource(g, *legacy);
    } else {
      PrintLegacyJob(*legacy);
    }
    return 0;
  }
  if (Structured(g)) {
    PrintResource(g, *job);
    return 0;
  }
  auto events = (*conn)->Call("GET", JobsPath(g) + "/" + http::UrlEncode(id) + "/events");
  const json& j = *job;
  std::cout << "Job " << IdOf(j) << "  " << j["displayName"].get<std::string>() << "\n";
  std::cout << "  name:     " << j["name"].get<std::string>() << "\n";
  std::cout << "  state:    " << j["state"].get<std::string>() << "\n";
  if (events.ok() && !(*events)["waitReason"].get<std::string>().empty()) {
    std::cout << "  waiting:  " << (*events)["waitReason"].get<std::string>() << "\n";
  }
  if (j.contains("stoker")) {
    // Attempts past the first: how many, and why this one restarted.
    const json& st = j["stoker"];
    int attempt = st.value("attempt", 0) + 1;
    if (attempt > 1) {
      const std::map<std::string, std::string> why = {{"preemption", "a preemption"},
                                                      {"node_failure", "a node failure"},
                                                      {"worker_restart", "a worker restart"},
                                                      {"retry", "a retry"}};
      auto reason = why.find(st.value("restartReason", std::string("retry")));
      std::cout << "  attempt:  " << attempt << " (restarted after "
                << (reason == why.end() ? st.value("restartReason", "") : reason->second) << ")";
      if (int n = st.value("preemptions", 0)) {
        std::cout << "; preempted " << n << (n == 1 ? " time" : " times");
      }
      std::cout << "\n";
    }
  }
  std::cout << "  created:  " << j["createTime"].get<std::string>() << "\n";
  if (j.contains("startTime"))
    std::cout << "  started:  " << j["startTime"].get<std::string>() << "\n";
  if (j.contains("endTime")) {
    std::cout << "  ended:    " << j["endTime"].get<std::string>();
    if (j.contains("startTime"))
      std::cout << "  (ran " << Since(j["startTime"], j["endTime"]) << ")";
    std::cout << "\n";
  }
  const json& spec = j["jobSpec"];
  if (spec.contains("baseOutputDirectory")) {
    std::cout << "  output:   " << spec["baseOutputDirectory"]["outputUriPrefix"].get<std::string>()
              << "\n";
  }
  int p = 0;
  for (const json& pool : spec["workerPoolSpecs"]) {
    if (!pool.empty()) {
      std::cout << "  workerpool" << p << ": " << pool.value("replicaCount", "1") << " x "
                << pool["machineSpec"].value("machineType", "?");
      if (pool["machineSpec"].contains("acceleratorType")) {
        // A number, which may be a share of one GPU (0.5).
        std::cout << " + " << pool["machineSpec"].value("acceleratorCount", json(0)).dump() << " x "
                  << pool["machineSpec"]["acceleratorType"].get<std::string>();
      }
      if (pool.contains("pythonPackageSpec")) {
        std::cout << ", python -m " << pool["pythonPackageSpec"]["pythonModule"].get<std::string>();
      } else if (pool.contains("containerSpec")) {
        std::cout << ", image " << pool["containerSpec"]["imageUri"].get<std::string>();
      }
      std::cout << "\n";
    }
    ++p;
  }
  if (j.contains("error")) {
    std::cout << "  error:    " << j["error"]["message"].get<std::string>() << "\n";
  }
  if (j.contains("stoker")) PrintUsage(j["stoker"].value("usage", json()), "  ");
  PrintTrainingMetricsSummary(**conn, g, id);
  PrintResourceSummary(**conn, g, id);
  if (events.ok()) {
    std::cout << "Events:\n";
    for (const json& e : (*events)["events"]) {
      std::string from = e["from"], to = e["to"];
      std::string change =
          from == to
              ? ""
              : (from == "JOB_STATE_UNSPECIFIED" ? "" : from.substr(10) + " -> ") + to.substr(10);
      std::printf("  %s  %-22s %s\n", e["time"].get<std::string>().c_str(), change.c_str(),
                  e["reason"].get<std::string>().c_str());
    }
  }
  return 0;
}

int Cancel(const Globals& g, const std::string& id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto r = (*conn)->Call("POST", JobsPath(g) + "/" + http::UrlEncode(id) + ":cancel", "{}");
  if (!r.ok()) {
    if (!TuningJobNamed(**conn, g, id, r.status())) return Report(r.status());
    r = (*conn)->Call("POST", LegacyJobsPath(g) + "/" + http::UrlEncode(id) + ":cancel", "{}");
    if (!r.ok()) return Report(r.status());
  }
  std::cout << "Cancel requested for job " << id << "\n";
  return 0;
}

int SubmitJobJson(const Globals& g, Connection& conn, const json& job, bool follow) {
  auto parsed = spec::ParseCustomJob(job);
  if (!parsed.ok()) return Report(parsed.status());
  if (Status s = spec::Validate(*parsed); !s.ok()) return Report(s);
  auto created = conn.Call("POST", JobsPath(g), spec::ToJson(*parsed).dump());
  if (!created.ok()) return Report(created.status());
  std::string id = IdOf(*created);
  if (Structured(g)) {
    PrintResource(g, *created);
  } else {
    std::cout << "Submitted job " << id << " (" << (*created)["displayName"].get<std::string>()
              << "): " << (*created)["state"].get<std::string>() << "\n";
    if (!follow) {
      std::cout << "  stoker jobs describe " << id << "\n  stoker jobs logs " << id
                << " --follow\n";
    }
  }
  if (!follow) return 0;
  std::string state;
  PrintLogs(conn, g, id, "", true, &state);
  auto final_job = conn.Call("GET", JobsPath(g) + "/" + id);
  if (!final_job.ok()) return Report(final_job.status());
  std::cout << "Job " << id << " ended: " << (*final_job)["state"].get<std::string>() << "\n";
  if (final_job->contains("error"))
    std::cout << (*final_job)["error"]["message"].get<std::string>() << "\n";
  return (*final_job)["state"] == "JOB_STATE_SUCCEEDED" ? 0 : 1;
}

int Logs(const Globals& g, const std::string& id, const std::string& replica, bool follow,
         const LogOptions& options) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto job = (*conn)->Call("GET", JobsPath(g) + "/" + http::UrlEncode(id));
  if (!job.ok()) {
    if (!TuningJobNamed(**conn, g, id, job.status())) return Report(job.status());
    if (!replica.empty()) {
      return Report(InvalidArgument("--replica: job '" + id +
                                    "' is a tuning job; its trials have the replicas (stoker "
                                    "hptuning logs ID --trial N --replica ...)"));
    }
    return FollowLegacyTuningLogs(**conn, g, id, follow, options);
  }
  std::string state;
  PrintLogs(**conn, g, id, replica, follow, &state, options);
  if (!follow) return 0;
  if (state == "JOB_STATE_SUCCEEDED") return 0;
  if (state.empty()) return 1;  // the daemon stopped answering; PrintLogs said why
  auto final_job = (*conn)->Call("GET", JobsPath(g) + "/" + http::UrlEncode(id));
  std::cerr << "Job " << id << " ended: " << state << "\n";
  if (final_job.ok() && final_job->contains("error")) {
    std::cerr << (*final_job)["error"].value("message", "") << "\n";
  }
  return 1;  // failed or cancelled: as gcloud's stream-logs, non-zero
}

void RegisterJobsCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    SubmitFlags sf;
    LegacySubmitFlags lf;
    std::string id, replica;
    bool follow = false;
    LogOptions log_options;
    double top_interval = 2;
    bool top_once = false;
  };
  auto v = std::make_shared<Values>();
  auto* jobs = app.add_subcommand("jobs", "Custom training jobs");
  jobs->require_subcommand(1);
  auto* submit = jobs->add_subcommand("submit", "Submit a CustomJob");
  submit->add_option("--config", v->sf.config, "CustomJob or CustomJobSpec file (YAML or JSON)");
  submit->add_option("--display-name", v->sf.display_name, "Job name (overrides the file)");
  submit
      ->add_option("--args", v->sf.args, "Replace every pool's args: --args=--epochs=10,--lr=0.01")
      ->delimiter(',')
      ->each([v](const std::string&) { v->sf.args_given = true; });
  submit->add_option("--package-path", v->sf.package_path,
                     "Pack this directory as the trainer package");
  submit->add_option("--module-name", v->sf.module_name,
                     "Python module to run (with --package-path)");
  submit->add_option("--machine-type", v->sf.machine_type, "Without --config: the machine type")
      ->capture_default_str();
  submit
      ->add_option("--executor-image-uri", v->sf.executor_image,
                   "Without --config: the executor image")
      ->capture_default_str();
  submit->add_flag("--follow", v->sf.follow,
                   "Stream logs until the job ends; exit 1 unless it succeeded");
  submit->add_option("--priority", v->sf.priority,
                     "Queue priority, higher first, -1000..1000 (jobSpec.scheduling.priority)");
  // `jobs submit training JOB_ID`: gcloud ai-platform's flags (legacy_commands.cc).
  auto* training = submit->add_subcommand(
      "training", "Submit an AI Platform training job (gcloud ai-platform jobs submit training)");
  AddLegacySubmitFlags(training, v->lf);
  training->callback([&g, &rc, v] { rc = LegacySubmitTraining(g, v->lf); });
  submit->callback([&g, &rc, v, training] {
    if (!training->parsed()) rc = Submit(g, v->sf);
  });

  auto* list = jobs->add_subcommand("list", "List jobs, newest first");
  AddListFlags(list, g.list);
  list->callback([&g, &rc] { rc = List(g); });

  auto* describe = jobs->add_subcommand("describe", "Show a job, its error and its events");
  describe->add_option("ID", v->id)->required();
  describe->callback([&g, &rc, v] { rc = Describe(g, v->id); });

  auto* logs = jobs->add_subcommand("logs", "Print a job's logs");
  logs->add_option("ID", v->id)->required();
  logs->add_option("--replica", v->replica, "Only this replica, e.g. workerpool0-0");
  logs->add_flag("--follow,-f", v->follow, "Keep streaming until the job ends");
  logs->add_flag("--timestamps", v->log_options.timestamps, kTimestampsHelp);
  logs->callback([&g, &rc, v] { rc = Logs(g, v->id, v->replica, v->follow, v->log_options); });

  auto* cancel = jobs->add_subcommand("cancel", "Cancel a job");
  cancel->add_option("ID", v->id)->required();
  cancel->callback([&g, &rc, v] { rc = Cancel(g, v->id); });

  auto* metrics = jobs->add_subcommand(
      "metrics", "A job's training metrics: hypertune reports and TensorBoard scalars");
  metrics->add_option("ID", v->id)->required();
  metrics->callback([&g, &rc, v] { rc = JobMetrics(g, v->id); });

  auto* top = jobs->add_subcommand(
      "top", "The running jobs' CPU, memory and GPU use per replica, refreshed in place");
  top->add_option("--interval,-n", v->top_interval, "Seconds between refreshes (default 2)")
      ->check(CLI::Range(0.2, 3600.0));
  top->add_flag("--once", v->top_once, "Print once and exit (also when stdout is not a terminal)");
  top->callback([&g, &rc, v] { rc = Top(g, v->top_interval, v->top_once); });
}

}  // namespace stoker::cli
