#include "tfevents/event_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>

namespace stoker::tfevents {
namespace {

constexpr size_t kMaxCachedFiles = 1024;

// A regular file opened by the caller, read with pread up to the size it had
// when opened (bytes appended later are read next time), through a 1 MiB
// read-ahead buffer: records are small, and a pread each cost more than the
// parsing.
class FdSource final : public ByteSource {
 public:
  FdSource(int fd, uint64_t size) : fd_(fd), size_(size) {}
  uint64_t Size() const override { return size_; }
  bool ReadAt(uint64_t offset, size_t n, std::string* out) const override {
    if (offset > size_ || n > size_ - offset) return false;
    if (offset < buf_offset_ || offset + n > buf_offset_ + buf_.size()) {
      if (n > kReadAhead) return Pread(offset, n, out);
      if (!Pread(offset, std::min<uint64_t>(kReadAhead, size_ - offset), &buf_)) {
        buf_.clear();
        return false;
      }
      buf_offset_ = offset;
    }
    out->assign(buf_, offset - buf_offset_, n);
    return true;
  }

 private:
  static constexpr size_t kReadAhead = 1 << 20;

  bool Pread(uint64_t offset, size_t n, std::string* out) const {
    out->resize(n);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, out->data() + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      done += static_cast<size_t>(r);
    }
    return true;
  }

  int fd_;
  uint64_t size_;
  mutable std::string buf_;
  mutable uint64_t buf_offset_ = 0;
};

struct Walk {
  const DirLimits& limits;
  size_t entries = 0;
  bool too_many_entries = false;
  std::vector<std::string> files;  // relative paths of event files
};

// Adds the event files under the directory `fd` (owned: closed here) whose
// path relative to the log directory starts with `prefix`.
void WalkDir(int fd, const std::string& prefix, int depth, Walk& w) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  std::vector<std::string> subdirs;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (++w.entries > w.limits.max_entries) {
      w.too_many_entries = true;
      break;
    }
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
    }
    if (type == DT_DIR && depth < w.limits.max_depth) {
      subdirs.push_back(name);
    } else if (type == DT_REG && name.find("tfevents") != std::string::npos) {
      w.files.push_back(prefix + name);
    }
  }
  for (const std::string& sub : subdirs) {
    if (w.too_many_entries) break;
    int sub_fd = ::openat(::dirfd(d), sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub_fd >= 0) WalkDir(sub_fd, prefix + sub + "/", depth + 1, w);
  }
  ::closedir(d);
}

uint64_t KeptPoints(const FileState& s) {
  uint64_t n = 0;
  for (const auto& [tag, series] : s.series) n += series.Points().size();
  return n;
}

}  // namespace

std::string EventFileWriter(const std::string& file_name) {
  static const std::string kPrefix = "events.out.tfevents.";
  size_t at = file_name.find(kPrefix);
  if (at == std::string::npos) return "";
  std::vector<std::string> parts;
  std::string rest = file_name.substr(at + kPrefix.size());
  for (size_t start = 0;;) {
    size_t dot = rest.find('.', start);
    parts.push_back(rest.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  auto number = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const size_t n = parts.size();
  if (n >= 5 && !number(parts[n - 1]) && number(parts[n - 2]) && number(parts[n - 3])) {
    parts.pop_back();  // a suffix after <pid>.<n>: TF2's ".v2"
  }
  if (parts.size() < 2) return "";  // the time alone
  if (parts.size() >= 4 && number(parts[parts.size() - 1]) && number(parts[parts.size() - 2])) {
    std::string host;
    for (size_t i = 1; i + 2 < parts.size(); ++i) host += (i > 1 ? "." : "") + parts[i];
    return host + " pid " + parts[parts.size() - 2];
  }
  std::string host;
  for (size_t i = 1; i < parts.size(); ++i) host += (i > 1 ? "." : "") + parts[i];
  return host;
}

std::string KnownWriterName(const std::string& writer, const std::vector<KnownWriter>& known) {
  static const std::string kPid = " pid ";
  const size_t at = writer.rfind(kPid);
  if (at == std::string::npos || at == 0) return "";
  const std::string digits = writer.substr(at + kPid.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "";
  }
  const int64_t pid = std::stoll(digits);
  const std::string host = writer.substr(0, at);
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto short_name = [](const std::string& s) { return s.substr(0, s.find('.')); };
  auto same_host = [&](const std::string& a, const std::string& b) {
    const std::string x = lower(a), y = lower(b);
    if (x == y) return true;
    // A short name and a full one: the same host when the short one is the
    // full one's first label.
    const bool x_short = x.find('.') == std::string::npos;
    const bool y_short = y.find('.') == std::string::npos;
    return x_short != y_short && short_name(x) == short_name(y);
  };
  std::set<std::string> names;
  for (const KnownWriter& k : known) {
    if (k.pid == pid && (k.host.empty() || same_host(k.host, host))) names.insert(k.name);
  }
  return names.size() == 1 ? *names.begin() : "";
}

std::vector<Point> Downsample(const std::vector<Point>& points, size_t max) {
  if (points.size() <= max) return points;
  if (max == 0) return {};
  if (max == 1) return {points.back()};
  std::vector<Point> out;
  out.reserve(max);
  const size_t n = points.size();
  for (size_t i = 0; i < max; ++i) out.push_back(points[i * (n - 1) / (max - 1)]);
  return out;
}

EventDirReader::EventDirReader(Limits limits, DirLimits dir_limits)
    : limits_(limits), dir_limits_(dir_limits) {}

DirScalars EventDirReader::Read(const std::filesystem::path& dir) {
  DirScalars out;
  std::lock_guard lock(mu_);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;  // nothing written yet
    out.skipped.push_back(
        {"", errno == ELOOP || errno == ENOTDIR
                 ? std::string("the log directory is a link or not a directory; not followed")
                 : std::string("cannot open the log directory: ") + std::strerror(errno)});
    return out;
  }
  Walk walk{dir_limits_};
  WalkDir(fd, "", 0, walk);
  std::sort(walk.files.begin(), walk.files.end());
  if (walk.too_many_entries) {
    out.skipped.push_back({"", "more than " + std::to_string(dir_limits_.max_entries) +
                                   " directory entries: the rest were not looked at"});
  }
  if (walk.files.size() > dir_limits_.max_files) {
    out.skipped.push_back({"", "more than " + std::to_string(dir_limits_.max_files) +
                                   " event files: only the first " +
                                   std::to_string(dir_limits_.max_files) + " (by path) were read"});
    walk.files.resize(dir_limits_.max_files);
  }

  uint64_t budget = dir_limits_.max_read_bytes;
  std::map<std::pair<std::string, std::string>, std::vector<Point>> merged;  // (name, writer)
  std::set<std::string> writers;
  for (const std::string& rel : walk.files) {
    const std::string path = (dir / rel).string();
    int file = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (file < 0) {
      if (errno != ENOENT)
        out.skipped.push_back({rel, std::string("cannot open: ") + std::strerror(errno)});
      continue;
    }
    struct stat st {};
    if (::fstat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(file);
      continue;
    }
    Cached& c = cache_[path];
    const auto size = static_cast<uint64_t>(st.st_size);
    if (c.dev != st.st_dev || c.ino != st.st_ino || size < c.size) {
      cached_points_ -= c.points;  // another file now, or rewritten: start over
      c = Cached{};
      c.dev = st.st_dev;
      c.ino = st.st_ino;
    }
    c.size = size;
    c.used = ++clock_;
    Limits limits = limits_;
    limits.max_read_bytes = std::min(limits_.max_read_bytes, budget);
    const uint64_t before = c.state.offset;
    ReadRecords(FdSource(file, size), limits, c.state);
    ::close(file);
    budget -= std::min(budget, c.state.offset - before);
    if (!c.state.error.empty()) out.skipped.push_back({rel, c.state.error});
    if (c.state.error.empty() && size - c.state.offset > limits_.max_record_bytes + 16) {
      out.skipped.push_back({rel,
                             "read up to byte " + std::to_string(c.state.offset) + " of " +
                                 std::to_string(size) + " so far; later requests read on",
                             /*transient=*/true});
    }
    for (const std::string& p : c.state.problems) out.skipped.push_back({rel, p});

    std::string prefix = std::filesystem::path(rel).parent_path().string();
    if (!prefix.empty()) prefix += "/";
    const std::string writer = EventFileWriter(std::filesystem::path(rel).filename().string());
    if (!c.state.series.empty()) writers.insert(writer);
    for (const auto& [tag, series] : c.state.series) {
      std::vector<Point>& m = merged[{prefix + tag, writer}];
      std::vector<Point> points = series.Points();
      m.insert(m.end(), points.begin(), points.end());
      if (m.size() > 4 * limits_.max_points) m = Downsample(m, 2 * limits_.max_points);
    }

    cached_points_ -= c.points;
    c.points = KeptPoints(c.state);
    cached_points_ += c.points;
    while (!cache_.empty() &&
           (cached_points_ > dir_limits_.max_cached_points || cache_.size() > kMaxCachedFiles)) {
      auto oldest = std::min_element(
          cache_.begin(), cache_.end(),
          [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
      cached_points_ -= oldest->second.points;
      cache_.erase(oldest);
    }
  }

  // One writer: its series by name alone (the writer's name is no news).
  // Several: each writer's own, so three replicas are three lines, not one
  // zigzag through all of their points.
  const bool by_writer = writers.size() > 1;
  std::map<std::pair<std::string, std::string>, std::vector<Point>> series;
  for (auto& [key, points] : merged) {
    std::vector<Point>& s = series[{key.first, by_writer ? key.second : ""}];
    s.insert(s.end(), points.begin(), points.end());
  }
  if (series.size() > dir_limits_.max_series) {
    out.skipped.push_back(
        {"", "more than " + std::to_string(dir_limits_.max_series) + " series: only the first " +
                 std::to_string(dir_limits_.max_series) + " (by name) are shown"});
  }
  for (auto& [key, points] : series) {
    if (out.series.size() >= dir_limits_.max_series) break;
    std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
      return a.step != b.step ? a.step < b.step : a.wall_time < b.wall_time;
    });
    out.series.push_back({key.first, key.second, Downsample(points, limits_.max_points)});
  }
  return out;
}

}  // namespace stoker::tfevents
