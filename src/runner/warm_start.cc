#include "runner/warm_start.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/time.h"
#include "runner/replica_processes.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How long a supervisor waits for a zygote it started to import its preload
// (torch takes 2-5 s; a loaded 2-core machine under sanitizers far more).
constexpr int64_t kZygoteReadyMs = 180'000;
// How long it waits for a running zygote to fork (it answers within ms).
constexpr int64_t kForkReplyMs = 30'000;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool IsPythonName(const std::string& argv0) {
  std::string base = fs::path(argv0).filename().string();
  if (base == "python" || base == "python3") return true;
  if (base.rfind("python3.", 0) != 0 || base.size() == 8) return false;
  for (size_t i = 8; i < base.size(); ++i) {
    if (base[i] < '0' || base[i] > '9') return false;
  }
  return true;
}

// The variables a fresh interpreter reads at start-up whose effect the
// zygote's child reproduces itself (or that have none on it).
bool HandledPythonVar(const std::string& k) {
  return k == "PYTHONPATH" || k == "PYTHONUNBUFFERED" || k == "PYTHONDONTWRITEBYTECODE" ||
         k == "PYTHONHASHSEED" || k == "PYTHONBREAKPOINT" || k == "PYTHONNOUSERSITE";
}

// Reads one line ("\n" excluded) from `fd` within `timeout_ms`; nullopt on
// EOF, error or timeout.
std::optional<std::string> ReadLine(int fd, int64_t timeout_ms) {
  std::string line;
  const int64_t deadline = MonotonicMs() + timeout_ms;
  while (true) {
    int64_t left = deadline - MonotonicMs();
    if (left <= 0) return std::nullopt;
    pollfd pfd = {fd, POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n < 0 && errno != EINTR) return std::nullopt;
    if (n <= 0) continue;
    char c;
    ssize_t r = ::read(fd, &c, 1);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
    if (line.size() > (1 << 20)) return std::nullopt;
  }
}

int ConnectUnix(const fs::path& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::strcpy(addr.sun_path, path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Sends a 4-byte length and `body`, with `fds` attached to the first bytes.
bool SendRequest(int fd, const std::string& body, const std::vector<int>& fds) {
  std::string data(4, '\0');
  uint32_t n = static_cast<uint32_t>(body.size());
  data[0] = static_cast<char>(n >> 24);
  data[1] = static_cast<char>(n >> 16);
  data[2] = static_cast<char>(n >> 8);
  data[3] = static_cast<char>(n);
  data += body;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec iov = {data.data(), data.size()};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  if (sent <= 0) return false;
  size_t off = static_cast<size_t>(sent);
  while (off < data.size()) {
    ssize_t w = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

// The directory of zygote sockets: the daemon's (under its data dir, hidden
// from trainers), this account's, opened by no other.
Status CheckWarmDir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return FailedPrecondition(Errno("cannot create the warm-start directory " + dir.string()));
  }
  struct stat st = {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    return FailedPrecondition("the warm-start directory " + dir.string() +
                              " must be a directory of stoker-run's account (uid " +
                              std::to_string(::geteuid()) + ") with mode 0700");
  }
  return OkStatus();
}

// Takes flock(LOCK_EX) on `path` within `timeout_ms`; the fd, or -1.
int LockFile(const fs::path& path, int64_t timeout_ms) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  const int64_t deadline = MonotonicMs() + timeout_ms;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || MonotonicMs() > deadline) {
      ::close(fd);
      return -1;
    }
    ::usleep(20'000);
  }
  return fd;
}

// Starts the zygote for `key`, detached (own session, not below this
// subreaper), and waits until it is ready. OK once its socket accepts.
Status SpawnZygote(const replica::WarmSpec& spec, const std::string& key,
                   const WarmRequest& request) {
  const fs::path sock = spec.dir / (key + ".sock");
  const fs::path log = spec.dir / (key + ".log");
  std::string preload;
  for (const std::string& m : spec.preload) preload += (preload.empty() ? "" : ",") + m;
  char idle[32];
  std::snprintf(idle, sizeof idle, "%.0f", spec.idle_seconds);
  std::vector<std::string> args = {request.python_path,
                                   spec.zygote.string(),
                                   "--socket",
                                   sock.string(),
                                   "--preload",
                                   preload,
                                   "--idle",
                                   idle,
                                   "--ready-fd",
                                   "3"};
  std::vector<std::string> env = ZygoteEnv(request.env, spec.dir.string());
  std::vector<char*> argv_p, env_p;
  for (auto& a : args) argv_p.push_back(a.data());
  argv_p.push_back(nullptr);
  for (auto& e : env) env_p.push_back(e.data());
  env_p.push_back(nullptr);

  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int ready[2] = {-1, -1};
  if (log_fd < 0 || null_fd < 0 || ::pipe2(ready, O_CLOEXEC) != 0) {
    Status s = Internal(Errno("cannot prepare the warm interpreter's start"));
    for (int fd : {log_fd, null_fd, ready[0], ready[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return s;
  }
  // The zygote must outlive this supervisor and never be taken for one of
  // its replica's processes: while it is orphaned (its parent below exits),
  // this process is no subreaper, so it goes to init.
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  pid_t mid = ::fork();
  if (mid == 0) {
    ::setsid();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::fork() == 0) {
      ::dup2(null_fd, 0);
      ::dup2(null_fd, 1);
      ::dup2(log_fd, 2);
      ::dup2(ready[1], 3);
      ::syscall(SYS_close_range, 4u, ~0u, 0u);
      ::chdir("/");
      ::execve(argv_p[0], argv_p.data(), env_p.data());
      dprintf(2, "stoker-run: cannot execute %s: %s\n", argv_p[0], std::strerror(errno));
      ::_exit(127);
    }
    ::_exit(0);
  }
  if (mid > 0) ::waitpid(mid, nullptr, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::close(ready[1]);
  ::close(log_fd);
  ::close(null_fd);
  if (mid < 0) {
    ::close(ready[0]);
    return Internal(Errno("cannot fork the warm interpreter"));
  }
  std::optional<std::string> line = ReadLine(ready[0], kZygoteReadyMs);
  ::close(ready[0]);
  json j = line ? json::parse(*line, nullptr, false) : json();
  if (!j.is_object() || !j.value("ready", false)) {
    return Unavailable("the warm interpreter " + request.python_path + " did not start (see " +
                       log.string() + ")");
  }
  return OkStatus();
}

// One try at the zygote: connect (starting it when none answers), send the
// request, read the reply. `*retry`: the zygote went away under us.
Result<WarmChild> TryFork(const replica::WarmSpec& spec, const std::string& key,
                          const WarmRequest& request, const std::string& body, bool* retry) {
  *retry = false;
  const fs::path sock = spec.dir / (key + ".sock");
  const int64_t start_ms = MonotonicMs();
  int conn = ConnectUnix(sock);
  if (conn < 0) {
    int lock = LockFile(spec.dir / (key + ".lock"), kZygoteReadyMs);
    if (lock < 0) return Unavailable(Errno("cannot lock " + (spec.dir / (key + ".lock")).string()));
    conn = ConnectUnix(sock);  // another supervisor may have started it meanwhile
    Status spawned = OkStatus();
    if (conn < 0) {
      spawned = SpawnZygote(spec, key, request);
      if (spawned.ok()) conn = ConnectUnix(sock);
    }
    ::close(lock);
    if (!spawned.ok()) return spawned;
    if (conn < 0) return Unavailable(Errno("cannot connect to the warm interpreter"));
  }
  ucred peer = {};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::geteuid()) {
    ::close(conn);
    return PermissionDenied("the warm interpreter's socket " + sock.string() +
                            " belongs to another account");
  }
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    ::close(conn);
    return Internal(Errno("cannot make the go pipe"));
  }
  std::vector<int> fds = {request.stdin_fd, request.out_fd, go[0]};
  json names = {"stdin", "out", "go"};
  if (request.userns_fd >= 0) {
    fds.push_back(request.userns_fd);
    names.push_back("userns");
  }
  if (request.mntns_fd >= 0) {
    fds.push_back(request.mntns_fd);
    names.push_back("mntns");
  }
  // The body without "fds" was built once; splice the names in.
  std::string full = body;
  full.insert(full.size() - 1, ",\"fds\":" + names.dump());
  bool sent = SendRequest(conn, full, fds);
  ::close(go[0]);
  auto fail = [&](Status s) -> Result<WarmChild> {
    ::close(go[1]);  // a child forked for this request exits unstarted
    ::close(conn);
    return s;
  };
  if (!sent) {
    *retry = true;
    return fail(Unavailable(Errno("cannot send the request to the warm interpreter")));
  }
  std::optional<std::string> line = ReadLine(conn, kForkReplyMs);
  if (!line) {
    *retry = true;
    return fail(Unavailable("the warm interpreter closed the connection without forking"));
  }
  json reply = json::parse(*line, nullptr, false);
  if (!reply.is_object()) return fail(Internal("the warm interpreter answered: " + *line));
  if (auto e = reply.find("error"); e != reply.end() && e->is_string()) {
    return fail(FailedPrecondition(e->get<std::string>()));
  }
  WarmChild child;
  if (auto p = reply.find("pid"); p != reply.end() && p->is_number_integer()) child.pid = *p;
  child.zygote_pid = peer.pid;
  child.fork_ms = MonotonicMs() - start_ms;
  if (auto p = reply.find("preloaded"); p != reply.end() && p->is_array()) {
    for (const json& m : *p) {
      if (m.is_string()) child.preloaded.push_back(m);
    }
  }
  if (auto p = reply.find("skipped"); p != reply.end() && p->is_object()) {
    for (const auto& [name, why] : p->items()) {
      child.skipped.push_back(name + ": " + (why.is_string() ? why.get<std::string>() : ""));
    }
  }
  if (child.pid <= 0) return fail(Internal("the warm interpreter answered: " + *line));
  child.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0));
  std::optional<ProcStat> st = ReadProcStat(child.pid);
  if (child.pidfd < 0 || !st || st->ppid != child.zygote_pid) {
    if (child.pidfd >= 0) ::close(child.pidfd);
    return fail(Internal("the warm interpreter's child " + std::to_string(child.pid) +
                         " is gone before it started"));
  }
  ::fcntl(conn, F_SETFL, ::fcntl(conn, F_GETFL) | O_NONBLOCK);
  child.conn = conn;
  child.go = go[1];
  return child;
}

}  // namespace

Result<WarmInvocation> ParseWarmInvocation(const std::vector<std::string>& argv) {
  if (argv.empty()) return FailedPrecondition("no argv");
  if (!IsPythonName(argv[0])) {
    return FailedPrecondition("the command '" + argv[0] +
                              "' is not a Python interpreter (python, python3 or python3.N)");
  }
  WarmInvocation inv;
  inv.python = argv[0];
  size_t i = 1;
  for (; i < argv.size() && argv[i].size() > 1 && argv[i][0] == '-'; ++i) {
    const std::string& a = argv[i];
    if (a == "-u") {
      inv.flag_u = true;
    } else if (a == "-m" || a.rfind("-m", 0) == 0) {
      inv.module = true;
      if (a == "-m") {
        if (i + 1 >= argv.size()) return FailedPrecondition("-m without a module name");
        inv.target = argv[++i];
      } else {
        inv.target = a.substr(2);
      }
      break;
    } else {
      return FailedPrecondition("the interpreter option '" + a +
                                "' is not one a warm start can give (only -u and -m)");
    }
  }
  if (!inv.module) {
    if (i >= argv.size()) return FailedPrecondition("no module (-m) or script to run");
    if (argv[i] == "-") return FailedPrecondition("a program read from stdin ('-')");
    inv.target = argv[i];
  }
  if (inv.target.empty()) return FailedPrecondition("an empty module or script name");
  inv.args.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
  return inv;
}

std::string WarmEnvProblem(const std::map<std::string, std::string>& env) {
  for (const auto& [k, v] : env) {
    if (k.rfind("PYTHON", 0) == 0 && !HandledPythonVar(k)) {
      return k + " is set (read at interpreter start-up, which a warm start skips)";
    }
    if ((k.rfind("LD_", 0) == 0 || k == "GLIBC_TUNABLES") && !v.empty()) {
      return k + " is set (read by the dynamic loader at start-up, which a warm start skips)";
    }
  }
  return "";
}

const std::vector<std::string>& ZygoteKeyVars() {
  static const std::vector<std::string> vars = {"LANG",
                                                "LC_ALL",
                                                "LC_CTYPE",
                                                "OMP_NUM_THREADS",
                                                "MKL_NUM_THREADS",
                                                "OPENBLAS_NUM_THREADS",
                                                "PYTHONHASHSEED"};
  return vars;
}

std::string ZygoteKey(const std::string& python_path, const std::vector<std::string>& preload,
                      uint32_t uid, uint32_t gid, const std::map<std::string, std::string>& env) {
  std::string canon = python_path + '\0';
  for (const std::string& m : preload) canon += m + ',';
  canon += '\0' + std::to_string(uid) + '\0' + std::to_string(gid) + '\0';
  for (const std::string& k : ZygoteKeyVars()) {
    auto it = env.find(k);
    canon += it == env.end() ? k + '\1' : k + '=' + it->second;
    canon += '\0';
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : canon) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::vector<std::string> ZygoteEnv(const std::map<std::string, std::string>& env,
                                   const std::string& home) {
  std::vector<std::string> out = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home};
  for (const std::string& k : ZygoteKeyVars()) {
    if (auto it = env.find(k); it != env.end()) out.push_back(k + "=" + it->second);
  }
  return out;
}

std::string WarmStartNote(const std::vector<std::string>& preloaded,
                          const std::vector<std::string>& skipped, int64_t fork_ms) {
  std::string list;
  for (const std::string& m : preloaded) list += (list.empty() ? "" : ", ") + m;
  std::string note = "warm start: forked from the warm interpreter (" +
                     (list.empty() ? "nothing" : list) + " preloaded";
  for (const std::string& s : skipped) note += "; not " + s.substr(0, 200);
  return note + ") in " + std::to_string(fork_ms) + " ms";
}

Result<WarmChild> ForkWarm(const replica::WarmSpec& spec, const std::string& key,
                           const WarmRequest& request) {
  STOKER_RETURN_IF_ERROR(CheckWarmDir(spec.dir));
  const WarmInvocation& inv = request.invocation;
  json body = {{"mode", inv.module ? "module" : "script"},
               {"target", inv.target},
               {"args", inv.args},
               {"python", inv.python},
               {"flag_u", inv.flag_u},
               {"env", request.env},
               {"cwd", request.cwd},
               {"run_as", nullptr}};
  if (request.switch_account) {
    body["run_as"] = {{"uid", request.uid},
                      {"gid", request.gid},
                      {"groups", request.groups},
                      {"umask", request.umask}};
  }
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  bool retry = false;
  Result<WarmChild> child = TryFork(spec, key, request, text, &retry);
  if (!child.ok() && retry) child = TryFork(spec, key, request, text, &retry);
  return child;
}

Status StartWarmChild(WarmChild* child) {
  ssize_t n;
  do {
    n = ::write(child->go, "g", 1);
  } while (n < 0 && errno == EINTR);
  int err = errno;
  ::close(child->go);
  child->go = -1;
  if (n != 1) {
    errno = err;
    return Internal(Errno("cannot start the warm child"));
  }
  return OkStatus();
}

std::optional<int> ReadWarmStatus(int conn, std::string* buffer, bool* closed) {
  char buf[512];
  while (true) {
    ssize_t n = ::recv(conn, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      buffer->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) *closed = true;
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  size_t nl;
  while ((nl = buffer->find('\n')) != std::string::npos) {
    json j = json::parse(buffer->substr(0, nl), nullptr, false);
    buffer->erase(0, nl + 1);
    if (j.is_object() && j.contains("status") && j["status"].is_number_integer()) {
      return j["status"].get<int>();
    }
  }
  return std::nullopt;
}

}  // namespace stoker::runner
