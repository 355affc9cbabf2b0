// Small text helpers shared across components.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace stoker {

// `s` without the ASCII whitespace (std::isspace) at either end.
inline std::string TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return std::string(s);
}

}  // namespace stoker
