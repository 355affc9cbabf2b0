#include "common/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace stoker {
namespace {

Status ErrnoStatus(const std::string& what, const std::filesystem::path& path) {
  int e = errno;
  std::string msg = what + " " + path.string() + ": " + std::strerror(e);
  if (e == ENOSPC || e == EDQUOT) return ResourceExhausted(msg + " (free space in the data dir)");
  if (e == ENOENT) return NotFound(msg);
  if (e == EACCES || e == EPERM) return PermissionDenied(msg);
  return Internal(msg);
}

}  // namespace

namespace {

// Reads `fd` to its end (at most `max_bytes`: ResourceExhausted past that)
// and closes it; `path` names it in errors.
Result<std::string> ReadAll(int fd, const std::filesystem::path& path,
                            size_t max_bytes = SIZE_MAX) {
  // Sized from fstat and read in place: a 200 MB upload went through an
  // ostringstream at about 50 MB/s. What lies past the stat'ed size (a file
  // still growing, or one that is not regular) is appended piecewise.
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    out.resize(std::min(static_cast<size_t>(st.st_size), max_bytes));
  }
  size_t size = 0;
  char more[64 * 1024];
  for (;;) {
    bool in_place = size < out.size();
    ssize_t n =
        in_place ? ::read(fd, out.data() + size, out.size() - size) : ::read(fd, more, sizeof more);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = ErrnoStatus("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    if (!in_place) out.append(more, static_cast<size_t>(n));
    size += static_cast<size_t>(n);
    if (size > max_bytes) {
      ::close(fd);
      return ResourceExhausted(path.string() + " holds more than " + std::to_string(max_bytes) +
                               " bytes; not read");
    }
  }
  ::close(fd);
  out.resize(size);  // a file that shrank since fstat
  return out;
}

}  // namespace

Result<std::string> ReadFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot read", path);
  return ReadAll(fd, path);
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view data,
                       Durability durability) {
  std::filesystem::path tmp = path;
  // Unique per process and call, so concurrent writers of one path never share a temp file.
  static std::atomic<uint64_t> counter{0};
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), flags, 0644);
  if (fd < 0 && errno == EEXIST) {
    // Left by a crashed process that had our pid, or planted: unlink never
    // follows a link, and the new file is again created exclusively.
    ::unlink(tmp.c_str());
    fd = ::open(tmp.c_str(), flags, 0644);
  }
  if (fd < 0) return ErrnoStatus("cannot create", tmp);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoStatus("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (durability == Durability::kSync && ::fsync(fd) != 0) {
    Status s = ErrnoStatus("cannot sync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoStatus("cannot rename into", path);
    ::unlink(tmp.c_str());
    return s;
  }
  if (durability == Durability::kNoSync) return OkStatus();
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

Status AppendLine(const std::filesystem::path& path, std::string_view line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  std::string data(line);
  data += '\n';
  ssize_t n = ::write(fd, data.data(), data.size());
  Status s =
      n == static_cast<ssize_t>(data.size()) ? OkStatus() : ErrnoStatus("cannot append to", path);
  ::close(fd);
  return s;
}

namespace {

// Splits a plain relative path; InvalidArgument for an absolute one or one
// with empty, "." or ".." parts.
Result<std::vector<std::string>> PlainParts(const std::filesystem::path& dir,
                                            const std::filesystem::path& relative) {
  std::vector<std::string> parts;
  for (const std::filesystem::path& part : relative) parts.push_back(part.string());
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // "a/b/"
  if (relative.is_absolute() || parts.empty() ||
      std::any_of(parts.begin(), parts.end(),
                  [](const std::string& p) { return p.empty() || p == "." || p == ".."; })) {
    return InvalidArgument("'" + relative.string() + "' is not a plain relative path below " +
                           dir.string());
  }
  return parts;
}

// Opens `dir`, then each of `parts` below it as a directory, creating the
// missing ones with `modes` when `create`; never follows a link. Returns the
// last one's descriptor (the caller closes it); `at` gets its path.
Result<int> WalkDirsBelow(const std::filesystem::path& dir, const std::vector<std::string>& parts,
                          bool create, const CreateModes& modes, std::filesystem::path& at) {
  at = dir;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
    return FailedPrecondition(dir.string() + " is a symbolic link or not a directory");
  }
  if (fd < 0) return ErrnoStatus("cannot open", dir);
  for (const std::string& part : parts) {
    at /= part;
    bool made = create && ::mkdirat(fd, part.c_str(), 0700) == 0;
    if (create && !made && errno != EEXIST) {
      Status s = ErrnoStatus("cannot create directory", at);
      ::close(fd);
      return s;
    }
    int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    ::close(fd);
    if (next < 0) {
      if (e == ELOOP || e == ENOTDIR) {
        return FailedPrecondition(at.string() +
                                  " is a symbolic link or not a directory; refusing to go "
                                  "through it");
      }
      errno = e;
      return ErrnoStatus("cannot open", at);
    }
    if (made) {
      // Modes as asked, whatever the umask; made through the descriptor,
      // never by name.
      if ((modes.gid >= 0 &&
           ::fchown(next, static_cast<uid_t>(-1), static_cast<gid_t>(modes.gid)) != 0) ||
          ::fchmod(next, modes.dir_mode) != 0) {
        Status s = ErrnoStatus("cannot set the mode of", at);
        ::close(next);
        return s;
      }
    }
    fd = next;
  }
  return fd;
}

// Opens `relative` below `dir` with `flags` (| O_NOFOLLOW | O_NONBLOCK |
// O_CLOEXEC), walked by WalkDirsBelow; with `create`, missing directories
// are made (0755) and `flags` may hold O_CREAT (0644). The file must be a
// regular file with one link. `at` gets its full path for errors.
Result<int> OpenBelow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                      bool create, int flags, std::filesystem::path& at) {
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> parts, PlainParts(dir, relative));
  std::string name = parts.back();
  parts.pop_back();
  STOKER_ASSIGN_OR_RETURN(int fd, WalkDirsBelow(dir, parts, create, CreateModes{}, at));
  at /= name;
  // O_NONBLOCK: a FIFO planted here fails (ENXIO) or reads empty instead of
  // blocking the caller.
  int file = ::openat(fd, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  int e = errno;
  ::close(fd);
  errno = e;
  auto refused = [&at](const std::string& why) {
    return FailedPrecondition(at.string() + " " + why + "; refusing to go through it");
  };
  if (file < 0 && (errno == ELOOP || errno == ENXIO))
    return refused("is a symbolic link or a FIFO");
  if (file < 0) return ErrnoStatus("cannot open", at);
  struct stat st {};
  if (::fstat(file, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(file);
    return refused("is not a regular file with a single link");
  }
  return file;
}

}  // namespace

Status MakeDirsBelow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                     const CreateModes& modes) {
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> parts, PlainParts(dir, relative));
  std::filesystem::path at;
  STOKER_ASSIGN_OR_RETURN(int fd, WalkDirsBelow(dir, parts, /*create=*/true, modes, at));
  ::close(fd);
  return OkStatus();
}

Result<int> OpenDirNoFollow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                            bool create, const CreateModes& modes) {
  std::vector<std::string> parts;
  if (!relative.empty()) {
    STOKER_ASSIGN_OR_RETURN(parts, PlainParts(dir, relative));
  }
  std::filesystem::path at;
  return WalkDirsBelow(dir, parts, create, modes, at);
}

Status WriteFileBelow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                      std::string_view data, const CreateModes& modes) {
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> parts, PlainParts(dir, relative));
  std::string name = parts.back();
  parts.pop_back();
  std::filesystem::path at;
  STOKER_ASSIGN_OR_RETURN(int dfd, WalkDirsBelow(dir, parts, /*create=*/true, modes, at));
  static std::atomic<uint64_t> counter{0};
  std::string tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1));
  if (tmp.size() > 255)
    tmp = ".stoker.tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  std::filesystem::path target = at / name;
  int fd = ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    Status s = ErrnoStatus("cannot create", at / tmp);
    ::close(dfd);
    return s;
  }
  Status s = OkStatus();
  size_t done = 0;
  while (s.ok() && done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = ErrnoStatus("cannot write", target);
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (s.ok() && modes.gid >= 0 &&
      ::fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(modes.gid)) != 0) {
    s = ErrnoStatus("cannot set the group of", target);
  }
  if (s.ok() && ::fchmod(fd, modes.file_mode) != 0)
    s = ErrnoStatus("cannot set the mode of", target);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus("cannot sync", target);
  ::close(fd);
  if (s.ok() && ::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) {
    s = ErrnoStatus("cannot rename into", target);
  }
  if (!s.ok()) {
    ::unlinkat(dfd, tmp.c_str(), 0);
  } else {
    ::fsync(dfd);
  }
  ::close(dfd);
  return s;
}

bool IsFileName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.size() <= 255 &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

Status AppendLineNoFollow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                          std::string_view line) {
  std::filesystem::path at;
  STOKER_ASSIGN_OR_RETURN(
      int file, OpenBelow(dir, relative, /*create=*/true, O_WRONLY | O_APPEND | O_CREAT, at));
  std::string data(line);
  data += '\n';
  ssize_t n = ::write(file, data.data(), data.size());
  Status s =
      n == static_cast<ssize_t>(data.size()) ? OkStatus() : ErrnoStatus("cannot append to", at);
  ::close(file);
  return s;
}

Result<std::string> ReadFileNoFollow(const std::filesystem::path& dir,
                                     const std::filesystem::path& relative, size_t max_bytes) {
  std::filesystem::path at;
  STOKER_ASSIGN_OR_RETURN(int file, OpenBelow(dir, relative, /*create=*/false, O_RDONLY, at));
  return ReadAll(file, at, max_bytes);
}

Result<std::string> ReadOwnFileNoFollow(const std::filesystem::path& dir,
                                        const std::filesystem::path& relative, size_t max_bytes) {
  std::filesystem::path at;
  STOKER_ASSIGN_OR_RETURN(int file, OpenBelow(dir, relative, /*create=*/false, O_RDONLY, at));
  struct stat st {};
  if (::fstat(file, &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    ::close(file);
    return FailedPrecondition(at.string() + " is not owned by uid " + std::to_string(::geteuid()) +
                              " alone; not believed");
  }
  return ReadAll(file, at, max_bytes);
}

Result<int> OpenReadNoFollow(const std::filesystem::path& dir,
                             const std::filesystem::path& relative) {
  std::filesystem::path at;
  return OpenBelow(dir, relative, /*create=*/false, O_RDONLY, at);
}

namespace {

constexpr int kMaxRemoveDepth = 512;

// Removes `name` in the directory open as `parent`; `path` names it in errors.
Status RemoveAt(int parent, const std::string& name, const std::filesystem::path& path, int depth) {
  if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT) return OkStatus();
  if (errno != EISDIR && errno != EPERM) return ErrnoStatus("cannot remove", path);
  if (depth >= kMaxRemoveDepth) {
    return FailedPrecondition(path.string() + " is more than " + std::to_string(kMaxRemoveDepth) +
                              " directories deep; remove it by hand");
  }
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
    // Swapped for a file or a link since unlinkat: remove that instead.
    if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT) return OkStatus();
  }
  if (fd < 0) return errno == ENOENT ? OkStatus() : ErrnoStatus("cannot open", path);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    Status s = ErrnoStatus("cannot list", path);
    ::close(fd);
    return s;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  Status out = OkStatus();
  for (const std::string& n : names) {
    Status s = RemoveAt(::dirfd(d), n, path / n, depth + 1);
    if (!s.ok() && out.ok()) out = s;
  }
  ::closedir(d);
  if (out.ok() && ::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    out = ErrnoStatus("cannot remove", path);
  }
  return out;
}

}  // namespace

Status RemoveTreeNoFollow(const std::filesystem::path& path) {
  std::filesystem::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? OkStatus() : ErrnoStatus("cannot open", parent);
  Status s = RemoveAt(fd, path.filename().string(), path, 0);
  ::close(fd);
  return s;
}

Status MakeDirs(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    errno = ec.value();
    return ErrnoStatus("cannot create directory", path);
  }
  return OkStatus();
}

std::filesystem::path DefaultStokerHome() {
  if (const char* h = std::getenv("STOKER_HOME"); h && *h) return h;
  if (::geteuid() == 0) return "/var/lib/stoker";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".local/share/stoker";
}

}  // namespace stoker
