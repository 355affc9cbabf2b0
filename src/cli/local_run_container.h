// `stoker ai custom-jobs local-run` when the executor image is in the
// container engine's store: the trainer runs in that image in the
// foreground, as gcloud's local-run runs it under docker.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "exec/containers.h"

namespace stoker::cli {

struct LocalContainerRun {
  std::string image;
  std::filesystem::path package;  // mounted at its own path, the working directory
  // e.g. {"python3", "-m", "trainer.task", ARGS...}; empty: the image's own
  // ENTRYPOINT runs, with `image_args` after the image (its CMD replaced),
  // in the image's WORKDIR.
  std::vector<std::string> command;
  std::vector<std::string> image_args;
  bool gpu = false;                // every GPU (CDI / --gpus all); else none
  bool pull = false;               // the engine pulls the image first (it lacks it)
  bool insecure_registry = false;  // ... without TLS verification (podman)
  std::map<std::string, std::string> env;
  std::vector<std::filesystem::path> read_only;  // more files to mount (a key file)
};

// The engine's command line for `run` (pure).
std::vector<std::string> LocalContainerArgv(const exec::ContainerEngine& engine,
                                            const LocalContainerRun& run,
                                            const std::vector<std::string>& ulimits);

// Replaces this process with the engine's client running `run`; returns
// (after printing why) only when that cannot be started.
int ExecLocalContainer(const exec::ContainerEngine& engine, const LocalContainerRun& run);

}  // namespace stoker::cli
