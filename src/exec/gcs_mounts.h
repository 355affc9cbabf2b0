// /gcs/BUCKET/...: the buckets where a Vertex trainer finds them (Vertex
// mounts Cloud Storage with FUSE at /gcs in every job; docs/storage.md
// "/gcs in jobs"). The buckets' root directory is shown at /gcs and each
// bucket the config maps elsewhere at /gcs/NAME, read-write as its gs://
// paths: inside an isolated trainer's view (runner/isolation.h, the
// `bind` of the isolation spec) and in every container (podman/docker
// --volume). A trainer that is not isolated sees the host's /gcs (nothing).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "replica/replica_contract.h"

namespace stoker::exec {

inline constexpr char kGcsRoot[] = "/gcs";

// The binds for a daemon whose data dir is `data` and whose config maps
// `overrides` (bucket name -> directory): data/buckets -> /gcs, then each
// override -> /gcs/NAME.
std::vector<replica::BindSpec> GcsBinds(
    const std::filesystem::path& data,
    const std::map<std::string, std::filesystem::path>& overrides);

// Readies the host at daemon start: makes data/buckets, and /gcs (empty, root's, 0755) when
// the daemon is root and it is missing, and an empty mount point
// data/buckets/NAME for each override (so that /gcs/NAME has somewhere to
// appear). Returns the line for the log: where trainers find the buckets,
// or why isolated trainers get no /gcs (a daemon that is not root, on a
// host without /gcs: an admin makes it once with `mkdir /gcs`).
std::string PrepareGcsMountPoints(const std::filesystem::path& data,
                                  const std::map<std::string, std::filesystem::path>& overrides);

}  // namespace stoker::exec
