// Small file helpers with explicit durability contracts. All return Status;
// none throws.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stoker {

// Reads a whole file. NotFound when it does not exist.
Result<std::string> ReadFile(const std::filesystem::path& path);

enum class Durability {
  kSync,    // fsync the file and its directory: survives a power loss
  kNoSync,  // atomic for readers and for a process crash, not for a power loss
};

// Writes `data` so that a reader sees either the old file or the whole new
// one, never a part: write to a temp file beside it, (fsync,) rename, (fsync
// the directory). With kSync, after it returns ok the content survives a
// power loss. The temp file is created new (O_EXCL, O_NOFOLLOW), so a
// symbolic link planted under its name is refused, never written through;
// the rename replaces a link at `path` itself.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view data,
                       Durability durability = Durability::kSync);

// Appends `line` and a newline to the file (created if missing) in one
// write(2), so concurrent appenders never interleave within a line.
Status AppendLine(const std::filesystem::path& path, std::string_view line);

// True for one file name: not empty, not "." or "..", no '/' or NUL, at
// most 255 bytes (NAME_MAX).
bool IsFileName(std::string_view name);

// AppendLine for a file below `dir` that others may write to: `relative`
// (no "..", not absolute) is walked from `dir` one component at a time, and
// neither `dir` itself nor any component may be a symbolic link. Missing
// directories are created (0755); the file is created 0644 if missing and
// must be a regular file with one link.
// FailedPrecondition naming the path for a link, a hard-linked file or
// anything not a regular file; InvalidArgument for a bad `relative`.
Status AppendLineNoFollow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                          std::string_view line);

// ReadFile for a file below `dir` that others may write to (a trainer's
// metrics, read by root): walked like AppendLineNoFollow but creating
// nothing. NotFound when missing; FailedPrecondition for a link, a FIFO or
// anything not a regular file with one link, so that a trainer can neither
// point root at another file nor block it on a FIFO; ResourceExhausted when
// it holds more than `max_bytes` (nothing past that is read).
Result<std::string> ReadFileNoFollow(const std::filesystem::path& dir,
                                     const std::filesystem::path& relative,
                                     size_t max_bytes = SIZE_MAX);

// ReadFileNoFollow for a file that only this process's account may have
// written (a supervisor's control file, read by the daemon): the file must
// also be owned by the effective uid and writable by nobody else, else
// FailedPrecondition. What another account made or may change is never
// believed.
Result<std::string> ReadOwnFileNoFollow(const std::filesystem::path& dir,
                                        const std::filesystem::path& relative,
                                        size_t max_bytes = SIZE_MAX);

// Opens `relative` below `dir` read-only, walked like ReadFileNoFollow (no
// link followed, no FIFO waited on, a regular file with one link). The
// caller owns the returned descriptor (O_CLOEXEC).
Result<int> OpenReadNoFollow(const std::filesystem::path& dir,
                             const std::filesystem::path& relative);

// Removes `path` and everything below it (like rm -rf) without following a
// link anywhere: each directory is entered through its parent's descriptor
// with O_NOFOLLOW, so a directory that another account swaps for a link
// while this runs is removed as a link, never entered. Trees deeper than
// 512 levels are refused (FailedPrecondition), the rest removed. Ok when
// `path` does not exist.
Status RemoveTreeNoFollow(const std::filesystem::path& path);

// How WriteFileBelow and MakeDirsBelow create what is missing.
struct CreateModes {
  unsigned dir_mode = 0755;   // for directories they make (umask not applied)
  unsigned file_mode = 0644;  // for the file WriteFileBelow writes
  int64_t gid = -1;           // >= 0: the group of what they make
};

// Creates `relative` (a plain relative path) below `dir` like mkdir -p,
// walking from `dir` one component at a time without following a link (a
// link or a file in the way is FailedPrecondition), so that a directory
// that another account may write cannot send it anywhere else. Ok when it
// exists.
Status MakeDirsBelow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                     const CreateModes& modes = {});

// WriteFileAtomic for `relative` below `dir`, walked like MakeDirsBelow
// (missing directories are made): the temp file and the rename happen in
// the directory reached, so no link planted on the way is followed.
Status WriteFileBelow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                      std::string_view data, const CreateModes& modes = {});

// Opens the directory `relative` below `dir` (`dir` itself for an empty
// `relative`), walked like MakeDirsBelow and making what is missing when
// `create`. The caller owns the returned descriptor (O_DIRECTORY, O_CLOEXEC)
// and works through it (openat, renameat, unlinkat), so that nothing
// swapped in on the way is followed.
Result<int> OpenDirNoFollow(const std::filesystem::path& dir, const std::filesystem::path& relative,
                            bool create, const CreateModes& modes = {});

// Creates the directory and its parents (like mkdir -p). Ok if it exists.
Status MakeDirs(const std::filesystem::path& path);

// The data dir that stokerd and the CLI use when none is given:
// $STOKER_HOME; else, for root, /var/lib/stoker (a root daemon runs trainers
// as another account, which must be able to reach the data dir, and root's
// home is not searchable by others); else $HOME/.local/share/stoker.
std::filesystem::path DefaultStokerHome();

}  // namespace stoker
