// How the CLI finds and talks to stokerd.
//
// Discovery order: --server URL, then $STOKER_SERVER, then
// $STOKER_HOME/stokerd.addr (STOKER_HOME defaults to DefaultStokerHome()).
// Only in the last case, when no daemon answers (or the daemon of that
// STOKER_HOME does not run: it holds a lock on stokerd.pid while it does),
// the CLI starts one in the background for that STOKER_HOME, listening on
// kLocalPort, and waits until GET /healthz answers.
//
// Credentials: every call carries "Authorization: Bearer TOKEN", the token
// being --token, else $STOKER_TOKEN, else the contents of
// $STOKER_HOME/token (the file the local daemon writes for its admin).
// https:// servers are verified against the system's CAs plus --ca-file or
// $STOKER_CA_FILE.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "http/http.h"

namespace stoker::cli {

// The port the local daemon asks for first, so that its console stays at
// http://127.0.0.1:8470/ across restarts (docs/console.md): $STOKER_LOCAL_PORT,
// else 8470. Taken, the daemon asks for the next of the nine after it, then
// for any free port. InvalidArgument when $STOKER_LOCAL_PORT is not a port.
inline constexpr int kLocalPort = 8470;
Result<int> LocalPort();

struct ConnectionOptions {
  std::string server;   // --server ("" if not given)
  std::string token;    // --token ("" if not given)
  std::string ca_file;  // --ca-file ("" if not given)
};

class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(const ConnectionOptions& options);

  // Calls the API; a non-2xx answer becomes a Status with the server's
  // message and the matching code.
  Result<nlohmann::json> Call(const std::string& method, const std::string& target,
                              const std::string& body = "");
  // The same for raw bytes (downloads).
  Result<std::string> CallRaw(const std::string& method, const std::string& target,
                              const std::string& body = "");

  // A streamed call (object transfers; http::Client::Stream) with the
  // credentials added. Any HTTP status is a successful Result; StatusOf
  // turns a non-2xx answer into the Status Call would give.
  Result<http::Response> Stream(const std::string& method, const std::string& target,
                                std::map<std::string, std::string> headers, uint64_t body_size,
                                const http::Client::BodyReader& reader,
                                const http::Client::BodyWriter& writer);
  static Status StatusOf(const http::Response& r);

  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }  // "" = none

 private:
  Connection(std::string url, std::string token, const http::ClientOptions& options);
  std::string url_;
  std::string token_;  // "" = send no Authorization header
  http::Client client_;
};

}  // namespace stoker::cli
