// FNV-1a (64 bit) of a byte string as 16 lower-case hex digits: a short,
// stable name for a longer key (a replica's cgroup, a warm interpreter's
// socket). Not a cryptographic hash: use it where a collision can only
// make two of one's own things share a name, never where an attacker
// chooses the input to collide with someone else's. Pure, header-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace stoker {

inline std::string Fnv1aHex(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace stoker
