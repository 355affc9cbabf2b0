#include "replica/log_stream.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "common/files.h"

namespace stoker::replica {

namespace fs = std::filesystem;

Result<std::vector<LogFile>> ParseLogState(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("files") ||
      !doc["files"].is_array()) {
    return InvalidArgument("log_state.json: expected {\"files\": [...]}");
  }
  std::vector<LogFile> out;
  for (const auto& f : doc["files"]) {
    if (!f.is_object() || !f.value("name", nlohmann::json()).is_string() ||
        !f.value("ino", nlohmann::json()).is_number_unsigned() ||
        !f.value("start", nlohmann::json()).is_number_unsigned()) {
      return InvalidArgument("log_state.json: files[" + std::to_string(out.size()) +
                             "]: needs name, ino and start");
    }
    std::string name = f["name"].get<std::string>();
    bool numbered = name.size() > 11 && name.compare(0, 11, "output.log.") == 0 &&
                    name.find_first_not_of("0123456789", 11) == std::string::npos;
    if (name != "output.log" && !numbered) {
      return InvalidArgument("log_state.json: files[" + std::to_string(out.size()) +
                             "].name must be output.log or output.log.N");
    }
    out.push_back({std::move(name), f["ino"].get<uint64_t>(), f["start"].get<uint64_t>()});
  }
  return out;
}

namespace {

// One file of a consistent view of the stream, open for reading.
struct OpenLog {
  int fd = -1;
  uint64_t start = 0;
  uint64_t size = 0;
};

struct Snapshot {
  std::vector<OpenLog> files;  // oldest first
  ~Snapshot() {
    for (const OpenLog& f : files) ::close(f.fd);
  }
  uint64_t end() const { return files.empty() ? 0 : files.back().start + files.back().size; }
};

// Opens the files of DIR's stream as they are at one moment. False when a
// rotation changed them while looking (the caller retries).
bool TakeSnapshot(const fs::path& dir, Snapshot* snap) {
  auto state_text = [&dir]() -> std::optional<std::string> {
    // Read as the daemon, in a directory a trainer may have written (an
    // older layout): never through a link, never blocking on a FIFO.
    auto t = ReadFileNoFollow(dir, "log_state.json", 1 << 20);
    if (!t.ok()) return std::nullopt;
    return *t;
  };
  std::optional<std::string> before = state_text();
  std::vector<LogFile> entries;
  if (before) {
    auto parsed = ParseLogState(*before);
    if (!parsed.ok()) return false;
    entries = std::move(parsed).value();
  } else {
    entries = {{"output.log", 0, 0}};  // never rotated: no inode to check
  }
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    // A link, a FIFO or a hard link planted at a log's name reads as no log:
    // the daemon must not show another file's content as the replica's.
    auto opened = OpenReadNoFollow(dir, it->name);
    int fd = opened.ok() ? *opened : -1;
    struct stat st = {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      bool missing = !opened.ok() && opened.status().code() == Code::kNotFound;
      if (fd >= 0) ::close(fd);
      return missing && !before && state_text() == before;  // no log yet: empty stream
    }
    snap->files.push_back({fd, it->start, static_cast<uint64_t>(st.st_size)});
    if (before && static_cast<uint64_t>(st.st_ino) != it->ino) return false;
  }
  // Sizes were taken file by file; only output.log still grows, and the
  // state file changes with every rotation.
  return state_text() == before;
}

bool ReadAt(int fd, uint64_t pos, size_t n, std::string* out) {
  size_t old = out->size();
  out->resize(old + n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out->data() + old + got, n - got, static_cast<off_t>(pos + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out->resize(old + got);
  return got == n;
}

Result<std::unique_ptr<Snapshot>> Snap(const fs::path& dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto snap = std::make_unique<Snapshot>();
    if (TakeSnapshot(dir, snap.get())) return snap;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return Unavailable("the log in " + dir.string() + " kept rotating while being read; try again");
}

}  // namespace

Result<LogRead> ReadLogStream(const fs::path& dir, uint64_t offset, size_t max_bytes) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Snapshot> snap, Snap(dir));
  LogRead out;
  out.size = snap->end();
  out.offset = offset;
  if (!snap->files.empty() && offset < snap->files.front().start) {
    out.skipped = snap->files.front().start - offset;
    out.offset = snap->files.front().start;
  }
  for (const OpenLog& f : snap->files) {
    if (out.offset >= f.start + f.size) continue;
    uint64_t pos = out.offset - f.start;
    size_t n = static_cast<size_t>(std::min<uint64_t>(f.size - pos, max_bytes));
    ReadAt(f.fd, pos, n, &out.data);
    break;
  }
  out.next_offset = out.offset + out.data.size();
  return out;
}

namespace {

// The mark at index `i` of the index file `fd`; false past its end.
bool ReadMark(int fd, uint64_t i, LogMark* mark) {
  std::string rec;
  if (!ReadAt(fd, i * kLogMarkBytes, kLogMarkBytes, &rec)) return false;
  uint64_t offset = 0, time = 0;
  for (size_t b = 0; b < 8; ++b) {
    offset |= static_cast<uint64_t>(static_cast<unsigned char>(rec[b])) << (8 * b);
    time |= static_cast<uint64_t>(static_cast<unsigned char>(rec[8 + b])) << (8 * b);
  }
  *mark = {offset, static_cast<int64_t>(time)};
  return true;
}

}  // namespace

std::vector<LogMark> ReadLogMarks(const fs::path& dir, uint64_t from, uint64_t to) {
  to = std::max(to, from);
  // Every index file there is, whatever its number: during a rotation the
  // numbers shift, and each mark carries its stream offset anyway.
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name == "output.times" || (name.size() > 13 && name.compare(0, 13, "output.times.") == 0 &&
                                   name.find_first_not_of("0123456789", 13) == std::string::npos)) {
      names.push_back(std::move(name));
    }
  }
  std::optional<LogMark> before;
  std::vector<LogMark> out;
  for (const std::string& name : names) {
    auto opened = OpenReadNoFollow(dir, name);
    if (!opened.ok()) continue;
    int fd = *opened;
    struct stat st = {};
    uint64_t n = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) / kLogMarkBytes : 0;
    // The first mark after `from` (binary search: offsets increase).
    uint64_t lo = 0, hi = n;
    LogMark m;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (!ReadMark(fd, mid, &m)) break;
      if (m.offset <= from) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo > 0 && ReadMark(fd, lo - 1, &m) && m.offset <= from &&
        (!before || m.offset > before->offset)) {
      before = m;
    }
    // A chunk of the stream holds at most one mark per kLogMarkBytes.
    for (uint64_t i = lo; i < n && out.size() < (to - from) / kLogMarkBytes + 16; ++i) {
      if (!ReadMark(fd, i, &m) || m.offset >= to) break;
      out.push_back(m);
    }
    ::close(fd);
  }
  if (before) out.push_back(*before);
  std::sort(out.begin(), out.end(),
            [](const LogMark& a, const LogMark& b) { return a.offset < b.offset; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string ReadLogTail(const fs::path& dir, size_t max_bytes) {
  auto snap = Snap(dir);
  if (!snap.ok()) return "";
  std::string out;
  uint64_t end = (*snap)->end();
  uint64_t from = end > max_bytes ? end - max_bytes : 0;
  for (const OpenLog& f : (*snap)->files) {
    if (f.start + f.size <= from) continue;
    uint64_t pos = from > f.start ? from - f.start : 0;
    ReadAt(f.fd, pos, static_cast<size_t>(f.size - pos), &out);
  }
  return out;
}

}  // namespace stoker::replica
