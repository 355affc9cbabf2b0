// Small file helpers with explicit durability contracts. All return Status;
// none throws.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace stoker {

// Reads a whole file. NotFound when it does not exist.
Result<std::string> ReadFile(const std::filesystem::path& path);

// Writes `data` so that a reader sees either the old file or the whole new
// one, never a part: write to a temp file beside it, fsync, rename, fsync the
// directory. After it returns ok the content survives a power loss.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view data);

// Creates the directory and its parents (like mkdir -p). Ok if it exists.
Status MakeDirs(const std::filesystem::path& path);

}  // namespace stoker
