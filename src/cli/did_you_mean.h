// "Did you mean" for the command line: a parse error about an unknown
// command or flag becomes one line that names the word, the nearest known
// one and where to look. Pure over a CLI11 app (no I/O); did_you_mean_test.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace stoker::cli {

// The message (without "ERROR: ") for `e`, raised by parsing `args` (argv
// without the program name, as typed) with `app`:
//   'jbos' is not a command of 'stoker'; did you mean 'jobs'? (commands: ...)
//   unrecognized argument '--folow' for 'stoker jobs logs'; did you mean
//   '--follow'? (see stoker jobs logs --help)
// "" when the error is about neither (a missing value, a failed check): the
// caller then prints CLI11's own message. The root is named "stoker".
std::string DidYouMean(const CLI::App& app, const std::vector<std::string>& args,
                       const CLI::ParseError& e);

}  // namespace stoker::cli
