// Reading job files: YAML or JSON text into nlohmann::json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace stoker {

// Limits on a job file: larger or deeper documents are refused up front.
inline constexpr size_t kMaxDocumentBytes = 4u << 20;
inline constexpr int kMaxDocumentDepth = 64;

// Parses YAML (a superset of JSON) into JSON. Scalars keep their YAML type:
// plain integers become numbers, quoted strings stay strings, true/false are
// booleans. InvalidArgument with "<source>:<line>:<col>: ..." on a syntax error,
// and naming the limit for a document over kMaxDocumentBytes or nested
// (flow style) deeper than kMaxDocumentDepth.
Result<nlohmann::json> ParseYamlOrJson(const std::string& text, const std::string& source);

}  // namespace stoker
