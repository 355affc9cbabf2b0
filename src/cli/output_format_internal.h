// Shared by the files of stoker_cli_output_format (output_format.h): resource
// keys, the scanner of flag texts, and the value rules (how a value prints,
// compares and counts as true) that --format, --filter and --sort-by share.
// Private to the library; nothing outside src/cli/ includes it. Pure and
// thread-safe like output_format.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/output_format.h"
#include "common/status.h"

namespace stoker::cli::format_internal {

// ------------------------------------------------------------ resource keys

// One step of a resource key: a name, a list index, or `[]` (every item).
struct Segment {
  enum class Kind { kName, kIndex, kEach } kind = Kind::kName;
  std::string name;
  int64_t index = 0;
};

// "a.b[0].c", "a[]", "a[-1]" into `out`; false when malformed (an empty
// name, a bad index, an unclosed '[').
bool ParsePath(std::string_view key, std::vector<Segment>* out);

// The value at path[at...] below `v` (names matched as gcloud matches
// them), nullopt when absent; a `[]` step yields a list.
std::optional<nlohmann::json> Lookup(const nlohmann::json& v, const std::vector<Segment>& path,
                                     size_t at);

// ------------------------------------------------------------ scanning

// A cursor over a flag's text; errors name the flag and the position.
class Scanner {
 public:
  Scanner(std::string_view text, std::string flag) : s_(text), flag_(std::move(flag)) {}

  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return AtEnd() ? '\0' : s_[pos_]; }
  size_t pos() const { return pos_; }
  void Advance(size_t n = 1) { pos_ += n; }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool StartsWith(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  std::string_view Rest() const { return s_.substr(std::min(pos_, s_.size())); }

  Status ErrorAt(size_t at, const std::string& what) const {
    return InvalidArgument(flag_ + ": at " + std::to_string(at + 1) + ": " + what);
  }
  Status Error(const std::string& what) const { return ErrorAt(pos_, what); }

  // A run of characters not in `stops` (and not blank when `blank_stops`),
  // with "..." or '...' pieces (backslash escapes) joined in. `quoted` is set
  // when any piece was quoted.
  Result<std::string> Value(std::string_view stops, bool blank_stops, bool* quoted = nullptr);

 private:
  std::string_view s_;
  std::string flag_;
  size_t pos_ = 0;
};

// ------------------------------------------------------------ text

// A letter, a digit or any non-ASCII byte (part of a --filter word).
bool IsWordChar(char c);
std::string Lower(std::string s);  // ASCII only
std::string Upper(std::string s);  // ASCII only
// "\t" and "\n" written as two characters, as gcloud's docs ask for.
std::string Unescape(const std::string& s);

// ------------------------------------------------------------ values

// The whole of `s` as a number, else nullopt.
std::optional<double> ParseNumber(const std::string& s);
// RFC 3339, or a date ("2018-01-15") or a time without a zone, both UTC,
// as microseconds since the epoch.
std::optional<int64_t> ParseTime(std::string s);
// A JSON number, or a string holding one (Vertex writes int64 as strings).
std::optional<double> NumberOf(const nlohmann::json& v);
// A scalar as text: strings bare, booleans True/False (Python's), null "".
std::string ScalarText(const nlohmann::json& v);
// A cell of value, table and csv output: lists joined by the delimiter,
// maps as key=value items, absent and null as "".
std::string Stringify(const std::optional<nlohmann::json>& v, const std::string& delimiter);
// gcloud's truth: absent, null, false, 0 and empty are false.
bool Truthy(const std::optional<nlohmann::json>& v);
// Order of two resource values for sorting (-1, 0, 1): absent first, then
// numbers (numeric strings too), times, text.
int CompareValues(const std::optional<nlohmann::json>& a, const std::optional<nlohmann::json>& b);

// ------------------------------------------------------------ projections

// The value a projection column shows for `resource`: its key looked up,
// then its transforms applied in order (output_format.cc).
std::optional<nlohmann::json> ColumnValue(const nlohmann::json& resource, const Column& c);

}  // namespace stoker::cli::format_internal
