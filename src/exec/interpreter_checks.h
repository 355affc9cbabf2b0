// Which Python modules an interpreter can import, asked ahead of time
// (docs/containers.md, docs/decisions/0037): the answers are kept in
// memory, keyed by the interpreter's path and its resolved file's path,
// size and modification time, so that a reinstalled or upgraded interpreter is asked again. The
// yes answers are also kept in a JSON file (the daemon's
// <data_dir>/cache/interpreters.json), so that a restart asks none of them
// again; a no is asked again after a restart (install the module, restart
// the daemon).
//
// Thread safety: every member is safe to call from any thread. Check runs
// the interpreter without holding the lock (a slow import holds up nobody
// else's lookup); a second Check of a pair being checked waits for the
// first one's answer instead of running the interpreter again.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace stoker::exec {

// What is asked of an interpreter about a module.
enum class ModuleCheck {
  kImport,  // `python -c "import MODULE"` exits 0 (seconds for a framework)
  kFind,    // importlib.util.find_spec(MODULE) finds it (no import)
};

class InterpreterChecks {
 public:
  // Runs the check; true when the interpreter says yes.
  using Runner =
      std::function<bool(const std::string& python, const std::string& module, ModuleCheck)>;

  // `cache_file`: "" keeps answers in memory only. `run`: the real check
  // (a subprocess with a 120 s limit) unless a test gives its own.
  explicit InterpreterChecks(std::filesystem::path cache_file, Runner run = {});
  // Waits for CheckInBackground's thread (at most its current check).
  ~InterpreterChecks();
  InterpreterChecks(const InterpreterChecks&) = delete;
  InterpreterChecks& operator=(const InterpreterChecks&) = delete;

  // The remembered answer, when the interpreter file is the one it was
  // asked of (same resolved path, size and mtime); false when `python` is
  // not a file; nullopt otherwise (never asked, or changed since). No
  // subprocess.
  std::optional<bool> Cached(const std::string& python, const std::string& module,
                             ModuleCheck check) const;

  // Cached, else runs the check now and remembers the answer (saving a
  // yes). An
  // interpreter that is not a file is "no" without running anything.
  bool Check(const std::string& python, const std::string& module, ModuleCheck check);

  // Checks each pair not cached yet, one after another, on a thread of its
  // own (once per object; a second call is ignored). `done` (optional) is
  // called on that thread when all are checked.
  void CheckInBackground(std::vector<std::pair<std::string, std::string>> imports,
                         std::function<void()> done = {});

 private:
  // "<python>|<resolved path>|<size>|<mtime ns>|<import|find>|<module>";
  // "" when `python` is not a file.
  static std::string Key(const std::string& python, const std::string& module, ModuleCheck check);
  void Load();
  void SaveLocked() const;

  const std::filesystem::path cache_file_;
  Runner run_;
  mutable std::mutex mu_;
  std::condition_variable checked_;  // a running check ended
  std::map<std::string, bool> answers_;
  std::set<std::string> running_;  // keys being checked now
  std::thread background_;
};

}  // namespace stoker::exec
