#include "runner/warm_start.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
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

#include "common/files.h"
#include "common/fnv1a.h"
#include "common/time.h"
#include "replica/replica_processes.h"
#include "replica/warm_start_registry.h"
#include "runner/isolation.h"

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

// The address of the Unix socket at `path`; false (errno ENAMETOOLONG)
// when the path does not fit.
bool UnixAddress(const fs::path& path, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  if (path.string().size() >= sizeof addr->sun_path) {
    errno = ENAMETOOLONG;
    return false;
  }
  std::strcpy(addr->sun_path, path.c_str());
  return true;
}

int ConnectUnix(const fs::path& path) {
  sockaddr_un addr;
  if (!UnixAddress(path, &addr)) return -1;
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

// Sends `data` with `fds` attached to its first bytes.
bool SendRequest(int fd, std::string data, const std::vector<int>& fds) {
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

// Drops the calling process (a child of stoker-run's) to the zygote's
// account exactly as the cold path drops a trainer (supervisor.cc): groups,
// gid, uid, each checked, and root can never be regained. nullptr, or the
// step that failed (errno set).
const char* DropTo(const ZygoteIdentity& a) {
  std::vector<gid_t> groups(a.groups.begin(), a.groups.end());
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (::setgroups(groups.size(), groups.data()) != 0) return "setgroups";
  if (::setgid(a.gid) != 0) return "setgid";
  if (::setuid(a.uid) != 0) return "setuid";
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0 || ru != a.uid ||
      eu != a.uid || su != a.uid || rg != a.gid || eg != a.gid || sg != a.gid) {
    return "checking the ids after setuid";
  }
  if (a.uid != 0 && ::setuid(0) == 0) return "checking that root cannot be regained";
  return nullptr;
}

// A Unix socket bound (not listening) at `path`: the zygote listens on it, so
// that SO_PEERCRED names the zygote; only stoker-run's account can reach the
// path (the warm dir is its own, mode 0700). -1 with errno on failure.
int BindUnix(const fs::path& path) {
  sockaddr_un addr;
  if (!UnixAddress(path, &addr)) return -1;
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  mode_t old = ::umask(077);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (rc != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Under zygotes.lock: makes room for one more zygote of `user` (ending
// least recently used idle ones) and records `key` as being started by this
// process. FailedPrecondition with the reason when there is no room.
Status ReserveZygote(const replica::WarmSpec& spec, const std::string& key) {
  const fs::path lock_path = spec.dir / "zygotes.lock";
  int lock = LockWarmFile(lock_path, kZygoteReadyMs);
  if (lock < 0) return Unavailable(Errno("cannot lock " + lock_path.string()));
  std::vector<ZygoteRecord> live = ListLiveZygotes(spec.dir);
  // This key's own zygote, if alive, no longer answers: it is being replaced.
  std::erase_if(live, [&](const ZygoteRecord& r) { return r.key == key; });
  SpawnPlan plan = PlanZygoteSpawn(live, spec.user, spec.max_per_user, spec.max_total);
  Status s = OkStatus();
  if (plan.refusal.empty()) {
    for (const ZygoteRecord& r : live) {
      if (std::find(plan.end.begin(), plan.end.end(), r.key) != plan.end.end()) {
        EndZygote(spec.dir, r);
      }
    }
    ZygoteRecord mine;
    mine.key = key;
    mine.user = spec.user;
    mine.spawner = ::getpid();
    s = WriteFileAtomic(spec.dir / (key + ".json"), FormatZygoteRecord(mine), Durability::kNoSync);
  }
  ::close(lock);
  if (!plan.refusal.empty()) return FailedPrecondition(plan.refusal);
  return s;
}

// Starts the zygote for `key`, detached (own session, not below this
// subreaper), as the request's account, and waits until it is ready; then
// puts its socket in place and completes its record. OK once its socket
// accepts.
Status SpawnZygote(const replica::WarmSpec& spec, const std::string& key,
                   const WarmRequest& request) {
  const fs::path sock = spec.dir / (key + ".sock");
  const fs::path tmp = spec.dir / (key + "." + std::to_string(::getpid()) + ".tmp");
  const fs::path log = spec.dir / (key + ".log");
  std::string preload;
  for (const std::string& m : spec.preload) preload += (preload.empty() ? "" : ",") + m;
  char idle[32];
  std::snprintf(idle, sizeof idle, "%.0f", spec.idle_seconds);
  std::vector<std::string> args = {request.zygote.python_path,
                                   spec.zygote.string(),
                                   "--socket",
                                   sock.string(),
                                   "--listen-fd",
                                   "4",
                                   "--dir-fd",
                                   "5",
                                   "--client-uid",
                                   std::to_string(::geteuid()),
                                   "--preload",
                                   preload,
                                   "--idle",
                                   idle,
                                   "--ready-fd",
                                   "3"};
  std::vector<std::string> env = ZygoteEnv(request.zygote.defaults, spec.dir.string());
  std::vector<char*> argv_p, env_p;
  for (auto& a : args) argv_p.push_back(a.data());
  argv_p.push_back(nullptr);
  for (auto& e : env) env_p.push_back(e.data());
  env_p.push_back(nullptr);

  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int dir_fd = ::open(spec.dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);  // no listing
  int listen_fd = BindUnix(tmp);
  int ready[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {log_fd, null_fd, dir_fd, listen_fd, ready[0], ready[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (log_fd < 0 || null_fd < 0 || dir_fd < 0 || listen_fd < 0 || ::pipe2(ready, O_CLOEXEC) != 0) {
    Status s = Internal(Errno("cannot prepare the warm interpreter's start"));
    close_all();
    ::unlink(tmp.c_str());
    return s;
  }
  const bool drop = request.switch_account;
  const ZygoteIdentity& account = request.zygote;
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
      // fds 0-5 as the zygote expects them, whatever numbers they had.
      const int from[6] = {null_fd, null_fd, log_fd, ready[1], listen_fd, dir_fd};
      int high[6];
      for (int i = 0; i < 6; ++i) high[i] = ::fcntl(from[i], F_DUPFD, 64);
      for (int i = 0; i < 6; ++i) ::dup2(high[i], i);
      ::syscall(SYS_close_range, 6u, ~0u, 0u);
      ::chdir("/");
      if (drop) {
        if (const char* step = DropTo(account)) {
          dprintf(2, "stoker-run: cannot start the warm interpreter as uid %u gid %u: %s: %s\n",
                  account.uid, account.gid, step, std::strerror(errno));
          ::_exit(127);
        }
      }
      ::execve(argv_p[0], argv_p.data(), env_p.data());
      dprintf(2, "stoker-run: cannot execute %s: %s\n", argv_p[0], std::strerror(errno));
      ::_exit(127);
    }
    ::_exit(0);
  }
  if (mid > 0) ::waitpid(mid, nullptr, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::close(ready[1]);
  ready[1] = -1;
  int reader = ready[0];
  ready[0] = -1;
  close_all();
  if (mid < 0) {
    ::close(reader);
    ::unlink(tmp.c_str());
    return Internal(Errno("cannot fork the warm interpreter"));
  }
  std::optional<std::string> line = ReadLine(reader, kZygoteReadyMs);
  ::close(reader);
  json j = line ? json::parse(*line, nullptr, false) : json();
  pid_t pid = j.is_object() ? j.value("pid", 0) : 0;
  if (!j.is_object() || !j.value("ready", false) || pid <= 0 ||
      ::rename(tmp.c_str(), sock.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Unavailable("the warm interpreter " + request.zygote.python_path +
                       " did not start (see " + log.string() + ")");
  }
  ZygoteRecord record;
  record.key = key;
  record.user = spec.user;
  record.pid = pid;
  record.start_ticks = ProcessStartTicks(pid);
  return WriteFileAtomic(spec.dir / (key + ".json"), FormatZygoteRecord(record),
                         Durability::kNoSync);
}

// Connects to the zygote of `key`, starting it when none answers: under the
// key's lock (concurrent supervisors start one), within the node's limits.
Result<int> ConnectOrSpawn(const replica::WarmSpec& spec, const std::string& key,
                           const WarmRequest& request) {
  const fs::path sock = spec.dir / (key + ".sock");
  int conn = ConnectUnix(sock);
  if (conn >= 0) {
    TouchZygote(spec.dir, key);
    return conn;
  }
  const fs::path lock_path = spec.dir / (key + ".lock");
  int lock = LockWarmFile(lock_path, kZygoteReadyMs);
  if (lock < 0) return Unavailable(Errno("cannot lock " + lock_path.string()));
  conn = ConnectUnix(sock);  // another supervisor may have started it meanwhile
  Status spawned = OkStatus();
  if (conn < 0) {
    spawned = ReserveZygote(spec, key);
    if (spawned.ok()) spawned = SpawnZygote(spec, key, request);
    if (!spawned.ok()) {
      std::error_code ec;
      fs::remove(spec.dir / (key + ".json"), ec);
    }
    if (spawned.ok()) conn = ConnectUnix(sock);
  }
  ::close(lock);
  if (!spawned.ok()) return spawned;
  if (conn < 0) return Unavailable(Errno("cannot connect to the warm interpreter"));
  return conn;
}

// The request's wire form: a 4-byte big-endian length and a header the
// zygote reads itself (the fds' names and what it checks before forking:
// nothing secret), then a 4-byte length and the body, which only the
// forked child decodes (the zygote wipes its copy after the fork).
std::string Frame(const json& header, const std::string& body) {
  std::string head = header.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  for (const std::string* part : std::initializer_list<const std::string*>{&head, &body}) {
    uint32_t n = static_cast<uint32_t>(part->size());
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((n >> shift) & 0xff));
    out += *part;
  }
  return out;
}

// One try at the zygote: connect (starting it when none answers), send the
// request, read the reply. `*retry`: the zygote went away under us.
Result<WarmChild> TryFork(const replica::WarmSpec& spec, const std::string& key,
                          const WarmRequest& request, const std::string& body, bool* retry) {
  *retry = false;
  const fs::path sock = spec.dir / (key + ".sock");
  const int64_t start_ms = MonotonicMs();
  STOKER_ASSIGN_OR_RETURN(int conn, ConnectOrSpawn(spec, key, request));
  const uint32_t zygote_uid = request.switch_account ? request.zygote.uid : ::geteuid();
  ucred peer = {};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != zygote_uid) {
    ::close(conn);
    return PermissionDenied("the warm interpreter's socket " + sock.string() +
                            " is not served by uid " + std::to_string(zygote_uid));
  }
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    ::close(conn);
    return Internal(Errno("cannot make the go pipe"));
  }
  std::vector<int> fds = {request.stdin_fd, request.out_fd, go[0]};
  json header = {{"fds", {"stdin", "out", "go"}}, {"home", nullptr}};
  if (auto h = request.env.find("HOME");
      h != request.env.end() && !request.env.count("PYTHONNOUSERSITE")) {
    header["home"] = h->second;
  }
  if (request.userns_fd >= 0) {
    fds.push_back(request.userns_fd);
    header["fds"].push_back("userns");
  }
  if (request.mntns_fd >= 0) {
    fds.push_back(request.mntns_fd);
    header["fds"].push_back("mntns");
  }
  bool sent = SendRequest(conn, Frame(header, body), fds);
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
  child.zygote_uid = peer.uid;
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
  if (std::optional<ProcStat> z = ReadProcStat(child.zygote_pid)) {
    child.zygote_rss_bytes = z->rss_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
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

std::string StartupVarProblem(const std::map<std::string, std::string>& env,
                              const std::map<std::string, std::string>& defaults) {
  const std::string why = " (read at interpreter start-up, which a warm start skips)";
  auto shown = [](const std::string& v) { return v.size() > 64 ? v.substr(0, 64) + "..." : v; };
  for (const auto& [k, v] : env) {
    if (!replica::IsWarmStartupVar(k)) continue;
    auto d = defaults.find(k);
    if (d == defaults.end()) {
      return k + "=" + shown(v) + " differs from the warm interpreter's, which has none" + why;
    }
    if (d->second != v) {
      return k + "=" + shown(v) + " differs from the warm interpreter's " + shown(d->second) + why;
    }
  }
  for (const auto& [k, v] : defaults) {
    if (!env.count(k)) return k + " is not set, the warm interpreter's is " + shown(v) + why;
  }
  return "";
}

std::string ZygoteKey(const ZygoteIdentity& id) {
  std::string canon = id.python_path + '\0';
  for (const std::string& m : id.preload) canon += m + ',';
  canon += '\0';
  for (const auto& [k, v] : id.defaults) canon += k + '=' + v + '\0';
  canon += '\1' + id.user + '\0' + std::to_string(id.uid) + '\0' + std::to_string(id.gid) + '\0';
  for (uint32_t g : id.groups) canon += std::to_string(g) + ',';
  return Fnv1aHex(canon);
}

std::vector<std::string> ZygoteEnv(const std::map<std::string, std::string>& defaults,
                                   const std::string& home) {
  std::vector<std::string> out = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home};
  for (const auto& [k, v] : defaults) {
    if (replica::IsWarmStartupVar(k)) out.push_back(k + "=" + v);
  }
  return out;
}

std::string WarmStartNote(const WarmChild& child, const std::string& user) {
  std::string list;
  for (const std::string& m : child.preloaded) list += (list.empty() ? "" : ", ") + m;
  std::string note = "warm start: forked from the warm interpreter (" +
                     (list.empty() ? "nothing" : list) + " preloaded";
  for (const std::string& s : child.skipped) note += "; not " + s.substr(0, 200);
  note += ") in " + std::to_string(child.fork_ms) + " ms";
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.0f MB", static_cast<double>(child.zygote_rss_bytes) / 1e6);
  return note + "; it runs as uid " + std::to_string(child.zygote_uid) + " (pid " +
         std::to_string(child.zygote_pid) + ", " + mb + " resident, kept for " +
         (user.empty() ? "the local user" : user) + ")";
}

Result<std::pair<int, int>> PrepareAccountView(const replica::IsolationSpec& spec,
                                               const ZygoteIdentity& account) {
  STOKER_ASSIGN_OR_RETURN(
      HeldView view, HoldViewInHelper([&spec, &account](std::string* note) -> std::string {
        if (const char* step = DropTo(account)) {
          return "cannot become uid " + std::to_string(account.uid) + ": " + step;
        }
        // Made as the account: a user namespace it owns, mapping its own ids.
        Isolation isolation(spec, account.uid == 0);
        int pipe_fds[2] = {-1, -1};
        if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) ::_exit(1);
        // A setuid without exec left it non-dumpable, and so its own
        // /proc/self/uid_map root's: writable by it only while dumpable.
        ::prctl(PR_SET_DUMPABLE, 1);
        const char* error = isolation.Enter(pipe_fds[1]);
        ::prctl(PR_SET_DUMPABLE, 0);
        char buf[600] = {};
        ssize_t n = ::read(pipe_fds[0], buf, sizeof buf - 1);
        if (error) return error;
        note->assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
        return "";
      }));
  if (view.userns_fd >= 0 && view.mntns_fd >= 0) {
    return std::pair<int, int>{view.userns_fd, view.mntns_fd};
  }
  for (int fd : {view.userns_fd, view.mntns_fd}) {
    if (fd >= 0) ::close(fd);
  }
  std::string note = view.note;
  while (!note.empty() && note.back() == '\n') note.pop_back();
  // A cold trainer would be isolated by root's namespace; a warm one,
  // whose zygote is the account's, cannot join that one.
  return FailedPrecondition("the trainer's account cannot make its isolated view itself here" +
                            (note.empty() ? std::string() : " (" + note + ")") +
                            ", and a warm interpreter, which runs as that account, can join no "
                            "other");
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
               {"run_as",
                {{"uid", request.switch_account ? request.zygote.uid : ::geteuid()},
                 {"gid", request.switch_account ? request.zygote.gid : ::getegid()},
                 {"umask", request.umask}}}};
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
