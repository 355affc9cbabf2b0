// bytes -> ParseYamlOrJson (and nlohmann's own JSON parser, the REST path)
// -> spec::ParseCustomJob -> ToJson -> text -> parse again: the round trip
// must give an equal job (custom_job.h: ParseCustomJob(ToJson(job)) == job).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fail.h"
#include "common/json_yaml.h"
#include "spec/custom_job.h"

namespace {

using stoker::fuzz::Fail;
using nlohmann::json;
using stoker::spec::CustomJob;

void RoundTrip(const json& input) {
  auto job = stoker::spec::ParseCustomJob(input);
  if (!job.ok()) return;
  // A bare CustomJobSpec parses with an empty displayName, which the CLI
  // fills before Validate(); do the same so the printed form is a whole job.
  if (job->display_name.empty()) job->display_name = "fuzz";
  (void)stoker::spec::Validate(*job);
  (void)stoker::spec::UnhonouredFields(*job);
  json out = stoker::spec::ToJson(*job);

  auto again = stoker::spec::ParseCustomJob(out);
  if (!again.ok())
    Fail("ToJson output does not re-parse", again.status().message() + "\n" + out.dump(2));
  if (!(*again == *job)) Fail("round trip changed the job", out.dump(2));

  // The store keeps the JSON text: text -> parse must also round-trip.
  std::string text;
  try {
    text = out.dump();
  } catch (const json::type_error&) {
    return;  // invalid UTF-8 that came in through YAML; nlohmann refuses to print it
  }
  json reparsed = json::parse(text, nullptr, false);
  if (reparsed.is_discarded()) Fail("ToJson text is not valid JSON", text);
  auto from_text = stoker::spec::ParseCustomJob(reparsed);
  if (!from_text.ok())
    Fail("ToJson text does not re-parse", from_text.status().message() + "\n" + text);
  if (!(*from_text == *job)) Fail("text round trip changed the job", text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  // The REST API parses bodies with nlohmann directly.
  json direct = json::parse(text, nullptr, false);
  if (!direct.is_discarded()) RoundTrip(direct);
  // Job files (CLI --config) go through YAML.
  auto parsed = stoker::ParseYamlOrJson(text, "fuzz");
  if (parsed.ok()) RoundTrip(*parsed);
  return 0;
}
