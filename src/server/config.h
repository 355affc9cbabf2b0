// stokerd's configuration: a YAML file (optional) plus built-in defaults.
//
// Keys (all optional):
//   listen: "127.0.0.1:0"
//   images:                       # executor/container image -> local environment
//     - match: "gcr.io/my-proj/trainer:*"   # shell glob on the image URI
//       python: /usr/bin/python3            # interpreter; "auto" = one with torch
//   buckets: {data: /srv/datasets}           # bucket name -> directory
//   inventory: {cpus: 8, memory_gb: 32, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}
//   cpu_oversubscription: 1.0   # local CPUs and memory may be booked this many times over
//   accelerator_substitution: true   # a GPU of another type with at least as much memory may serve
//   cancel_grace_seconds: 10
//   poll_interval_ms: 100
//   nfs_mount_root: /mnt/nfs    # nfsMounts whose path exists here are linked at
//   <root>/<mountPoint>
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "resources/resources.h"

namespace stoker::server {

struct ImageRule {
  std::string match;   // glob on the image URI
  std::string python;  // interpreter path or "auto"
};

struct Config {
  std::filesystem::path data_dir;
  std::filesystem::path config_file;  // "" when none was read
  std::string listen = "127.0.0.1:0";
  std::vector<ImageRule> images;  // user rules first, then the built-in ones
  std::map<std::string, std::filesystem::path> buckets;
  std::optional<resources::Node> inventory;  // declared; else detected
  double cpu_oversubscription = 1.0;
  bool accelerator_substitution = true;
  double cancel_grace_seconds = 10;
  int poll_interval_ms = 100;
  std::string nfs_mount_root = "/mnt/nfs";  // where nfsMounts appear, as on Vertex
  std::filesystem::path runner;             // stoker-run binary
  std::filesystem::path python_helpers;     // directory holding the hypertune module
  std::string api_url;                      // where trainers reach the API (set by main)
};

// The rules that map Vertex's prebuilt training images (PyTorch, TensorFlow,
// scikit-learn, XGBoost) to the system Python.
std::vector<ImageRule> DefaultImageRules();

// Reads `file` (if it exists; a missing default file is fine, a missing
// explicit file is NotFound) over the defaults. Errors name the key.
Result<Config> LoadConfig(const std::filesystem::path& data_dir, const std::filesystem::path& file,
                          bool file_is_explicit);

}  // namespace stoker::server
