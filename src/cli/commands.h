// The CLI's commands: each group's registration (called by main.cc) and the
// commands the files implement. Every command returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/connection.h"
#include "cli/output_format.h"
#include "common/status.h"

namespace stoker::cli {

inline constexpr char kDefaultImage[] =
    "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest";

struct Globals {
  std::string server;
  std::string token;    // --token: the bearer token ("" = $STOKER_TOKEN or the token file)
  std::string ca_file;  // --ca-file: a PEM certificate to trust for https servers
  std::string project = "local";
  std::string region = "local";
  std::string format = "text";  // --format as written (anywhere on the line)
  OutputFormat output;          // --format parsed (kText: the command's own output)
  ListFlags list;               // --filter, --sort-by, --limit, --page-size of list commands
  bool quiet = false;           // --quiet / -q: no prompts, no progress
};

// ---- Command groups ----
// Each Register* adds one group of commands to `app` (its flags bound to
// values the callbacks own, global ones to `g`); a command's callback runs
// after parsing and sets `rc` to its exit code. main.cc calls each once; a
// new group is a new file with its Register* and one line in main.
//
// `auth print-access-token`, `config list` and `config get-value` (session_commands.cc).
void RegisterSessionCommands(CLI::App& app, Globals& g, int& rc);
// `console` (console_command.cc).
void RegisterConsoleCommand(CLI::App& app, Globals& g, int& rc);
// `jobs ...`: CustomJobs by their ids, and `jobs submit training` (AI
// Platform's flags; legacy_commands.cc) (job_commands.cc).
void RegisterJobsCommands(CLI::App& app, Globals& g, int& rc);
// `hptuning ...`: tuning jobs by their ids (hptuning_commands.cc).
void RegisterHptuningCommands(CLI::App& app, Globals& g, int& rc);
// `ai custom-jobs ...` (gcloud_commands.cc) and `ai hp-tuning-jobs ...`
// (RegisterHpTuningJobsCommands): Vertex AI's commands with gcloud ai's flags.
void RegisterAiCommands(CLI::App& app, Globals& g, int& rc);
// `hp-tuning-jobs ...` under `ai` (hptuning_commands.cc).
void RegisterHpTuningJobsCommands(CLI::App& ai, Globals& g, int& rc);
// `ai-platform jobs ...` and its older name `ml-engine jobs ...`: AI
// Platform's job commands over jobIds of both kinds (ai_platform_commands.cc).
void RegisterAiPlatformCommands(CLI::App& app, Globals& g, int& rc);
// `storage ...` and `gsutil ...` (storage_commands.cc).
void RegisterStorageCommands(CLI::App& app, Globals& g, int& rc);
// `images build|list|import|load|rm` with the container engine of the
// machine where the CLI runs (containers.engine in $STOKER_HOME/config.yaml),
// never through --server (images_commands.cc; docs/images.md).
void RegisterImagesCommands(CLI::App& app, Globals& g, int& rc);
// `builds submit`: gcloud's Cloud Build command for docker build and push
// steps (builds_commands.cc).
void RegisterBuildsCommands(CLI::App& app, Globals& g, int& rc);
// `admin ...`: users, tokens and backups (admin_commands.cc).
void RegisterAdminCommands(CLI::App& app, Globals& g, int& rc);
// `queue` and `nodes` (cluster_commands.cc).
void RegisterClusterCommands(CLI::App& app, Globals& g, int& rc);
// `usage`, `cost ...` and `budgets ...` (cost_commands.cc; docs/cost.md).
void RegisterCostCommands(CLI::App& app, Globals& g, int& rc);
// `server ARGS...`: becomes the stokerd installed beside this binary
// (server_command.cc; docs/install.md).
void RegisterServerCommand(CLI::App& app, Globals& g, int& rc);

// ---- Flag wiring shared by the groups (flags.cc) ----
// --server, --project, --region, --token, --ca-file and --format on `app`.
void AddGlobalFlags(CLI::App& app, Globals& g);
// The flags whose value may follow as the next word, which could itself look
// like --format (HoistGlobalFlags leaves such a word alone).
const std::set<std::string>& FlagsWithValues();
// CLI11 reads `--flag=` (an empty value) as a flag without a value and takes
// the next argument; gcloud's lists give it a meaning (an empty
// --worker-pool-spec is an empty pool, an empty --args no args). In the
// gcloud-style commands (`custom-jobs`, `submit training`) such a word of
// `args` (before `--`) gets a marker that Unempty turns back into "".
void MarkEmptyGcloudListValues(std::vector<std::string>& args);
// `v`, or "" for a value MarkEmptyGcloudListValues marked empty.
std::string Unempty(const std::string& v);
// An optional gcloud value flag: the last one given wins, an empty one is "".
void AddGcloudValueOption(CLI::App* c, const char* name, std::optional<std::string>& target,
                          const char* help);
// A gcloud resource name's last segment: projects/P/locations/L/KIND/ID -> ID
// (and P, L into `g`); anything else is taken as the ID.
std::string IdFromName(Globals& g, const std::string& name, const std::string& kind);
// gcloud's list flags (--filter, --sort-by, --limit, --page-size), on every list command.
void AddListFlags(CLI::App* c, ListFlags& f);
inline constexpr char kTimestampsHelp[] =
    "Prefix each line with when it was written (RFC 3339 UTC, ms; lines within 50 ms of "
    "each other may share a time)";

// ---- gcloud's output conventions (printing.cc; output_format.h) ----
// Whether --format asked for anything but the command's own text.
bool Structured(const Globals& g);
// Prints one resource in --format (json, yaml, value(...), table(...), ...).
void PrintResource(const Globals& g, const nlohmann::json& resource);
// A list command's resources after --filter and --sort-by (default: newest
// `createTime` first, as gcloud lists) and --limit. With a structured
// --format they are printed here and `printed` is set; otherwise the caller
// prints them its own way.
Result<std::vector<nlohmann::json>> SelectForList(const Globals& g,
                                                  std::vector<nlohmann::json> items, bool* printed);

// The one place where error codes become exit codes: 0 ok; 1 failure; 2 bad
// input; 3 not found; 4 daemon unavailable.
int ExitCodeFor(const Status& s);
// Prints "ERROR: message" to stderr and returns the exit code.
int Report(const Status& s);

std::string JobsPath(const Globals& g);
std::string IdOf(const nlohmann::json& job);
// A duration for people: "12.3s", "4m05s", "3h05m" or "2d".
std::string Span(double seconds);
// Span between two RFC 3339 times; "?" when either does not parse or b < a.
std::string Since(const std::string& a, const std::string& b);
Result<std::unique_ptr<Connection>> Connect(const Globals& g);

// Runs `call` on a fresh connection; prints its JSON in --format json, or
// hands it to `text` otherwise. Returns the exit code.
template <typename Call, typename Text>
int CallAndPrint(const Globals& g, Call&& call, Text&& text) {
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  Result<nlohmann::json> r = call(**conn);
  if (!r.ok()) return Report(r.status());
  if (Structured(g)) {
    PrintResource(g, *r);
  } else {
    text(*r);
  }
  return 0;
}

// Reads a --config file (YAML or JSON) that must hold a mapping (`what`
// names it in the error, e.g. "a CustomJob or CustomJobSpec"), read as
// gcloud reads it (spec::AcceptGcloudForms; each warning goes to stderr).
Result<nlohmann::json> ReadConfigFile(const std::string& path, const std::string& what);

// Packs a trainer package directory as an sdist and stages it; returns its gs:// URI.
Result<std::string> StagePackage(Connection& conn, const std::string& package_path);

// How followed logs are shown.
struct LogOptions {
  // With follow: while the job is queued or starting, one line on stderr
  // saying what it waits for (WaitingLine), again whenever that changes.
  bool show_waiting = true;
  // --timestamps: each line prefixed with when it was written, before the
  // replica's name (log_stamper.h).
  bool timestamps = false;
};

// Streams a job's logs (all replicas, prefixed when several, or `only`);
// with `follow`, until the job has ended and its logs are drained.
// `final_state` gets the job's last Vertex state ("" when the daemon stopped
// answering; the error is on stderr).
void PrintLogs(Connection& conn, const Globals& g, const std::string& id, const std::string& only,
               bool follow, std::string* final_state, const LogOptions& options = {});
// "Waiting: queued 2nd, needs 1x NVIDIA_L4, 0 free; 1 job ahead in the queue"
// for a job in `vertex_state` with its entry of GET /v1/stoker/queue (null
// when it has none yet): "" once it is neither queued nor pending.
std::string WaitingLine(const std::string& vertex_state, const nlohmann::json& queue_entry);
// "1st", "2nd", "3rd", "4th", "11th", "22nd".
std::string Ordinal(int n);

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
  std::optional<int> priority;  // --priority: jobSpec.scheduling.priority
};
int Submit(const Globals& g, const SubmitFlags& f);
// Submits a complete CustomJob JSON; prints it or follows it like Submit.
int SubmitJobJson(const Globals& g, Connection& conn, const nlohmann::json& job, bool follow);
// Every resource of a list route (`key`: "customJobs", ...), page by page
// (--page-size per request).
Result<std::vector<nlohmann::json>> FetchAll(Connection& conn, const Globals& g,
                                             const std::string& path, const std::string& key);
// `jobs list`: every job, then --filter, --sort-by, --limit and --format
// (SelectForList).
int List(const Globals& g);
int Describe(const Globals& g, const std::string& id);
int Cancel(const Globals& g, const std::string& id);
// `id` is a custom job's number or AI Platform jobId, or a tuning job's
// jobId (its trials' logs, one after the other). With `follow`: until the job
// ends; exit 0 when it succeeded, 1 when it failed or was cancelled.
int Logs(const Globals& g, const std::string& id, const std::string& replica, bool follow,
         const LogOptions& options = {});
// `jobs metrics`: one line per training-metrics series (name, source, the
// replica or else the writer when several processes wrote TensorBoard files,
// points, last step and value, min, max), then what was skipped and why
// (training_metrics_commands.cc; docs/training-metrics.md).
int JobMetrics(const Globals& g, const std::string& id);
// The "metrics:" line of `jobs describe`: each series' last value (the first
// 8), its replica or writer in brackets when it has one.
// Prints nothing when the job has none or the daemon does not answer.
void PrintTrainingMetricsSummary(Connection& conn, const Globals& g, const std::string& id);

struct HptuningFlags {
  std::string config;
  std::string display_name;
  int max_trial_count = 0;       // 0 = from the file
  int parallel_trial_count = 0;  // 0 = from the file
  std::string algorithm;         // grid-search, random-search, algorithm-unspecified
  bool follow = false;
};
int HptuningSubmit(const Globals& g, const HptuningFlags& f);
// Submits a complete HyperparameterTuningJob JSON; prints it or follows it.
int SubmitStudyJson(const Globals& g, Connection& conn, const nlohmann::json& study, bool follow);
int HptuningDescribe(const Globals& g, const std::string& id);
int HptuningList(const Globals& g);
int HptuningCancel(const Globals& g, const std::string& id);
int HptuningLogs(const Globals& g, const std::string& id, const std::string& trial, bool follow);
// `ai hp-tuning-jobs stream-logs`: every trial's logs in turn (a "==> trial N"
// line on stderr before each) until the tuning job ends; 0 when it
// succeeded, 1 otherwise.
int HptuningStreamLogs(const Globals& g, const std::string& id, const LogOptions& options = {});
// The logs of tuning job `id`'s trials, one after the other (a "==> trial N"
// line on stderr before each); with `follow` until the job has ended.
// Returns its last Vertex state.
Result<std::string> FollowStudyTrialLogs(Connection& conn, const Globals& g, const std::string& id,
                                         bool follow, const LogOptions& options = {});

// `stoker ai custom-jobs ...`: gcloud's flags (gcloud_commands.cc).
struct GcloudCreateFlags {
  std::string display_name;
  std::string config;
  std::vector<std::string> worker_pool_specs;  // one per --worker-pool-spec, in order
  std::optional<std::string> args;             // raw gcloud lists, split with SplitGcloudList
  std::optional<std::string> command;
  std::optional<std::string> python_package_uris;
  std::optional<std::string> labels;  // KEY=VALUE,...
  std::string region;                 // "" = the global --region
  std::optional<std::string> network;
  std::optional<std::string> service_account;
  bool enable_web_access = false;
  bool enable_dashboard_access = false;
  std::optional<std::string> persistent_resource_id;
  bool follow = false;
};
int AiCustomJobsCreate(const Globals& g, const GcloudCreateFlags& f);
// ID or projects/P/locations/L/customJobs/ID.
int AiCustomJobsDescribe(const Globals& g, const std::string& job);
int AiCustomJobsCancel(const Globals& g, const std::string& job);
int AiCustomJobsStreamLogs(const Globals& g, const std::string& job, const std::string& task_name,
                           const LogOptions& options = {});

// `stoker ai custom-jobs local-run`: gcloud's flags; runs the trainer in the
// foreground on this machine with the interpreter the executor image maps to
// (exec: its exit code and signals are the trainer's).
struct LocalRunFlags {
  std::string executor_image_uri;
  std::string local_package_path;  // "" = the current directory
  std::string script;              // a .py file in the package, or
  std::string python_module;       // a module, run with -m
  std::vector<std::string> requirements;
  std::vector<std::string> extra_packages;
  std::vector<std::string> extra_dirs;
  std::string output_image_uri;
  bool gpu = false;
  std::string service_account_key_file;
  std::vector<std::string> args;  // after `--`
};
int AiCustomJobsLocalRun(const Globals& g, const LocalRunFlags& f);

// `stoker jobs submit training JOB_ID`: gcloud ai-platform's flags (legacy_commands.cc).
struct LegacySubmitFlags {
  std::string job_id;
  std::string config;  // a YAML/JSON Job with trainingInput
  std::optional<std::string> job_dir;
  std::string package_path;
  std::optional<std::string> packages;  // comma list of local tar.gz or gs:// URIs
  std::optional<std::string> module_name;
  std::optional<std::string> staging_bucket;  // accepted; Stoker stages on its own
  std::optional<std::string> region;
  std::optional<std::string> scale_tier;
  std::optional<std::string> master_machine_type;
  std::optional<std::string> master_accelerator;
  std::optional<int64_t> worker_count;
  std::optional<std::string> worker_machine_type;
  std::optional<std::string> worker_accelerator;
  std::optional<int64_t> parameter_server_count;
  std::optional<std::string> parameter_server_machine_type;
  std::optional<std::string> parameter_server_accelerator;
  std::optional<std::string> master_image_uri;
  std::optional<std::string> worker_image_uri;
  std::optional<std::string> parameter_server_image_uri;
  std::optional<std::string> runtime_version;
  std::optional<std::string> python_version;
  std::optional<std::string> use_chief_in_tf_config;  // true/false
  std::optional<std::string> network;
  std::optional<std::string> service_account;
  bool enable_web_access = false;
  std::optional<std::string> kms_key;
  std::optional<std::string> labels;   // KEY=VALUE,...
  std::vector<std::string> user_args;  // after `--`
  bool stream_logs = false;
};
int LegacySubmitTraining(const Globals& g, const LegacySubmitFlags& f);
// gcloud ai-platform's submit flags into `f` (flags.cc): on `jobs submit
// training` and `ai-platform|ml-engine jobs submit training`.
void AddLegacySubmitFlags(CLI::App* c, LegacySubmitFlags& f);

// ---- AI Platform jobIds, custom and tuning jobs (ai_platform_commands.cc) ----
// /v1/projects/P/jobs, the legacy routes (api/legacy_routes.cc).
std::string LegacyJobsPath(const Globals& g);
// The legacy Job `job_id` names (either kind); NotFound when none does.
Result<nlohmann::json> GetLegacyJob(Connection& conn, const Globals& g, const std::string& job_id);
// Whether a legacy Job is a tuning job (trainingOutput.isHyperparameterTuningJob).
bool IsTuningJob(const nlohmann::json& legacy);
// A legacy Job as text: state, times, trainingOutput with one line per trial.
void PrintLegacyJob(const nlohmann::json& legacy);
// The logs of tuning job `job_id`'s trials, one after the other (a header
// line per trial on stderr); with `follow` until it has ended, then "Job
// [ID] ended: STATE" on stderr. Returns the exit code (1 unless SUCCEEDED).
int FollowLegacyTuningLogs(Connection& conn, const Globals& g, const std::string& job_id,
                           bool follow, const LogOptions& options = {});
// `stoker ai-platform jobs describe|list|cancel|stream-logs`: the legacy Job
// of either kind (list: both kinds, newest first, with the list flags).
int AiPlatformDescribe(const Globals& g, const std::string& job_id);
int AiPlatformList(const Globals& g);
int AiPlatformCancel(const Globals& g, const std::string& job_id);
int AiPlatformStreamLogs(const Globals& g, const std::string& job_id,
                         const LogOptions& options = {});

// Parses gcloud's --labels=KEY=VALUE,... (the flag named in errors).
Result<std::map<std::string, std::string>> ParseLabelsFlag(const std::string& value);
// Stages a local archive's bytes; returns its gs:// URI.
Result<std::string> StageArchive(Connection& conn, const std::string& path,
                                 const std::string& flag);

int StorageCp(const Globals& g, const std::string& src, const std::string& dst);
int StorageLs(const Globals& g, const std::string& uri);
int StorageMb(const Globals& g, const std::string& uri);
// `stoker images build`'s work (images_commands.cc): builds DIR with the
// engine on this machine; returns the exit code, having said what failed.
struct BuildFlags {
  std::string tag;
  std::vector<std::string> extra_tags;  // more names for the same image
  std::string file;
  std::vector<std::string> build_args;
  std::string dir;
};
int ImagesBuild(const BuildFlags& f);

// `stoker admin users ...` (admin_commands.cc): users and tokens.
struct AdminUserFlags {
  std::string name;
  std::string role = "user";
  std::string unix_user;
};
int AdminUsersAdd(const Globals& g, const AdminUserFlags& f);
int AdminUsersList(const Globals& g);
int AdminUsersRemove(const Globals& g, const std::string& name);
int AdminUsersToken(const Globals& g, const std::string& name);
int AdminTokensRevoke(const Globals& g, const std::string& token_id);
// `value`: a priority (-1000..1000), or "role" to clear back to the role's ceiling.
int AdminUsersSetMaxPriority(const Globals& g, const std::string& name, const std::string& value);
int AdminWhoami(const Globals& g);
// `stoker admin backup FILE`: a consistent copy of the daemon's store,
// written to FILE (mode 0600, replaced atomically) or to stdout for "-".
int AdminBackup(const Globals& g, const std::string& file);

// `stoker queue`: the queue in the scheduler's order with reasons and
// estimated starts. `stoker nodes`: nodes, GPUs and what runs on each.
int Queue(const Globals& g);
int Nodes(const Globals& g);

// ---- telemetry (telemetry_commands.cc; docs/telemetry.md) ----
// The "Resources" table of `jobs describe`: per replica CPU, memory, GPU and
// GPU memory utilisation, a reported throughput, and the waste flags.
// Prints nothing when the job has no samples.
void PrintResourceSummary(Connection& conn, const Globals& g, const std::string& id);
// `stoker jobs top`: the running jobs' latest samples, redrawn in place every
// `interval_seconds` on a terminal; printed once when piped or with `once`.
int Top(const Globals& g, double interval_seconds, bool once);

// ---- usage, cost and budgets (cost_commands.cc; docs/cost.md) ----
// The "usage:" and "cost:" lines of a job's or study's stoker.usage.
void PrintUsage(const nlohmann::json& usage, const std::string& indent);
// "$1.23" at the Vertex price, "-" when unknown.
std::string VertexCost(const nlohmann::json& usage);

struct UsageFlags {
  std::string by = "user";  // user, project, month, job, gpu, label:KEY
  double days = 0;          // the last N days (0: this month, or --start/--end)
  std::string start;        // RFC 3339
  std::string end;
  bool break_even = false;
};
int Usage(const Globals& g, const UsageFlags& f);
int CostEstimate(const Globals& g, const std::string& config);

struct BudgetFlags {
  std::string scope;
  std::optional<double> monthly_usd;
  std::optional<double> monthly_gpu_hours;
  std::string price = "vertex";
  double warn_at = 0.8;
  bool stop_running = false;
};
int BudgetsList(const Globals& g);
int BudgetsSet(const Globals& g, const BudgetFlags& f);
int BudgetsDelete(const Globals& g, const std::string& scope);

}  // namespace stoker::cli
