// gcloud's output conventions for `stoker`: --format, --filter, --sort-by,
// --limit, --page-size, the global flags that may stand anywhere on the
// command line, and "did you mean" suggestions.
//
// A pure core: no I/O, no clock, no daemon. A command fetches its resources
// (Vertex JSON: a CustomJob, a HyperparameterTuningJob, ...), then
//
//   STOKER_ASSIGN_OR_RETURN(OutputFormat fmt, ParseFormat(g.format));
//   STOKER_ASSIGN_OR_RETURN(items, ApplyListFlags(std::move(items), list_flags));
//   if (fmt.kind == FormatKind::kText) { ...the command's own human output... }
//   else std::cout << FormatList(items, fmt);        // or FormatResource(job, fmt)
//
// The semantics follow `gcloud topic formats`, `gcloud topic filters` and
// `gcloud topic projections`; where Stoker differs it says so below.
//
// Resource keys (in projections, filters and --sort-by) are dotted paths with
// list indexes: `jobSpec.workerPoolSpecs[0].machineSpec.machineType`;
// `[-1]` is the last item and `[]` every item (the result is a list). Key
// names match as gcloud's do: snake_case and camelCase are the same name
// (`create_time` finds `createTime`, `display_name` finds `displayName`).
//
// Every error is InvalidArgument and names the flag (`--format: ...`,
// `--filter: at 12: ...`) and what to write instead. All functions are
// thread-safe (they share no state).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::cli {

// ---------------------------------------------------------------- --format

enum class FormatKind {
  kText,       // "text" or "default": the command's own human output (not gcloud's flattened)
  kJson,       // "json": indent 2; a list is one JSON array
  kYaml,       // "yaml": block style; a list is a stream, each document after "---"
  kValue,      // "value(...)": no heading, tab separated, one line a resource
  kTable,      // "table(...)": aligned columns under ANGRY_SNAKE_CASE headings
  kCsv,        // "csv(...)": RFC 4180, a heading row of the keys (or labels)
  kList,       // "list": " - " and the resource on one line
  kFlattened,  // "flattened": one `key.path: value` line per scalar (gcloud's `text`)
  kNone,       // "none" / "disable": prints nothing
};

// A transform in a projection key: `createTime.date("%Y-%m-%d")` is
// {"date", {"%Y-%m-%d"}}; named arguments stay "name=value" in args.
// Supported: basename(), date(format, tz=UTC|LOCAL), len(), yesno(yes, no),
// lower(), upper(), join(sep), list(separator), segment(index), firstof(k...).
struct Transform {
  std::string name;
  std::vector<std::string> args;
};

// One key of a projection: a table column, a value field.
struct Column {
  std::string key;  // the resource key as written, without transforms ("name")
  std::vector<Transform> transforms;
  std::string label;     // `:label=ID`; "" = derived from the key
  int sort = 0;          // `:sort=N` (1 first), 0 = not a sort key
  bool reverse = false;  // `:reverse`
};

struct OutputFormat {
  FormatKind kind = FormatKind::kText;
  std::vector<Column> columns;    // the projection; empty = the whole resource
  bool heading = true;            // [no-heading]
  bool box = false;               // [box] / [all-box]
  std::string title;              // [title=TEXT] (table)
  std::string separator;          // [separator=S]: "\t" for value, "," for csv
  std::string delimiter = ";";    // [delimiter=S]: between the items of a list value
  std::string terminator = "\n";  // [terminator=S]: after each record (value, csv)
};

// Parses a --format value: NAME[ATTRIBUTES](PROJECTION) as in
// `gcloud topic formats`, e.g. "json", "value(name)",
// "table[box](name.basename():label=ID,displayName,state,createTime.date())",
// "csv[no-heading](name,state)", "value[separator=','](name,state)".
// Unknown attribute names are ignored, as gcloud does. value, table and csv
// need a projection. An empty text is kText. InvalidArgument "--format: ..."
// naming the unknown format (with a suggestion), transform or the position
// of a syntax error.
Result<OutputFormat> ParseFormat(const std::string& text);

// Renders one resource (a describe) in `format`, ending in a newline (none
// for kNone). kText is the caller's; given it, this renders YAML.
std::string FormatResource(const nlohmann::json& resource, const OutputFormat& format);

// Renders a list of resources (a list command). An empty list renders
// nothing in table, value, csv and list formats, "[]" in json.
std::string FormatList(const std::vector<nlohmann::json>& items, const OutputFormat& format);

// The value at `key` in `resource` (see "Resource keys" above), or nullopt
// when it is absent. `key` must be a valid key; an invalid one yields nullopt.
std::optional<nlohmann::json> LookupKey(const nlohmann::json& resource, const std::string& key);

// ---------------------------------------------------------------- list flags

// gcloud's list flags. Applied in gcloud's order: --sort-by, --filter,
// --limit. --page-size only sizes the requests to the daemon; it is
// validated here and otherwise left to the command.
struct ListFlags {
  std::string filter;                // --filter: `gcloud topic filters`
  std::string sort_by;               // --sort-by: "key[,~key2]", '~' = descending
  std::optional<int64_t> limit;      // --limit: at most N resources (>= 1)
  std::optional<int64_t> page_size;  // --page-size: N per request (>= 1)
};

// The --filter language (`gcloud topic filters`):
//   key = value   key != value   key < <= > >= value   (numbers compare as
//                 numbers, RFC 3339 times and dates as times, else as text)
//   key : pattern (case-insensitive match of a word or a run of words; a
//                 trailing '*' matches a prefix; `key:*` = key is set and
//                 not empty; on a map, matches a key: `labels:team`)
//   key ~ regex   key !~ regex   (partial match, ECMAScript syntax)
//   key =(a b)    key :(a,b)     (any of the values)
//   NOT term, -term, term AND term, term OR term, (expression), and
//   juxtaposition = AND with lower precedence than OR. A filter that mixes
//   AND and OR without parentheses is refused, as gcloud does.
// On a list value a term holds when any item matches; `!=` and `!~` are the
// negations of `=` and `~`. An absent key matches no positive term.
class ResourceFilter {
 public:
  ResourceFilter() = default;  // matches everything
  bool Matches(const nlohmann::json& resource) const;

  struct Node;  // private to resource_filter.cc

 private:
  friend Result<ResourceFilter> ParseResourceFilter(const std::string& text);
  std::shared_ptr<const Node> root_;
};

// Parses a --filter value; blank = matches everything. InvalidArgument
// "--filter: at N: ..." (N counts characters from 1) saying what was
// expected there.
Result<ResourceFilter> ParseResourceFilter(const std::string& text);

// Checks every list flag without applying them, so a command can refuse bad
// flags before it contacts the daemon. Same errors as ApplyListFlags.
Status ValidateListFlags(const ListFlags& flags);

// Filters, sorts (stable; absent values first when ascending) and limits.
// InvalidArgument naming the flag for a bad filter, sort key, limit or page
// size.
Result<std::vector<nlohmann::json>> ApplyListFlags(std::vector<nlohmann::json> items,
                                                   const ListFlags& flags);

// ---------------------------------------------------------------- argv

// gcloud's global flags, hoisted from anywhere on a command line.
struct HoistedFlags {
  std::optional<std::string> format;     // --format X / --format=X (the last wins)
  std::optional<std::string> verbosity;  // --verbosity: debug|info|warning|error|critical|none
  bool quiet = false;                    // --quiet / -q
  std::vector<std::string> rest;         // every other argument, in order
};

// Takes `args` (argv without the program name) and hoists --format,
// --verbosity and --quiet/-q out of it, wherever they stand before a
// literal "--"; "--" and everything after it stay in `rest` untouched.
// A token that is the value of another flag is never read as a flag:
// `--args=--format=json` is one token, and after a flag named in
// `flags_with_values` written without '=' (e.g. "--args") the next token
// is its value. InvalidArgument for --format or --verbosity without a value
// or a verbosity gcloud does not have.
Result<HoistedFlags> HoistGlobalFlags(const std::vector<std::string>& args,
                                      const std::set<std::string>& flags_with_values = {});

// ---------------------------------------------------------------- did you mean

// The candidate closest to `word` by Damerau-Levenshtein distance (case
// insensitive), when it is close enough to be a typo (1 edit for words of
// up to 4 characters, 2 up to 8, 3 beyond), else the only candidate that
// starts with `word` (3 characters or more), else "". Ties go to the
// earlier candidate. E.g. Suggest("jsn", {"json","yaml"}) == "json".
std::string Suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace stoker::cli
