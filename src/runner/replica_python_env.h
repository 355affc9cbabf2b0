// The supervisor's requirement step (launch.json's "python_env",
// python_env.h): the requirements a replica's packages declare, installed
// into the cached environment before its trainer starts.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "runner/trainer_start.h"

namespace stoker::runner {

// Installs the requirements (launch.json's and those the unpacked packages
// under `package_roots` declare) into the cached environment, or finds it
// built; its site directories go first on *python_path, its scripts last on
// spec's PATH, and one line in output.log (and *note) says which it was.
// A container's requirements are installed with the image's python3 in the
// image. OK with nothing done when there are no requirements. Cancelled
// when a cancel came meanwhile (pip is stopped); InvalidArgument for a
// requirement that cannot be read; pip's failure with its last lines.
Status PrepareReplicaPythonEnv(const ReplicaServices& services, LaunchSpec& spec,
                               const std::vector<std::filesystem::path>& package_roots,
                               std::vector<std::filesystem::path>* python_path, std::string* note);

}  // namespace stoker::runner
