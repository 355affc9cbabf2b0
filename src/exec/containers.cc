#include "exec/containers.h"

#include <arpa/inet.h>
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
  auto r = RunImageStoreRead({client, "image", "ls", "-q"}, 20);
  if (!r.ok()) return r.status().message();
  if (r->exit_code == 0) return "";
  std::string said = FirstLine(r->err.empty() ? r->out : r->err);
  return "`" + client + " image ls` failed" + (said.empty() ? "" : ": " + said);
}

// `a`'s address as digits ("127.0.0.1", "::1"); "" when unreadable.
std::string NumericHost(const addrinfo* a) {
  char host[NI_MAXHOST] = "";
  if (::getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) !=
      0) {
    return "";
  }
  return host;
}

}  // namespace

Result<CommandResult> RunImageStoreRead(const std::vector<std::string>& args,
                                        double timeout_seconds) {
  for (int pause_ms : {200, 600}) {
    STOKER_ASSIGN_OR_RETURN(CommandResult r, RunCommand(args, timeout_seconds));
    if (r.exit_code == 0 || r.timed_out) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  return RunCommand(args, timeout_seconds);
}

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

Result<bool> HasImage(const ContainerEngine& engine, const ImageReference& ref) {
  const std::string image = ref.ToString();
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

std::string NonPublicAddressKind(const std::string& numeric) {
  // getnameinfo writes a link-local IPv6 address with its zone: "fe80::1%eth0".
  const std::string address = numeric.substr(0, numeric.find('%'));
  unsigned char v6[16];
  uint32_t v4 = 0;
  in_addr a4;
  if (::inet_pton(AF_INET, address.c_str(), &a4) == 1) {
    v4 = ntohl(a4.s_addr);
  } else if (::inet_pton(AF_INET6, address.c_str(), v6) == 1) {
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(v6, kMapped, 12) != 0) {
      static const unsigned char kZero[16] = {};
      if (std::memcmp(v6, kZero, 16) == 0) return "unspecified";
      if (std::memcmp(v6, kZero, 15) == 0 && v6[15] == 1) return "loopback";
      if (v6[0] == 0xfe && (v6[1] & 0xc0) == 0x80) return "link-local";
      if ((v6[0] & 0xfe) == 0xfc) return "private";
      if (v6[0] == 0xff) return "multicast";
      return "";
    }
    v4 = (uint32_t{v6[12]} << 24) | (uint32_t{v6[13]} << 16) | (uint32_t{v6[14]} << 8) | v6[15];
  } else {
    return "";
  }
  auto in = [v4](uint32_t net, int bits) { return (v4 >> (32 - bits)) == (net >> (32 - bits)); };
  if (in(0x00000000, 8)) return "unspecified";
  if (in(0x7f000000, 8)) return "loopback";
  if (in(0xa9fe0000, 16)) return "link-local";
  if (in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16)) return "private";
  if (in(0xe0000000, 4)) return "multicast";
  if (v4 == 0xffffffff) return "broadcast";
  return "";
}

RegistryProbe ProbeRegistry(const ImageReference& image, bool allow_private, int timeout_ms) {
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
  std::thread([lookup, host = image.ConnectHost(), port = std::to_string(image.ConnectPort())] {
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
      return {false, "cannot resolve " + image.ConnectHost() + " within " +
                         std::to_string(timeout_ms) + " ms"};
    }
    if (lookup->rc != 0) {
      return {false, "cannot resolve " + image.ConnectHost() + ": " + ::gai_strerror(lookup->rc)};
    }
    addresses = lookup->result;
  }
  // Every address is checked before any is connected to.
  for (addrinfo* a = addresses; a != nullptr && !allow_private; a = a->ai_next) {
    std::string host = NumericHost(a);
    std::string kind = NonPublicAddressKind(host);
    if (host.empty()) kind = "unreadable";
    if (!kind.empty()) {
      ::freeaddrinfo(addresses);
      return {true, (host.empty() ? "an address" : host) + ", a" +
                        (kind == "unspecified" ? "n " : " ") + kind + " address"};
    }
  }
  std::string why;
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    std::string where = NumericHost(a) + ":" + std::to_string(image.ConnectPort());
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
      return {};
    }
    why += (why.empty() ? "" : "; ") + where + ": " + std::strerror(err);
    if (Clock::now() >= deadline) break;
  }
  ::freeaddrinfo(addresses);
  return {false, why.empty() ? "no address of " + image.ConnectHost() + " answers" : why};
}

std::vector<std::string> EngineCommand(const ContainerEngine& engine,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> out = {engine.path};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

}  // namespace stoker::exec
