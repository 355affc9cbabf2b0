// The replica log: output.log, bounded by rotation.
//
// The trainer's stdout and stderr go into a pipe; stoker-run copies them into
// DIR/output.log. When the next write would take output.log past
// `max_bytes`, it is renamed output.log.1 (output.log.1 becomes .2, and so
// on up to .`max_files`; the oldest is deleted) and a new output.log begins.
// So the files of one replica never hold more than max_bytes * (max_files+1).
//
// Rotation cuts at a line end whenever one fits (PlanWrite), and the pump
// holds back a trailing partial line for a moment, so a line is split across
// files only when it is longer than the room left or the trainer paused in
// the middle of it.
//
// Readers (the API, the failure message) see the log as one stream: bytes
// numbered from 0 since the replica started. After the first rotation
// DIR/log_state.json says where each file starts in that stream:
//   {"files": [{"name": "output.log", "ino": N, "start": S}, {"name":
//   "output.log.1", ...}, ...]}   newest first
// written atomically after each rotation. A reader that opens a file whose
// inode differs from the entry caught a rotation in flight and should retry.
// Without log_state.json there has been no rotation: output.log starts at 0.
//
// When lines were written: beside output.log, DIR/output.times (and
// output.times.N beside output.log.N, rotated with it) holds marks of
// kLogMarkBytes each: the stream offset of a line start (uint64) and the
// Unix time in microseconds stoker-run wrote that line to output.log (int64),
// both little-endian, offsets increasing. Not every line has a mark: each
// file's first line start has one, and later a line start gets one when at
// least kLogMarkIntervalUs passed since the file's previous mark and the
// index stays within its log file's size (up to the line) plus
// kLogMarkSlackBytes. A line's time is that of the latest mark at or before
// its start, so it is exact to within the interval while the trainer writes
// more than a mark's size per line on average, and the index files never
// outgrow the logs by more than kLogMarkSlackBytes each.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "replica/log_stream.h"
#include "replica/replica_contract.h"

namespace stoker::runner {

// launch.json's log_max_bytes / log_max_files (the replica contract).
using replica::LogLimits;
// The stream's files and line marks (replica/log_stream.h, the reader half).
using replica::kLogMarkBytes;
using replica::kLogMarkIntervalUs;
using replica::kLogMarkSlackBytes;
using replica::LogFile;
using replica::LogMark;

// The next step of writing `data` to a file that holds `size` bytes: either
// rotate first (`rotate`, with `write` 0) or write the first `write` bytes of
// `data` into the current file. It writes up to the last line end that fits;
// it rotates when no line end fits (so a line that started in this file is
// cut only when it does not fit, and a new line never is); it cuts inside a
// line only in an empty file (a line longer than a whole file). Applied
// repeatedly to the rest, it never makes a file exceed `max_bytes` (> 0;
// 0 means "write everything") and always makes progress. Pure.
struct WriteStep {
  bool rotate = false;
  size_t write = 0;
};
WriteStep PlanWrite(uint64_t size, std::string_view data, uint64_t max_bytes);

// DIR/output.log with rotation. Not thread-safe: one writer at a time (the
// pump's writer thread while it runs, the supervisor before and after).
// Also keeps output.times (see the top); a failure to write a mark is
// reported once on stderr and ends the marks, never the log.
class RotatingLog {
 public:
  // `now_us`: the clock of the marks (Unix microseconds); tests set it.
  RotatingLog(std::filesystem::path dir, LogLimits limits,
              std::function<int64_t()> now_us = nullptr);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  // Opens (creating) output.log for appending; output.times at the first
  // write that earns a mark.
  Status Open();
  // Appends `data`, rotating as PlanWrite says, and marks its lines' time.
  // Errors name the file.
  Status Write(std::string_view data);
  // Whether the last byte written ended a line (true before any).
  bool AtLineStart() const { return at_line_start_; }

 private:
  Status Rotate();
  // Adds the marks that `part`, about to be written at the end of
  // output.log, earns (see the top).
  void Mark(std::string_view part, int64_t now);
  void OpenTimes(bool fresh);

  std::filesystem::path dir_;
  LogLimits limits_;
  std::function<int64_t()> now_us_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<LogFile> files_;  // newest first; [0] is output.log
  int times_fd_ = -1;           // output.times; -1 when marks failed
  bool times_pending_ = false;  // opened at the next Mark (Open defers it)
  bool times_failed_ = false;
  bool at_line_start_ = true;  // the next byte written starts a line
  bool file_marked_ = false;   // output.times has a mark for this output.log
  uint64_t file_marks_ = 0;    // marks in output.times
  LogMark last_mark_;
};

// Copies a pipe into a sink (RotatingLog::Write) on two threads of its own: a
// reader that drains the pipe into memory and a writer that calls the sink.
// The reader never waits for the writer, so the trainer never waits on a
// slow disk: when more than `buffer_limit` bytes are queued, the oldest
// queued output is dropped (the newest, which error messages quote, is
// kept) and the writer puts a line saying how many bytes went missing where
// they went missing. A sink error is reported once on stderr and the rest of
// the output dropped. The sink is called from the writer thread only.
class LogPump {
 public:
  using Sink = std::function<Status(std::string_view)>;
  // Takes ownership of `read_fd`; `sink` must stay callable until Finish.
  LogPump(int read_fd, Sink sink, size_t buffer_limit = 8u << 20);
  ~LogPump();  // Finish(0) if not done
  LogPump(const LogPump&) = delete;
  LogPump& operator=(const LogPump&) = delete;

  // Waits up to `wait_ms` for the pipe's end of file (every writer gone),
  // then takes what is left in the pipe, writes everything and joins the
  // threads. Idempotent.
  void Finish(int wait_ms);

 private:
  void ReadLoop();
  void WriteLoop();

  int fd_;
  int stop_fd_;  // eventfd: tells the reader to drain and stop
  Sink sink_;
  size_t buffer_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Output read but not yet written, one piece per read, oldest first; what
  // was dropped lies before its front. Guarded by mu_, like the others.
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool eof_ = false;  // guarded by mu_
  std::thread reader_, writer_;
  bool finished_ = false;
};

}  // namespace stoker::runner
