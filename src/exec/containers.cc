#include "exec/containers.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "exec/command.h"

namespace stoker::exec {
namespace {

// The first executable `name` on PATH (then the usual system directories,
// which a daemon started by systemd may lack on PATH); "" when none.
std::string FindClient(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && dir[0] == '/') {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::string FirstLine(const std::string& text) {
  size_t start = text.find_first_not_of(" \n");
  if (start == std::string::npos) return "";
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Empty when `<client> image ls -q` answers (its image store works: what
// Stoker needs of it; 60 ms, where `info` takes 0.5 s); else why not.
std::string Unusable(const std::string& client) {
  auto r = RunCommand({client, "image", "ls", "-q"}, 20);
  if (!r.ok()) return r.status().message();
  if (r->exit_code == 0) return "";
  std::string said = FirstLine(r->err.empty() ? r->out : r->err);
  return "`" + client + " image ls` failed" + (said.empty() ? "" : ": " + said);
}

}  // namespace

Result<ContainerEngine> DetectContainerEngine(const std::string& want) {
  if (want == "none") return ContainerEngine{"", "", "containers.engine is none"};
  std::vector<std::string> names = {"podman", "docker"};
  if (want != "auto") names = {want};
  std::string reasons;
  for (const std::string& name : names) {
    std::string client = FindClient(name);
    std::string why = client.empty() ? name + " is not installed" : Unusable(client);
    if (why.empty()) {
      return ContainerEngine{name, client,
                             want == "auto" ? "found " + client + " and its image store answers"
                                            : "containers.engine is " + name};
    }
    if (want != "auto") {
      return FailedPrecondition("containers.engine: " + name + " cannot be used: " + why +
                                "; fix it, or set containers.engine to auto or none");
    }
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  return ContainerEngine{
      "", "",
      "no usable container engine (" + reasons + "); images run through interpreter rules only"};
}

Result<bool> HasImage(const ContainerEngine& engine, const std::string& image) {
  std::vector<std::string> args =
      engine.name == "podman"
          ? std::vector<std::string>{engine.path, "image", "exists", "--", image}
          : std::vector<std::string>{engine.path, "image", "inspect", "--format",
                                     "{{.Id}}",   "--",    image};
  STOKER_ASSIGN_OR_RETURN(CommandResult r, RunCommand(args, 20));
  if (r.exit_code == 0) return true;
  if (r.exit_code == 1) return false;
  return FailedPrecondition("cannot ask " + engine.path + " about image " + image + ": " +
                            FirstLine(r.err));
}

ImageRegistry RegistryOf(const std::string& image) {
  ImageRegistry r{"docker.io", "registry-1.docker.io", 443};
  size_t slash = image.find('/');
  if (slash == std::string::npos) return r;
  std::string first = image.substr(0, slash);
  if (first.find_first_of(".:") == std::string::npos && first != "localhost") return r;
  r.name = first;
  r.host = first;
  // host:port, or [v6]:port
  size_t colon = first.rfind(':');
  if (colon != std::string::npos && first.find(']', colon) == std::string::npos) {
    r.host = first.substr(0, colon);
    r.port = std::atoi(first.c_str() + colon + 1);
  }
  if (r.host.size() > 2 && r.host.front() == '[' && r.host.back() == ']') {
    r.host = r.host.substr(1, r.host.size() - 2);
  }
  return r;
}

std::string ProbeRegistry(const ImageRegistry& registry, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // getaddrinfo has no time limit of its own: it runs on a thread of its
  // own, which frees the answer itself when nobody waits for it any more.
  struct Lookup {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool abandoned = false;
    int rc = 0;
    addrinfo* result = nullptr;
  };
  auto lookup = std::make_shared<Lookup>();
  std::thread([lookup, host = registry.host, port = std::to_string(registry.port)] {
    addrinfo hints = {};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
    std::lock_guard<std::mutex> lock(lookup->mu);
    if (lookup->abandoned) {
      if (rc == 0) ::freeaddrinfo(result);
      return;
    }
    lookup->rc = rc;
    lookup->result = result;
    lookup->done = true;
    lookup->cv.notify_all();
  }).detach();
  addrinfo* addresses = nullptr;
  {
    std::unique_lock<std::mutex> lock(lookup->mu);
    if (!lookup->cv.wait_until(lock, deadline, [&] { return lookup->done; })) {
      lookup->abandoned = true;
      return "cannot resolve " + registry.host + " within " + std::to_string(timeout_ms) + " ms";
    }
    if (lookup->rc != 0) {
      return "cannot resolve " + registry.host + ": " + ::gai_strerror(lookup->rc);
    }
    addresses = lookup->result;
  }
  std::string why;
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    char host[NI_MAXHOST] = "?";
    ::getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
    std::string where = std::string(host) + ":" + std::to_string(registry.port);
    int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        int left = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
        pollfd p = {fd, POLLOUT, 0};
        if (left <= 0 || ::poll(&p, 1, left) != 1) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof err;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(addresses);
      return "";
    }
    why += (why.empty() ? "" : "; ") + where + ": " + std::strerror(err);
    if (Clock::now() >= deadline) break;
  }
  ::freeaddrinfo(addresses);
  return why.empty() ? "no address of " + registry.host + " answers" : why;
}

std::vector<std::string> EngineCommand(const ContainerEngine& engine,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> out = {engine.path};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

}  // namespace stoker::exec
