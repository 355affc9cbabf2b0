// The node's container engine (docs/containers.md): podman or docker,
// found and checked once, and what it is asked about images. Each call runs
// the engine's client with a time limit; nothing is cached here.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::exec {

struct ContainerEngine {
  std::string name;  // "podman" or "docker"; "" = none usable
  std::string path;  // absolute path of its client
  std::string why;   // how it was chosen, or why there is none (for logs and errors)
  bool usable() const { return !path.empty(); }
};

// `want` is config's containers.engine: "auto" (podman, then docker, each
// only if `<client> image ls` answers), "podman", "docker" or "none".
// FailedPrecondition, with the engine's own words, when the one named
// cannot be used; "auto" never fails (the result then says why none).
Result<ContainerEngine> DetectContainerEngine(const std::string& want);

// Whether the engine's store holds `image` (`podman image exists`,
// `docker image inspect`). FailedPrecondition when the client cannot answer.
Result<bool> HasImage(const ContainerEngine& engine, const std::string& image);

// The registry an image reference names, by Docker's rule: the part
// before the first '/' when it has a '.' or a ':' or is "localhost";
// otherwise Docker Hub. Pure.
struct ImageRegistry {
  std::string name;  // as written, e.g. "gcr.io", "localhost:5000"; "docker.io" when implied
  std::string host;  // what is connected to ("registry-1.docker.io" for Docker Hub)
  int port = 443;    // as written, else 443
};
ImageRegistry RegistryOf(const std::string& image);

// "" when a TCP connection to the registry opens within `timeout_ms`
// (name lookup included); else why not, e.g. "cannot resolve gcr.io" or
// "127.0.0.1:5000: Connection refused". Says nothing of credentials.
std::string ProbeRegistry(const ImageRegistry& registry, int timeout_ms);

// The engine's client line for a `stoker images` verb, e.g.
// {path, "build", "-t", tag, "-f", file, dir}: what the CLI runs in the
// foreground with its own output. Pure.
std::vector<std::string> EngineCommand(const ContainerEngine& engine,
                                       const std::vector<std::string>& args);

}  // namespace stoker::exec
