// Internal to spec/: the helpers every spec parser uses to read camelCase JSON
// fields and to collect every problem of one input with its field path.
// Not a public header; only spec/*.cc include it.
//
// Conventions shared by the parsers built on it:
// - A path is the full field path of a value ("jobSpec.workerPoolSpecs[0]");
//   "" is the top level.
// - Read* functions report a wrong type at the field's path and leave `out`
//   unchanged; they never report a missing field (the caller knows whether it
//   is required).
// - Problems collects lines "path: what is wrong; what to do".
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "spec/enums.h"

namespace stoker::spec::internal {

using Names = std::vector<std::string_view>;
// (key, what to do): keys that are not fields here but are fields somewhere else.
using Misplaced = std::vector<std::pair<std::string_view, std::string_view>>;

constexpr size_t kMaxDisplayName = 128;
constexpr size_t kMaxLabelLength = 64;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

bool Contains(const Names& names, std::string_view s);
// "a, b, c".
std::string JoinNames(const Names& names);
// The path of field `key` under `base` ("a.b"; just "b" at the top level).
std::string Join(const std::string& base, std::string_view key);
// The path of element `i` of the list at `base` ("a[3]").
std::string At(const std::string& base, size_t i);
// "a string", "a number", "a list", ... for messages.
std::string TypeName(const nlohmann::json& v);
// Where a string was expected: YAML turns unquoted 1, 1.5 and true into non-strings.
std::string QuoteHint(const nlohmann::json& v);
// UTF-8 code points, as Vertex counts length limits.
size_t Utf8Length(const std::string& s);
std::string SnakeToCamel(std::string_view key);
// Vertex AcceleratorType names (enums.h) without
// ACCELERATOR_TYPE_UNSPECIFIED, which means "none".
extern const Names kAcceleratorTypes;
// gcloud's spellings of an accelerator type: `nvidia-tesla-t4` (the enum name
// lower-cased with dashes, as gcloud ai-platform's flags take it) becomes
// NVIDIA_TESLA_T4, `tpu-v2` TPU_V2. Any other text comes back unchanged, so
// the caller's check names what the user wrote.
std::string CanonicalAcceleratorType(const std::string& s);

// Case-insensitive Levenshtein distance, for "did you mean".
size_t EditDistance(std::string_view a, std::string_view b);

// Every problem found in one input, in the order found. A problem recorded at
// a path "covers" that path and everything under it, so that a follow-on
// check (a required field whose value had the wrong type) stays quiet.
class Problems {
 public:
  void Add(const std::string& path, const std::string& message) {
    Note(path, message);
    covered_.push_back(path);
  }
  // Adds a problem unless one was already reported at or above `path`.
  void AddUnlessCovered(const std::string& path, const std::string& message) {
    if (!Covered(path)) Add(path, message);
  }
  // Reports without covering `path`: an unknown key says nothing about the known ones.
  void Note(const std::string& path, const std::string& message) {
    lines_.push_back((path.empty() ? std::string("(top level)") : path) + ": " + message);
  }
  void Cover(const std::string& path) { covered_.push_back(path); }
  // Adds each line of a non-ok `status` from another parser (whose lines already
  // start with their full paths) and covers `path`, the value that parser read.
  void AddStatus(const std::string& path, const Status& status) {
    const std::string& m = status.message();
    size_t start = 0;
    while (start <= m.size()) {
      size_t end = m.find('\n', start);
      if (end == std::string::npos) end = m.size();
      if (end > start) lines_.push_back(m.substr(start, end - start));
      start = end + 1;
    }
    covered_.push_back(path);
  }

  bool Covered(const std::string& path) const {
    for (const auto& c : covered_) {
      if (c.empty() || path == c) return true;
      if (path.size() > c.size() && path.compare(0, c.size(), c) == 0 &&
          (path[c.size()] == '.' || path[c.size()] == '[')) {
        return true;
      }
    }
    return false;
  }
  bool empty() const { return lines_.empty(); }
  size_t size() const { return lines_.size(); }
  Status ToStatus() const {
    std::string m;
    for (const auto& l : lines_) {
      if (!m.empty()) m += "\n";
      m += l;
    }
    return InvalidArgument(m);
  }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string> covered_;
};

// Reports every key of `obj` (at `path`) that is not in `known` or `ignored`:
// a snake_case spelling of a known key gets its camelCase spelling, a key in
// `misplaced` gets its advice, a near miss gets "did you mean", anything else
// the list of fields.
void CheckKeys(const nlohmann::json& obj, const std::string& path, const Names& known, Problems& p,
               const Misplaced& misplaced = {}, const Names& ignored = {});

// The value of `key` in `obj`, or nullptr when absent or null (proto JSON reads null as unset).
const nlohmann::json* Get(const nlohmann::json& obj, const char* key);

// Returns whether `key` was given.
bool ReadString(const nlohmann::json& obj, const char* key, const std::string& path, Problems& p,
                std::string* out);
// ReadString for an image's name: a non-empty value that is not an image
// reference (common/image_reference.h) is a problem at path.key naming the
// grammar, so that no such name is accepted, wherever it is given.
bool ReadImageReference(const nlohmann::json& obj, const char* key, const std::string& path,
                        Problems& p, std::string* out);
// Checks that `v` (at `path`) is a list of strings; appends them to `out` when not null,
// with "" for a wrong element so that indices stay aligned. Returns whether `v` is a list.
bool CheckStringList(const nlohmann::json& v, const std::string& path, Problems& p,
                     std::vector<std::string>* out);
void ReadStringList(const nlohmann::json& obj, const char* key, const std::string& path,
                    Problems& p, std::vector<std::string>* out);
// For a list whose presence matters (a container's command, a trainer's args): the list of
// strings `key` of `obj`, or nullopt when it is absent, null, or not a list of strings (then
// reported, as by CheckStringList), so that a bad list is never taken as given.
std::optional<std::vector<std::string>> ReadOptionalStringList(const nlohmann::json& obj,
                                                               const char* key,
                                                               const std::string& path,
                                                               Problems& p);
// An enum value `v` (at `path`) of enum `e`: a string comes back as given (the
// caller checks it against the names it takes, with its own advice); an
// integer (the proto number, as the client libraries' REST transports send
// enums) comes back as its name. An unknown number or another type is a
// problem naming the enum and its values, and nullopt.
std::optional<std::string> EnumValueName(const nlohmann::json& v, const std::string& path,
                                         const EnumType& e, Problems& p);
// EnumValueName of obj[key] into `out`. Returns whether `key` was given and read.
bool ReadEnumName(const nlohmann::json& obj, const char* key, const std::string& path,
                  const EnumType& e, Problems& p, std::string* out);
void ReadBool(const nlohmann::json& obj, const char* key, const std::string& path, Problems& p,
              bool* out);
// An integer in [lo, hi] given as a JSON number or a decimal string (proto JSON accepts both).
// With hi = INT64_MAX (a count), a value below lo reads "must be at least lo".
std::optional<int64_t> ReadInteger(const nlohmann::json& v, const std::string& path, int64_t lo,
                                   int64_t hi, Problems& p);
// A protobuf Duration ("3600s"); a bare number of seconds is accepted too.
std::optional<double> ReadDuration(const nlohmann::json& obj, const char* key,
                                   const std::string& path, Problems& p);
// Exact decimal seconds ("3600s", "0.25s"); proto Durations have nanosecond precision.
std::string FormatSeconds(double seconds);

// ---- Fields kept verbatim: checked for shape, then copied as given. ----

// kEnum: a name or proto number of `enum_type`, copied as its name.
enum class Kind { kString, kStrings, kBool, kInt32, kObject, kObjects, kInt64, kDouble, kEnum };

struct Shape {
  std::string_view name;
  Kind kind;
  std::vector<Shape> fields = {};               // for kObject / kObjects
  std::vector<std::string_view> required = {};  // for kObject / kObjects
  const EnumType* enum_type = nullptr;          // for kEnum
};

// The verbatim fields every job resource (CustomJob, HyperparameterTuningJob)
// accepts at its top level: encryptionSpec.
const std::vector<Shape>& JobVerbatim();

void CheckShape(const nlohmann::json& v, const Shape& s, const std::string& path, Problems& p);
// Checks and copies into `out` each field of `shapes` present in `obj`
// (enum numbers become their names).
void ReadVerbatim(const nlohmann::json& obj, const std::string& path,
                  const std::vector<Shape>& shapes, Problems& p, nlohmann::json* out);

// ---- Fields shared by the job resources (CustomJob, HyperparameterTuningJob). ----

// displayName: required, at most 128 characters.
void CheckDisplayName(const std::string& name, Problems& p);
// Reads the top-level `labels` object of `obj`.
void ParseLabels(const nlohmann::json& obj, Problems& p,
                 std::map<std::string, std::string>* labels);
// Vertex label rules (lowercase keys and values, at most 64 characters).
void CheckLabels(const std::map<std::string, std::string>& labels, Problems& p);

}  // namespace stoker::spec::internal
