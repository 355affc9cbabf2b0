// What a fuzz target does when a property it checks does not hold.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace stoker::fuzz {

// Prints "<target>: <what>" and `detail` (the input or output that broke the
// property), then aborts, so that libFuzzer keeps the input as a crash.
[[noreturn]] inline void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n%s\n", program_invocation_short_name, what, detail.c_str());
  std::abort();
}

}  // namespace stoker::fuzz
