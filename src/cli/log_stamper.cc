#include "cli/log_stamper.h"

#include "common/time.h"

namespace stoker::cli {

std::string FormatLogTime(int64_t micros) {
  // Floor to milliseconds, so a line never shows a time later than it had.
  int64_t ms = micros >= 0 ? micros / 1000 : (micros - 999) / 1000;
  std::string t = FormatRfc3339(ms * 1000);  // "...:02.123000Z"
  return t.substr(0, t.size() - 4) + "Z";
}

std::string LineStamper::Stamp(int64_t time) const {
  return (time < 0 ? std::string() : FormatLogTime(time) + " ") + prefix_;
}

std::string LineStamper::Add(std::string_view data, const nlohmann::json& times) {
  std::string out;
  size_t next_mark = 0;
  // The time of the byte at `pos`: the latest mark at or before it.
  auto time_at = [&](size_t pos) {
    while (times.is_array() && next_mark < times.size()) {
      const nlohmann::json& m = times[next_mark];
      if (!m.is_array() || m.size() != 2 || !m[0].is_number_integer() || m[0].get<int64_t>() < 0 ||
          !m[1].is_number_integer() || m[0].get<uint64_t>() > pos) {
        break;
      }
      last_time_ = m[1].get<int64_t>();
      ++next_mark;
    }
    return last_time_;
  };
  size_t start = 0;
  while (start < data.size()) {
    if (partial_.empty()) partial_time_ = time_at(start);
    size_t nl = data.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(data.substr(start));
      break;
    }
    out += Stamp(partial_time_) + partial_;
    out.append(data.substr(start, nl - start + 1));
    partial_.clear();
    start = nl + 1;
  }
  time_at(data.size());  // later chunks start after every mark of this one
  return out;
}

std::string LineStamper::Flush() {
  if (partial_.empty()) return "";
  std::string out = Stamp(partial_time_) + partial_ + "\n";
  partial_.clear();
  return out;
}

}  // namespace stoker::cli
