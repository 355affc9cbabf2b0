// The image catalog (docs/containers.md "How the daemon knows its images",
// docs/decisions/0037): what the container engine's store holds, read once
// when the daemon starts and kept current by a background thread, so that
// admission and launch ask a map instead of running the engine's client.
//
// The engine is asked only through ImageEngine (image_engine.h runs the
// real client; tests use a fake). The background thread reads the list,
// then follows the engine's event stream and reads the list again after
// each image event; a slow timer reads it again as well, should an event
// be missed or the stream end (it is opened again on the next tick).
//
// Thread safety: every member is safe to call from any thread. Lookups take
// a mutex and never run a subprocess.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/image_reference.h"
#include "common/status.h"

namespace stoker::exec {

// One name the engine's store lists, with its image's id.
struct ListedImage {
  std::string name;  // as the engine writes it, e.g. "localhost/x:1", "busybox:latest"
  std::string id;
};

// The engine calls the catalog makes. Implementations must be safe to call
// from the catalog's threads: List and Watch from the background thread,
// Cancel from any thread while Watch runs.
class ImageEngine {
 public:
  virtual ~ImageEngine() = default;
  // "podman" or "docker": how names are compared (NormalImageName).
  virtual std::string Kind() const = 0;
  // Every name in the store (an image with two names: two entries; a
  // digest reference "repo@sha256:..." is a name too). Error when the
  // engine cannot answer.
  virtual Result<std::vector<ListedImage>> List() = 0;
  // Follows the engine's image events, calling `on_event` after each one,
  // until the stream ends (returns why) or Cancel is called (returns OK).
  virtual Status Watch(const std::function<void()>& on_event) = 0;
  // Makes a running Watch return soon, and any later one at once.
  virtual void Cancel() = 0;
};

// The engine's normal form of `ref` for an exact comparison:
// "docker.io" for an implied registry, "library/" before a one-component
// Docker Hub path, ":latest" when neither tag nor digest is written
// ("busybox" -> "docker.io/library/busybox:latest", "localhost/x" ->
// "localhost/x:latest", "x@sha256:D" -> "docker.io/library/x@sha256:D").
// A name with both a tag and a digest keeps only the digest, as the
// engines do. Pure.
std::string NormalImageName(const ImageReference& ref);

class ImageCatalog {
 public:
  enum class Presence { kUnknown, kPresent, kAbsent };

  // `refresh_ms`: how often the background thread reads the list again
  // without an event (and reopens an ended event stream).
  ImageCatalog(std::unique_ptr<ImageEngine> engine, int refresh_ms = 60000);
  // Stops the background thread (cancels the event stream) and waits for it.
  ~ImageCatalog();
  ImageCatalog(const ImageCatalog&) = delete;
  ImageCatalog& operator=(const ImageCatalog&) = delete;

  // Starts the background thread (once): the first list, then events and
  // the timer. Without Start the catalog changes only through Refresh.
  void Start();

  // Whether the store holds `ref`, from the last list read: kUnknown until
  // a list has been read or while the engine cannot be asked (the last
  // read failed), so that the caller asks the engine itself. A name
  // without a registry is looked up as the engine would: docker looks only
  // on Docker Hub; podman also finds it under any registry (its
  // "short name" lookup: `x:1` is found as localhost/x:1 or quay.io/a/x:1).
  // Pure: no subprocess.
  Presence Lookup(const ImageReference& ref) const;

  // Reads the list now, on the caller's thread, and logs each name added or
  // removed since the last read (after the new list is in use). The
  // engine's error when it cannot answer (the catalog then says kUnknown).
  Status Refresh();

  // How many lists have been read (successfully or not) so far; WaitForReads
  // blocks until at least `n` have, or `timeout_ms` passed (false then).
  uint64_t reads() const;
  bool WaitForReads(uint64_t n, int timeout_ms) const;

 private:
  void Run();

  std::unique_ptr<ImageEngine> engine_;
  const std::string kind_;
  const int refresh_ms_;
  // Held for a whole Refresh: lists are read and applied one at a time, so
  // an older list never replaces a newer one.
  std::mutex refresh_mu_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  bool loaded_ = false;       // the last read succeeded
  bool ever_loaded_ = false;  // a read has succeeded (the first one is logged)
  uint64_t reads_ = 0;
  std::set<std::string> names_;  // NormalImageName of every listed name
  bool stopping_ = false;
  std::thread timer_;
  std::thread watcher_;
};

}  // namespace stoker::exec
