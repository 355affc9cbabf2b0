#include "storage/libarchive.h"

#include <dlfcn.h>

#include <string>

namespace stoker::storage {

Result<const LibArchive*> LoadLibArchive() {
  static const Result<const LibArchive*> loaded = []() -> Result<const LibArchive*> {
    auto missing = [](const std::string& why) {
      return FailedPrecondition(std::string("cannot load ") + kLibArchiveSoname + " (" + why +
                                "), which reads and writes tar.gz packages: install it "
                                "(apt-get install libarchive13)");
    };
    // Never closed: the functions are used until the process ends.
    void* handle = ::dlopen(kLibArchiveSoname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return missing(::dlerror());
    static LibArchive lib;
#define STOKER_LIBARCHIVE_LOAD(name)                                       \
  lib.name = reinterpret_cast<decltype(lib.name)>(::dlsym(handle, #name)); \
  if (lib.name == nullptr) return missing("it has no " #name);
    STOKER_LIBARCHIVE_FUNCTIONS(STOKER_LIBARCHIVE_LOAD)
#undef STOKER_LIBARCHIVE_LOAD
    return &lib;
  }();
  return loaded;
}

}  // namespace stoker::storage
