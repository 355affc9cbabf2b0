#include "exec/image_catalog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace stoker::exec {

std::string NormalImageName(const ImageReference& ref) {
  std::string registry = ref.registry.empty() ? "docker.io" : ref.registry;
  std::string path = ref.path;
  if (registry == "docker.io" && path.find('/') == std::string::npos) path = "library/" + path;
  std::string name = registry + "/" + path;
  if (!ref.digest.empty()) return name + "@" + ref.digest;
  return name + ":" + (ref.tag.empty() ? "latest" : ref.tag);
}

ImageCatalog::ImageCatalog(std::unique_ptr<ImageEngine> engine, int refresh_ms)
    : engine_(std::move(engine)), kind_(engine_->Kind()), refresh_ms_(refresh_ms) {}

ImageCatalog::~ImageCatalog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  engine_->Cancel();
  if (watcher_.joinable()) watcher_.join();
  if (timer_.joinable()) timer_.join();
}

void ImageCatalog::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (watcher_.joinable() || stopping_) return;
  watcher_ = std::thread([this] { Run(); });
  timer_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (changed_.wait_for(lock, std::chrono::milliseconds(refresh_ms_),
                            [this] { return stopping_; })) {
        return;
      }
      lock.unlock();
      (void)Refresh();
      lock.lock();
    }
  });
}

void ImageCatalog::Run() {
  if (Status first = Refresh(); !first.ok()) {
    spdlog::warn("image catalog: {}; asking the engine per image until it answers",
                 first.message());
  }
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    Status ended = engine_->Watch([this] { (void)Refresh(); });
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    // The stream ended by itself: the timer keeps the list current until
    // it is opened again, one refresh interval later.
    spdlog::warn(
        "image catalog: the engine's event stream ended ({}); reading the list every {} ms",
        ended.ok() ? "no reason given" : ended.message(), refresh_ms_);
    changed_.wait_for(lock, std::chrono::milliseconds(refresh_ms_), [this] { return stopping_; });
  }
}

Status ImageCatalog::Refresh() {
  std::lock_guard<std::mutex> one_at_a_time(refresh_mu_);
  auto listed = engine_->List();
  std::set<std::string> names;
  if (listed.ok()) {
    for (const ListedImage& image : *listed) {
      auto ref = ParseImageReference(image.name, "image list");
      if (ref.ok()) names.insert(NormalImageName(*ref));
    }
  }
  std::vector<std::string> changes;  // "+NAME" / "-NAME", after a first read
  bool first_read = false;           // the first list that succeeded
  size_t count = names.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    first_read = listed.ok() && !ever_loaded_;
    if (listed.ok() && ever_loaded_) {
      for (const std::string& n : names) {
        if (!names_.count(n)) changes.push_back("+" + n);
      }
      for (const std::string& n : names_) {
        if (!names.count(n)) changes.push_back("-" + n);
      }
    }
    loaded_ = listed.ok();
    ever_loaded_ = ever_loaded_ || listed.ok();
    if (listed.ok()) names_ = std::move(names);
    ++reads_;
  }
  changed_.notify_all();
  // Logged once the new list is in use: a reader of the log may rely on it.
  if (first_read) {
    spdlog::info("image catalog: read {} image names; following the engine's events", count);
  }
  const size_t shown = std::min<size_t>(changes.size(), 10);
  for (size_t i = 0; i < shown; ++i) {
    spdlog::info("image catalog: {} {}", changes[i][0] == '+' ? "now has" : "no longer has",
                 changes[i].substr(1));
  }
  if (changes.size() > shown) {
    spdlog::info("image catalog: and {} more changes", changes.size() - shown);
  }
  return listed.ok() ? Status() : listed.status();
}

ImageCatalog::Presence ImageCatalog::Lookup(const ImageReference& ref) const {
  const std::string normal = NormalImageName(ref);
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) return Presence::kUnknown;
  if (names_.count(normal)) return Presence::kPresent;
  if (ref.registry.empty() && kind_ == "podman") {
    // Podman's short-name lookup: any registry (and any path above it).
    const std::string suffix =
        "/" + ref.path +
        (ref.digest.empty() ? ":" + (ref.tag.empty() ? "latest" : ref.tag) : "@" + ref.digest);
    for (const std::string& name : names_) {
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return Presence::kPresent;
      }
    }
  }
  return Presence::kAbsent;
}

uint64_t ImageCatalog::reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

bool ImageCatalog::WaitForReads(uint64_t n, int timeout_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return reads_ >= n; });
}

}  // namespace stoker::exec
