#include "common/json_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace stoker {
namespace {

using nlohmann::json;

json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  // A quoted scalar ("1") is a string; YAML tags it "!".
  if (node.Tag() == "!") return s;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "Null" || s == "NULL" || s == "~") return nullptr;
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return i;
    double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d) && s.find_first_of("0123456789") != std::string::npos) {
      return d;
    }
  }
  return s;
}

// What one document may expand to. YAML aliases (*a) repeat a node without
// repeating its text, so a few hundred bytes of nested aliases stand for
// billions of values (the "billion laughs"): the conversion counts what it
// makes and stops at these.
struct Budget {
  int64_t values = 1'000'000;
  int64_t bytes = int64_t{64} << 20;  // scalar and key text
  std::string exceeded;               // set: the reason it stopped
};

json NodeToJson(const YAML::Node& node, Budget& budget, int depth) {
  if (!budget.exceeded.empty()) return nullptr;
  if (--budget.values < 0) {
    budget.exceeded = "expands to more than 1,000,000 values (through YAML aliases?)";
    return nullptr;
  }
  if (depth > kMaxDocumentDepth) {
    budget.exceeded = "nested more than " + std::to_string(kMaxDocumentDepth) + " levels deep";
    return nullptr;
  }
  auto spend = [&budget](size_t n) {
    budget.bytes -= static_cast<int64_t>(n);
    if (budget.bytes < 0 && budget.exceeded.empty()) {
      budget.exceeded = "expands to more than 64 MiB of text (through YAML aliases?)";
    }
    return budget.exceeded.empty();
  };
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      if (!spend(node.Scalar().size())) return nullptr;
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      json arr = json::array();
      for (const auto& item : node) {
        arr.push_back(NodeToJson(item, budget, depth + 1));
        if (!budget.exceeded.empty()) return nullptr;
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      json obj = json::object();
      for (const auto& kv : node) {
        std::string key = kv.first.as<std::string>();
        if (!spend(key.size())) return nullptr;
        obj[key] = NodeToJson(kv.second, budget, depth + 1);
        if (!budget.exceeded.empty()) return nullptr;
      }
      return obj;
    }
  }
  return nullptr;
}

}  // namespace

Result<nlohmann::json> ParseYamlOrJson(const std::string& text, const std::string& source) {
  if (text.size() > kMaxDocumentBytes) {
    return InvalidArgument(source + ": " + std::to_string(text.size()) +
                           " bytes is more than the " + std::to_string(kMaxDocumentBytes >> 20) +
                           " MiB a job file may have (keep data in a bucket, not in the job)");
  }
  // Flow-style nesting ([[[... or {{{...) deeper than any job file needs is
  // refused before the recursive parser sees it.
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  if (deepest > kMaxDocumentDepth) {
    return InvalidArgument(source + ": nested " + std::to_string(deepest) +
                           " levels deep; a job file may nest at most " +
                           std::to_string(kMaxDocumentDepth));
  }
  try {
    YAML::Node root = YAML::Load(text);
    Budget budget;
    json out = NodeToJson(root, budget, 0);
    if (!budget.exceeded.empty()) {
      return InvalidArgument(source + ": " + budget.exceeded +
                             "; a job file must be plain data (write the values out)");
    }
    return out;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": " + e.msg +
                           " (the file must be valid YAML or JSON)");
  }
}

}  // namespace stoker
