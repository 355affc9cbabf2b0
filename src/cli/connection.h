// How the CLI finds and talks to stokerd.
//
// Discovery order: --server URL, then $STOKER_SERVER, then
// $STOKER_HOME/stokerd.addr (STOKER_HOME defaults to ~/.local/share/stoker).
// Only in the last case, when no daemon answers, the CLI starts one in the
// background for that STOKER_HOME and waits until GET /healthz answers.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "http/http.h"

namespace stoker::cli {

std::filesystem::path StokerHome();

class Connection {
 public:
  // `server_flag`: the --server value ("" if not given).
  static Result<std::unique_ptr<Connection>> Open(const std::string& server_flag);

  // Calls the API; a non-2xx answer becomes a Status with the server's
  // message and the matching code.
  Result<nlohmann::json> Call(const std::string& method, const std::string& target,
                              const std::string& body = "");
  // The same for raw bytes (downloads).
  Result<std::string> CallRaw(const std::string& method, const std::string& target,
                              const std::string& body = "");

  const std::string& url() const { return url_; }

 private:
  explicit Connection(std::string url);
  std::string url_;
  http::Client client_;
};

}  // namespace stoker::cli
