// stoker: the command-line client. A thin HTTP client of stokerd; it
// validates job files locally for early, precise errors, and packs trainer
// packages. Commands live in *_commands.cc; this file wires the flags.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "cli/commands.h"

namespace fs = std::filesystem;
using namespace stoker;
using namespace stoker::cli;

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
  app.add_option("--format", g.format, "Output format: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  int rc = 0;

  auto* jobs = app.add_subcommand("jobs", "Custom training jobs");
  jobs->require_subcommand(1);
  SubmitFlags sf;
  auto* submit = jobs->add_subcommand("submit", "Submit a CustomJob");
  submit->add_option("--config", sf.config, "CustomJob or CustomJobSpec file (YAML or JSON)");
  submit->add_option("--display-name", sf.display_name, "Job name (overrides the file)");
  submit->add_option("--args", sf.args, "Replace every pool's args: --args=--epochs=10,--lr=0.01")
      ->delimiter(',')
      ->each([&](const std::string&) { sf.args_given = true; });
  submit->add_option("--package-path", sf.package_path,
                     "Pack this directory as the trainer package");
  submit->add_option("--module-name", sf.module_name, "Python module to run (with --package-path)");
  submit->add_option("--machine-type", sf.machine_type, "Without --config: the machine type")
      ->capture_default_str();
  submit
      ->add_option("--executor-image-uri", sf.executor_image,
                   "Without --config: the executor image")
      ->capture_default_str();
  submit->add_flag("--follow", sf.follow,
                   "Stream logs until the job ends; exit 1 unless it succeeded");
  submit->callback([&] { rc = Submit(g, sf); });

  std::string filter;
  auto* list = jobs->add_subcommand("list", "List jobs");
  list->add_option("--filter", filter, "e.g. state=\"JOB_STATE_RUNNING\"");
  list->callback([&] { rc = List(g, filter); });

  std::string id;
  auto* describe = jobs->add_subcommand("describe", "Show a job, its error and its events");
  describe->add_option("ID", id)->required();
  describe->callback([&] { rc = Describe(g, id); });

  std::string replica;
  bool follow = false;
  auto* logs = jobs->add_subcommand("logs", "Print a job's logs");
  logs->add_option("ID", id)->required();
  logs->add_option("--replica", replica, "Only this replica, e.g. workerpool0-0");
  logs->add_flag("--follow,-f", follow, "Keep streaming until the job ends");
  logs->callback([&] { rc = Logs(g, id, replica, follow); });

  auto* cancel = jobs->add_subcommand("cancel", "Cancel a job");
  cancel->add_option("ID", id)->required();
  cancel->callback([&] { rc = Cancel(g, id); });

  auto* hp = app.add_subcommand("hptuning", "Hyperparameter tuning jobs");
  hp->require_subcommand(1);
  HptuningFlags hf;
  auto* hp_submit = hp->add_subcommand("submit", "Submit a HyperparameterTuningJob file");
  hp_submit->add_option("--config", hf.config, "HyperparameterTuningJob YAML or JSON")->required();
  hp_submit->add_option("--display-name", hf.display_name, "Overrides the file");
  hp_submit->add_option("--max-trial-count", hf.max_trial_count, "Overrides maxTrialCount");
  hp_submit->add_option("--parallel-trial-count", hf.parallel_trial_count,
                        "Overrides parallelTrialCount");
  hp_submit->add_option("--algorithm", hf.algorithm,
                        "grid-search, random-search or algorithm-unspecified (Bayesian)");
  hp_submit->add_flag("--follow", hf.follow, "Report trials as they end; exit 1 unless it succeeded");
  hp_submit->callback([&] { rc = HptuningSubmit(g, hf); });
  std::string hp_id, trial;
  auto* hp_describe = hp->add_subcommand("describe", "Show a tuning job and its trials");
  hp_describe->add_option("ID", hp_id)->required();
  hp_describe->callback([&] { rc = HptuningDescribe(g, hp_id); });
  auto* hp_list = hp->add_subcommand("list", "List tuning jobs");
  hp_list->callback([&] { rc = HptuningList(g); });
  auto* hp_cancel = hp->add_subcommand("cancel", "Cancel a tuning job and its running trials");
  hp_cancel->add_option("ID", hp_id)->required();
  hp_cancel->callback([&] { rc = HptuningCancel(g, hp_id); });
  bool hp_follow = false;
  auto* hp_logs = hp->add_subcommand("logs", "Print one trial's logs");
  hp_logs->add_option("ID", hp_id)->required();
  hp_logs->add_option("--trial", trial, "Trial id (1, 2, ...)")->required();
  hp_logs->add_flag("--follow,-f", hp_follow, "Keep streaming until the trial ends");
  hp_logs->callback([&] { rc = HptuningLogs(g, hp_id, trial, hp_follow); });

  auto* st = app.add_subcommand("storage", "Local buckets behind gs:// URIs");
  st->require_subcommand(1);
  std::string src, dst;
  auto* cp = st->add_subcommand("cp", "Copy files or directories to or from a bucket");
  cp->add_option("SOURCE", src)->required();
  cp->add_option("DESTINATION", dst)->required();
  bool recursive = false;
  cp->add_flag("-r,--recursive", recursive,
               "Accepted for gsutil compatibility; directories always copy recursively");
  cp->callback([&] { rc = StorageCp(g, src, dst); });
  std::string uri;
  auto* ls = st->add_subcommand("ls", "List buckets, or objects under gs://BUCKET/PREFIX");
  ls->add_option("URI", uri);
  ls->callback([&] { rc = StorageLs(g, uri); });
  auto* mb = st->add_subcommand("mb", "Make a bucket");
  mb->add_option("URI", uri)->required();
  mb->callback([&] { rc = StorageMb(g, uri); });

  auto* server =
      app.add_subcommand("server", "Run stokerd in the foreground (arguments pass through)");
  server->allow_extras();
  server->callback([&] {
    std::error_code ec;
    fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
    std::string bin = fs::exists(dir / "stokerd") ? (dir / "stokerd").string()
                                                  : (dir / "../server/stokerd").string();
    std::vector<std::string> args = {bin};
    for (const std::string& a : server->remaining()) args.push_back(a);
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(bin.c_str(), cargs.data());
    rc = Report(Internal("cannot run " + bin));
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return rc;
}
