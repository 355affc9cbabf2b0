// Hyperparameter tuning commands: submit, describe, list, cancel, logs.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "common/files.h"
#include "common/json_yaml.h"
#include "http/http.h"
#include "spec/job_state.h"
#include "spec/study.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

std::string StudiesPath(const Globals& g) {
  return "/v1/projects/" + http::UrlEncode(g.project) + "/locations/" + http::UrlEncode(g.region) +
         "/hyperparameterTuningJobs";
}

std::string ValueText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

// The objective of a trial's final measurement, if any.
std::optional<double> Objective(const json& trial, const std::string& metric) {
  if (!trial.contains("finalMeasurement")) return std::nullopt;
  for (const json& m : trial["finalMeasurement"].value("metrics", json::array())) {
    if (m.value("metricId", "") == metric) return m["value"].get<double>();
  }
  return std::nullopt;
}

void PrintStudy(const json& j) {
  std::string metric = j["studySpec"]["metrics"][0]["metricId"];
  bool maximize = j["studySpec"]["metrics"][0].value("goal", "MAXIMIZE") != "MINIMIZE";
  std::cout << "Tuning job " << IdOf(j) << "  " << j["displayName"].get<std::string>() << "\n";
  std::cout << "  state:    " << j["state"].get<std::string>() << "\n";
  std::cout << "  trials:   " << j["trials"].size() << " of " << j.value("maxTrialCount", 1) << " ("
            << j.value("parallelTrialCount", 1) << " at a time), algorithm "
            << j["studySpec"].value("algorithm", "ALGORITHM_UNSPECIFIED") << "\n";
  std::cout << "  metric:   " << metric << " (" << (maximize ? "maximize" : "minimize") << ")\n";
  if (j.contains("error"))
    std::cout << "  error:    " << j["error"]["message"].get<std::string>() << "\n";
  int best = -1;
  std::optional<double> best_value;
  for (size_t i = 0; i < j["trials"].size(); ++i) {
    auto v = Objective(j["trials"][i], metric);
    if (v && (!best_value || (maximize ? *v > *best_value : *v < *best_value))) {
      best = static_cast<int>(i);
      best_value = v;
    }
  }
  if (j.contains("stoker")) PrintUsage(j["stoker"].value("usage", json()), "  ");
  std::printf("  %-2s %-5s %-11s %-12s %-9s %s\n", "", "TRIAL", "STATE",
              metric.substr(0, 12).c_str(), "VERTEX$", "PARAMETERS");
  for (size_t i = 0; i < j["trials"].size(); ++i) {
    const json& t = j["trials"][i];
    std::string params;
    for (const json& p : t["parameters"]) {
      params += (params.empty() ? "" : " ") + p["parameterId"].get<std::string>() + "=" +
                ValueText(p["value"]);
    }
    auto v = Objective(t, metric);
    char value[32] = "-";
    if (v) std::snprintf(value, sizeof value, "%.6g", *v);
    std::string state = t["state"];
    if (t.value("stoppedEarly", false)) state += "*";
    std::string cost = t.contains("stoker") ? VertexCost(t["stoker"].value("usage", json())) : "-";
    std::printf("  %-2s %-5s %-11s %-12s %-9s %s\n", static_cast<int>(i) == best ? "=>" : "",
                t["id"].get<std::string>().c_str(), state.c_str(), value, cost.c_str(),
                params.c_str());
    if (t.contains("infeasibleReason")) {
      std::cout << "           " << t["infeasibleReason"].get<std::string>() << "\n";
    }
  }
  if (best >= 0) std::cout << "  (=> best trial; * stopped early)\n";
}

}  // namespace

int HptuningSubmit(const Globals& g, const HptuningFlags& f) {
  auto j = ReadConfigFile(f.config, "a HyperparameterTuningJob mapping");
  if (!j.ok()) return Report(j.status());
  // Flags override the file, as gcloud's do.
  if (!f.display_name.empty()) (*j)["displayName"] = f.display_name;
  if (f.max_trial_count > 0) (*j)["maxTrialCount"] = f.max_trial_count;
  if (f.parallel_trial_count > 0) (*j)["parallelTrialCount"] = f.parallel_trial_count;
  if (!f.algorithm.empty()) {
    std::string a;
    for (char c : f.algorithm) a += c == '-' ? '_' : static_cast<char>(std::toupper(c));
    if (a != "ALGORITHM_UNSPECIFIED" && a != "GRID_SEARCH" && a != "RANDOM_SEARCH") {
      return Report(
          InvalidArgument("--algorithm: '" + f.algorithm +
                          "' is not one of algorithm-unspecified, grid-search, random-search"));
    }
    (*j)["studySpec"]["algorithm"] = a;
  }
  auto parsed = spec::ParseHyperparameterTuningJob(*j);
  if (!parsed.ok()) return Report(parsed.status());
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  return SubmitStudyJson(g, **conn, spec::ToJson(*parsed), f.follow);
}

int SubmitStudyJson(const Globals& g, Connection& conn, const json& study, bool follow) {
  auto created = conn.Call("POST", StudiesPath(g), study.dump());
  if (!created.ok()) return Report(created.status());
  std::string id = IdOf(*created);
  if (Structured(g)) {
    PrintResource(g, *created);
  } else {
    std::cout << "Submitted tuning job " << id << " ("
              << (*created)["displayName"].get<std::string>()
              << "): " << (*created)["state"].get<std::string>() << "\n";
  }
  if (!follow) {
    std::cout << "  stoker hptuning describe " << id << "\n";
    return 0;
  }
  size_t reported = 0;
  while (true) {
    auto now = conn.Call("GET", StudiesPath(g) + "/" + id);
    if (!now.ok()) return Report(now.status());
    const json& trials = (*now)["trials"];
    // One line per trial as it ends.
    for (; reported < trials.size(); ++reported) {
      std::string st = trials[reported]["state"];
      if (st != "SUCCEEDED" && st != "INFEASIBLE") break;
      std::string metric = (*now)["studySpec"]["metrics"][0]["metricId"];
      auto v = Objective(trials[reported], metric);
      std::cout << "trial " << trials[reported]["id"].get<std::string>() << " " << st;
      if (v) std::cout << " " << metric << "=" << *v;
      std::cout << "\n";
    }
    std::string state = (*now)["state"];
    if (spec::IsTerminal(*spec::ParseJobState(state))) {
      PrintStudy(*now);
      return state == "JOB_STATE_SUCCEEDED" ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

int HptuningDescribe(const Globals& g, const std::string& id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto j = (*conn)->Call("GET", StudiesPath(g) + "/" + http::UrlEncode(id));
  if (!j.ok()) return Report(j.status());
  if (Structured(g)) {
    PrintResource(g, *j);
  } else {
    PrintStudy(*j);
  }
  return 0;
}

int HptuningList(const Globals& g) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  if (Status s = ValidateListFlags(g.list); !s.ok()) return Report(s);
  auto fetched = FetchAll(**conn, g, StudiesPath(g), "hyperparameterTuningJobs");
  if (!fetched.ok()) return Report(fetched.status());
  bool printed = false;
  auto all = SelectForList(g, std::move(*fetched), &printed);
  if (!all.ok()) return Report(all.status());
  if (printed) return 0;
  std::printf("%-6s %-24s %-22s %s\n", "ID", "NAME", "STATE", "TRIALS");
  for (const json& s : *all) {
    std::printf("%-6s %-24s %-22s %zu/%d\n", IdOf(s).c_str(),
                s["displayName"].get<std::string>().substr(0, 24).c_str(),
                s["state"].get<std::string>().c_str(), s["trials"].size(),
                s.value("maxTrialCount", 1));
  }
  return 0;
}

int HptuningCancel(const Globals& g, const std::string& id) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto r = (*conn)->Call("POST", StudiesPath(g) + "/" + http::UrlEncode(id) + ":cancel", "{}");
  if (!r.ok()) return Report(r.status());
  std::cout << "Cancel requested for tuning job " << id << "\n";
  return 0;
}

int HptuningLogs(const Globals& g, const std::string& id, const std::string& trial, bool follow) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto j = (*conn)->Call("GET", StudiesPath(g) + "/" + http::UrlEncode(id));
  if (!j.ok()) return Report(j.status());
  for (const json& t : (*j)["trials"]) {
    if (t["id"] == trial) {
      std::string job = t["customJob"];
      return Logs(g, job.substr(job.rfind('/') + 1), "", follow);
    }
  }
  return Report(NotFound("--trial: tuning job " + id + " has no trial " + trial + " (yet)"));
}

Result<std::string> FollowStudyTrialLogs(Connection& conn, const Globals& g, const std::string& id,
                                         bool follow, const LogOptions& options) {
  std::set<std::string> done;  // trials whose logs are out in full
  std::string said;
  while (true) {
    STOKER_ASSIGN_OR_RETURN(json study,
                            conn.Call("GET", StudiesPath(g) + "/" + http::UrlEncode(id)));
    std::string state = study["state"];
    bool ended = spec::IsTerminal(*spec::ParseJobState(state));  // read before the trials
    const json& trials = study["trials"];
    if (follow && trials.empty() && !ended) {
      std::string wait = "Waiting: tuning job " + id + " is " + state + ", no trial yet";
      if (wait != said) std::cerr << wait << "\n";
      said = wait;
    }
    for (const json& t : trials) {
      std::string trial = t["id"];
      if (done.count(trial) || !t.contains("customJob")) continue;
      std::string job = t["customJob"];
      job = job.substr(job.rfind('/') + 1);
      std::cerr << "==> trial " << trial << " (job " << job << ") <==\n";
      std::string trial_state;
      PrintLogs(conn, g, job, "", follow, &trial_state, options);
      done.insert(trial);
    }
    if (!follow || (ended && done.size() >= trials.size())) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

int HptuningStreamLogs(const Globals& g, const std::string& id, const LogOptions& options) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto state = FollowStudyTrialLogs(**conn, g, id, /*follow=*/true, options);
  if (!state.ok()) return Report(state.status());
  std::cerr << "Tuning job " << id << " ended: " << *state << "\n";
  return *state == "JOB_STATE_SUCCEEDED" ? 0 : 1;
}

void RegisterHptuningCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    HptuningFlags hf;
    std::string hp_id, trial;
    bool hp_follow = false;
  };
  auto v = std::make_shared<Values>();
  auto* hp = app.add_subcommand("hptuning", "Hyperparameter tuning jobs");
  hp->require_subcommand(1);
  auto* hp_submit = hp->add_subcommand("submit", "Submit a HyperparameterTuningJob file");
  hp_submit->add_option("--config", v->hf.config, "HyperparameterTuningJob YAML or JSON")
      ->required();
  hp_submit->add_option("--display-name", v->hf.display_name, "Overrides the file");
  hp_submit->add_option("--max-trial-count", v->hf.max_trial_count, "Overrides maxTrialCount");
  hp_submit->add_option("--parallel-trial-count", v->hf.parallel_trial_count,
                        "Overrides parallelTrialCount");
  hp_submit->add_option("--algorithm", v->hf.algorithm,
                        "grid-search, random-search or algorithm-unspecified (Bayesian)");
  hp_submit->add_flag("--follow", v->hf.follow,
                      "Report trials as they end; exit 1 unless it succeeded");
  hp_submit->callback([&g, &rc, v] { rc = HptuningSubmit(g, v->hf); });
  auto* hp_describe = hp->add_subcommand("describe", "Show a tuning job and its trials");
  hp_describe->add_option("ID", v->hp_id)->required();
  hp_describe->callback([&g, &rc, v] { rc = HptuningDescribe(g, v->hp_id); });
  auto* hp_list = hp->add_subcommand("list", "List tuning jobs, newest first");
  AddListFlags(hp_list, g.list);
  hp_list->callback([&g, &rc] { rc = HptuningList(g); });
  auto* hp_cancel = hp->add_subcommand("cancel", "Cancel a tuning job and its running trials");
  hp_cancel->add_option("ID", v->hp_id)->required();
  hp_cancel->callback([&g, &rc, v] { rc = HptuningCancel(g, v->hp_id); });
  auto* hp_logs = hp->add_subcommand("logs", "Print one trial's logs");
  hp_logs->add_option("ID", v->hp_id)->required();
  hp_logs->add_option("--trial", v->trial, "Trial id (1, 2, ...)")->required();
  hp_logs->add_flag("--follow,-f", v->hp_follow, "Keep streaming until the trial ends");
  hp_logs->callback([&g, &rc, v] { rc = HptuningLogs(g, v->hp_id, v->trial, v->hp_follow); });
}

void RegisterHpTuningJobsCommands(CLI::App& ai, Globals& g, int& rc) {
  struct Values {
    HptuningFlags hpt_flags;
    std::string hpt_id, hpt_region;
    double polling_interval = 60;
    bool multiline = false;
    LogOptions log_options;
  };
  auto v = std::make_shared<Values>();
  auto* hpt = ai.add_subcommand("hp-tuning-jobs", "gcloud ai hp-tuning-jobs");
  hpt->require_subcommand(1);
  auto hpt_globals = [&g, v] {
    Globals r = g;
    if (!v->hpt_region.empty()) r.region = v->hpt_region;
    return r;
  };
  auto* hpt_create =
      hpt->add_subcommand("create", "Create a HyperparameterTuningJob from a --config file");
  hpt_create->add_option("--config", v->hpt_flags.config, "HyperparameterTuningJob YAML or JSON")
      ->required();
  hpt_create->add_option("--display-name", v->hpt_flags.display_name, "Overrides the file");
  hpt_create->add_option("--max-trial-count", v->hpt_flags.max_trial_count,
                         "Overrides maxTrialCount");
  hpt_create->add_option("--parallel-trial-count", v->hpt_flags.parallel_trial_count,
                         "Overrides parallelTrialCount");
  hpt_create
      ->add_option("--algorithm", v->hpt_flags.algorithm,
                   "grid-search, random-search or algorithm-unspecified (Bayesian)")
      ->check(CLI::IsMember({"grid-search", "random-search", "algorithm-unspecified"}));
  hpt_create->add_option("--region", v->hpt_region, "The job's location");
  hpt_create->add_flag("--follow", v->hpt_flags.follow,
                       "Stoker: report trials as they end; exit 1 unless it succeeded");
  hpt_create->callback([&rc, v, hpt_globals] { rc = HptuningSubmit(hpt_globals(), v->hpt_flags); });
  auto hpt_named = [hpt, v](const char* name, const char* help) {
    auto* c = hpt->add_subcommand(name, help);
    c->add_option("HP_TUNING_JOB", v->hpt_id,
                  "ID or projects/P/locations/L/hyperparameterTuningJobs/ID")
        ->required();
    c->add_option("--region", v->hpt_region, "The job's location");
    return c;
  };
  auto hpt_id_of = [v](Globals& r) { return IdFromName(r, v->hpt_id, "hyperparameterTuningJobs"); };
  hpt_named("describe", "Show a tuning job and its trials")
      ->callback([&rc, hpt_globals, hpt_id_of] {
        Globals r = hpt_globals();
        rc = HptuningDescribe(r, hpt_id_of(r));
      });
  hpt_named("cancel", "Cancel a tuning job and its running trials")
      ->callback([&rc, hpt_globals, hpt_id_of] {
        Globals r = hpt_globals();
        rc = HptuningCancel(r, hpt_id_of(r));
      });
  auto* hpt_logs = hpt_named("stream-logs", "Stream every trial's logs until the job ends");
  hpt_logs->add_option("--polling-interval", v->polling_interval,
                       "Accepted for gcloud compatibility");
  hpt_logs->add_flag("--allow-multiline-logs", v->multiline, "Accepted for gcloud compatibility");
  hpt_logs->add_flag("--timestamps", v->log_options.timestamps, kTimestampsHelp);
  hpt_logs->callback([&rc, v, hpt_globals, hpt_id_of] {
    Globals r = hpt_globals();
    rc = HptuningStreamLogs(r, hpt_id_of(r), v->log_options);
  });
  auto* hpt_list = hpt->add_subcommand("list", "List tuning jobs, newest first");
  hpt_list->add_option("--region", v->hpt_region, "The jobs' location");
  AddListFlags(hpt_list, g.list);
  hpt_list->callback([&rc, hpt_globals] { rc = HptuningList(hpt_globals()); });
}

}  // namespace stoker::cli
