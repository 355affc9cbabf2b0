// Small file helpers with explicit durability contracts. All return Status;
// none throws.
#pragma once

#include <filesystem>
#include <string>

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
// power loss.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view data,
                       Durability durability = Durability::kSync);

// Appends `line` and a newline to the file (created if missing) in one
// write(2), so concurrent appenders never interleave within a line.
Status AppendLine(const std::filesystem::path& path, std::string_view line);

// Creates the directory and its parents (like mkdir -p). Ok if it exists.
Status MakeDirs(const std::filesystem::path& path);

// The data dir that stokerd and the CLI use when none is given:
// $STOKER_HOME; else, for root, /var/lib/stoker (a root daemon runs trainers
// as another account, which must be able to reach the data dir, and root's
// home is not searchable by others); else $HOME/.local/share/stoker.
std::filesystem::path DefaultStokerHome();

}  // namespace stoker
