// Internal to spec/: the rules on a CustomJobSpec, shared by the parser
// (custom_job.cc) and Validate. Not a public header; only spec/*.cc include it.
#pragma once

#include <string>

#include "spec/custom_job.h"
#include "spec/json_fields.h"

namespace stoker::spec::internal {

// Adds to `p` every broken rule of `spec` found at `path` ("jobSpec",
// "trialJobSpec", or "" for a bare spec): pool count and shapes, machines,
// tasks (image, package URIs, module, env, command-line sizes), NFS mounts
// and scheduling. Quiet at a path `p` already covers (a value that did not
// parse), so that each problem is reported once.
void CheckSpec(const CustomJobSpec& spec, const std::string& path, Problems& p);

}  // namespace stoker::spec::internal
