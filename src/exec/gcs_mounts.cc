#include "exec/gcs_mounts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker::exec {

namespace fs = std::filesystem;

std::vector<replica::BindSpec> GcsBinds(const fs::path& data,
                                        const std::map<std::string, fs::path>& overrides) {
  std::vector<replica::BindSpec> binds = {{fs::absolute(data / "buckets"), fs::path(kGcsRoot)}};
  for (const auto& [name, dir] : overrides) {
    binds.push_back({fs::absolute(dir), fs::path(kGcsRoot) / name});
  }
  return binds;
}

std::string PrepareGcsMountPoints(const fs::path& data,
                                  const std::map<std::string, fs::path>& overrides) {
  std::error_code ec;
  // The root of the buckets exists from the start, so that a trainer's /gcs
  // shows buckets made after it started too (as Buckets::Create would make it).
  ::mkdir((data / "buckets").c_str(), 0755);
  for (const auto& [name, dir] : overrides) {
    fs::path point = data / "buckets" / name;
    if (!fs::exists(point, ec)) ::mkdir(point.c_str(), 0755);  // best effort: /gcs/NAME only
  }
  if (fs::is_directory(kGcsRoot, ec)) {
    return std::string("trainers find the buckets at ") + kGcsRoot +
           "/BUCKET (isolated and "
           "container trainers; docs/storage.md)";
  }
  if (::geteuid() == 0) {
    if (::mkdir(kGcsRoot, 0755) == 0 || errno == EEXIST) {
      return std::string("made the empty directory ") + kGcsRoot +
             ": trainers find the buckets at /gcs/BUCKET (isolated and container trainers)";
    }
    return std::string("cannot make ") + kGcsRoot + " (" + std::strerror(errno) +
           "): only container trainers find the buckets at /gcs/BUCKET";
  }
  return std::string("this host has no ") + kGcsRoot +
         ": only container trainers find the buckets at /gcs/BUCKET (an admin makes it once: "
         "sudo mkdir /gcs)";
}

}  // namespace stoker::exec
