// stoker: the command-line client. A thin HTTP client of stokerd; it
// validates job files locally for early, precise errors, and packs trainer
// packages. Commands live in *_commands.cc; this file wires the flags.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "spec/gcloud_flags.h"

namespace fs = std::filesystem;
using namespace stoker;
using namespace stoker::cli;

namespace {

// Stands for an empty value of a gcloud list flag (see main).
constexpr char kEmptyValue[] = "\x1e<empty>";

bool IsGcloudListFlag(const std::string& arg) {
  for (const char* f : {"--worker-pool-spec=", "--args=", "--command=", "--python-package-uris=",
                        "--labels=", "--packages="}) {
    if (arg == f) return true;
  }
  return false;
}

std::string Unempty(const std::string& v) { return v == kEmptyValue ? "" : v; }

void AddGcloudCreateFlags(CLI::App* c, GcloudCreateFlags& f) {
  auto opt = [c](const char* name, std::optional<std::string>& target, const char* help) {
    c->add_option_function<std::string>(
         name, [&target](const std::string& v) { target = Unempty(v); }, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  c->add_option("--display-name", f.display_name, "The job's display name")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  c->add_option("--config", f.config, "A CustomJobSpec (or CustomJob) YAML or JSON file");
  c->add_option("--worker-pool-spec", f.worker_pool_specs,
                "One worker pool, repeatable: machine-type=T,replica-count=N,container-image-uri=I "
                "| executor-image-uri=I,python-module=M | "
                "local-package-path=DIR,(python-module=M|script=S)")
      ->allow_extra_args(false);
  opt("--args", f.args, "Replace every pool's args: --args=--epochs=10,--lr=0.01");
  opt("--command", f.command, "Replace every container pool's command");
  opt("--python-package-uris", f.python_package_uris, "packageUris of every python pool");
  opt("--labels", f.labels, "KEY=VALUE,... on the job");
  c->add_option("--region", f.region, "The job's location (default: the global --region)");
  opt("--network", f.network, "Accepted; kept on the job");
  opt("--service-account", f.service_account, "Accepted; kept on the job");
  c->add_flag("--enable-web-access", f.enable_web_access, "Accepted; kept on the job");
  c->add_flag("--enable-dashboard-access", f.enable_dashboard_access, "Accepted; kept on the job");
  opt("--persistent-resource-id", f.persistent_resource_id, "Accepted; kept on the job");
  c->add_flag("--follow", f.follow,
              "Stoker: stream logs until the job ends; exit 1 unless it succeeded");
}

void AddLegacySubmitFlags(CLI::App* c, LegacySubmitFlags& f) {
  auto opt = [c](const char* name, std::optional<std::string>& target, const char* help) {
    c->add_option_function<std::string>(
         name, [&target](const std::string& v) { target = Unempty(v); }, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  auto count = [c](const char* name, std::optional<int64_t>& target, const char* help) {
    c->add_option_function<int64_t>(
        name, [&target](int64_t v) { target = v; }, help);
  };
  c->add_option("JOB", f.job_id, "The jobId: letters, digits and underscores")->required();
  c->add_option("USER_ARGS", f.user_args, "After `--`: the trainer's arguments, verbatim");
  c->add_option("--config", f.config, "A Job YAML or JSON file {trainingInput: ...}");
  opt("--job-dir", f.job_dir, "gs:// output directory, passed as --job-dir");
  c->add_option("--package-path", f.package_path, "The trainer package directory to pack");
  opt("--packages", f.packages, "Local .tar.gz archives or gs:// URIs, comma-separated");
  opt("--module-name", f.module_name, "The module to run, e.g. trainer.task");
  opt("--staging-bucket", f.staging_bucket, "Accepted; Stoker stages packages itself");
  opt("--region", f.region, "trainingInput.region (default: the global --region)");
  opt("--scale-tier", f.scale_tier, "basic, standard-1, premium-1, basic-gpu or custom");
  opt("--master-machine-type", f.master_machine_type, "masterType (custom tier)");
  opt("--master-accelerator", f.master_accelerator, "type=TYPE,count=N");
  count("--worker-count", f.worker_count, "workerCount");
  opt("--worker-machine-type", f.worker_machine_type, "workerType");
  opt("--worker-accelerator", f.worker_accelerator, "type=TYPE,count=N");
  count("--parameter-server-count", f.parameter_server_count, "parameterServerCount");
  opt("--parameter-server-machine-type", f.parameter_server_machine_type, "parameterServerType");
  opt("--parameter-server-accelerator", f.parameter_server_accelerator, "type=TYPE,count=N");
  opt("--master-image-uri", f.master_image_uri, "A custom container for the master");
  opt("--worker-image-uri", f.worker_image_uri, "A custom container for the workers");
  opt("--parameter-server-image-uri", f.parameter_server_image_uri,
      "A custom container for the parameter servers");
  opt("--runtime-version", f.runtime_version, "Picks the TensorFlow executor image");
  opt("--python-version", f.python_version, "Accepted");
  opt("--use-chief-in-tf-config", f.use_chief_in_tf_config, "Accepted (true or false)");
  opt("--network", f.network, "Accepted; kept on the job");
  opt("--service-account", f.service_account, "Accepted; kept on the job");
  c->add_flag("--enable-web-access", f.enable_web_access, "Accepted; kept on the job");
  opt("--kms-key", f.kms_key, "Accepted; kept on the job");
  opt("--labels", f.labels, "KEY=VALUE,... on the job");
  c->add_flag_function(
      "--async", [](int64_t) {}, "Accepted (the default)");
  c->add_flag("--stream-logs", f.stream_logs,
              "Stream logs until the job ends; exit 1 unless it succeeded");
}

// Flags whose value may follow as the next word, which could itself look like
// --format (HoistGlobalFlags leaves such a word alone).
const std::set<std::string> kFlagsWithValues = {
    "--args",    "--command",     "--config",       "--display-name", "--filter",  "--labels",
    "--server",  "--token",       "--project",      "--region",       "--sort-by", "--script",
    "--job-dir", "--module-name", "--package-path", "--python-module"};

// gcloud's list flags, on every list command.
void AddListFlags(CLI::App* c, ListFlags& f) {
  c->add_option("--filter", f.filter,
                "gcloud's filter: state=JOB_STATE_SUCCEEDED AND displayName:train*, "
                "labels.team=ml, createTime>2026-01-01, displayName~^exp-[0-9]+$");
  c->add_option_function<std::string>(
      "--sort-by", [&f](const std::string& v) { f.sort_by = v; },
      "Sort by these keys, ~ for descending: --sort-by=~createTime (default: newest first)");
  c->add_option_function<int64_t>(
      "--limit", [&f](int64_t v) { f.limit = v; }, "Print at most N");
  c->add_option_function<int64_t>(
      "--page-size", [&f](int64_t v) { f.page_size = v; }, "Ask the daemon for N per request");
}

// A gcloud resource name's last segment: projects/P/locations/L/KIND/ID -> ID
// (and P, L into `g`); anything else is taken as the ID.
std::string IdFromName(Globals& g, const std::string& name, const std::string& kind) {
  std::vector<std::string> parts;
  size_t start = 0, slash;
  while ((slash = name.find('/', start)) != std::string::npos) {
    parts.push_back(name.substr(start, slash - start));
    start = slash + 1;
  }
  parts.push_back(name.substr(start));
  if (parts.size() == 6 && parts[0] == "projects" && parts[2] == "locations" && parts[4] == kind) {
    g.project = parts[1];
    g.region = parts[3];
    return parts[5];
  }
  return name;
}

// The words of `argv` that name commands: the deepest known command, and the
// first word under it that is neither one of its commands nor a flag.
struct UnknownWord {
  const CLI::App* app = nullptr;
  std::string word;
  std::string path;  // "stoker jobs"
};
UnknownWord FindUnknownWord(const CLI::App& app, const std::vector<std::string>& args) {
  UnknownWord u{&app, "", "stoker"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.rfind("-", 0) == 0) {
      if (a.find('=') == std::string::npos && i + 1 < args.size()) {
        // A flag that takes a value swallows the next word.
        try {
          const CLI::Option* o = u.app->get_option_no_throw(a);
          if (o == nullptr) o = app.get_option_no_throw(a);
          if (o != nullptr && o->get_type_size() != 0) ++i;
        } catch (const CLI::Error&) {
        }
      }
      continue;
    }
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : u.app->get_subcommands({})) {
      if (s->check_name(a)) sub = s;
    }
    if (sub == nullptr) {
      if (!u.app->get_subcommands({}).empty() && u.word.empty()) u.word = a;
      return u;
    }
    u.app = sub;
    u.path += " " + a;
  }
  return u;
}

// "ERROR: ..., did you mean ...?" for an unknown command or flag, or "" when
// the error is not about one.
std::string DidYouMean(const CLI::App& app, const std::vector<std::string>& args,
                       const CLI::ParseError& e) {
  UnknownWord u = FindUnknownWord(app, args);
  std::vector<std::string> commands;
  for (const CLI::App* s : u.app->get_subcommands({})) commands.push_back(s->get_name());
  if (!u.word.empty()) {
    std::string best = Suggest(u.word, commands);
    return "'" + u.word + "' is not a command of '" + u.path + "'" +
           (best.empty() ? "" : "; did you mean '" + best + "'?") + " (commands: " +
           [&] {
             std::string all;
             for (const std::string& c : commands) all += (all.empty() ? "" : ", ") + c;
             return all;
           }() +
           ")";
  }
  // An unknown flag: the first --word that no command on the path knows.
  if (std::string(e.what()).find("not expected") == std::string::npos) return "";
  std::vector<std::string> flags;
  for (const CLI::App* a = u.app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
    }
  }
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a.rfind("--", 0) != 0) continue;
    std::string flag = a.substr(0, a.find('='));
    if (std::find(flags.begin(), flags.end(), flag) != flags.end()) continue;
    std::string best = Suggest(flag, flags);
    return "unrecognized argument '" + flag + "' for '" + u.path + "'" +
           (best.empty() ? "" : "; did you mean '" + best + "'?") + " (see " + u.path + " --help)";
  }
  return "";
}

constexpr char kTimestampsHelp[] =
    "Prefix each line with when it was written (RFC 3339 UTC, ms; lines within 50 ms of "
    "each other may share a time)";

// `jobs ...`: CustomJobs by their ids (job_commands.cc), and `jobs submit
// training` (legacy_commands.cc).
void AddJobsCommands(CLI::App& app, Globals& g, int& rc) {
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

// `hptuning ...`: tuning jobs by their ids (hptuning_commands.cc).
void AddHptuningCommands(CLI::App& app, Globals& g, int& rc) {
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

// `ai custom-jobs ...`: gcloud ai's commands and flags (gcloud_commands.cc).
void AddCustomJobsCommands(CLI::App* ai, Globals& g, int& rc) {
  struct Values {
    GcloudCreateFlags gf;
    std::string cj_id, cj_region, task_name;
    double polling_interval = 60;
    bool multiline = false;
    LogOptions log_options;
    LocalRunFlags lr;
    std::string lr_requirements, lr_extra_packages, lr_extra_dirs;
  };
  auto v = std::make_shared<Values>();
  auto* cj = ai->add_subcommand("custom-jobs", "gcloud ai custom-jobs");
  cj->require_subcommand(1);
  auto* cj_create = cj->add_subcommand("create", "Create a CustomJob from gcloud's flags");
  AddGcloudCreateFlags(cj_create, v->gf);
  cj_create->callback([&g, &rc, v] {
    for (std::string& spec : v->gf.worker_pool_specs) spec = Unempty(spec);
    rc = AiCustomJobsCreate(g, v->gf);
  });
  auto add_region = [v](CLI::App* cmd) {
    cmd->add_option("--region", v->cj_region, "The job's location (default: the global --region)");
  };
  auto with_region = [&g, v] {
    Globals r = g;
    if (!v->cj_region.empty()) r.region = v->cj_region;
    return r;
  };
  auto* cj_describe = cj->add_subcommand("describe", "Show a job (ID or full resource name)");
  cj_describe->add_option("CUSTOM_JOB", v->cj_id)->required();
  add_region(cj_describe);
  cj_describe->callback(
      [&rc, v, with_region] { rc = AiCustomJobsDescribe(with_region(), v->cj_id); });
  auto* cj_list = cj->add_subcommand("list", "List jobs, newest first");
  AddListFlags(cj_list, g.list);
  add_region(cj_list);
  cj_list->callback([&rc, with_region] { rc = List(with_region()); });
  auto* cj_cancel = cj->add_subcommand("cancel", "Cancel a job (ID or full resource name)");
  cj_cancel->add_option("CUSTOM_JOB", v->cj_id)->required();
  add_region(cj_cancel);
  cj_cancel->callback([&rc, v, with_region] { rc = AiCustomJobsCancel(with_region(), v->cj_id); });
  auto* cj_logs = cj->add_subcommand("stream-logs", "Stream a job's logs until it ends");
  cj_logs->add_option("CUSTOM_JOB", v->cj_id)->required();
  cj_logs->add_option("--task-name", v->task_name, "Only this replica, e.g. workerpool0-0");
  cj_logs->add_option("--polling-interval", v->polling_interval,
                      "Accepted for gcloud compatibility; Stoker streams as the logs grow");
  cj_logs->add_flag("--allow-multiline-logs", v->multiline, "Accepted for gcloud compatibility");
  add_region(cj_logs);
  cj_logs->add_flag("--timestamps", v->log_options.timestamps, kTimestampsHelp);
  cj_logs->callback([&rc, v, with_region] {
    rc = AiCustomJobsStreamLogs(with_region(), v->cj_id, v->task_name, v->log_options);
  });
  auto* cj_local = cj->add_subcommand(
      "local-run", "Run a trainer package in the foreground, as a job's replica would run it");
  cj_local
      ->add_option("--executor-image-uri", v->lr.executor_image_uri,
                   "The image the job would run (picks the interpreter)")
      ->required();
  cj_local->add_option("--local-package-path", v->lr.local_package_path,
                       "The trainer's directory (default: the current one)");
  cj_local->add_option("--script", v->lr.script, "A Python file in the package to run");
  cj_local->add_option("--python-module", v->lr.python_module, "A module to run with python -m");
  // The comma lists are single values split here: a list option right
  // before `--` would end at it, and the trainer's arguments after it would
  // then be read as the CLI's own ("--epochs=5 was not expected").
  cj_local->add_option("--requirements", v->lr_requirements, "PyPI requirements, comma-separated");
  cj_local->add_option("--extra-packages", v->lr_extra_packages,
                       "Archives in the package to install, comma-separated");
  cj_local->add_option("--extra-dirs", v->lr_extra_dirs, "Accepted: the whole package is used");
  cj_local->add_option("--output-image-uri", v->lr.output_image_uri,
                       "Accepted: no image is built here");
  cj_local->add_flag("--gpu", v->lr.gpu, "Give the trainer this machine's GPUs");
  cj_local->add_option("--service-account-key-file", v->lr.service_account_key_file,
                       "Accepted; set as GOOGLE_APPLICATION_CREDENTIALS");
  cj_local->add_option("ARGS", v->lr.args, "After `--`: the trainer's arguments, verbatim");
  cj_local->callback([&g, &rc, v] {
    v->lr.requirements = spec::SplitGcloudList(v->lr_requirements);
    v->lr.extra_packages = spec::SplitGcloudList(v->lr_extra_packages);
    v->lr.extra_dirs = spec::SplitGcloudList(v->lr_extra_dirs);
    rc = AiCustomJobsLocalRun(g, v->lr);
  });
}

// `ai hp-tuning-jobs ...`: gcloud ai's tuning commands over the tuning jobs.
void AddHpTuningJobsCommands(CLI::App* ai, Globals& g, int& rc) {
  struct Values {
    HptuningFlags hpt_flags;
    std::string hpt_id, hpt_region;
    double polling_interval = 60;
    bool multiline = false;
    LogOptions log_options;
  };
  auto v = std::make_shared<Values>();
  auto* hpt = ai->add_subcommand("hp-tuning-jobs", "gcloud ai hp-tuning-jobs");
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

// `ai ...`: Vertex AI's commands with gcloud ai's flags.
void AddAiCommands(CLI::App& app, Globals& g, int& rc) {
  auto* ai = app.add_subcommand("ai", "Vertex AI commands with gcloud ai's flags");
  ai->require_subcommand(1);
  AddCustomJobsCommands(ai, g, rc);
  AddHpTuningJobsCommands(ai, g, rc);
}

// `ai-platform jobs ...` and its older name `ml-engine jobs ...`: AI
// Platform's job commands, over jobIds of both kinds (ai_platform_commands.cc).
void AddAiPlatformCommands(CLI::App& app, Globals& g, int& rc) {
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

// `admin ...`: users, tokens and backups (admin_commands.cc).
void AddAdminCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    AdminUserFlags uf;
    std::string user_name, token_id, max_priority, backup_file;
  };
  auto v = std::make_shared<Values>();
  auto* admin = app.add_subcommand("admin", "Administration (admins only)");
  admin->require_subcommand(1);
  auto* users = admin->add_subcommand("users", "Users, roles and API tokens");
  users->require_subcommand(1);
  auto* users_add = users->add_subcommand("add", "Add a user");
  users_add->add_option("NAME", v->uf.name, "User name (a-z, 0-9, _ . -)")->required();
  users_add->add_option("--role", v->uf.role, "admin, user or viewer")
      ->check(CLI::IsMember({"admin", "user", "viewer"}))
      ->capture_default_str();
  users_add->add_option("--unix-user", v->uf.unix_user,
                        "Unix account its replicas run as when stokerd runs as root");
  users_add->callback([&g, &rc, v] { rc = AdminUsersAdd(g, v->uf); });
  auto* users_list = users->add_subcommand("list", "List users and their token ids");
  users_list->callback([&g, &rc] { rc = AdminUsersList(g); });
  auto* users_remove = users->add_subcommand("remove", "Remove a user and revoke its tokens");
  users_remove->add_option("NAME", v->user_name)->required();
  users_remove->callback([&g, &rc, v] { rc = AdminUsersRemove(g, v->user_name); });
  auto* users_token =
      users->add_subcommand("token", "Issue a new token for a user (printed once, on stdout)");
  users_token->add_option("NAME", v->user_name)->required();
  users_token->callback([&g, &rc, v] { rc = AdminUsersToken(g, v->user_name); });
  auto* users_revoke = users->add_subcommand("revoke", "Revoke a token by its id");
  users_revoke->add_option("TOKEN_ID", v->token_id)->required();
  users_revoke->callback([&g, &rc, v] { rc = AdminTokensRevoke(g, v->token_id); });
  auto* users_max_priority = users->add_subcommand(
      "set-max-priority", "Set the highest job priority a user may set (N, or 'role')");
  users_max_priority->add_option("NAME", v->user_name)->required();
  users_max_priority
      ->add_option("N", v->max_priority,
                   "-1000..1000, or 'role' for the role's ceiling (config auth:)")
      ->required();
  users_max_priority->callback(
      [&g, &rc, v] { rc = AdminUsersSetMaxPriority(g, v->user_name, v->max_priority); });
  auto* whoami = admin->add_subcommand("whoami", "Show the user the token belongs to");
  whoami->callback([&g, &rc] { rc = AdminWhoami(g); });
  auto* backup = admin->add_subcommand(
      "backup", "Copy the daemon's store (every job, study, user) while it runs, into FILE");
  backup->add_option("FILE", v->backup_file, "Where to write the copy (mode 0600); - for stdout")
      ->required();
  backup->callback([&g, &rc, v] { rc = AdminBackup(g, v->backup_file); });
}

// `usage`, `cost ...` and `budgets ...` (cost_commands.cc, docs/cost.md).
void AddCostCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    UsageFlags usage_flags;
    std::string cost_config;
    BudgetFlags bf;
    std::string bdel_scope;
  };
  auto v = std::make_shared<Values>();
  auto* usage = app.add_subcommand("usage", "GPU, CPU and memory use and its cost, grouped");
  usage->fallthrough();  // --format may follow the command, as gcloud allows
  usage
      ->add_option("--by", v->usage_flags.by,
                   "Group by user, project, month, job, gpu or label:KEY")
      ->capture_default_str();
  usage->add_option("--days", v->usage_flags.days, "The last N days (default: this calendar month)")
      ->check(CLI::PositiveNumber);
  usage->add_option("--start", v->usage_flags.start,
                    "From this time (RFC 3339, e.g. 2026-11-01T00:00:00Z)");
  usage->add_option("--end", v->usage_flags.end, "Until this time (RFC 3339; default now)");
  usage->add_flag("--break-even", v->usage_flags.break_even,
                  "Buy vs rent: Vertex vs owning this node, from the last --days (default 30)");
  usage->callback([&g, &rc, v] { rc = Usage(g, v->usage_flags); });

  auto* cost = app.add_subcommand("cost", "Prices of jobs before they run");
  cost->require_subcommand(1);
  cost->fallthrough();
  auto* estimate = cost->add_subcommand(
      "estimate", "What a job would cost per hour and up to its timeout (Vertex, Spot, own)");
  estimate->fallthrough();
  estimate->add_option("--config", v->cost_config, "CustomJob or CustomJobSpec file (YAML or JSON)")
      ->required();
  estimate->callback([&g, &rc, v] { rc = CostEstimate(g, v->cost_config); });

  auto* budgets = app.add_subcommand("budgets", "Monthly budgets per user, project or label");
  budgets->require_subcommand(1);
  budgets->fallthrough();
  budgets->add_subcommand("list", "Budgets and how much of each this month used")
      ->fallthrough()
      ->callback([&g, &rc] { rc = BudgetsList(g); });
  auto* bset = budgets->add_subcommand("set", "Create or change a budget (admins)");
  bset->fallthrough();
  bset->add_option("SCOPE", v->bf.scope, "user:NAME, project:NAME or label:KEY=VALUE")->required();
  bset->add_option("--monthly-usd", v->bf.monthly_usd, "Limit in US dollars per calendar month");
  bset->add_option("--monthly-gpu-hours", v->bf.monthly_gpu_hours, "Limit in booked GPU-hours");
  bset->add_option("--price", v->bf.price, "Which price counts: vertex, compute-engine, spot, own")
      ->check(CLI::IsMember({"vertex", "compute-engine", "spot", "own"}))
      ->capture_default_str();
  bset->add_option("--warn-at", v->bf.warn_at, "Warn (an event on the jobs) at this fraction")
      ->capture_default_str();
  bset->add_flag("--stop-running", v->bf.stop_running,
                 "At the limit, also cancel the scope's running jobs (default: refuse new ones)");
  bset->callback([&g, &rc, v] { rc = BudgetsSet(g, v->bf); });
  auto* bdel = budgets->add_subcommand("delete", "Remove a budget (admins)");
  bdel->add_option("SCOPE", v->bdel_scope)->required();
  bdel->callback([&g, &rc, v] { rc = BudgetsDelete(g, v->bdel_scope); });
}

// `stoker server ARGS...` becomes the stokerd installed beside this binary
// (exec: same pid, so a container's signals reach the daemon itself), with
// ARGS passed through unchanged (docs/install.md).
void AddServerCommand(CLI::App& app, int& rc) {
  auto* server =
      app.add_subcommand("server", "Run stokerd in the foreground (arguments pass through)");
  server->allow_extras();
  server->callback([&rc, server] {
    std::error_code ec;
    fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
    std::string bin = (dir / "stokerd").string();
    std::vector<std::string> args = {bin};
    for (const std::string& a : server->remaining()) args.push_back(a);
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(bin.c_str(), cargs.data());
    rc = Report(FailedPrecondition("cannot run " + bin + ": " + std::strerror(errno) +
                                   "; stokerd must be installed beside stoker (cmake --install "
                                   "puts both in PREFIX/bin)"));
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stoker: run Vertex AI-style training jobs on your own machines"};
  app.require_subcommand(1);
  Globals g;
  app.add_option("--server", g.server,
                 "stokerd URL (default: $STOKER_SERVER, else the local daemon)");
  app.add_option("--project", g.project, "Project name used in resource names")
      ->capture_default_str();
  app.add_option("--region", g.region, "Location name used in resource names")
      ->capture_default_str();
  app.add_option("--token", g.token,
                 "Bearer token for stokerd (default: $STOKER_TOKEN, else $STOKER_HOME/token)");
  app.add_option("--ca-file", g.ca_file,
                 "PEM certificate to trust for an https:// server (default: $STOKER_CA_FILE)");
  // Read before parsing, wherever it stands (HoistGlobalFlags); listed here for --help.
  app.add_option("--format", g.format,
                 "Output: text (default), json, yaml, value(KEYS), table(KEYS), csv(KEYS), list; "
                 "anywhere on the line, as gcloud's (csv alone: stoker usage)");
  int rc = 0;
  RegisterSessionCommands(app, g, rc);
  RegisterConsoleCommand(app, g, rc);
  RegisterBuildsCommands(app, g, rc);

  AddJobsCommands(app, g, rc);
  AddHptuningCommands(app, g, rc);
  AddAiCommands(app, g, rc);
  AddAiPlatformCommands(app, g, rc);
  AddStorageCommands(app, g, rc);  // storage ..., gsutil ... (storage_commands.cc)
  AddImagesCommands(app, g, rc);   // images build|list|import|load|rm (images_commands.cc)

  AddAdminCommands(app, g, rc);

  app.add_subcommand("queue",
                     "The queue in the scheduler's order, with reasons and estimated starts")
      ->callback([&] { rc = Queue(g); });
  app.add_subcommand("nodes", "Nodes and GPUs, with what runs on each")->callback([&] {
    rc = Nodes(g);
  });

  AddCostCommands(app, g, rc);
  AddServerCommand(app, rc);

  try {
    // CLI11 reads `--flag=` (an empty value) as a flag without a value and
    // takes the next argument; gcloud's lists give it a meaning (an empty
    // --worker-pool-spec is an empty pool, an empty --args no args). Only
    // the gcloud-style commands get this reading.
    std::vector<std::string> args(argv + 1, argv + argc);
    // gcloud's global flags may stand anywhere before `--`.
    auto hoisted = HoistGlobalFlags(args, kFlagsWithValues);
    if (!hoisted.ok()) return Report(hoisted.status());
    args = hoisted->rest;
    g.quiet = hoisted->quiet;
    if (hoisted->format) {
      g.format = *hoisted->format;
      bool usage_command = std::find(args.begin(), args.end(), "usage") != args.end();
      if (g.format != "csv" || !usage_command) {  // `usage --format csv`: its own CSV report
        auto output = ParseFormat(g.format);
        if (!output.ok()) return Report(output.status());
        g.output = *output;
      }
    }
    bool gcloud = false;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--") break;
      if (args[i] == "custom-jobs" || (args[i] == "training" && i > 0 && args[i - 1] == "submit")) {
        gcloud = true;
      } else if (gcloud && IsGcloudListFlag(args[i])) {
        args[i] += kEmptyValue;
      }
    }
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    if (app.get_name().empty()) app.name(argv[0]);
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      std::string hint = DidYouMean(app, std::vector<std::string>(argv + 1, argv + argc), e);
      if (!hint.empty()) {
        std::cerr << "ERROR: " << hint << "\n";
        return 2;
      }
    }
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return rc;
}
