#include "cli/connection.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/files.h"

extern char** environ;

namespace stoker::cli {
namespace {

namespace fs = std::filesystem;

Code CodeForHttp(int status) {
  switch (status) {
    case 400:
      return Code::kInvalidArgument;
    case 401:
    case 403:
      return Code::kPermissionDenied;
    case 404:
      return Code::kNotFound;
    case 409:
      return Code::kAlreadyExists;
    case 413:
    case 429:
      return Code::kResourceExhausted;
    case 503:
      return Code::kUnavailable;
    case 504:
      return Code::kDeadlineExceeded;
    default:
      return Code::kInternal;
  }
}

bool Healthy(const std::string& url, const http::ClientOptions& options) {
  http::Client c(url, options);
  auto r = c.Call("GET", "/healthz", "", {}, 2000);
  return r.ok() && r->status == 200;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

fs::path StokerdBinary() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path dir = ec ? fs::current_path() : exe.parent_path();
  for (const fs::path& p : {dir / "stokerd", dir / "../server/stokerd"}) {
    if (fs::exists(p)) return p;
  }
  return "stokerd";  // from PATH
}

// Where the local daemon listens (server/listen_address.h): LocalPort(), the
// console's fixed address, else the next free of the nine after it (a second
// user's daemon on the machine), else any free port.
Result<std::string> LocalListen() {
  STOKER_ASSIGN_OR_RETURN(int first, LocalPort());
  std::string list;
  for (int port = first; port < first + 10; ++port) {
    list += "127.0.0.1:" + std::to_string(port) + ",";
  }
  return list + "127.0.0.1:0";
}

// Whether the daemon of `home` runs: it holds the lock on its pid file for
// its whole life (server/main.cc). A stokerd.addr left by a daemon that did
// not stop cleanly may name a port that another user's daemon now has.
// Unknown (no pid file we can open) counts as running: the address is then
// checked by asking it.
bool LocalDaemonMayRun(const fs::path& home) {
  int fd = ::open((home / "stokerd.pid").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases our shared lock, if we took it
  return held;
}

// Starts stokerd detached (its own session; output to HOME/stokerd.log).
Status StartDaemon(const fs::path& home) {
  STOKER_RETURN_IF_ERROR(MakeDirs(home));
  std::string bin = StokerdBinary().string();
  STOKER_ASSIGN_OR_RETURN(std::string listen, LocalListen());
  std::string data = home.string();
  std::string log = (home / "stokerd.log").string();
  pid_t pid = ::fork();
  if (pid < 0) return Internal("cannot fork to start stokerd");
  if (pid == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execl(bin.c_str(), bin.c_str(), "--data-dir", data.c_str(), "--listen", listen.c_str(),
            static_cast<char*>(nullptr));
    ::execlp("stokerd", "stokerd", "--data-dir", data.c_str(), "--listen", listen.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status;
  ::waitpid(pid, &status, 0);
  return OkStatus();
}

}  // namespace

Result<int> LocalPort() {
  const char* env = std::getenv("STOKER_LOCAL_PORT");
  if (!env || !*env) return kLocalPort;
  char* end = nullptr;
  long port = std::strtol(env, &end, 10);
  if (*end != '\0' || port < 1 || port > 65535 - 9) {
    return InvalidArgument(std::string("STOKER_LOCAL_PORT: '") + env +
                           "' is not a port in 1..65526; unset it for the default " +
                           std::to_string(kLocalPort));
  }
  return static_cast<int>(port);
}

Connection::Connection(std::string url, std::string token, const http::ClientOptions& options)
    : url_(url), token_(std::move(token)), client_(url, options) {}

Result<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options) {
  http::ClientOptions client_options;
  client_options.ca_file = options.ca_file;
  if (const char* ca = std::getenv("STOKER_CA_FILE"); client_options.ca_file.empty() && ca) {
    client_options.ca_file = ca;
  }
  fs::path home = DefaultStokerHome();
  // The token is read lazily below, after a daemon we start has written it.
  auto token = [&options, &home]() -> std::string {
    if (!options.token.empty()) return options.token;
    if (const char* t = std::getenv("STOKER_TOKEN"); t && *t) return t;
    auto text = ReadFile(home / "token");
    return text.ok() ? Trim(*text) : "";
  };
  std::string url = options.server;
  if (url.empty()) {
    if (const char* s = std::getenv("STOKER_SERVER"); s && *s) url = s;
  }
  if (!url.empty()) {
    while (!url.empty() && url.back() == '/') url.pop_back();
    return std::unique_ptr<Connection>(new Connection(url, token(), client_options));
  }
  fs::path addr = home / "stokerd.addr";
  if (!LocalDaemonMayRun(home)) {
    std::error_code ec;
    fs::remove(addr, ec);  // stale: the daemon we start writes its own
  } else if (auto text = ReadFile(addr); text.ok() && Healthy(Trim(*text), client_options)) {
    return std::unique_ptr<Connection>(new Connection(Trim(*text), token(), client_options));
  }
  STOKER_RETURN_IF_ERROR(StartDaemon(home));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto text = ReadFile(addr); text.ok() && Healthy(Trim(*text), client_options)) {
      return std::unique_ptr<Connection>(new Connection(Trim(*text), token(), client_options));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Unavailable("started stokerd for " + home.string() +
                     " but it did not answer within 20s; see " + (home / "stokerd.log").string());
}

Result<std::string> Connection::CallRaw(const std::string& method, const std::string& target,
                                        const std::string& body) {
  std::map<std::string, std::string> headers = {{"content-type", "application/json"}};
  if (!token_.empty()) headers["authorization"] = "Bearer " + token_;
  auto r = client_.Call(method, target, body, headers, 120000);
  if (!r.ok()) return r.status();
  if (r->status >= 200 && r->status < 300) return std::move(r->body);
  return StatusOf(*r);
}

Status Connection::StatusOf(const http::Response& r) {
  if (r.status >= 200 && r.status < 300) return OkStatus();
  nlohmann::json err = nlohmann::json::parse(r.body, nullptr, false);
  std::string message = r.body;
  if (err.is_object() && err.contains("error") && err["error"].contains("message")) {
    message = err["error"]["message"].get<std::string>();
  }
  return Status(CodeForHttp(r.status), message);
}

Result<http::Response> Connection::Stream(const std::string& method, const std::string& target,
                                          std::map<std::string, std::string> headers,
                                          uint64_t body_size,
                                          const http::Client::BodyReader& reader,
                                          const http::Client::BodyWriter& writer) {
  if (!token_.empty()) headers["authorization"] = "Bearer " + token_;
  return client_.Stream(method, target, headers, body_size, reader, writer, 120000);
}

Result<nlohmann::json> Connection::Call(const std::string& method, const std::string& target,
                                        const std::string& body) {
  STOKER_ASSIGN_OR_RETURN(std::string text, CallRaw(method, target, body));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    return Internal("stokerd answered " + target + " with something that is not JSON");
  return j;
}

}  // namespace stoker::cli
