// The AIP-160 filter subset that ListCustomJobs accepts (vertex.md §1.1):
//
//   display_name  =  !=  :   (":" matches a pattern where '*' is any text)
//   user          =  !=  :   (Stoker: the submitting user)
//   state         =  !=      (a JobState name, e.g. JOB_STATE_SUCCEEDED)
//   create_time   =  !=  <  <=  >  >=   (an RFC 3339 timestamp)
//   labels.KEY    =  !=  :   (labels.KEY:* is "has the label")
//   labels:KEY               (has the label)
//
// Restrictions combine with AND, OR, NOT (or a leading '-') and parentheses;
// juxtaposition is an implicit AND. As in AIP-160, OR binds tighter than AND:
// `a AND b OR c` is `a AND (b OR c)`. Values are quoted ("..." or '...', with
// backslash escapes) or bare. camelCase field names (displayName,
// createTime) are accepted too.
//
// A pure parser and evaluator: no I/O, no store access.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace stoker::api {

// Longest filter accepted, in bytes, and deepest nesting of parentheses and
// NOTs.
inline constexpr size_t kMaxFilterLength = 4096;
inline constexpr int kMaxFilterDepth = 32;

// What a filter is evaluated against: one job.
struct FilterSubject {
  std::string display_name;
  std::string state;  // e.g. "JOB_STATE_RUNNING"
  int64_t create_time_us = 0;
  std::map<std::string, std::string> labels;
  std::string user;  // who submitted it
};

struct FilterNode;

class Filter {
 public:
  Filter() = default;  // matches everything
  explicit Filter(std::shared_ptr<const FilterNode> root) : root_(std::move(root)) {}

  bool Matches(const FilterSubject& subject) const;
  // True for the empty filter.
  bool MatchesAll() const { return root_ == nullptr; }

 private:
  std::shared_ptr<const FilterNode> root_;
};

// Parses `text`; an empty or all-blank text is the filter that matches
// everything. InvalidArgument "filter: at N: ..." (N counts characters from
// 1) naming what was expected there.
Result<Filter> ParseFilter(const std::string& text);

}  // namespace stoker::api
