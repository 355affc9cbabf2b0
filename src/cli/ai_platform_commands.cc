// AI Platform (ml/v1) job ids in the CLI. A jobId names a custom job or a
// tuning job (trainingInput.hyperparameters) of the project; the daemon's
// legacy routes (api/legacy_routes.cc) answer for both. The `jobs` commands
// reach custom jobs through the customJobs routes and fall back to these for
// tuning jobs; the `ai-platform jobs` commands use these directly.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "http/http.h"
#include "spec/job_state.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

// "12" from ".../customJobs/12" or ".../hyperparameterTuningJobs/12".
std::string LastSegment(const std::string& name) { return name.substr(name.rfind('/') + 1); }

std::string Str(const json& j, const char* key) {
  if (!j.contains(key)) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// The end of a followed legacy job: "Job [ID] ended: STATE" on stderr (with
// the error), and the exit code (0 for SUCCEEDED, 1 otherwise).
int EndOfLegacyJob(const json& job) {
  std::string state = Str(job, "state");
  std::cerr << "Job [" << Str(job, "jobId") << "] ended: " << state << "\n";
  if (job.contains("errorMessage")) std::cerr << Str(job, "errorMessage") << "\n";
  return state == "SUCCEEDED" ? 0 : 1;
}

}  // namespace

std::string LegacyJobsPath(const Globals& g) {
  return "/v1/projects/" + http::UrlEncode(g.project) + "/jobs";
}

Result<json> GetLegacyJob(Connection& conn, const Globals& g, const std::string& job_id) {
  return conn.Call("GET", LegacyJobsPath(g) + "/" + http::UrlEncode(job_id));
}

bool IsTuningJob(const json& legacy) {
  return legacy.is_object() && legacy.contains("trainingOutput") &&
         legacy["trainingOutput"].value("isHyperparameterTuningJob", false);
}

std::string Ordinal(int n) {
  int tens = n % 100, ones = n % 10;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    if (ones == 1) suffix = "st";
    if (ones == 2) suffix = "nd";
    if (ones == 3) suffix = "rd";
  }
  return std::to_string(n) + suffix;
}

std::string WaitingLine(const std::string& vertex_state, const json& queue_entry) {
  if (vertex_state == "JOB_STATE_PENDING") return "Waiting: starting its replicas";
  if (vertex_state != "JOB_STATE_QUEUED") return "";
  if (!queue_entry.is_object()) return "Waiting: queued";
  std::string line = "Waiting: queued " + Ordinal(queue_entry.value("position", 0));
  std::string reason = queue_entry.value("reason", "");
  if (!reason.empty()) line += ", " + reason;
  return line;
}

void PrintLegacyJob(const json& j) {
  std::cout << "jobId: " << Str(j, "jobId") << "\n";
  std::cout << "state: " << Str(j, "state") << "\n";
  for (const char* t : {"createTime", "startTime", "endTime", "errorMessage"}) {
    if (j.contains(t)) std::cout << t << ": " << Str(j, t) << "\n";
  }
  const json& out = j.value("trainingOutput", json::object());
  bool tuning = IsTuningJob(j);
  if (!out.empty()) std::cout << "trainingOutput:\n";
  if (tuning) {
    std::cout << "  isHyperparameterTuningJob: true\n";
    std::cout << "  hyperparameterMetricTag: " << Str(out, "hyperparameterMetricTag") << "\n";
    std::cout << "  completedTrialCount: " << Str(out, "completedTrialCount") << "\n";
  }
  if (out.contains("consumedMLUnits")) {
    char units[32];
    std::snprintf(units, sizeof units, "%.4g", out["consumedMLUnits"].get<double>());
    std::cout << "  consumedMLUnits: " << units << "\n";
  }
  if (tuning) {
    std::printf("  %-6s %-10s %-12s %-8s %-7s %s\n", "TRIAL", "STATE", "OBJECTIVE", "STEP",
                "STOPPED", "HYPERPARAMETERS");
    for (const json& t : out.value("trials", json::array())) {
      std::string params;
      const json hyperparameters = t.value("hyperparameters", json::object());
      for (const auto& [k, v] : hyperparameters.items()) {
        params += (params.empty() ? "" : " ") + k + "=" +
                  (v.is_string() ? v.get<std::string>() : v.dump());
      }
      char value[32] = "-";
      std::string step = "-";
      if (t.contains("finalMetric")) {
        std::snprintf(value, sizeof value, "%.6g", t["finalMetric"].value("objectiveValue", 0.0));
        step = Str(t["finalMetric"], "trainingStep");
      }
      std::printf("  %-6s %-10s %-12s %-8s %-7s %s\n", Str(t, "trialId").c_str(),
                  Str(t, "state").c_str(), value, step.c_str(),
                  t.value("isTrialStoppedEarly", false) ? "yes" : "", params.c_str());
    }
  }
  if (j.contains("stoker") && j["stoker"].contains("hyperparameterTuningJob")) {
    std::string id = LastSegment(j["stoker"]["hyperparameterTuningJob"]);
    std::cout << "Runs as tuning job " << id << " (stoker hptuning describe " << id << ")\n";
  }
}

int FollowLegacyTuningLogs(Connection& conn, const Globals& g, const std::string& job_id,
                           bool follow, const LogOptions& options) {
  auto job = GetLegacyJob(conn, g, job_id);
  if (!job.ok()) return Report(job.status());
  if (!job->contains("stoker") || !(*job)["stoker"].contains("hyperparameterTuningJob")) {
    return Report(Internal("job " + job_id + " names no tuning job"));
  }
  std::string study = LastSegment((*job)["stoker"]["hyperparameterTuningJob"]);
  auto state = FollowStudyTrialLogs(conn, g, study, follow, options);
  if (!state.ok()) return Report(state.status());
  if (!follow) return 0;
  job = GetLegacyJob(conn, g, job_id);  // its state and error as AI Platform words them
  if (!job.ok()) return Report(job.status());
  return EndOfLegacyJob(*job);
}

int AiPlatformDescribe(const Globals& g, const std::string& job_id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto job = GetLegacyJob(**conn, g, job_id);
  if (!job.ok()) return Report(job.status());
  if (Structured(g)) {
    PrintResource(g, *job);
  } else {
    PrintLegacyJob(*job);
  }
  return 0;
}

int AiPlatformList(const Globals& g) {
  if (Status s = ValidateListFlags(g.list); !s.ok()) return Report(s);
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto fetched = FetchAll(**conn, g, LegacyJobsPath(g), "jobs");
  if (!fetched.ok()) return Report(fetched.status());
  bool printed = false;
  auto all = SelectForList(g, std::move(*fetched), &printed);
  if (!all.ok()) return Report(all.status());
  if (printed) return 0;
  std::printf("%-32s %-11s %-7s %s\n", "JOB_ID", "STATUS", "KIND", "CREATED");
  for (const json& j : *all) {
    std::printf("%-32s %-11s %-7s %s\n", Str(j, "jobId").c_str(), Str(j, "state").c_str(),
                IsTuningJob(j) ? "tuning" : "custom", Str(j, "createTime").c_str());
  }
  return 0;
}

int AiPlatformCancel(const Globals& g, const std::string& job_id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto r =
      (*conn)->Call("POST", LegacyJobsPath(g) + "/" + http::UrlEncode(job_id) + ":cancel", "{}");
  if (!r.ok()) return Report(r.status());
  std::cout << "Cancel requested for job " << job_id << "\n";
  return 0;
}

int AiPlatformStreamLogs(const Globals& g, const std::string& job_id, const LogOptions& options) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto job = GetLegacyJob(**conn, g, job_id);
  if (!job.ok()) return Report(job.status());
  if (IsTuningJob(*job)) return FollowLegacyTuningLogs(**conn, g, job_id, true, options);
  return Logs(g, job_id, "", true, options);
}

void RegisterAiPlatformCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    std::string ap_id, task_name;
    double polling_interval = 60;
    bool multiline = false;
    LogOptions log_options;
  };
  auto v = std::make_shared<Values>();
  for (const char* group : {"ai-platform", "ml-engine"}) {
    auto* ap = app.add_subcommand(group, std::string("gcloud ") + group + " jobs");
    ap->require_subcommand(1);
    auto* ap_jobs = ap->add_subcommand("jobs", "AI Platform training jobs");
    ap_jobs->require_subcommand(1);
    auto* ap_submit = ap_jobs->add_subcommand("submit", "Submit a job");
    ap_submit->require_subcommand(1);
    auto f = std::make_shared<LegacySubmitFlags>();
    auto* ap_training = ap_submit->add_subcommand("training", "Submit a training job");
    AddLegacySubmitFlags(ap_training, *f);
    ap_training->callback([&g, &rc, f] { rc = LegacySubmitTraining(g, *f); });
    auto named = [ap_jobs, v](const char* name, const char* help) {
      auto* c = ap_jobs->add_subcommand(name, help);
      c->add_option("JOB", v->ap_id, "The jobId")->required();
      return c;
    };
    named("describe", "Show a job of either kind (custom or tuning)")->callback([&g, &rc, v] {
      rc = AiPlatformDescribe(g, v->ap_id);
    });
    named("cancel", "Cancel a job")->callback([&g, &rc, v] { rc = AiPlatformCancel(g, v->ap_id); });
    auto* ap_logs = named("stream-logs", "Stream a job's logs until it ends");
    ap_logs->add_option("--polling-interval", v->polling_interval,
                        "Accepted for gcloud compatibility");
    ap_logs->add_flag("--allow-multiline-logs", v->multiline, "Accepted for gcloud compatibility");
    ap_logs->add_option("--task-name", v->task_name, "Accepted for gcloud compatibility");
    ap_logs->add_flag("--timestamps", v->log_options.timestamps, kTimestampsHelp);
    ap_logs->callback([&g, &rc, v] { rc = AiPlatformStreamLogs(g, v->ap_id, v->log_options); });
    auto* ap_list = ap_jobs->add_subcommand("list", "List jobs of both kinds, newest first");
    AddListFlags(ap_list, g.list);
    ap_list->callback([&g, &rc] { rc = AiPlatformList(g); });
  }
}

}  // namespace stoker::cli
