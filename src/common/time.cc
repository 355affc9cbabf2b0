#include "common/time.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string_view>

namespace stoker {
namespace {

bool Digits(std::string_view s, size_t at, size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// Days from 1970-01-01 to y-m-d (proleptic Gregorian), Howard Hinnant's way.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace

int64_t ToMicros(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
TimePoint FromMicros(int64_t us) { return TimePoint(std::chrono::microseconds(us)); }
int64_t NowMicros() { return ToMicros(std::chrono::system_clock::now()); }

int64_t MonotonicMs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

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

std::optional<int64_t> ParseRfc3339Micros(const std::string& text) {
  std::string_view s = text;
  int y, mo, d, h, mi, sec;
  if (!Digits(s, 0, 4, &y) || s.size() < 20 || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
      !Digits(s, 11, 2, &h) || s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' ||
      !Digits(s, 17, 2, &sec)) {
    return std::nullopt;
  }
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || h > 23 || mi > 59 || sec > 60) {
    return std::nullopt;
  }
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo == 2 && d == 29 && !leap) return std::nullopt;
  size_t i = 19;
  int64_t frac_us = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    size_t start = i;
    int64_t scale = 100000;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      frac_us += (s[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    if (i == start || i - start > 9) return std::nullopt;
  }
  int64_t offset_s = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh, om;
    if (!Digits(s, i + 1, 2, &oh) || i + 3 >= s.size() || s[i + 3] != ':' ||
        !Digits(s, i + 4, 2, &om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_s = (oh * 3600 + om * 60) * (s[i] == '+' ? 1 : -1);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  int64_t secs = DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  return secs * 1000000 + frac_us;
}

}  // namespace stoker
