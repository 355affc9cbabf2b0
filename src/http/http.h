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
#include <string_view>

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

// A byte range of an open file, sent as a response body instead of
// Response::body: a download of any size is read from disk piece by piece,
// never held in memory. Owns `fd` (closed when the last holder lets go). A
// file that ends before `offset + length` breaks the connection (the length
// was already promised in Content-Length).
struct FileBody {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  FileBody(int fd_in, uint64_t offset_in, uint64_t length_in)
      : fd(fd_in), offset(offset_in), length(length_in) {}
  ~FileBody();
  FileBody(const FileBody&) = delete;
  FileBody& operator=(const FileBody&) = delete;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;  // extra headers
  // Set: the body is this file range and `body` is ignored.
  std::shared_ptr<FileBody> file;
};

using Handler = std::function<Response(const Request&)>;

// A request body consumed as it arrives (object uploads), instead of being
// collected into Request::body. Called on one server thread at a time, in
// order; it may block on disk I/O like a Handler.
class BodySink {
 public:
  virtual ~BodySink() = default;
  // The next piece of the body. false stops the upload: Finish() is then
  // called, its response sent, and the connection closed after the rest of
  // the body is drained.
  virtual bool Write(std::string_view bytes) = 0;
  // After the last piece (or after Write returned false): the response.
  virtual Response Finish() = 0;
  // false: the sink refuses the body before any of it arrives (a refused
  // route, a body the disk cannot hold). Finish() is then called at once,
  // its response sent and the connection closed; no body byte is awaited.
  virtual bool Accepting() const { return true; }
  // When the connection breaks or times out mid-body, neither is called
  // again: the sink is destroyed without Finish, and must leave behind only
  // what an interrupted upload may (nothing, or a resumable session's
  // bytes so far).
};

// Looks at a request's header (Request::body empty) and returns the sink to
// stream its body into, or nullptr to have the body collected, up to
// max_body_bytes, and passed to the Handler. Streamed bodies have no size
// limit here. Must be thread-safe, like the Handler; an exception from it
// becomes a 500.
using StreamRouter = std::function<std::unique_ptr<BodySink>(const Request& head)>;

struct ServerOptions {
  int threads = 4;
  uint64_t max_body_bytes = 256ull << 20;  // larger collected bodies get 413
  StreamRouter stream_router;              // unset: every body is collected
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

  // Where an upload's bytes come from: fills at most `n` bytes of `buf` and
  // returns how many (0 only at the end), or an error that ends the call.
  using BodyReader = std::function<Result<size_t>(char* buf, size_t n)>;
  // Where a download's bytes go, piece by piece; an error ends the call
  // (and drops the connection) with that status.
  using BodyWriter = std::function<Status(std::string_view bytes)>;

  // A call whose request body (`body_size` bytes, Content-Length) is pulled
  // from `reader` and whose 2xx response body is pushed to `writer` (when
  // set; the returned Response::body is then empty), so that neither side
  // of a transfer of any size sits in memory. Other answers (errors) keep
  // their body in Response::body. `idle_timeout_ms` bounds each wait for
  // progress, not the whole call. Never resent: the caller decides (a
  // resumable upload asks the server how far it got). Errors as Call's.
  Result<Response> Stream(const std::string& method, const std::string& target,
                          const std::map<std::string, std::string>& headers, uint64_t body_size,
                          const BodyReader& reader, const BodyWriter& writer,
                          int idle_timeout_ms = 60000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a string for a path segment or query value.
std::string UrlEncode(const std::string& s);

}  // namespace stoker::http
