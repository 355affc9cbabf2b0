// The node's container engine (docs/containers.md): podman or docker,
// found and checked once, and what it is asked about images. Each call runs
// the engine's client with a time limit; nothing is cached here.
#pragma once

#include <string>
#include <vector>

#include "common/image_reference.h"
#include "common/status.h"
#include "exec/command.h"

namespace stoker::exec {

struct ContainerEngine {
  std::string name;  // "podman" or "docker"; "" = none usable
  std::string path;  // absolute path of its client
  std::string why;   // how it was chosen, or why there is none (for logs and errors)
  bool usable() const { return !path.empty(); }
};

// Runs an engine client command that reads the image store (`image ls`)
// and, while it exits non-zero, runs it again up to twice more, 0.2 s and
// 0.6 s later: podman's `image ls` fails with "image not known" when
// another client removes an image while it reads the store, a race that
// passes. Returns the last run; errors as RunCommand.
Result<CommandResult> RunImageStoreRead(const std::vector<std::string>& args,
                                        double timeout_seconds);

// `want` is config's containers.engine: "auto" (podman, then docker, each
// only if `<client> image ls` answers), "podman", "docker" or "none".
// FailedPrecondition, with the engine's own words, when the one named
// cannot be used; "auto" never fails (the result then says why none).
Result<ContainerEngine> DetectContainerEngine(const std::string& want);

// Whether the engine's store holds `image` (`podman image exists`,
// `docker image inspect`), asked with its parsed form after "--".
// FailedPrecondition when the client cannot answer.
Result<bool> HasImage(const ContainerEngine& engine, const ImageReference& image);

// Whether `address` (numeric IPv4 or IPv6, as getnameinfo writes it) is
// one a registry must not be at unless the config trusts it: "loopback",
// "link-local", "private", "unspecified", "multicast" or "broadcast" (an
// IPv4-mapped IPv6 address as its IPv4 address); "" for a public address
// (or text that is no address). Pure.
std::string NonPublicAddressKind(const std::string& address);

// What ProbeRegistry found.
struct RegistryProbe {
  // A looked-up address is not public (NonPublicAddressKind) and private
  // addresses were not allowed: nothing was connected to.
  bool refused = false;
  // "" when a TCP connection opened; else why not, e.g. "cannot resolve
  // gcr.io", "127.0.0.1:5000: Connection refused", or for `refused`
  // "127.0.0.1, a loopback address".
  std::string why;
};

// Looks up `image`'s registry (ImageReference::ConnectHost/ConnectPort)
// and opens a TCP connection to it within `timeout_ms` (lookup included).
// Every address the lookup returns is checked before any connection:
// unless `allow_private` (the registry is in containers.insecure_registries)
// one that is not public refuses the registry, so that a job cannot make
// stokerd or root's engine connect to the node's own or its network's
// services. Says nothing of credentials.
RegistryProbe ProbeRegistry(const ImageReference& image, bool allow_private, int timeout_ms);

// The engine's client line for a `stoker images` verb, e.g.
// {path, "build", "-t", tag, "-f", file, dir}: what the CLI runs in the
// foreground with its own output. Pure.
std::vector<std::string> EngineCommand(const ContainerEngine& engine,
                                       const std::vector<std::string>& args);

}  // namespace stoker::exec
