// Flags shared by several command groups (commands.h, "Flag wiring"): the
// global flags, gcloud's list flags, AI Platform's submit flags, the reading
// of gcloud's empty list values, and gcloud's full resource names as ids.
#include <set>

#include "cli/commands.h"

namespace stoker::cli {

namespace {

// Stands for an empty value of a gcloud list flag (MarkEmptyGcloudListValues).
constexpr char kEmptyValue[] = "\x1e<empty>";

bool IsGcloudListFlag(const std::string& arg) {
  for (const char* f : {"--worker-pool-spec=", "--args=", "--command=", "--python-package-uris=",
                        "--labels=", "--packages="}) {
    if (arg == f) return true;
  }
  return false;
}

}  // namespace

std::string Unempty(const std::string& v) { return v == kEmptyValue ? "" : v; }

void MarkEmptyGcloudListValues(std::vector<std::string>& args) {
  bool gcloud = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "custom-jobs" || (args[i] == "training" && i > 0 && args[i - 1] == "submit")) {
      gcloud = true;
    } else if (gcloud && IsGcloudListFlag(args[i])) {
      args[i] += kEmptyValue;
    }
  }
}

const std::set<std::string>& FlagsWithValues() {
  static const std::set<std::string> flags = {
      "--args",    "--command",     "--config",       "--display-name", "--filter",  "--labels",
      "--server",  "--token",       "--project",      "--region",       "--sort-by", "--script",
      "--job-dir", "--module-name", "--package-path", "--python-module"};
  return flags;
}

void AddGlobalFlags(CLI::App& app, Globals& g) {
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
}

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

void AddGcloudValueOption(CLI::App* c, const char* name, std::optional<std::string>& target,
                          const char* help) {
  c->add_option_function<std::string>(
       name, [&target](const std::string& v) { target = Unempty(v); }, help)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void AddLegacySubmitFlags(CLI::App* c, LegacySubmitFlags& f) {
  auto opt = [c](const char* name, std::optional<std::string>& target, const char* help) {
    AddGcloudValueOption(c, name, target, help);
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

}  // namespace stoker::cli
