#include "exec/trainer_account.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace stoker::exec {
namespace {

namespace fs = std::filesystem;

Status Chown(const fs::path& path, const RunAs& who, mode_t mode) {
  if (::chown(path.c_str(), who.uid, who.gid) != 0 || ::chmod(path.c_str(), mode) != 0) {
    return Internal("cannot hand " + path.string() + " to " + who.user + " (uid " +
                    std::to_string(who.uid) + "): " + std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace

Status HandOverReplicaDir(const fs::path& jobs_root, const fs::path& dir, const RunAs& who,
                          const std::map<std::string, std::string>& env) {
  if (::chmod(jobs_root.c_str(), 0711) != 0) {
    return Internal("cannot chmod " + jobs_root.string() + ": " + std::strerror(errno));
  }
  for (fs::path p = dir; p != jobs_root && p.has_relative_path() && p != p.parent_path();
       p = p.parent_path()) {
    STOKER_RETURN_IF_ERROR(Chown(p, who, 0700));
  }
  if (auto it = env.find("AIP_MODEL_DIR"); it != env.end()) {
    std::string model = it->second;  // ".../out/model/" -> ".../out"
    while (model.size() > 1 && model.back() == '/') model.pop_back();
    fs::path out = fs::path(model).parent_path();
    std::error_code ec;
    fs::path data = fs::weakly_canonical(jobs_root.parent_path(), ec);
    fs::path canon = fs::weakly_canonical(out, ec);
    auto rel = canon.lexically_relative(data);
    if (!ec && !rel.empty() && *rel.begin() != ".." && fs::is_directory(canon)) {
      struct stat st;
      if (::stat(canon.c_str(), &st) == 0 && st.st_uid == ::geteuid()) {
        if (::chown(canon.c_str(), who.uid, who.gid) != 0) {
          return Internal("cannot hand the output directory " + canon.string() + " to " + who.user +
                          ": " + std::strerror(errno));
        }
      }
    }
  }
  return OkStatus();
}

}  // namespace stoker::exec
