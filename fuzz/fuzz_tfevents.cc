// bytes -> a TensorBoard event file (tfevents::ReadRecords), read whole and
// again in two halves as a growing file would be, plus the bytes as one
// record's data (DecodeEvent) and as a tag (SanitizeTag). Properties: no
// crash, no sanitizer report, the reader only moves forward and stays inside
// the file, every kept value is finite, every series name is clean, and
// reading in two steps gives what reading at once gives.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "fail.h"
#include "tfevents/event_file.h"

using stoker::fuzz::Fail;
using namespace stoker::tfevents;

namespace {

// Small bounds, so that the fuzzer reaches them.
Limits SmallLimits() {
  Limits l;
  l.max_record_bytes = 2048;
  l.max_tags = 8;
  l.max_tag_bytes = 32;
  l.max_points = 4;
  l.max_values_per_event = 16;
  return l;
}

void CheckState(const FileState& s, size_t size, const std::string& input) {
  if (s.offset > size) Fail("offset past the end of the file", input);
  if (s.problems.size() > 16) Fail("more than 16 problems", input);
  if (s.series.size() > SmallLimits().max_tags) Fail("more series than max_tags", input);
  for (const auto& [name, series] : s.series) {
    if (name.empty() || SanitizeTag(name) != name) Fail("a series name is not clean", name);
    std::vector<Point> points = series.Points();
    if (points.size() > 2 * SmallLimits().max_points + 1) Fail("too many points kept", input);
    for (const Point& p : points) {
      if (!std::isfinite(p.value)) Fail("a non-finite value was kept", input);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string input(bytes);
  const Limits limits = SmallLimits();

  FileState whole;
  ReadRecords(StringSource(bytes), limits, whole);
  CheckState(whole, size, input);

  FileState halves;
  ReadRecords(StringSource(bytes.substr(0, size / 2)), limits, halves);
  uint64_t first_offset = halves.offset;
  ReadRecords(StringSource(bytes), limits, halves);
  CheckState(halves, size, input);
  if (halves.offset < first_offset) Fail("the reader moved backwards", input);
  if (halves.offset != whole.offset || halves.records != whole.records ||
      halves.error != whole.error || halves.series.size() != whole.series.size()) {
    Fail("reading in two steps differs from reading at once", input);
  }

  std::string why;
  if (auto e = DecodeEvent(bytes, limits, &why)) {
    if (e->values.size() > limits.max_values_per_event) Fail("too many values decoded", input);
    for (const SummaryValue& v : e->values) {
      if (v.tag.size() > limits.max_tag_bytes) Fail("a tag longer than the bound", input);
    }
  } else if (why.empty()) {
    Fail("a refused event without a reason", input);
  }

  std::string clean = SanitizeTag(bytes);
  for (unsigned char c : clean) {
    if (c < 0x20 || c == 0x7f) Fail("a control character survived SanitizeTag", clean);
  }
  if (SanitizeTag(clean) != clean) Fail("SanitizeTag is not idempotent", input);
  return 0;
}
