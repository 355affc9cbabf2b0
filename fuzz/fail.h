// What a fuzz target does when a property it checks does not hold, and the
// step the JSON targets share: turning the fuzzer's bytes into a document.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace stoker::fuzz {

// Prints "<target>: <what>" and `detail` (the input or output that broke the
// property), then aborts, so that libFuzzer keeps the input as a crash.
[[noreturn]] inline void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n%s\n", program_invocation_short_name, what, detail.c_str());
  std::abort();
}

// The input as JSON, or nullopt for what a target skips: more than 64 KiB
// (bigger inputs only slow the fuzzer down; the HTTP layer caps bodies
// anyway) or bytes that are not JSON.
inline std::optional<nlohmann::json> JsonInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return std::nullopt;
  nlohmann::json input = nlohmann::json::parse(data, data + size, nullptr, false);
  if (input.is_discarded()) return std::nullopt;
  return input;
}

}  // namespace stoker::fuzz
