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

// The whole lines within the last `max_bytes` of `text`: `text` itself when
// it is no longer; otherwise its last `max_bytes` less the line cut at their
// start (a line that starts exactly there is whole and kept).
inline std::string_view TailWholeLines(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::string_view tail = text.substr(text.size() - max_bytes - 1);  // with the byte before
  size_t nl = tail.find('\n');
  return nl == std::string_view::npos ? std::string_view() : tail.substr(nl + 1);
}

}  // namespace stoker
