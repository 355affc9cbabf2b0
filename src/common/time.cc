#include "common/time.h"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace stoker {

int64_t ToMicros(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
TimePoint FromMicros(int64_t us) { return TimePoint(std::chrono::microseconds(us)); }
int64_t NowMicros() { return ToMicros(Clock::now()); }

std::string FormatRfc3339(int64_t micros) {
  time_t secs = static_cast<time_t>(micros / 1000000);
  int64_t frac = micros % 1000000;
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(frac));
  return buf;
}

Result<double> ParseDuration(const std::string& text, const std::string& field) {
  std::string t = text;
  if (!t.empty() && t.back() == 's') t.pop_back();
  if (t.empty()) {
    return InvalidArgument(field + ": '" + text +
                           "' is not a duration; write seconds like \"3600s\"");
  }
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  // google.protobuf.Duration's range: up to 315,576,000,000 s (10,000 years).
  if (end == nullptr || *end != '\0' || !std::isfinite(v) || v < 0 || v > 315576000000.0) {
    return InvalidArgument(field + ": '" + text +
                           "' is not a duration; write seconds from 0 to 315576000000 like \"3600s\"");
  }
  return v;
}

std::string FormatDuration(double seconds) {
  char buf[64];
  if (seconds == std::floor(seconds) && std::fabs(seconds) < 1e15) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(seconds));
  } else {
    std::snprintf(buf, sizeof buf, "%.9f", seconds);
    std::string s = buf;  // trim trailing zeros: "0.500000000" -> "0.5"
    while (s.back() == '0') s.pop_back();
    return s + "s";
  }
  return buf;
}

}  // namespace stoker
