// A small HTTP/1.1 server and client on Boost.Beast.
//
// The server runs a fixed pool of threads on one io_context; every request
// is handed to one synchronous Handler, which must be thread-safe. Handlers
// should not block for long (no thread per client): long waits such as log
// following are done by clients polling with offsets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"

namespace stoker::http {

struct Request {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // raw target: path plus "?query"
  std::string path;                            // percent-decoded path without the query
  std::map<std::string, std::string> query;    // decoded query parameters
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string remote_address;  // peer IP
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;  // extra headers
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  int threads = 4;
  uint64_t max_body_bytes = 256ull << 20;  // larger bodies get 413
};

class Server {
 public:
  Server(Handler handler, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Serves HTTPS instead of HTTP: `cert_file` is a PEM certificate chain,
  // `key_file` its unencrypted PEM private key. TLS 1.2 or newer. Call before
  // Start. InvalidArgument naming the config key when a file cannot be used.
  Status EnableTls(const std::string& cert_file, const std::string& key_file);
  // Binds and listens. Port 0 picks a free port. Returns the bound port.
  Result<int> Listen(const std::string& host, int port);
  // Starts the worker threads; returns at once.
  void Start();
  // Stops accepting, closes connections, joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ClientOptions {
  // For https:// URLs: a PEM file of certificates to trust besides the
  // system's (a self-signed server certificate). "" = the system's only.
  std::string ca_file;
};

// A blocking client bound to one base URL ("http://127.0.0.1:8080" or
// "https://host:8443"). It keeps one connection alive and reconnects when
// the server closed it. Over https it verifies the server's certificate and
// host name. Not thread-safe: use one per thread.
class Client {
 public:
  explicit Client(std::string base_url, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends a request; Unavailable when the server cannot be reached,
  // DeadlineExceeded after `timeout_ms`. Any HTTP status is a successful
  // Result: the caller maps it.
  Result<Response> Call(const std::string& method, const std::string& target,
                        const std::string& body = "",
                        const std::map<std::string, std::string>& headers = {},
                        int timeout_ms = 30000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a string for a path segment or query value.
std::string UrlEncode(const std::string& s);

}  // namespace stoker::http
