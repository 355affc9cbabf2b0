#include "exec/image_engine.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "exec/command.h"

extern char** environ;

namespace stoker::exec {
namespace {

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class CommandImageEngine : public ImageEngine {
 public:
  explicit CommandImageEngine(ContainerEngine engine) : engine_(std::move(engine)) {}

  std::string Kind() const override { return engine_.name; }

  Result<std::vector<ListedImage>> List() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Events from a second before this list on are followed: one the
      // list already shows costs one more read, none is lost.
      listed_at_ = NowSeconds() - 1;
    }
    STOKER_ASSIGN_OR_RETURN(
        CommandResult r, RunImageStoreRead({engine_.path, "image", "ls", "--no-trunc", "--format",
                                            "{{.ID}} {{.Repository}} {{.Tag}} {{.Digest}}"},
                                           60));
    if (r.exit_code != 0) {
      return FailedPrecondition("`" + engine_.path +
                                " image ls` failed: " + r.err.substr(0, r.err.find('\n')));
    }
    std::vector<ListedImage> out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      for (ListedImage& image : ParseImageListLine(line)) out.push_back(std::move(image));
    }
    return out;
  }

  Status Watch(const std::function<void()>& on_event) override;

  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  }

 private:
  ContainerEngine engine_;
  std::mutex mu_;
  int64_t listed_at_ = 0;
  bool cancelled_ = false;
  int pidfd_ = -1;  // the running events client, signalled through this (no pid reuse)
};

Status CommandImageEngine::Watch(const std::function<void()>& on_event) {
  std::vector<std::string> args;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return Status();
    args = {engine_.path, "events",
            "--filter",   "type=image",
            "--format",   engine_.name == "podman" ? "{{.Status}}" : "{{.Action}}",
            "--since",    std::to_string(listed_at_)};
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + strerror(errno));
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec. The client dies with stokerd.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null_fd, 0);
    ::dup2(out[1], 1);
    ::dup2(null_fd, 2);
    ::execve(argv[0], argv.data(), environ);
    ::_exit(127);
  }
  ::close(out[1]);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) {
    ::close(out[0]);
    return Internal(std::string("fork: ") + strerror(errno));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (cancelled_ && pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  }
  // Each read that brings at least one whole event line is one refresh: a
  // build's several events (build, tag) mostly arrive together.
  char buf[4096];
  while (true) {
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (std::memchr(buf, '\n', n) != nullptr) on_event();
  }
  ::close(out[0]);
  int pidfd = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(pidfd, pidfd_);
  }
  if (pidfd >= 0) {
    // Reaped through its pidfd (P_PIDFD, Linux 5.4): never another child
    // that got its pid after the controller, which reaps every child of
    // stokerd, reaped it first.
    constexpr int kPidfd = 3;
    siginfo_t info;
    ::waitid(static_cast<idtype_t>(kPidfd), static_cast<id_t>(pidfd), &info, WEXITED);
    ::close(pidfd);
  }
  return FailedPrecondition("`" + engine_.path + " events` ended");
}

}  // namespace

std::unique_ptr<ImageEngine> MakeCommandImageEngine(const ContainerEngine& engine) {
  return std::make_unique<CommandImageEngine>(engine);
}

std::vector<ListedImage> ParseImageListLine(const std::string& line) {
  std::istringstream fields(line);
  std::string id, repo, tag, digest;
  fields >> id >> repo >> tag >> digest;
  std::vector<ListedImage> out;
  if (repo.empty() || repo == "<none>") return out;
  if (!tag.empty() && tag != "<none>") out.push_back({repo + ":" + tag, id});
  if (digest.rfind("sha256:", 0) == 0) out.push_back({repo + "@" + digest, id});
  return out;
}

}  // namespace stoker::exec
