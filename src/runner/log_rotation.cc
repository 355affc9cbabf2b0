#include "runner/log_rotation.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/files.h"
#include "common/time.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// A trailing line without its newline is held back this long (or until it
// grows this big) in the hope that the rest arrives, so that rotation does
// not cut it; then it is written as it is (a progress bar, a prompt).
constexpr int kHoldBackMs = 100;
constexpr size_t kMaxHeldBack = 64 * 1024;

std::string FileName(int index) {
  return index == 0 ? "output.log" : "output.log." + std::to_string(index);
}

// The index of FileName(index)'s line times.
std::string TimesName(int index) {
  return index == 0 ? "output.times" : "output.times." + std::to_string(index);
}

// Opens DIR/output.log (`flags` | O_WRONLY | O_APPEND) for root in a
// directory the trainer's account owns: never through a symbolic link
// (O_NOFOLLOW), never a FIFO left to block us (O_NONBLOCK), and only a
// regular file with no other name (a hard link the trainer made to a file
// of root's would have two). The fd, or -1 with errno set.
int OpenOwnLog(const fs::path& path, int flags) {
  int fd =
      ::open(path.c_str(), flags | O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  struct stat st = {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

void Complain(const std::string& line) {
  std::string l = "stoker-run[" + std::to_string(::getpid()) + "]: " + line + "\n";
  ssize_t n = ::write(STDERR_FILENO, l.data(), l.size());
  (void)n;
}

}  // namespace

WriteStep PlanWrite(uint64_t size, std::string_view data, uint64_t max_bytes) {
  if (max_bytes == 0) return {false, data.size()};
  uint64_t room = size < max_bytes ? max_bytes - size : 0;
  if (data.size() <= room) return {false, data.size()};
  if (room > 0) {
    size_t nl = data.substr(0, static_cast<size_t>(room)).rfind('\n');
    if (nl != std::string_view::npos) return {false, nl + 1};
    // A line longer than a whole file: cut it at the file's end.
    if (size == 0) return {false, static_cast<size_t>(room)};
  }
  return {true, 0};
}

RotatingLog::RotatingLog(fs::path dir, LogLimits limits, std::function<int64_t()> now_us)
    : dir_(std::move(dir)), limits_(limits), now_us_(std::move(now_us)) {
  if (limits_.max_files < 1) limits_.max_files = 1;
  if (!now_us_) now_us_ = NowMicros;
}

RotatingLog::~RotatingLog() {
  if (fd_ >= 0) ::close(fd_);
  if (times_fd_ >= 0) ::close(times_fd_);
}

void RotatingLog::OpenTimes(bool fresh) {
  times_pending_ = false;
  if (times_fd_ >= 0) ::close(times_fd_);
  times_fd_ = -1;
  file_marked_ = false;
  file_marks_ = 0;
  if (times_failed_) return;
  fs::path path = dir_ / TimesName(0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    times_fd_ = OpenOwnLog(path, fresh ? O_CREAT | O_EXCL : O_CREAT);
    if (times_fd_ >= 0 || errno != EEXIST) break;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) break;
  }
  if (times_fd_ < 0) {
    Complain("cannot open " + path.string() + ": " + std::strerror(errno) +
             "; the log's lines will have no times");
    times_failed_ = true;
  }
}

void RotatingLog::Mark(std::string_view part, int64_t now) {
  if (times_pending_) OpenTimes(/*fresh=*/false);
  if (times_fd_ < 0) return;
  uint64_t base = files_.front().start + size_;
  size_t pos = 0;
  if (!at_line_start_) {
    size_t nl = part.find('\n');
    if (nl == std::string_view::npos) return;
    pos = nl + 1;
  }
  while (pos < part.size()) {
    uint64_t offset = base + pos;
    if (file_marked_ && now - last_mark_.time_us < kLogMarkIntervalUs) return;
    if ((file_marks_ + 1) * kLogMarkBytes <= offset - files_.front().start + kLogMarkSlackBytes) {
      unsigned char rec[kLogMarkBytes];
      for (size_t i = 0; i < 8; ++i) {
        rec[i] = static_cast<unsigned char>(offset >> (8 * i));
        rec[8 + i] = static_cast<unsigned char>(static_cast<uint64_t>(now) >> (8 * i));
      }
      ssize_t n;
      do {
        n = ::write(times_fd_, rec, sizeof rec);
      } while (n < 0 && errno == EINTR);
      if (n != static_cast<ssize_t>(sizeof rec)) {
        Complain("cannot write " + (dir_ / TimesName(0)).string() + ": " +
                 std::strerror(n < 0 ? errno : ENOSPC) + "; later lines will have no times");
        ::close(times_fd_);
        times_fd_ = -1;
        times_failed_ = true;
        return;
      }
      last_mark_ = {offset, now};
      file_marked_ = true;
      ++file_marks_;
      return;  // the next mark needs a later Write (the interval)
    }
    size_t nl = part.find('\n', pos);
    if (nl == std::string_view::npos) return;
    pos = nl + 1;
  }
}

Status RotatingLog::Open() {
  fs::path path = dir_ / FileName(0);
  fd_ = OpenOwnLog(path, O_CREAT);
  struct stat st = {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
    return Internal("cannot open " + path.string() + ": " + std::strerror(errno) +
                    (errno == ELOOP || errno == EPERM
                         ? " (it must be a regular file, not a link: stoker-run writes it as root)"
                         : ""));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  files_ = {{FileName(0), static_cast<uint64_t>(st.st_ino), 0}};
  // output.times is opened at the first mark: for a trainer's log that is
  // after the fork, one file creation fewer on the way to its start.
  times_pending_ = true;
  return OkStatus();
}

Status RotatingLog::Rotate() {
  ::close(fd_);
  fd_ = -1;
  // output.log.(n-1) -> .n (replacing the oldest), ..., output.log -> .1.
  for (int i = limits_.max_files; i >= 1; --i) {
    fs::path from = dir_ / FileName(i - 1), to = dir_ / FileName(i);
    if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) {
      return Internal("cannot rotate " + from.string() + " to " + to.string() + ": " +
                      std::strerror(errno));
    }
    // The line times go with their log; losing them loses no output.
    fs::path tfrom = dir_ / TimesName(i - 1), tto = dir_ / TimesName(i);
    if (::rename(tfrom.c_str(), tto.c_str()) != 0 && errno != ENOENT) {
      ::unlink(tfrom.c_str());
    }
  }
  OpenTimes(/*fresh=*/true);
  uint64_t next_start = files_.front().start + size_;
  fs::path path = dir_ / FileName(0);
  // A new file: whatever took the name since the rename (a link the trainer
  // planted) is removed, not opened.
  for (int attempt = 0; attempt < 10; ++attempt) {
    fd_ = OpenOwnLog(path, O_CREAT | O_EXCL);
    if (fd_ >= 0 || errno != EEXIST) break;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) break;
  }
  struct stat st = {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
    return Internal("cannot open " + path.string() + " after rotating: " + std::strerror(errno));
  }
  size_ = 0;
  files_.insert(files_.begin(), LogFile{"", static_cast<uint64_t>(st.st_ino), next_start});
  if (files_.size() > static_cast<size_t>(limits_.max_files) + 1) files_.pop_back();
  nlohmann::json state = {{"files", nlohmann::json::array()}};
  for (size_t i = 0; i < files_.size(); ++i) {
    files_[i].name = FileName(static_cast<int>(i));
    state["files"].push_back(
        {{"name", files_[i].name}, {"ino", files_[i].ino}, {"start", files_[i].start}});
  }
  return WriteFileAtomic(dir_ / "log_state.json", state.dump() + "\n", Durability::kNoSync);
}

Status RotatingLog::Write(std::string_view data) {
  const int64_t now = now_us_();
  while (!data.empty()) {
    if (fd_ < 0) return FailedPrecondition((dir_ / FileName(0)).string() + " is not open");
    WriteStep step = PlanWrite(size_, data, limits_.max_bytes);
    if (step.rotate) {
      STOKER_RETURN_IF_ERROR(Rotate());
      continue;
    }
    std::string_view part = data.substr(0, step.write);
    Mark(part, now);
    at_line_start_ = !part.empty() && part.back() == '\n';
    while (!part.empty()) {
      ssize_t n = ::write(fd_, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return Internal("cannot write " + (dir_ / FileName(0)).string() + ": " +
                        std::strerror(n < 0 ? errno : ENOSPC));
      }
      part.remove_prefix(static_cast<size_t>(n));
      size_ += static_cast<uint64_t>(n);
    }
    data.remove_prefix(step.write);
  }
  return OkStatus();
}

LogPump::LogPump(int read_fd, Sink sink, size_t buffer_limit)
    : fd_(read_fd), sink_(std::move(sink)), buffer_limit_(buffer_limit) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  reader_ = std::thread([this] { ReadLoop(); });
  writer_ = std::thread([this] { WriteLoop(); });
}

LogPump::~LogPump() { Finish(0); }

void LogPump::Finish(int wait_ms) {
  if (finished_) return;
  finished_ = true;
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return eof_; });
  }
  uint64_t one = 1;
  ssize_t n = ::write(stop_fd_, &one, sizeof one);
  (void)n;
  reader_.join();
  writer_.join();
  ::close(fd_);
  ::close(stop_fd_);
}

void LogPump::ReadLoop() {
  std::vector<char> buf(64 * 1024);
  bool stopping = false;
  while (true) {
    if (!stopping) {
      pollfd p[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
      // Stop requested: take what the pipe holds now, then end.
      if (p[1].revents != 0) stopping = true;
    }
    ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n > 0) {
      std::lock_guard lock(mu_);
      queue_.emplace_back(buf.data(), static_cast<size_t>(n));
      queued_bytes_ += static_cast<size_t>(n);
      // Over the limit: drop the oldest pieces, never the newest.
      while (queued_bytes_ > buffer_limit_ && queue_.size() > 1) {
        queued_bytes_ -= queue_.front().size();
        dropped_ += queue_.front().size();
        queue_.pop_front();
      }
      cv_.notify_all();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !stopping) continue;
    break;  // end of file, drained after a stop, or an error
  }
  std::lock_guard lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

void LogPump::WriteLoop() {
  std::unique_lock lock(mu_);
  int64_t partial_since = -1;  // when the held-back partial line was first seen
  bool failed = false;
  bool at_line_start = true;  // the last byte handed to the sink was a newline
  while (true) {
    bool eof = eof_;
    std::string data;
    data.reserve(queued_bytes_);
    for (const std::string& piece : queue_) data += piece;
    queue_.clear();
    queued_bytes_ = 0;
    uint64_t dropped = dropped_;
    dropped_ = 0;
    // Hold back a trailing partial line for a moment (see kHoldBackMs).
    size_t keep = data.size();
    size_t nl = data.rfind('\n');
    size_t partial = nl == std::string::npos ? 0 : nl + 1;
    if (partial < data.size()) {
      int64_t now = MonotonicMs();
      if (nl != std::string::npos || partial_since < 0) partial_since = now;
      if (!eof && data.size() - partial < kMaxHeldBack && now - partial_since < kHoldBackMs) {
        keep = partial;
      }
    } else {
      partial_since = -1;
    }
    if (keep < data.size()) {
      queue_.push_front(data.substr(keep));
      queued_bytes_ += data.size() - keep;
      data.resize(keep);
    } else {
      partial_since = -1;
    }
    if (dropped > 0) {
      // The gap lies before what is queued now.
      data.insert(0, std::string(at_line_start ? "" : "\n") +
                         "stoker-run: " + std::to_string(dropped) +
                         " bytes of output dropped here: the disk did not keep up\n");
    }
    if (data.empty()) {
      if (eof && queue_.empty()) break;
      if (partial_since >= 0) {
        cv_.wait_for(lock, std::chrono::milliseconds(kHoldBackMs));
      } else {
        cv_.wait(lock);
      }
      continue;
    }
    lock.unlock();
    at_line_start = data.back() == '\n';
    if (!failed) {
      Status s = sink_(data);
      if (!s.ok()) {
        Complain(s.message() + "; dropping the rest of the trainer's output");
        failed = true;
      }
    }
    lock.lock();
  }
}

}  // namespace stoker::runner
