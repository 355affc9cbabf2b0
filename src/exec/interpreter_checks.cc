#include "exec/interpreter_checks.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "exec/command.h"

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

bool RunCheck(const std::string& python, const std::string& module, ModuleCheck check) {
  std::string code = check == ModuleCheck::kImport
                         ? "import " + module
                         : "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('" +
                               module + "') else 1)";
  auto r = RunCommand({python, "-c", code}, 120);
  return r.ok() && r->exit_code == 0;
}

}  // namespace

InterpreterChecks::InterpreterChecks(fs::path cache_file, Runner run)
    : cache_file_(std::move(cache_file)), run_(run ? std::move(run) : Runner(RunCheck)) {
  Load();
}

InterpreterChecks::~InterpreterChecks() {
  if (background_.joinable()) background_.join();
}

std::string InterpreterChecks::Key(const std::string& python, const std::string& module,
                                   ModuleCheck check) {
  std::error_code ec;
  fs::path resolved = fs::canonical(python, ec);
  struct stat st;
  if (ec || ::stat(resolved.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  // The path as given too: a virtual environment's python3 is a link to the
  // base interpreter, but finds other packages.
  return python + "|" + resolved.string() + "|" + std::to_string(st.st_size) + "|" +
         std::to_string(mtime_ns) + "|" + (check == ModuleCheck::kImport ? "import" : "find") +
         "|" + module;
}

void InterpreterChecks::Load() {
  if (cache_file_.empty()) return;
  std::ifstream in(cache_file_);
  if (!in) return;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& [key, value] : j.at("answers").items()) answers_[key] = value.get<bool>();
  } catch (const std::exception& e) {
    // A damaged cache only costs the checks again.
    spdlog::warn("interpreter checks: ignoring {}: {}", cache_file_.string(), e.what());
    answers_.clear();
  }
}

void InterpreterChecks::SaveLocked() const {
  if (cache_file_.empty()) return;
  std::error_code ec;
  fs::create_directories(cache_file_.parent_path(), ec);
  // Only yes is kept across restarts: after installing a framework, a
  // restart is enough for it to be seen.
  nlohmann::json yes = nlohmann::json::object();
  for (const auto& [key, ok] : answers_) {
    if (ok) yes[key] = true;
  }
  nlohmann::json j = {{"answers", yes}};
  // Written beside and renamed: a reader never sees half a file.
  fs::path tmp = cache_file_.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
    if (!out) {
      spdlog::warn("interpreter checks: cannot write {}", tmp.string());
      return;
    }
  }
  fs::rename(tmp, cache_file_, ec);
  if (ec)
    spdlog::warn("interpreter checks: cannot save {}: {}", cache_file_.string(), ec.message());
}

std::optional<bool> InterpreterChecks::Cached(const std::string& python, const std::string& module,
                                              ModuleCheck check) const {
  const std::string key = Key(python, module, check);
  if (key.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = answers_.find(key);
  if (it == answers_.end()) return std::nullopt;
  return it->second;
}

bool InterpreterChecks::Check(const std::string& python, const std::string& module,
                              ModuleCheck check) {
  const std::string key = Key(python, module, check);
  if (key.empty()) return false;
  std::unique_lock<std::mutex> lock(mu_);
  // A check of the same pair already running (the background one, when a
  // submission comes right after the start) is waited for, not repeated.
  checked_.wait(lock, [&] { return !running_.count(key); });
  auto it = answers_.find(key);
  if (it != answers_.end()) return it->second;
  running_.insert(key);
  lock.unlock();
  bool ok = run_(python, module, check);
  lock.lock();
  running_.erase(key);
  answers_[key] = ok;
  if (ok) SaveLocked();
  checked_.notify_all();
  return ok;
}

void InterpreterChecks::CheckInBackground(std::vector<std::pair<std::string, std::string>> imports,
                                          std::function<void()> done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (background_.joinable()) return;
  background_ = std::thread([this, imports = std::move(imports), done = std::move(done)] {
    for (const auto& [python, module] : imports) (void)Check(python, module, ModuleCheck::kImport);
    if (done) done();
  });
}

}  // namespace stoker::exec
