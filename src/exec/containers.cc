#include "exec/containers.h"

#include <unistd.h>

#include <cstdlib>

#include "exec/command.h"

namespace stoker::exec {
namespace {

// The first executable `name` on PATH (then the usual system directories,
// which a daemon started by systemd may lack on PATH); "" when none.
std::string FindClient(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && dir[0] == '/') {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::string FirstLine(const std::string& text) {
  size_t start = text.find_first_not_of(" \n");
  if (start == std::string::npos) return "";
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Empty when `<client> image ls -q` answers (its image store works: what
// Stoker needs of it; 60 ms, where `info` takes 0.5 s); else why not.
std::string Unusable(const std::string& client) {
  auto r = RunCommand({client, "image", "ls", "-q"}, 20);
  if (!r.ok()) return r.status().message();
  if (r->exit_code == 0) return "";
  std::string said = FirstLine(r->err.empty() ? r->out : r->err);
  return "`" + client + " image ls` failed" + (said.empty() ? "" : ": " + said);
}

}  // namespace

Result<ContainerEngine> DetectContainerEngine(const std::string& want) {
  if (want == "none") return ContainerEngine{"", "", "containers.engine is none"};
  std::vector<std::string> names = {"podman", "docker"};
  if (want != "auto") names = {want};
  std::string reasons;
  for (const std::string& name : names) {
    std::string client = FindClient(name);
    std::string why = client.empty() ? name + " is not installed" : Unusable(client);
    if (why.empty()) {
      return ContainerEngine{name, client,
                             want == "auto" ? "found " + client + " and its image store answers"
                                            : "containers.engine is " + name};
    }
    if (want != "auto") {
      return FailedPrecondition("containers.engine: " + name + " cannot be used: " + why +
                                "; fix it, or set containers.engine to auto or none");
    }
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  return ContainerEngine{
      "", "",
      "no usable container engine (" + reasons + "); images run through interpreter rules only"};
}

Result<bool> HasImage(const ContainerEngine& engine, const std::string& image) {
  std::vector<std::string> args =
      engine.name == "podman"
          ? std::vector<std::string>{engine.path, "image", "exists", "--", image}
          : std::vector<std::string>{engine.path, "image", "inspect", "--format",
                                     "{{.Id}}",   "--",    image};
  STOKER_ASSIGN_OR_RETURN(CommandResult r, RunCommand(args, 20));
  if (r.exit_code == 0) return true;
  if (r.exit_code == 1) return false;
  return FailedPrecondition("cannot ask " + engine.path + " about image " + image + ": " +
                            FirstLine(r.err));
}

std::vector<std::string> EngineCommand(const ContainerEngine& engine,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> out = {engine.path};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

}  // namespace stoker::exec
