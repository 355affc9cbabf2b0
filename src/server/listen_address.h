// Where stokerd serves its API: the `listen` setting (--listen, or
// `listen:` in the config file), one address or several in order of
// preference.
//
//   "127.0.0.1:8470"                  this address, or fail
//   "127.0.0.1:8470,127.0.0.1:0"      the first that is free; port 0 = any free port
//   "[::1]:8470"                      IPv6 in brackets
//
// The daemon the CLI starts for a user asks for "127.0.0.1:8470,...,
// 127.0.0.1:8479,127.0.0.1:0" (cli/connection.cc): the console's address
// stays the same across restarts, and a second user's daemon takes the next
// free port of the ten, saying so in its log.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stoker::server {

struct ListenAddress {
  std::string host;  // without IPv6 brackets: "127.0.0.1", "::1", "0.0.0.0"
  int port = 0;      // 0..65535; 0 = any free port

  std::string ToString() const;  // "127.0.0.1:8470", "[::1]:0"
};

// The addresses of a `listen` value, in order. InvalidArgument naming the
// `listen` setting and the entry when one is not HOST:PORT with a port in
// 0..65535, or the list is empty.
Result<std::vector<ListenAddress>> ParseListenList(std::string_view text);

// Tries `bind` on each address in order and returns the index of the first
// that binds. A candidate that fails with Unavailable (the port is taken,
// the address is not this machine's) is logged through `note` and the next
// is tried; any other failure, or the last candidate's, is returned as is.
Result<size_t> BindFirstFree(const std::vector<ListenAddress>& candidates,
                             const std::function<Status(const ListenAddress&)>& bind,
                             const std::function<void(const std::string&)>& note);

}  // namespace stoker::server
