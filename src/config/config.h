// stokerd's configuration: a YAML file (optional) plus built-in defaults.
// User documentation: docs/config.md (keep the two in step).
//
// Keys (all optional):
//   listen: "127.0.0.1:0"
//   images:                       # executor/container image -> local environment
//     - match: "gcr.io/my-proj/trainer:*"   # shell glob on the image URI
//       python: /usr/bin/python3            # interpreter; "auto" = one with torch
//       framework: tensorflow               # optional: a module it must import
//   containers: {engine: auto}    # auto | podman | docker | none (docs/containers.md)
//     pull: missing               # missing | never; insecure_registries: [localhost:5000]
//     user_namespace: true        # podman: the image's root is the trainer's account
//   buckets: {data: /srv/datasets}           # bucket name -> directory
//   inventory: {cpus: 8, memory_gb: 32, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
//   cpu_oversubscription: 4     # local CPUs and memory may be booked this many times over
//                               # (a chief + 2 workers of a cloud machine type fit one node)
//   machine_types:              # define machine types, or redefine the built-in catalog's
//     lab-box: {vcpus: 16, memory_gb: 64, gpu_type: NVIDIA_L4, gpu_count: 2}
//   accelerator_substitution: true   # a GPU of another type with at least as much memory may serve
//   cancel_grace_seconds: 10
//   poll_interval_ms: 100
//   quotas:                     # per user; "*" applies to users not listed
//     alice: {max_gpus: 2, max_running_jobs: 4}
//     "*": {max_running_jobs: 10}
//   fair_share_half_life_hours: 24  # GPU-seconds used count half after this long
//   aging_hours: 1              # a waiting job gains +1 priority per this many hours (0 = no
//   aging) backfill: true              # smaller jobs may start ahead when they delay no one
//   hang_timeout_seconds: 0     # a running replica silent this long is reported hung (0 = off)
//   gpu_telemetry_seconds: 5    # this node's GPUs read for the gauges, idle hooks checked (0 =
//   off) telemetry_seconds: 5        # each replica's CPU/memory/GPU use sampled this often (0 =
//   off) nfs_mount_root: /mnt/nfs    # nfsMounts whose path exists here are linked at
//   <root>/<mountPoint>
//   tls_cert_file: /etc/stoker/cert.pem   # serve HTTPS with this certificate chain (PEM)
//   tls_key_file: /etc/stoker/key.pem     # ... and this private key (both or neither)
//   allow_insecure_http: false  # true: allow plain HTTP on a non-loopback address
//   default_unix_user: nobody   # root daemon: account for users with no unix_user
//   allow_root_trainers: false  # root daemon: true lets replicas run as root
//   bucket_group: stoker        # root daemon: trainers get this group, which may write
//                               # every bucket (made with groupadd --system if
//                               # missing; "" = buckets writable by root only)
//   job_isolation: auto         # auto | required | off: each trainer sees only its job's
//                               # files of the data dir (docs/security.md)
//   warm_starts: true           # study trials start from a warm interpreter (docs/warm-starts.md)
//   warm_start_max_per_user: 2  # live warm interpreters per submitting user on a node
//   warm_start_max_total: 8     # ... and in all (least recently used idle ones are ended)
//   log_max_bytes: 67108864   # a replica's output.log is rotated past this size (0 = never)
//   log_max_files: 3          # rotated files kept per replica (output.log.1 ... .3)
//   retention:                # finished jobs' replica dirs (<data>/jobs/<id>/); buckets untouched
//     replica_dirs_days: 7              # removed this long after the job ended (0 = at once)
//     max_finished_replica_dirs: 10000  # at most this many kept, oldest removed first
//     scan_interval_seconds: 60         # how often to look; a negative value turns a rule off
//   preemption:                 # off by default (docs/preemption.md)
//     enabled: true
//     priority_margin: 100      # a waiting job preempts only jobs this much lower in priority
//     grace_seconds: 30         # SIGTERM, this long, then SIGKILL
//     min_run_seconds: 300      # an attempt younger than this is never preempted
//     preemptible_below: 0      # jobs with a priority below this are preemptible (a band);
//                               # besides SPOT jobs and label stoker-preemptible: "true"
//   auth:                       # docs/security.md
//     max_priority: {user: 100, admin: 1000}  # highest job priority per role (per user:
//                               # stoker admin users set-max-priority); above it, lowered
//     console_session_hours: 12 # a web console session ends this long after sign-in
//   executor: local             # local | slurm (docs/slurm.md)
//   slurm:                      # only with executor: slurm
//     partition: gpu            # default --partition (label slurm-partition overrides)
//     account: ml               # default --account (label slurm-account overrides)
//     qos: normal               # default --qos (label slurm-qos overrides)
//     preemptible_partition: low  # --partition of preemptible jobs, where Slurm may preempt them
//     preemptible_qos: scavenger  # --qos of preemptible jobs (labels still override both)
//     shared_dir: /shared/stoker  # holds jobs/; same path on every node (default: data dir)
//     sbatch_extra_args: ["--exclusive"]
//     grace_seconds: 30         # after the graceful scancel, a plain one
//   cost:                       # prices and own hardware (docs/cost.md, docs/prices.md)
//     own_hardware: {usd_per_kwh: 0.12, gpus: {NVIDIA_L4: {purchase_usd: 2500, watts: 72}}}
//   webhooks:                   # signed POSTs about jobs and budgets (docs/webhooks.md)
//     - {url: https://hooks.example.com/s, secret_file: /etc/stoker/hook.secret, events:
//     [job.failed]}
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "auth/policy.h"
#include "common/status.h"
#include "config/webhooks.h"
#include "cost/catalog.h"
#include "exec/slurm_executor.h"
#include "resources/resources.h"
#include "scheduler/policy.h"

namespace stoker::config {

// `retention:` (server/retention.h): how long finished jobs' replica
// directories are kept.
struct RetentionPolicy {
  double replica_dirs_days = 7;               // < 0: no age limit
  int64_t max_finished_replica_dirs = 10000;  // < 0: no count limit
  double scan_interval_seconds = 60;
};

struct ImageRule {
  std::string match;      // glob on the image URI
  std::string python;     // interpreter path or "auto"
  std::string framework;  // a module the interpreter must import ("" = none)
};

// The `preemption:` section (docs/preemption.md).
struct PreemptionConfig {
  bool enabled = false;
  int priority_margin = 100;
  double grace_seconds = 30;
  double min_run_seconds = 300;
  std::optional<int> preemptible_below;  // a band of preemptible priorities
};

// Warm starts (docs/warm-starts.md): study trials (and jobs labelled
// stoker-warm-start: "true") start from a warm interpreter that has already
// imported `preload`.
struct WarmStartConfig {
  bool enabled = true;                                    // warm_starts
  std::vector<std::string> preload = {"torch", "numpy"};  // warm_start_preload
  double idle_seconds = 600;                              // warm_start_idle_seconds
  // Live warm interpreters on a node (one per submitting user, interpreter
  // and preload): at most this many per submitting user, and in all; past
  // either, the least recently used idle one is ended, or the trainer
  // starts cold when every one is busy.
  int max_per_user = 2;  // warm_start_max_per_user
  int max_total = 8;     // warm_start_max_total
};

// The `python_packages:` section (docs/python-packages.md): where pip finds
// the requirements of jobs' packages (their install_requires, gcloud's
// requirements=), installed into cached environments under
// <data_dir>/envs/pip.
struct PythonPackagesConfig {
  // Directories of wheels (pip --find-links); default <data_dir>/wheelhouse.
  std::vector<std::filesystem::path> wheelhouse;
  std::string index_url;  // "" = offline: the wheelhouse only
};

struct Config {
  std::filesystem::path data_dir;
  std::filesystem::path config_file;  // "" when none was read
  std::string listen = "127.0.0.1:0";
  std::vector<ImageRule> images;  // user rules first, then the built-in ones
  std::map<std::string, std::filesystem::path> buckets;
  std::optional<resources::Node> inventory;  // declared; else detected
  bool inventory_declares_gpus = false;      // inventory.gpus given (even empty): no NVML
  double cpu_oversubscription = 4;
  resources::MachineCatalog machine_types;  // before the built-in catalog
  bool accelerator_substitution = true;
  double cancel_grace_seconds = 10;
  int poll_interval_ms = 100;
  std::map<std::string, scheduler::Quota> quotas;  // user (or "*") -> limits
  double fair_share_half_life_hours = 24;
  double aging_hours = 1;
  bool backfill = true;
  double hang_timeout_seconds = 0;
  double gpu_telemetry_seconds = 5;  // node GPU gauges and gpu_idle checks this often; 0 = never
  double telemetry_seconds = 5;      // stoker-run samples its replica this often; 0 = never
  std::string nfs_mount_root = "/mnt/nfs";  // where nfsMounts appear, as on Vertex
  std::string tls_cert_file;                // "" = plain HTTP
  std::string tls_key_file;
  bool allow_insecure_http = false;  // plain HTTP on a non-loopback address
  std::string default_unix_user = "nobody";
  bool allow_root_trainers = false;
  std::string bucket_group = "stoker";           // root daemon: the group that may write buckets
  std::string job_isolation = "auto";            // auto | required | off
  std::string container_engine = "auto";         // containers.engine: auto | podman | docker | none
  bool container_pull = true;                    // containers.pull: missing (true) | never
  std::vector<std::string> insecure_registries;  // containers.insecure_registries
  bool container_user_namespace = true;          // containers.user_namespace
  WarmStartConfig warm_starts;
  PythonPackagesConfig python_packages;
  uint64_t log_max_bytes = 64ull << 20;  // per replica log file; 0 = no rotation
  int log_max_files = 3;                 // rotated files kept, 1..1000
  RetentionPolicy retention;
  PreemptionConfig preemption;
  auth::AuthPolicy auth;           // `auth:`: priority ceilings, console sessions (auth/policy.h)
  std::string executor = "local";  // local | slurm
  // The `slurm:` section (executor: slurm) sets partition, account, qos,
  // preemptible_partition, preemptible_qos, shared_dir ("" = the data dir),
  // sbatch_extra_args and grace_seconds; the executor registry the rest.
  exec::SlurmOptions slurm;
  cost::Catalog catalog = cost::Catalog::BuiltIn();  // with the `cost:` section applied
  std::vector<Webhook> webhooks;                     // `webhooks:` (docs/webhooks.md)
  std::filesystem::path runner;                      // stoker-run binary
  std::filesystem::path python_helpers;              // directory holding the hypertune module
  std::string api_url;                               // where trainers reach the API (set by main)
  std::string push_secret;  // behind trials' push keys (set by main; auth.h)
};

// The rules that map Vertex's prebuilt training images (PyTorch, TensorFlow,
// scikit-learn, XGBoost) to the system Python.
std::vector<ImageRule> DefaultImageRules();

// Reads `file` (if it exists; a missing default file is fine, a missing
// explicit file is NotFound) over the defaults. Errors name the key.
Result<Config> LoadConfig(const std::filesystem::path& data_dir, const std::filesystem::path& file,
                          bool file_is_explicit);

}  // namespace stoker::config
