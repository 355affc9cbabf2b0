// The replica log's reader half: the stream stoker-run's RotatingLog
// (runner/log_rotation.h, the writer, whose top comment describes the
// files) leaves in a replica directory, read as one stream of bytes
// numbered from 0 since the replica started, with the marks that date its
// lines. Safe in any process while the supervisor writes (the daemon's
// executors read logs and tails through it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stoker::replica {

// One entry of log_state.json.
struct LogFile {
  std::string name;  // "output.log", "output.log.1", ...
  uint64_t ino = 0;
  uint64_t start = 0;  // offset of its first byte in the replica's log stream
};

// A mark of output.times: the line starting at `offset` of the stream was
// written at `time_us` (Unix microseconds).
struct LogMark {
  uint64_t offset = 0;
  int64_t time_us = 0;
  bool operator==(const LogMark& o) const { return offset == o.offset && time_us == o.time_us; }
};
constexpr int64_t kLogMarkIntervalUs = 50'000;
constexpr size_t kLogMarkBytes = 16;
constexpr uint64_t kLogMarkSlackBytes = 4096;  // 256 marks before the log must pay for them

// Parses log_state.json (newest first). InvalidArgument when malformed.
Result<std::vector<LogFile>> ParseLogState(std::string_view json);

// A piece of a replica's log stream.
struct LogRead {
  std::string data;          // never spans two files; empty at the end
  uint64_t offset = 0;       // where `data` starts (> the asked offset if skipped)
  uint64_t skipped = 0;      // bytes before `offset` that rotation already deleted
  uint64_t next_offset = 0;  // offset + data.size()
  uint64_t size = 0;         // the stream's length now
};

// Reads up to `max_bytes` of DIR's log stream from `offset`. A missing
// output.log reads as an empty stream. Retries briefly when it catches a
// rotation in flight; Unavailable if the files keep changing under it.
Result<LogRead> ReadLogStream(const std::filesystem::path& dir, uint64_t offset, size_t max_bytes);

// The marks that date the stream's bytes [from, to): the latest one at or
// before `from` (when rotation has not deleted it), then every mark in
// (from, to), by offset. Missing or unreadable index files read as no marks:
// the times are a best effort (a rotation in flight may hide some).
std::vector<LogMark> ReadLogMarks(const std::filesystem::path& dir, uint64_t from, uint64_t to);

// The stream's last `max_bytes` bytes (fewer if it is shorter), taken from
// output.log.1 as well when output.log holds fewer: right after a rotation
// the tail is still there. "" when there is no log.
std::string ReadLogTail(const std::filesystem::path& dir, size_t max_bytes);

}  // namespace stoker::replica
