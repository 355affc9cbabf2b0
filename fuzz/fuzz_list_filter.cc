// bytes -> api::ParseFilter (the AIP-160 `filter` of list requests, which
// any caller controls): never crashes, never recurses past its depth limit,
// and a filter that parses evaluates on jobs of every shape; NOT of a filter
// is its complement.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fail.h"
#include "api/list_filter.h"

namespace {

using stoker::fuzz::Fail;
using stoker::api::FilterSubject;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto filter = stoker::api::ParseFilter(text);
  if (!filter.ok()) {
    if (filter.status().message().rfind("filter: ", 0) != 0) {
      Fail("an error that does not name the filter", filter.status().message());
    }
    return 0;
  }
  const FilterSubject subjects[] = {
      {},
      {"train-1", "JOB_STATE_RUNNING", 1621296000000000, {{"team", "ml"}, {"env", "prod"}}},
      {std::string(200, '*'), "JOB_STATE_FAILED", -1, {{"", ""}}},
  };
  auto negated = stoker::api::ParseFilter("NOT (" + text + ")");
  for (const FilterSubject& s : subjects) {
    bool m = filter->Matches(s);
    // Wrapping adds a level of nesting, so it may pass the depth limit.
    if (negated.ok() && !text.empty() && negated->Matches(s) == m && !filter->MatchesAll()) {
      Fail("NOT (f) matches the same job as f", text);
    }
  }
  return 0;
}
