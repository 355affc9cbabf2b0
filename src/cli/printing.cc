// gcloud's output conventions on top of output_format.h: one resource, or a
// list after --filter, --sort-by and --limit, in the --format asked for.
#include <algorithm>
#include <iostream>

#include "cli/commands.h"

namespace stoker::cli {

using nlohmann::json;

bool Structured(const Globals& g) { return g.output.kind != FormatKind::kText; }

void PrintResource(const Globals& g, const json& resource) {
  std::cout << FormatResource(resource, g.output);
}

Result<std::vector<json>> SelectForList(const Globals& g, std::vector<json> items,
                                        bool* printed) {
  *printed = false;
  if (g.list.sort_by.empty()) {
    // Newest first, as gcloud lists; RFC 3339 UTC times order as text.
    std::stable_sort(items.begin(), items.end(), [](const json& a, const json& b) {
      return a.value("createTime", "") > b.value("createTime", "");
    });
  }
  STOKER_ASSIGN_OR_RETURN(items, ApplyListFlags(std::move(items), g.list));
  if (Structured(g)) {
    std::cout << FormatList(items, g.output);
    *printed = true;
  }
  return items;
}

}  // namespace stoker::cli
