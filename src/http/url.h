// Internal helpers of stoker_http for taking apart request targets. Not part
// of the public surface (see http.h); no Beast here so they compile fast and
// are unit-tested on their own.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace stoker::http::internal {

// Decodes %XX escapes. A '%' not followed by two hex digits is kept as is.
// With `plus_as_space`, '+' becomes ' ' (form encoding, used in queries).
std::string PercentDecode(std::string_view s, bool plus_as_space);

// Splits a request target ("/a%20b?x=1&y") into its decoded path ("/a b")
// and decoded query parameters ({x: "1", y: ""}). When a name repeats, the
// last value wins.
void ParseTarget(std::string_view target, std::string* path,
                 std::map<std::string, std::string>* query);

}  // namespace stoker::http::internal
