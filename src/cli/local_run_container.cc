#include "cli/local_run_container.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "replica/launch.h"

namespace stoker::cli {

std::vector<std::string> LocalContainerArgv(const exec::ContainerEngine& engine,
                                            const LocalContainerRun& run,
                                            const std::vector<std::string>& ulimits) {
  std::vector<std::string> a = {engine.path, "run", "--rm", "--network=host",
                                run.pull ? "--pull=missing" : "--pull=never"};
  if (run.pull && run.insecure_registry && engine.name == "podman")
    a.push_back("--tls-verify=false");
  // Ctrl-C reaches the trainer; a terminal stays a terminal.
  if (::isatty(STDIN_FILENO)) a.insert(a.end(), {"--interactive", "--tty"});
  a.insert(a.end(), ulimits.begin(), ulimits.end());
  const std::string pkg = run.package.string();
  a.push_back("--volume=" + pkg + ":" + pkg);
  for (const auto& p : run.read_only)
    a.push_back("--volume=" + p.string() + ":" + p.string() + ":ro");
  if (!run.command.empty()) a.push_back("--workdir=" + pkg);
  // Values go in as NAME=VALUE pairs: this is the user's own machine and
  // command line, nothing of another account's.
  for (const auto& [k, v] : run.env) a.insert(a.end(), {"--env", k + "=" + v});
  if (run.gpu) {
    if (engine.name == "docker") {
      a.push_back("--gpus=all");
    } else {
      a.push_back("--device=nvidia.com/gpu=all");
    }
  }
  if (!run.command.empty()) {
    a.push_back("--entrypoint=" + nlohmann::json::array({run.command[0]}).dump());
  }
  // run.image is Environments::ForImage's parsed form; "--" ends the options.
  a.insert(a.end(), {"--", run.image});
  if (!run.command.empty()) a.insert(a.end(), run.command.begin() + 1, run.command.end());
  a.insert(a.end(), run.image_args.begin(), run.image_args.end());
  return a;
}

int ExecLocalContainer(const exec::ContainerEngine& engine, const LocalContainerRun& run) {
  std::vector<std::string> args = LocalContainerArgv(engine, run, runner::ContainerUlimitFlags());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(engine.path.c_str(), argv.data());
  std::cerr << "ERROR: local-run: cannot run " << engine.path << ": " << std::strerror(errno)
            << "\n";
  return 1;
}

}  // namespace stoker::cli
