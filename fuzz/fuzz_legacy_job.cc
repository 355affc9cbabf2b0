// bytes -> JSON -> spec::FromLegacyJob (the AI Platform REST body,
// POST /v1/projects/{p}/jobs): whatever comes in, a conversion that succeeds
// must give a CustomJob that passes Validate and survives the ToJson /
// ParseCustomJob round trip (ai_platform.h: "validated").
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fail.h"
#include "spec/ai_platform.h"

namespace {

using stoker::fuzz::Fail;
using nlohmann::json;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = stoker::fuzz::JsonInput(data, size);
  if (!parsed) return 0;
  const json& input = *parsed;
  auto legacy = stoker::spec::FromLegacyJob(input);
  if (!legacy.ok()) {
    if (legacy.status().message().empty()) Fail("an error without a message", input.dump());
    return 0;
  }
  if (auto s = stoker::spec::Validate(legacy->job); !s.ok()) {
    Fail("the converted job does not validate", s.message() + "\n" + input.dump(2));
  }
  json out = stoker::spec::ToJson(legacy->job);
  auto again = stoker::spec::ParseCustomJob(out);
  if (!again.ok()) {
    Fail("the converted job does not re-parse", again.status().message() + "\n" + out.dump(2));
  }
  if (!(*again == legacy->job)) Fail("round trip changed the job", out.dump(2));
  // The legacy view of it must render whatever the state.
  (void)stoker::spec::ToLegacyJob(input.value("jobId", "j"), input.value("trainingInput", json()),
                                  "JOB_STATE_RUNNING", "", "", "", "");
  return 0;
}
