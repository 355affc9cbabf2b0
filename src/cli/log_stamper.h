// `--timestamps` on the log commands: a replica's log as lines, each prefixed
// with when stoker-run wrote it (RFC 3339 UTC, milliseconds).
//
// The daemon dates a log chunk with marks (GET .../logs?replica=R&times=1:
// "times": [[index in data, Unix microseconds], ...]); a line's time is that
// of the latest mark at or before its first byte. stoker-run keeps at most
// one mark per 50 ms (runner/log_rotation.h), so lines written within 50 ms of
// a mark carry the mark's time. Pure; one LineStamper per replica stream.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace stoker::cli {

// "2026-11-26T14:31:02.123Z" for Unix microseconds.
std::string FormatLogTime(int64_t micros);

class LineStamper {
 public:
  // `prefix` goes after the time ("workerpool0-0: " when several replicas).
  explicit LineStamper(std::string prefix = "") : prefix_(std::move(prefix)) {}

  // The next chunk of the stream and its marks: returns its whole lines,
  // stamped; an unterminated last line waits for the next chunk. A line
  // with no mark at or before it (an older daemon, a notice) gets no time.
  std::string Add(std::string_view data, const nlohmann::json& times);
  // The held unterminated line, stamped and ended; "" when there is none.
  std::string Flush();

 private:
  std::string Stamp(int64_t time) const;

  std::string prefix_;
  std::string partial_;
  int64_t partial_time_ = -1;  // the time of partial_'s first byte
  int64_t last_time_ = -1;     // the latest mark seen
};

}  // namespace stoker::cli
