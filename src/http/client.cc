// Client: blocking calls built on Beast's asynchronous operations, because
// beast::tcp_stream enforces its timeouts only on those. Each step starts one
// operation and runs the private io_context until it completes.
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "http/http.h"

namespace stoker::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kResponseHeaderLimit = 64 * 1024;

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         beast::iequals(beast::string_view(s.data(), prefix.size()),
                        beast::string_view(prefix.data(), prefix.size()));
}

// Errors that mean "the server closed this kept-alive connection before our
// request reached it", after which resending is safe.
bool IsStaleConnection(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::connection_aborted || ec == net::error::not_connected;
}

// The request line must not let a caller's text start another header.
Status CheckRequestLine(const std::string& method, const std::string& target) {
  if (method.empty() || target.find_first_of(" \r\n") != std::string::npos ||
      method.find_first_of(" \r\n") != std::string::npos) {
    return InvalidArgument("cannot send \"" + method + " " + target +
                           "\": the method must be a token and the target percent-encoded");
  }
  return OkStatus();
}

// The request line and Stoker's headers, then the caller's. Returns the verb.
template <typename Request>
bhttp::verb StartRequest(Request& req, const std::string& method, const std::string& prefix,
                         const std::string& target, const std::string& authority,
                         const std::map<std::string, std::string>& headers) {
  const bhttp::verb verb = bhttp::string_to_verb(method);
  if (verb == bhttp::verb::unknown) {
    req.method_string(method);
  } else {
    req.method(verb);
  }
  std::string full_target = prefix;
  if (target.empty() || target.front() != '/') full_target.push_back('/');
  full_target += target;
  req.target(full_target);
  req.version(11);
  req.set(bhttp::field::host, authority);
  req.set(bhttp::field::user_agent, "stoker");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.keep_alive(true);
  return verb;
}

// The answer's status and headers (names lower-cased, repeats joined with ", ").
template <typename Message>
void ReadHead(const Message& msg, Response& out) {
  out.status = static_cast<int>(msg.result_int());
  for (const auto& field : msg) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    beast::string_view value = field.value();
    auto [it, inserted] = out.headers.try_emplace(std::move(name), value.data(), value.size());
    if (!inserted) {
      it->second += ", ";
      it->second.append(value.data(), value.size());
    }
  }
  out.content_type.clear();
  if (auto it = out.headers.find("content-type"); it != out.headers.end()) {
    out.content_type = it->second;
  }
}

}  // namespace

struct Client::Impl {
  std::string base_url;
  Status config_error;  // set when base_url is unusable; every Call returns it
  std::string host;     // without IPv6 brackets
  std::string port;
  std::string authority;  // the Host header
  std::string prefix;     // path of base_url, prepended to every target
  ClientOptions options;
  std::unique_ptr<ssl::context> tls;  // set for https:// URLs

  net::io_context ioc{1};
  // While connected, exactly one is engaged: `stream` (http) or `tls_stream`.
  std::optional<beast::tcp_stream> stream;
  std::optional<TlsStream> tls_stream;
  beast::flat_buffer buffer;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;

  bool connected() const { return stream.has_value() || tls_stream.has_value(); }
  beast::tcp_stream& Tcp() { return tls_stream ? beast::get_lowest_layer(*tls_stream) : *stream; }

  // Runs `op(s)` on whichever stream is connected.
  template <typename Op>
  auto OnStream(Op&& op) {
    if (tls_stream) return op(*tls_stream);
    return op(*stream);
  }

  Status SetUpTls() {
    tls = std::make_unique<ssl::context>(ssl::context::tls_client);
    tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    tls->set_verify_mode(ssl::verify_peer);
    beast::error_code ec;
    tls->set_default_verify_paths(ec);  // the system's CAs; missing ones are not fatal
    if (!options.ca_file.empty()) {
      tls->load_verify_file(options.ca_file, ec);
      if (ec) {
        return InvalidArgument("--ca-file: cannot load " + options.ca_file + ": " + ec.message() +
                               " (want a PEM certificate, e.g. the server's tls_cert_file)");
      }
    }
    return OkStatus();
  }

  Status ParseBaseUrl() {
    std::string_view url = base_url;
    const Status bad = InvalidArgument("server URL \"" + base_url +
                                       "\" is not of the form http://HOST:PORT or "
                                       "https://HOST:PORT, like http://127.0.0.1:8080");
    std::string default_port = "80";
    if (StartsWithNoCase(url, "https://")) {
      url.remove_prefix(8);
      default_port = "443";
      STOKER_RETURN_IF_ERROR(SetUpTls());
    } else if (StartsWithNoCase(url, "http://")) {
      url.remove_prefix(7);
    } else {
      return bad;
    }
    size_t slash = url.find('/');
    std::string_view auth = url.substr(0, slash);
    if (slash != std::string_view::npos) {
      prefix = std::string(url.substr(slash));
      while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    }
    if (auth.empty()) return bad;
    std::string_view port_part;
    if (auth.front() == '[') {
      size_t close = auth.find(']');
      if (close == std::string_view::npos) return bad;
      host = std::string(auth.substr(1, close - 1));
      std::string_view rest = auth.substr(close + 1);
      if (!rest.empty() && rest.front() != ':') return bad;
      if (!rest.empty()) port_part = rest.substr(1);
    } else {
      size_t colon = auth.rfind(':');
      host = std::string(auth.substr(0, colon));
      if (colon != std::string_view::npos) port_part = auth.substr(colon + 1);
    }
    if (host.empty()) return bad;
    if (port_part.empty()) port_part = default_port;
    if (port_part.size() > 5 ||
        !std::all_of(port_part.begin(), port_part.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(std::string(port_part)) > 65535) {
      return bad;
    }
    port = std::string(port_part);
    authority = std::string(auth);
    return OkStatus();
  }

  // Starts one asynchronous operation through `initiate(handler)` and runs
  // the io_context until it and the stream's timer have completed.
  template <typename Initiate>
  beast::error_code Run(Initiate&& initiate) {
    beast::error_code result;
    initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  void Close() {
    stream.reset();  // closes the socket
    tls_stream.reset();
    buffer.clear();
  }

  // True when the kept-alive connection is known to be unusable: the server
  // closed or reset it, or sent something unasked (say, a timeout notice).
  // Checking first avoids resending a non-idempotent request in the usual
  // case; the retry in Call covers the race where it closes right after.
  bool PeerClosed() {
    if (buffer.size() != 0) return true;
    char c;
    ssize_t n = ::recv(Tcp().socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    return true;
  }

  Status Connect(Clock::time_point deadline, int timeout_ms) {
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) {
      return Unavailable("cannot reach stokerd at " + base_url + ": cannot resolve \"" + host +
                         "\": " + ec.message());
    }
    if (tls) {
      tls_stream.emplace(ioc, *tls);
    } else {
      stream.emplace(ioc);
    }
    Tcp().expires_at(deadline);
    ec = Run([&](auto handler) { Tcp().async_connect(endpoints, std::move(handler)); });
    if (ec) {
      Close();
      if (ec == beast::error::timeout) {
        return DeadlineExceeded("cannot reach stokerd at " + base_url + ": no connection within " +
                                std::to_string(timeout_ms) + " ms");
      }
      if (ec == net::error::connection_refused) {
        return Unavailable("cannot reach stokerd at " + base_url + ": connection refused");
      }
      return Unavailable("cannot reach stokerd at " + base_url + ": " + ec.message());
    }
    Tcp().socket().set_option(tcp::no_delay(true), ec);
    buffer.clear();
    if (tls_stream) {
      // SNI, and the certificate must name the host we asked for.
      SSL_set_tlsext_host_name(tls_stream->native_handle(), host.c_str());
      tls_stream->set_verify_callback(ssl::host_name_verification(host));
      ec = Run([&](auto handler) {
        tls_stream->async_handshake(ssl::stream_base::client, std::move(handler));
      });
      if (ec) {
        Close();
        if (ec == beast::error::timeout) {
          return DeadlineExceeded("cannot reach stokerd at " + base_url +
                                  ": no TLS handshake within " + std::to_string(timeout_ms) +
                                  " ms");
        }
        std::string hint;
        if (ec.category() == net::error::get_ssl_category()) {
          hint = options.ca_file.empty()
                     ? " (for a self-signed server certificate pass --ca-file CERT.pem or set "
                       "STOKER_CA_FILE)"
                     : " (is " + options.ca_file + " the server's certificate, issued for " + host +
                           "?)";
        }
        return Unavailable("TLS handshake with stokerd at " + base_url +
                           " failed: " + ec.message() + hint);
      }
    }
    return OkStatus();
  }

  // Writes `req`'s header, then its body of `body_size` bytes from `reader`
  // a piece at a time (Beast's buffer_body: each write returns need_buffer
  // once the piece is sent), each write within `idle`. The stream's error,
  // if any; `source` gets the reader's error, or a short source's.
  beast::error_code WriteStreamed(bhttp::request<bhttp::buffer_body>& req, uint64_t body_size,
                                  const Client::BodyReader& reader, std::chrono::milliseconds idle,
                                  Status& source) {
    bhttp::request_serializer<bhttp::buffer_body> sr(req);
    auto write = [&](bool header_only) {
      Tcp().expires_after(idle);
      beast::error_code ec = OnStream([&](auto& s) {
        return Run([&](auto handler) {
          if (header_only) {
            bhttp::async_write_header(s, sr, std::move(handler));
          } else {
            bhttp::async_write(s, sr, std::move(handler));
          }
        });
      });
      return ec == bhttp::error::need_buffer ? beast::error_code{} : ec;
    };
    beast::error_code ec = write(true);
    std::vector<char> piece(
        body_size > 0 ? static_cast<size_t>(std::min<uint64_t>(body_size, 1 << 20)) : 0);
    uint64_t sent = 0;
    while (!ec && sent < body_size) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(body_size - sent, piece.size()));
      Result<size_t> got = reader(piece.data(), want);
      if (!got.ok()) {
        source = got.status();
        return ec;
      }
      if (*got == 0 || *got > want) {
        source = FailedPrecondition("the upload's source ended after " + std::to_string(sent) +
                                    " of the " + std::to_string(body_size) +
                                    " bytes announced (did the file shrink while it was read?)");
        return ec;
      }
      sent += *got;
      req.body().data = piece.data();
      req.body().size = *got;
      req.body().more = sent < body_size;
      ec = write(false);
    }
    if (!ec && !sr.is_done()) {
      req.body().data = nullptr;
      req.body().size = 0;
      req.body().more = false;
      ec = write(false);
    }
    return ec;
  }

  Status Timeout(const std::string& method, const std::string& target, int timeout_ms) {
    return DeadlineExceeded("stokerd at " + base_url + " did not answer " + method + " " + target +
                            " within " + std::to_string(timeout_ms) + " ms");
  }
};

Client::Client(std::string base_url, ClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->base_url = std::move(base_url);
  impl_->options = std::move(options);
  impl_->config_error = impl_->ParseBaseUrl();
}

Client::~Client() = default;

Result<Response> Client::Call(const std::string& method, const std::string& target,
                              const std::string& body,
                              const std::map<std::string, std::string>& headers, int timeout_ms) {
  Impl& im = *impl_;
  if (!im.config_error.ok()) return im.config_error;
  STOKER_RETURN_IF_ERROR(CheckRequestLine(method, target));
  const Clock::time_point deadline = timeout_ms > 0
                                         ? Clock::now() + std::chrono::milliseconds(timeout_ms)
                                         : Clock::time_point::max();

  bhttp::request<bhttp::string_body> req;
  if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
  const bhttp::verb verb = StartRequest(req, method, im.prefix, target, im.authority, headers);
  if (!body.empty() || verb == bhttp::verb::post || verb == bhttp::verb::put ||
      verb == bhttp::verb::patch) {
    req.content_length(body.size());
    req.body() = body;
  }

  for (int attempt = 0;; ++attempt) {
    bool reused = im.connected();
    if (reused && im.PeerClosed()) {
      im.Close();
      reused = false;
    }
    if (!im.connected()) STOKER_RETURN_IF_ERROR(im.Connect(deadline, timeout_ms));
    const bool may_retry = reused && attempt == 0;

    im.Tcp().expires_at(deadline);
    beast::error_code ec = im.OnStream([&](auto& s) {
      return im.Run([&](auto handler) { bhttp::async_write(s, req, std::move(handler)); });
    });
    if (ec) {
      im.Close();
      if (ec == beast::error::timeout) return im.Timeout(method, target, timeout_ms);
      if (may_retry) continue;
      return Unavailable("lost the connection to stokerd at " + im.base_url + " while sending " +
                         method + " " + target + ": " + ec.message());
    }

    im.parser.emplace();
    // Beast reads only as much as the buffer has room for (at most 64 KiB):
    // give it that room, or a large download takes tiny reads.
    if (im.buffer.capacity() < 64 * 1024) im.buffer.reserve(64 * 1024);
    im.parser->header_limit(kResponseHeaderLimit);
    im.parser->body_limit(std::numeric_limits<uint64_t>::max());
    if (verb == bhttp::verb::head) im.parser->skip(true);
    ec = im.OnStream([&](auto& s) {
      return im.Run(
          [&](auto handler) { bhttp::async_read(s, im.buffer, *im.parser, std::move(handler)); });
    });
    if (ec) {
      im.Close();
      if (ec == beast::error::timeout) return im.Timeout(method, target, timeout_ms);
      // Not one byte of the answer came back: the server closed the
      // connection before it saw our request.
      if (may_retry && !im.parser->got_some() && IsStaleConnection(ec)) continue;
      return Unavailable("lost the connection to stokerd at " + im.base_url +
                         " while waiting for the answer to " + method + " " + target + ": " +
                         ec.message());
    }

    bhttp::response<bhttp::string_body>& msg = im.parser->get();
    Response out;
    ReadHead(msg, out);
    out.body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    im.parser.reset();
    if (!keep_alive) im.Close();
    return out;
  }
}

Result<Response> Client::Stream(const std::string& method, const std::string& target,
                                const std::map<std::string, std::string>& headers,
                                uint64_t body_size, const BodyReader& reader,
                                const BodyWriter& writer, int idle_timeout_ms) {
  Impl& im = *impl_;
  if (!im.config_error.ok()) return im.config_error;
  STOKER_RETURN_IF_ERROR(CheckRequestLine(method, target));
  const auto idle = std::chrono::milliseconds(idle_timeout_ms > 0 ? idle_timeout_ms : 1 << 30);
  bhttp::request<bhttp::buffer_body> req;
  const bhttp::verb verb = StartRequest(req, method, im.prefix, target, im.authority, headers);
  if (body_size > 0 || verb == bhttp::verb::post || verb == bhttp::verb::put) {
    req.content_length(body_size);
  }
  req.body().data = nullptr;
  req.body().more = body_size > 0;

  if (im.connected() && im.PeerClosed()) im.Close();
  if (!im.connected()) {
    STOKER_RETURN_IF_ERROR(im.Connect(Clock::now() + idle, idle_timeout_ms));
  }
  auto timeout = [&] {
    return DeadlineExceeded("stokerd at " + im.base_url + " made no progress on " + method + " " +
                            target + " for " + std::to_string(idle_timeout_ms) + " ms");
  };
  auto lost = [&](const char* when, const beast::error_code& ec) {
    return Unavailable("lost the connection to stokerd at " + im.base_url + " while " + when + " " +
                       method + " " + target + ": " + ec.message());
  };

  Status source;
  beast::error_code send_ec = im.WriteStreamed(req, body_size, reader, idle, source);
  if (!source.ok()) {
    im.Close();
    return source;
  }
  if (send_ec == beast::error::timeout) {
    im.Close();
    return timeout();
  }
  // After a failed send the server may have refused the upload and said why
  // before closing: try to read that answer, and fail with the write error
  // if none.
  const bool send_failed = static_cast<bool>(send_ec);

  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kResponseHeaderLimit);
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (verb == bhttp::verb::head) parser.skip(true);
  if (im.buffer.capacity() < 64 * 1024) im.buffer.reserve(64 * 1024);
  im.Tcp().expires_after(send_failed ? std::chrono::milliseconds(5000) : idle);
  beast::error_code ec = im.OnStream([&](auto& s) {
    return im.Run(
        [&](auto handler) { bhttp::async_read_header(s, im.buffer, parser, std::move(handler)); });
  });
  if (ec) {
    im.Close();
    if (send_failed) return lost("sending", send_ec);
    if (ec == beast::error::timeout) return timeout();
    return lost("waiting for the answer to", ec);
  }
  Response out;
  ReadHead(parser.get(), out);
  const bool to_writer = writer && out.status / 100 == 2;
  std::vector<char> buf(256 * 1024);
  while (!parser.is_done()) {
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    im.Tcp().expires_after(idle);
    ec = im.OnStream([&](auto& s) {
      return im.Run(
          [&](auto handler) { bhttp::async_read(s, im.buffer, parser, std::move(handler)); });
    });
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) {
      im.Close();
      if (ec == beast::error::timeout) return timeout();
      return lost("receiving the answer to", ec);
    }
    size_t n = buf.size() - parser.get().body().size;
    if (n == 0) continue;
    if (to_writer) {
      Status st = writer(std::string_view(buf.data(), n));
      if (!st.ok()) {
        im.Close();  // the rest of the body is not wanted
        return st;
      }
    } else if (out.body.size() < (1 << 20)) {
      out.body.append(buf.data(), n);
    }
  }
  if (send_failed || !parser.get().keep_alive()) im.Close();
  return out;
}

}  // namespace stoker::http
