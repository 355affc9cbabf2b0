// bytes -> JSON -> spec::ParseHyperparameterTuningJob -> ToJson -> parse
// again: the round trip must give an equal job (study.h contract).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fail.h"
#include "spec/study.h"

namespace {

using stoker::fuzz::Fail;
using nlohmann::json;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = stoker::fuzz::JsonInput(data, size);
  if (!parsed) return 0;
  const json& input = *parsed;
  auto job = stoker::spec::ParseHyperparameterTuningJob(input);
  if (!job.ok()) return 0;
  (void)stoker::spec::Validate(*job);
  json out = stoker::spec::ToJson(*job);
  auto again = stoker::spec::ParseHyperparameterTuningJob(out);
  if (!again.ok())
    Fail("ToJson output does not re-parse", again.status().message() + "\n" + out.dump(2));
  if (!(*again == *job)) Fail("round trip changed the job", out.dump(2));
  std::string text = out.dump();  // input was valid JSON, so valid UTF-8
  auto from_text = stoker::spec::ParseHyperparameterTuningJob(json::parse(text));
  if (!from_text.ok() || !(*from_text == *job)) Fail("text round trip changed the job", text);
  return 0;
}
