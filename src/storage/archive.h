// Package archives: tar.gz sdists, packed by the CLI and unpacked per replica.
//
// Extraction is hostile-input safe: absolute paths, `..` components, links
// that point outside the destination, device files, fifos, and archives past
// the size or entry limits are refused before anything is written outside
// `dest`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stoker::storage {

struct ArchiveLimits {
  uint64_t max_total_bytes = 4ull << 30;  // sum of unpacked file sizes
  uint64_t max_entries = 100000;
};

// Checks that `data` is a gzip-compressed tar whose entries all pass the
// rules above, without writing anything. InvalidArgument naming `name` and
// the offending entry otherwise.
Status CheckTarGz(std::string_view data, const std::string& name, const ArchiveLimits& limits = {});

// The content of the first regular file of the tar.gz `data` whose path
// (as stored, a leading "./" dropped) `wanted` accepts; nullopt when none
// does, or when that file is over `max_bytes`. For a look at a trainer's
// own source at submission (CheckTarGz checks the archive as a whole).
Result<std::optional<std::string>> ReadTarGzFile(
    std::string_view data, const std::function<bool(std::string_view)>& wanted, size_t max_bytes);

// CheckTarGz for an archive in an open file (read from its start; the
// caller keeps `fd`): a staged package of any size is checked without
// holding it in memory.
Status CheckTarGzFd(int fd, const std::string& name, const ArchiveLimits& limits = {});

// Unpacks a .tar.gz file into `dest` (created if missing), same rules. The
// whole archive is checked before anything is written; a failure while
// writing can leave a partial tree, so unpack into a fresh directory.
// Owners are not restored; files get 0644 (0755 if executable), dirs 0755.
Status ExtractTarGz(const std::filesystem::path& archive, const std::filesystem::path& dest,
                    const ArchiveLimits& limits = {});

// Packs the Python package directory `package_dir` (e.g. ./trainer) as a
// source distribution: a tar.gz whose single top directory `<name>-<version>/`
// holds the package directory, a PKG-INFO, and a setup.py (the user's own
// setup.py when one sits in `package_dir`'s parent, else a generated one).
// Files are sorted and timestamps zeroed, so the same tree gives the same bytes.
// __pycache__ directories and *.pyc files are skipped.
Result<std::string> PackSdist(const std::filesystem::path& package_dir, const std::string& name,
                              const std::string& version);

// A generated file to add to an sdist, at `path` (relative, '/'-separated,
// no `..`) under its top directory `<name>-<version>/`.
struct SdistFile {
  std::string path;
  std::string content;
  bool executable = false;
};

// PackSdist with extra generated files (e.g. an entry module at the sdist
// root, which is on PYTHONPATH when the package runs). InvalidArgument when
// an extra path is unsafe or clashes with a packed entry.
Result<std::string> PackSdist(const std::filesystem::path& package_dir, const std::string& name,
                              const std::string& version,
                              const std::vector<SdistFile>& extra_files);

// The top-level directories of an sdist unpacked in `dest`
// (the directories that go on PYTHONPATH), sorted. When `dest` itself holds
// .py files or a package directory (one with __init__.py), i.e. the archive
// was a bare package rather than an sdist, returns {dest}.
std::vector<std::filesystem::path> SdistRoots(const std::filesystem::path& dest);

}  // namespace stoker::storage
