// bytes -> storage::CheckTarGz; when it passes, ExtractTarGz into a fresh
// directory and check that nothing was written outside it: the sandbox
// parent holds only `dest` and a sentinel, and every path under `dest`
// resolves inside it.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

#include "storage/archive.h"

namespace fs = std::filesystem;

namespace {

// Small limits keep each run cheap; the rules are the same as production.
const stoker::storage::ArchiveLimits kLimits{64ull << 20, 5000};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_archive: %s\n", what.c_str());
  std::abort();
}

struct Sandbox {
  fs::path top;     // <tmp>/stoker-fuzz-archive-<pid>
  fs::path parent;  // top/box: holds dest, the input file and a sentinel
  fs::path dest;    // top/box/dest
  fs::path input;   // top/box/in.tar.gz
  Sandbox() {
    top = fs::temp_directory_path() / ("stoker-fuzz-archive-" + std::to_string(::getpid()));
    fs::remove_all(top);
    parent = top / "box";
    dest = parent / "dest";
    input = parent / "in.tar.gz";
    fs::create_directories(parent);
    std::ofstream(parent / "sentinel") << "x";
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(Get().top, ec);
    });
  }
  static Sandbox& Get() {
    static Sandbox s;
    return s;
  }
  // Everything under `top` except what lies under `dest`.
  std::set<std::string> Outside() const {
    std::set<std::string> out;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(top, fs::directory_options::none, ec), end;
         !ec && it != end; it.increment(ec)) {
      if (it->path() == dest) {
        it.disable_recursion_pending();
        continue;
      }
      out.insert(it->path().string());
    }
    return out;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!stoker::storage::CheckTarGz(bytes, "fuzz.tar.gz", kLimits).ok()) return 0;

  Sandbox& box = Sandbox::Get();
  std::error_code ec;
  fs::remove_all(box.dest, ec);
  {
    std::ofstream out(box.input, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::set<std::string> before = box.Outside();
  stoker::Status s = stoker::storage::ExtractTarGz(box.input, box.dest, kLimits);
  (void)s;  // may fail (e.g. duplicate entries); it must still stay inside
  if (box.Outside() != before) Fail("extraction wrote outside the destination directory");
  // Nothing under dest may resolve outside it (a symlink planted for later).
  fs::path root = fs::canonical(box.dest, ec);
  if (!ec) {
    for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
         !ec && it != end; it.increment(ec)) {
      std::error_code ec2;
      fs::path real = fs::weakly_canonical(it->path(), ec2);
      if (ec2) continue;
      std::string r = real.string(), base = root.string() + "/";
      if (real != root && r.compare(0, base.size(), base) != 0) {
        Fail("entry " + it->path().string() + " resolves to " + r + ", outside " + root.string());
      }
    }
  }
  return 0;
}
