// bytes -> lines -> the flag parsers of `gcloud ai custom-jobs create`
// (spec/gcloud_flags.h): every line is a --worker-pool-spec value, except
// lines starting --args= / --command= / --python-package-uris=, which are
// those list flags (SplitGcloudList). When the pools parse, MergeGcloudFlags
// runs, and its result goes through ParseCustomJob -> ToJson -> ParseCustomJob,
// which must round-trip. No input may crash, leak or trip a sanitizer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fail.h"
#include "spec/custom_job.h"
#include "spec/gcloud_flags.h"

namespace {

using stoker::fuzz::Fail;
using nlohmann::json;

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);

  std::vector<std::string> values;
  stoker::spec::GcloudJobFlags flags;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (end == text.size() && line.empty() && !values.empty()) break;  // trailing newline
    // Every line is a list value too: SplitGcloudList must take anything.
    std::vector<std::string> items = stoker::spec::SplitGcloudList(line);
    for (const std::string& item : items) {
      if (item.size() > line.size()) Fail("SplitGcloudList grew an item", line);
    }
    if (StartsWith(line, "--args=")) {
      flags.args = stoker::spec::SplitGcloudList(line.substr(7));
    } else if (StartsWith(line, "--command=")) {
      flags.command = stoker::spec::SplitGcloudList(line.substr(10));
    } else if (StartsWith(line, "--python-package-uris=")) {
      flags.python_package_uris = stoker::spec::SplitGcloudList(line.substr(22));
    } else {
      values.push_back(line);
    }
  }

  auto pools = stoker::spec::ParseWorkerPoolSpecFlags(values);
  if (!pools.ok()) {
    if (pools.status().message().empty()) Fail("error without a message", text);
    return 0;
  }
  if (pools->pools.size() != values.size()) Fail("one pool per value expected", text);
  if (pools->local) (void)stoker::spec::ScriptCommand(pools->local->script);
  flags.worker_pools = pools->pools;

  auto merged = stoker::spec::MergeGcloudFlags(nullptr, flags);
  if (!merged.ok()) return 0;
  auto job = stoker::spec::ParseCustomJob(*merged);
  if (!job.ok()) return 0;
  if (job->display_name.empty()) job->display_name = "fuzz";
  (void)stoker::spec::Validate(*job);
  json out = stoker::spec::ToJson(*job);
  auto again = stoker::spec::ParseCustomJob(out);
  if (!again.ok())
    Fail("ToJson output does not re-parse", again.status().message() + "\n" + out.dump(2));
  if (!(*again == *job)) Fail("round trip changed the job", out.dump(2));
  return 0;
}
