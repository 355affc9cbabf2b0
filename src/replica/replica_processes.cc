#include "replica/replica_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/time.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

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

// A process's environment is bounded by the kernel (at most 6 MiB at exec);
// past this we stop reading and look at what we have.
constexpr size_t kMaxEnvironBytes = 16u << 20;

// Reads /proc/<pid>/environ into `buf`: 0, or the errno that stopped it. A
// zombie or a process past the point of its exit where it let go of its
// memory reads as empty; a kernel thread fails with ESRCH. Not
// stoker::ReadFile: the sweep must tell EMFILE from ESRCH, and a Status
// keeps no errno.
int ReadEnviron(pid_t pid, std::string& buf) {
  buf.clear();
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/environ", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char chunk[65536];
  int err = 0;
  while (buf.size() < kMaxEnvironBytes) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return err;
}

// Whether `pid` carries `entry`. *unknown: the answer is unknown because
// the caller ran out of something (descriptors, memory); gone (ENOENT,
// ESRCH) and not the caller's (EACCES, EPERM) are answers: no.
bool Carries(pid_t pid, const std::string& entry, std::string& buf, bool* unknown) {
  int err = ReadEnviron(pid, buf);
  *unknown = err == EMFILE || err == ENFILE || err == ENOMEM;
  return err == 0 && HasEntry(buf, entry);
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

// True when `pid` is gone or a zombie (for victims without a pidfd). A stat
// that cannot be read (out of descriptors) is not taken for an exit.
bool Exited(pid_t pid) {
  if (std::optional<ProcStat> st = ReadProcStat(pid)) return st->state == 'Z' || st->state == 'X';
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

Result<std::vector<pid_t>> ListPids() {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr)
    return Unavailable(std::string("cannot list /proc: ") + std::strerror(errno));
  std::vector<pid_t> out;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid > 0 && *end == '\0') out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return out;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // comm may hold spaces and parentheses: the state follows the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return std::nullopt;
  ProcStat st;
  long ppid = 0;
  // Fields 3.. of proc(5): state ppid pgrp session tty_nr tpgid flags minflt
  // cminflt majflt cmajflt utime stime cutime cstime priority nice
  // num_threads itrealvalue starttime vsize rss.
  unsigned long long utime = 0, stime = 0, rss = 0;
  long long cutime = 0, cstime = 0;
  int fields =
      std::sscanf(close_paren + 1,
                  " %c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d %*d "
                  "%*d %*d %*u %*u %llu",
                  &st.state, &ppid, &utime, &stime, &cutime, &cstime, &rss);
  if (fields < 2) return std::nullopt;
  st.ppid = static_cast<pid_t>(ppid);
  if (fields == 7) {
    st.cpu_ticks = utime + stime + static_cast<uint64_t>(std::max(0LL, cutime)) +
                   static_cast<uint64_t>(std::max(0LL, cstime));
    st.rss_pages = rss;
  }
  return st;
}

std::string ReplicaCookie(const fs::path& replica_dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(replica_dir, ec), ec);
  if (ec) p = fs::absolute(replica_dir, ec);
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::vector<pid_t> FindReplicaProcesses(std::string_view cookie, bool* complete) {
  std::vector<pid_t> out;
  const std::string entry = Entry(cookie);
  const pid_t self = ::getpid();
  std::string buf;
  bool all = true;
  Result<std::vector<pid_t>> pids = ListPids();
  if (pids.ok()) {
    for (pid_t pid : *pids) {
      if (pid == self) continue;
      bool unknown = false;
      if (Carries(pid, entry, buf, &unknown)) out.push_back(pid);
      if (unknown) all = false;
    }
  } else {
    all = false;
  }
  if (complete) *complete = all;
  return out;
}

ProcessSweep::ProcessSweep(std::string cookie) : cookie_(std::move(cookie)) {}

ProcessSweep::~ProcessSweep() {
  for (const Victim& v : victims_) {
    if (v.pidfd >= 0) ::close(v.pidfd);
  }
}

void ProcessSweep::ReleaseExited() {
  std::vector<pollfd> fds;
  std::vector<size_t> index;
  for (size_t i = 0; i < victims_.size(); ++i) {
    if (victims_[i].pidfd < 0) continue;
    fds.push_back({victims_[i].pidfd, POLLIN, 0});
    index.push_back(i);
  }
  // A pidfd polls readable once its process has exited.
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
  for (size_t j = 0; j < fds.size(); ++j) {
    if ((fds[j].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    Victim& v = victims_[index[j]];
    ::close(v.pidfd);
    v.pidfd = -1;
    v.exited = true;
  }
}

int ProcessSweep::KillPass() {
  // Descriptors of processes already dead are not held while opening more.
  ReleaseExited();
  const std::string entry = Entry(cookie_);
  std::string buf;
  int signalled = 0;
  refused_ = 0;
  for (pid_t pid : FindReplicaProcesses(cookie_, &complete_)) {
    int fd = PidfdOpen(pid);
    if (fd < 0 && errno == ESRCH) continue;  // gone since the scan
    // Through the pidfd the signal reaches the process opened above or no
    // one; checking the cookie again after opening it makes sure that
    // process is the one the scan found (its pid may have been reused).
    // Without a pidfd (no kernel support, or EMFILE, ENFILE, ENOMEM) the
    // check comes just before kill(pid): a narrow window for reuse, better
    // than leaving the process alive.
    bool unknown = false;
    if (!Carries(pid, entry, buf, &unknown)) {
      if (unknown) complete_ = false;
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
    auto it = std::find_if(victims_.begin(), victims_.end(),
                           [pid](const Victim& v) { return v.pid == pid; });
    if (it == victims_.end()) {
      victims_.push_back({pid, fd, false});
    } else {
      // Signalled again (still exiting), or a new process on a reused pid:
      // the fresh pidfd is right in both cases.
      if (it->pidfd >= 0) ::close(it->pidfd);
      it->pidfd = fd;
      it->exited = false;
    }
  }
  return signalled;
}

bool ProcessSweep::WaitForExits(int64_t timeout_ms) {
  const int64_t deadline = MonotonicMs() + std::max<int64_t>(timeout_ms, 0);
  while (true) {
    ReleaseExited();
    std::vector<pollfd> waiting;
    bool fallback_left = false;
    for (Victim& v : victims_) {
      if (v.exited) continue;
      if (v.pidfd >= 0) {
        waiting.push_back({v.pidfd, POLLIN, 0});
      } else if (Exited(v.pid)) {
        v.exited = true;
      } else {
        fallback_left = true;
      }
    }
    if (waiting.empty() && !fallback_left) return true;
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
  // just before they died; stop when a complete pass finds none.
  while (true) {
    int signalled = sweep.KillPass();
    if (signalled == 0 && sweep.complete()) break;
    int64_t left = deadline - MonotonicMs();
    if (left <= 0) return -1;
    // The exits also give back the descriptors an incomplete scan lacked.
    sweep.WaitForExits(std::min<int64_t>(left, 100));
    if (signalled == 0) ::usleep(static_cast<useconds_t>(std::min<int64_t>(left, 10)) * 1000);
  }
  if (sweep.refused() > 0) return -1;
  return sweep.WaitForExits(deadline - MonotonicMs()) ? sweep.killed() : -1;
}

}  // namespace stoker::runner
