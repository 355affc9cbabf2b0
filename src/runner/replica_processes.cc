#include "runner/replica_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// A process's environment is bounded by the kernel (a quarter of its stack
// limit); past this we stop reading and look at what we have.
constexpr size_t kMaxEnvironBytes = 16u << 20;

int64_t MonotonicMs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Reads /proc/<pid>/environ into `buf`; false when it cannot be read. A
// zombie, a kernel thread or a process past the point of its exit where it
// let go of its memory reads as empty.
bool ReadEnviron(pid_t pid, std::string& buf) {
  buf.clear();
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/environ", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char chunk[65536];
  while (buf.size() < kMaxEnvironBytes) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

// True when the NUL-separated `environ` holds the entry `entry` ("K=V")
// exactly: at the start or after a NUL, and ending at a NUL or the end.
bool HasEntry(const std::string& environ, const std::string& entry) {
  for (size_t pos = environ.find(entry); pos != std::string::npos;
       pos = environ.find(entry, pos + 1)) {
    bool starts = pos == 0 || environ[pos - 1] == '\0';
    size_t end = pos + entry.size();
    bool ends = end == environ.size() || environ[end] == '\0';
    if (starts && ends) return true;
  }
  return false;
}

std::string Entry(std::string_view cookie) {
  std::string e(kReplicaCookieVar);
  e += '=';
  e += cookie;
  return e;
}

bool Carries(pid_t pid, const std::string& entry, std::string& buf) {
  return ReadEnviron(pid, buf) && HasEntry(buf, entry);
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

int PidfdSendSignal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

// True when `pid` is gone or a zombie (the fallback without pidfds).
bool Exited(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');
  return paren == nullptr || paren[1] == '\0' || paren[2] == 'Z' || paren[2] == 'X';
}

}  // namespace

std::string ReplicaCookie(const fs::path& replica_dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(replica_dir, ec), ec);
  if (ec) p = fs::absolute(replica_dir, ec);
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::vector<pid_t> FindReplicaProcesses(std::string_view cookie) {
  std::vector<pid_t> out;
  const std::string entry = Entry(cookie);
  const pid_t self = ::getpid();
  std::string buf;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self) continue;
    if (Carries(static_cast<pid_t>(pid), entry, buf)) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return out;
}

ProcessSweep::ProcessSweep(std::string cookie) : cookie_(std::move(cookie)) {}

ProcessSweep::~ProcessSweep() {
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
}

int ProcessSweep::KillPass() {
  const std::string entry = Entry(cookie_);
  std::string buf;
  int signalled = 0;
  refused_ = 0;
  for (pid_t pid : FindReplicaProcesses(cookie_)) {
    int fd = PidfdOpen(pid);
    if (fd < 0 && errno != ENOSYS) continue;  // gone since the scan
    // Through the pidfd the signal reaches the process opened above or no
    // one; checking the cookie again after opening it makes sure that
    // process is the one the scan found (its pid may have been reused).
    if (!Carries(pid, entry, buf)) {
      if (fd >= 0) ::close(fd);
      continue;
    }
    int rc = fd >= 0 ? PidfdSendSignal(fd, SIGKILL) : ::kill(pid, SIGKILL);
    if (rc != 0) {
      if (errno == EPERM) ++refused_;
      if (fd >= 0) ::close(fd);
      continue;
    }
    ++signalled;
    auto it = std::find(pids_.begin(), pids_.end(), pid);
    if (it == pids_.end()) {
      pids_.push_back(pid);
      pidfds_.push_back(fd);
    } else {
      // Signalled again (still exiting), or a new process on a reused pid:
      // the fresh pidfd is right in both cases.
      int& old = pidfds_[it - pids_.begin()];
      if (old >= 0) ::close(old);
      old = fd;
    }
  }
  return signalled;
}

bool ProcessSweep::WaitForExits(int64_t timeout_ms) {
  const int64_t deadline = MonotonicMs() + std::max<int64_t>(timeout_ms, 0);
  while (true) {
    std::vector<pollfd> waiting;
    bool fallback_left = false;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (pidfds_[i] >= 0) {
        waiting.push_back({pidfds_[i], POLLIN, 0});
      } else if (!Exited(pids_[i])) {
        fallback_left = true;
      }
    }
    // A pidfd polls readable once its process has exited.
    if (!waiting.empty()) ::poll(waiting.data(), waiting.size(), 0);
    bool left = fallback_left || std::any_of(waiting.begin(), waiting.end(), [](const pollfd& p) {
                  return (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0;
                });
    if (!left) return true;
    int64_t now = MonotonicMs();
    if (now >= deadline) return false;
    int wait_ms = static_cast<int>(std::min<int64_t>(deadline - now, fallback_left ? 5 : 1000));
    if (!waiting.empty()) {
      ::poll(waiting.data(), waiting.size(), wait_ms);
    } else {
      ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    }
  }
}

int KillReplicaProcesses(std::string_view cookie, int64_t timeout_ms) {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  ProcessSweep sweep{std::string(cookie)};
  // Each pass may find children that the previous pass's victims forked
  // just before they died; stop when a pass finds none.
  while (sweep.KillPass() > 0) {
    int64_t left = deadline - MonotonicMs();
    if (left <= 0) return -1;
    sweep.WaitForExits(std::min<int64_t>(left, 100));
  }
  if (sweep.refused() > 0) return -1;
  return sweep.WaitForExits(deadline - MonotonicMs()) ? sweep.killed() : -1;
}

}  // namespace stoker::runner
