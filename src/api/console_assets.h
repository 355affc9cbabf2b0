// The web console's static files (web/console/), built into the binary:
// src/api/embed_files.cmake generates their definition at build time.
#pragma once

#include <string_view>
#include <vector>

namespace stoker::api {

struct EmbeddedFile {
  std::string_view name;  // the file name under web/console/, e.g. "app.js"
  std::string_view data;  // its bytes (static storage)
};

// Every file of web/console/ with a served extension, sorted by name.
const std::vector<EmbeddedFile>& ConsoleFiles();

}  // namespace stoker::api
