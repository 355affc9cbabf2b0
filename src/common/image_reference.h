// Image references (docs/images.md, "Image names"; docs/decisions/0033):
// the one reader of a container image's name. Every image name that comes
// from a user (a job's imageUri or executorImageUri, `stoker images`,
// local-run, launch.json's container) is parsed here, and engine command
// lines are built only from the parsed value, so that a name can never be
// read by the engine as a transport (`containers-storage:[...]`,
// `docker://`, `oci-archive:`), an option, or anything but a name. Pure.
//
// The grammar is the Docker/OCI distribution reference:
//   [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST]
// HOST is written only when the first '/'-separated component contains
// '.' or ':' or is "localhost"; it is domain-name components
// ([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])? joined by '.'), an IPv4 address
// or a bracketed IPv6 address; PORT is 1..65535. PATH is lower-case
// components [a-z0-9]+ joined by one of '.', '_', '__' or a run of '-',
// separated by '/'. TAG is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. DIGEST is 64
// lower-case hex digits (sha256 only). HOST[:PORT]/PATH is at most 255
// characters. A name without a host whose text before its first ':' is a
// transport's name ("oci:x", "dir:x", "containers-storage:x") is refused
// too: it fits the grammar, but the engine would read a transport there.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace stoker {

struct ImageReference {
  std::string registry;  // HOST[:PORT] as written; "" when implied (Docker Hub)
  std::string host;      // without brackets for IPv6; "" when implied
  int port = 0;          // 0 when not written
  std::string path;      // e.g. "vertex-ai/training/pytorch-gpu.1-13.py310"
  std::string tag;       // "" when none
  std::string digest;    // "sha256:<64 hex>" or ""

  // The reference rebuilt from its parts: the spelling the user wrote
  // (so a locally built `trainer:v1` still matches the engine's store).
  std::string ToString() const;
  // The registry pulls go to: `registry`, or "docker.io" when implied.
  std::string Registry() const;
  // What a connection to the registry opens: Docker Hub's
  // registry-1.docker.io for an implied or docker.io registry; port 443
  // when none is written.
  std::string ConnectHost() const;
  int ConnectPort() const;
};

// Parses `name`. InvalidArgument naming `field` (e.g.
// "workerPoolSpecs[0].containerSpec.imageUri"), the name (control
// characters escaped), what is wrong with it, and the grammar.
Result<ImageReference> ParseImageReference(std::string_view name, std::string_view field);

}  // namespace stoker
