// Reading job files: YAML or JSON text into nlohmann::json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace stoker {

// Parses YAML (a superset of JSON) into JSON. Scalars keep their YAML type:
// plain integers become numbers, quoted strings stay strings, true/false are
// booleans. InvalidArgument with "<source>:<line>:<col>: ..." on a syntax error.
Result<nlohmann::json> ParseYamlOrJson(const std::string& text, const std::string& source);

}  // namespace stoker
