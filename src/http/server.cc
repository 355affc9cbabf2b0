// Server: one io_context run by a fixed pool of threads. Every connection is
// a Session on its own strand, so its reads, writes and timers never run
// concurrently; the Handler runs synchronously on whichever pool thread
// carries the session. Stop() stops the io_context, joins the threads and
// then destroys it, which destroys every pending handler and with them every
// Session and its socket: no connection outlives Stop().
#include <unistd.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "http/http.h"
#include "http/url.h"

namespace stoker::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr uint32_t kRequestHeaderLimit = 64 * 1024;
// Longer request targets get 414. Handlers match paths with std::regex,
// whose matcher recurses per character: a 30 000-character path overflowed a
// worker's 8 MiB stack and killed the daemon. Object names are at most 1024
// bytes (3 KiB percent-encoded), so real targets stay far below this.
constexpr size_t kTargetLimit = 8 * 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(60);
// After an error response sent while part of the request may still be in
// flight, the connection half-closes and discards input for at most this long
// before closing. Closing at once would make the kernel answer the unread
// bytes with a reset, and the client could lose the error response.
constexpr auto kLingerTimeout = std::chrono::seconds(5);
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(20);
// How much of a streamed body a BodySink gets at a time.
constexpr size_t kStreamChunk = 1 << 20;

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// The error body every Stoker endpoint uses; see api/ for the other producers.
Response ErrorResponse(int code, std::string_view status, std::string_view message) {
  Response r;
  r.status = code;
  r.body = "{\"error\":{\"code\":" + std::to_string(code) + ",\"message\":";
  AppendJsonString(&r.body, message);
  r.body += ",\"status\":";
  AppendJsonString(&r.body, status);
  r.body += "}}";
  return r;
}

const boost::system::error_category& HttpParseCategory() {
  return bhttp::make_error_code(bhttp::error::bad_method).category();
}

// A Beast body that sends a FileBody's range with pread, a piece at a time.
struct FileRangeBody {
  using value_type = std::shared_ptr<FileBody>;

  static std::uint64_t size(const value_type& v) { return v->length; }

  class writer {
   public:
    using const_buffers_type = net::const_buffer;

    template <bool isRequest, class Fields>
    writer(const bhttp::header<isRequest, Fields>&, const value_type& v) : file_(v) {}

    void init(beast::error_code& ec) {
      ec = {};
      buf_.resize(static_cast<size_t>(std::min<uint64_t>(file_->length, kPiece)));
    }

    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      uint64_t left = file_->length - done_;
      if (left == 0) return boost::none;
      size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf_.size()));
      ssize_t got;
      do {
        got = ::pread(file_->fd, buf_.data(), want, static_cast<off_t>(file_->offset + done_));
      } while (got < 0 && errno == EINTR);
      if (got <= 0) {
        // Shorter than promised (truncated since), or unreadable: the
        // connection breaks, so the client sees a short body, not a wrong one.
        ec = beast::errc::make_error_code(beast::errc::io_error);
        return boost::none;
      }
      done_ += static_cast<uint64_t>(got);
      return {{net::const_buffer(buf_.data(), static_cast<size_t>(got)), done_ < file_->length}};
    }

   private:
    static constexpr uint64_t kPiece = 256 * 1024;
    value_type file_;
    uint64_t done_ = 0;
    std::vector<char> buf_;
  };
};

// What every session needs from its server. Owned by Server::Impl, which
// outlives every Session (see Server::Stop).
struct Shared {
  Handler handler;
  StreamRouter stream_router;
  uint64_t max_body_bytes = 0;
  std::unique_ptr<ssl::context> tls;  // set: every connection speaks TLS
};

// One connection. `Stream` is beast::tcp_stream (plain HTTP) or TlsStream
// (HTTPS: a TLS handshake first, then the same HTTP exchange).
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <typename... TlsContext>
  Session(tcp::socket socket, const Shared* shared, TlsContext&... tls)
      : stream_(std::move(socket), tls...), shared_(shared) {}

  void Run() {
    beast::error_code ec;
    Lowest().socket().set_option(tcp::no_delay(true), ec);
    tcp::endpoint peer = Lowest().socket().remote_endpoint(ec);
    if (!ec) {
      net::ip::address address = peer.address();
      if (address.is_v6() && address.to_v6().is_v4_mapped()) {
        address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
      }
      remote_address_ = address.to_string();
    }
    if constexpr (kTls) {
      // A handshake that stalls (or plain HTTP sent to this port) ends at the
      // idle timeout or at the first bytes that are not TLS: the connection
      // closes without an answer, as nothing can be said in the clear.
      Lowest().expires_after(kIdleTimeout);
      stream_.async_handshake(ssl::stream_base::server,
                              beast::bind_front_handler(&Session::OnHandshake, Self()));
    } else {
      net::dispatch(stream_.get_executor(),
                    beast::bind_front_handler(&Session::ReadHeader, Self()));
    }
  }

 private:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  std::shared_ptr<Session> Self() { return this->shared_from_this(); }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void OnHandshake(beast::error_code ec) {
    if (ec) return;  // not TLS, or the peer went away: dropping the last reference closes
    ReadHeader();
  }

  void ReadHeader() {
    head_parser_.emplace();
    head_parser_->header_limit(kRequestHeaderLimit);
    // The limit on collected bodies is checked once the route is known:
    // streamed uploads have none. (Not boost::none: Beast 1.74 then refuses
    // every body with a Content-Length.)
    head_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    Lowest().expires_after(kIdleTimeout);
    bhttp::async_read_header(stream_, buffer_, *head_parser_,
                             beast::bind_front_handler(&Session::OnHeader, Self()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    if (head_parser_->get().target().size() > kTargetLimit) {
      return SendError(
          ErrorResponse(414, "INVALID_ARGUMENT",
                        "request target longer than " + std::to_string(kTargetLimit) + " bytes"));
    }
    if (shared_->stream_router) {
      Request head = HeadOf(head_parser_->get());
      try {
        sink_ = shared_->stream_router(head);
      } catch (const std::exception& e) {
        return SendError(ErrorResponse(
            500, "INTERNAL",
            "internal error while routing " + head.method + " " + head.path + ": " + e.what()));
      }
    }
    if (sink_ && !sink_->Accepting()) {
      Response resp = sink_->Finish();
      sink_.reset();
      head_parser_.reset();
      return SendError(std::move(resp));
    }
    if (sink_) {
      stream_parser_.emplace(std::move(*head_parser_));
      head_parser_.reset();
      stream_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
      if (stream_parser_->is_done()) return FinishStream();
      if (beast::iequals(stream_parser_->get()[bhttp::field::expect], "100-continue")) {
        return SendContinue(stream_parser_->get().version());
      }
      return StreamBody();
    }
    if (auto length = head_parser_->content_length(); length && *length > shared_->max_body_bytes) {
      return OnReadError(bhttp::error::body_limit);
    }
    parser_.emplace(std::move(*head_parser_));
    head_parser_.reset();
    parser_->body_limit(shared_->max_body_bytes);
    if (parser_->is_done()) return Dispatch();
    if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
      return SendContinue(parser_->get().version());
    }
    ReadBody();
  }

  void SendContinue(unsigned version) {
    // curl sends Expect for bodies over 1 KiB and would otherwise wait 1 s.
    continue_.emplace(bhttp::status::continue_, version);
    bhttp::async_write(stream_, *continue_,
                       beast::bind_front_handler(&Session::OnContinueSent, Self()));
  }

  void OnContinueSent(beast::error_code ec, size_t) {
    continue_.reset();
    if (ec) return;  // The peer is gone; dropping the last reference closes.
    if (sink_) return StreamBody();
    ReadBody();
  }

  // A streamed body: read into chunk_ until it is full or the body ends,
  // hand that to the sink, repeat. The idle timeout restarts on progress.
  void StreamBody() {
    if (chunk_.size() != kStreamChunk) chunk_.resize(kStreamChunk);
    if (buffer_.capacity() < 64 * 1024) buffer_.reserve(64 * 1024);
    auto& body = stream_parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    Lowest().expires_after(kIdleTimeout);
    bhttp::async_read(stream_, buffer_, *stream_parser_,
                      beast::bind_front_handler(&Session::OnStreamBody, Self()));
  }

  void OnStreamBody(beast::error_code ec, size_t) {
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) {
      // The upload broke off: the sink keeps only what it may (BodySink).
      sink_.reset();
      stream_parser_.reset();
      return OnReadError(ec);
    }
    size_t n = chunk_.size() - stream_parser_->get().body().size;
    bool more = true;
    if (n > 0) {
      try {
        more = sink_->Write(std::string_view(chunk_.data(), n));
      } catch (const std::exception& e) {
        sink_.reset();
        stream_parser_.reset();
        return SendError(ErrorResponse(
            500, "INTERNAL", std::string("internal error while storing the upload: ") + e.what()));
      }
    }
    if (!more) {
      Response resp = FinishSink();
      stream_parser_.reset();
      return SendError(std::move(resp));
    }
    if (stream_parser_->is_done()) return FinishStream();
    StreamBody();
  }

  Response FinishSink() {
    Response resp;
    try {
      resp = sink_->Finish();
    } catch (const std::exception& e) {
      resp = ErrorResponse(500, "INTERNAL",
                           std::string("internal error while finishing the upload: ") + e.what());
    }
    sink_.reset();
    return resp;
  }

  void FinishStream() {
    const bool keep_alive = stream_parser_->get().keep_alive();
    const unsigned version = stream_parser_->get().version();
    stream_parser_.reset();
    Response resp = FinishSink();
    Write(std::move(resp), version, keep_alive, /*head=*/false, /*linger=*/false);
  }

  // Reads the body piecewise so that the idle timeout restarts on progress:
  // a large upload is fine as long as it keeps moving.
  void ReadBody() {
    // Beast reads as much as the buffer has room for (at most 64 KiB); the
    // room left after the header was a few KiB, which took a 200 MB upload
    // 35,000 reads and thread hand-offs.
    if (buffer_.capacity() < 64 * 1024) buffer_.reserve(64 * 1024);
    Lowest().expires_after(kIdleTimeout);
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           beast::bind_front_handler(&Session::OnBody, Self()));
  }

  void OnBody(beast::error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    if (parser_->is_done()) return Dispatch();
    ReadBody();
  }

  void OnReadError(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      return SendError(ErrorResponse(
          413, "RESOURCE_EXHAUSTED",
          "request body larger than " + std::to_string(shared_->max_body_bytes) + " bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return SendError(ErrorResponse(
          431, "RESOURCE_EXHAUSTED",
          "request header larger than " + std::to_string(kRequestHeaderLimit) + " bytes"));
    }
    // A clean close between requests, a peer that vanished mid-request, a
    // timeout: nobody is listening for an answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec.category() != HttpParseCategory()) {
      return;
    }
    SendError(ErrorResponse(400, "INVALID_ARGUMENT", "malformed HTTP request: " + ec.message()));
  }

  template <typename Message>
  Request HeadOf(const Message& msg) const {
    Request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    internal::ParseTarget(req.target, &req.path, &req.query);
    for (const auto& field : msg) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      beast::string_view value = field.value();
      auto [it, inserted] = req.headers.try_emplace(std::move(name), value.data(), value.size());
      if (!inserted) {
        it->second += ", ";
        it->second.append(value.data(), value.size());
      }
    }
    req.remote_address = remote_address_;
    return req;
  }

  void Dispatch() {
    bhttp::request<bhttp::string_body>& msg = parser_->get();
    Request req = HeadOf(msg);
    req.body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    const bool head = msg.method() == bhttp::verb::head;
    const unsigned version = msg.version();
    parser_.reset();

    Response resp;
    try {
      resp = shared_->handler(req);
    } catch (const std::exception& e) {
      resp = ErrorResponse(
          500, "INTERNAL",
          "internal error while serving " + req.method + " " + req.path + ": " + e.what());
    } catch (...) {
      resp = ErrorResponse(
          500, "INTERNAL",
          "internal error while serving " + req.method + " " + req.path + ": unknown exception");
    }
    if (resp.status < 100 || resp.status > 999) {
      resp = ErrorResponse(500, "INTERNAL",
                           "handler for " + req.method + " " + req.path +
                               " returned invalid HTTP status " + std::to_string(resp.status));
    }
    Write(std::move(resp), version, keep_alive, head, /*linger=*/false);
  }

  void SendError(Response resp) {
    Write(std::move(resp), 11, /*keep_alive=*/false, /*head=*/false, /*linger=*/true);
  }

  void Write(Response&& resp, unsigned version, bool keep_alive, bool head, bool linger) {
    const bool bodiless = resp.status < 200 || resp.status == 204 || resp.status == 304;
    auto fill = [&](auto& res) {
      res.version(version);
      res.result(static_cast<unsigned>(resp.status));
      res.set(bhttp::field::server, "stokerd");
      if (!resp.content_type.empty()) res.set(bhttp::field::content_type, resp.content_type);
      for (const auto& [name, value] : resp.headers) res.set(name, value);
      res.keep_alive(keep_alive);
    };
    Lowest().expires_after(kIdleTimeout);
    if (resp.file && !bodiless && !head) {
      file_res_.emplace();
      fill(*file_res_);
      file_res_->body() = std::move(resp.file);
      file_res_->prepare_payload();
      bhttp::async_write(
          stream_, *file_res_,
          beast::bind_front_handler(&Session::OnWritten, Self(), keep_alive, linger));
      return;
    }
    res_.emplace();
    fill(*res_);
    if (bodiless) {
      res_->erase(bhttp::field::content_length);
    } else if (resp.file) {  // HEAD of a file: its length, no bytes
      res_->content_length(resp.file->length);
    } else {
      res_->content_length(resp.body.size());
      if (!head) res_->body() = std::move(resp.body);
    }
    bhttp::async_write(stream_, *res_,
                       beast::bind_front_handler(&Session::OnWritten, Self(), keep_alive, linger));
  }

  void OnWritten(bool keep_alive, bool linger, beast::error_code ec, size_t) {
    res_.reset();
    file_res_.reset();
    if (ec) return;
    if (keep_alive) return ReadHeader();
    // With TLS this skips close_notify: every response carries its length,
    // so the peer needs no TLS-level end of stream.
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (linger) {
      buffer_.clear();
      Lowest().expires_after(kLingerTimeout);
      Drain();
    }
    // Otherwise dropping the last reference closes the socket.
  }

  void Drain() {
    stream_.async_read_some(buffer_.prepare(64 * 1024),
                            [self = Self()](beast::error_code ec, size_t) {
                              if (!ec) self->Drain();
                            });
  }

  Stream stream_;
  const Shared* shared_;
  std::string remote_address_;
  beast::flat_buffer buffer_;
  // The header is read with head_parser_, which then becomes parser_ (a
  // collected body) or stream_parser_ (a body streamed into sink_).
  std::optional<bhttp::request_parser<bhttp::empty_body>> head_parser_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> stream_parser_;
  std::unique_ptr<BodySink> sink_;
  std::vector<char> chunk_;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<bhttp::response<bhttp::string_body>> res_;
  std::optional<bhttp::response<FileRangeBody>> file_res_;
};

}  // namespace

struct Server::Impl {
  Shared shared;
  int threads = 1;

  std::mutex mu;  // Serialises Listen, Start and Stop.
  bool started = false;
  bool stopped = false;
  // Declared before everything that refers to it; Stop() destroys the others
  // first and then this.
  std::unique_ptr<net::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_retry;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> workers;

  void Accept() {
    acceptor->async_accept(net::make_strand(*ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (ec) {
        // Out of descriptors or memory: retry soon rather than spin.
        accept_retry->expires_after(kAcceptRetryDelay);
        accept_retry->async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      }
      if (shared.tls) {
        std::make_shared<Session<TlsStream>>(std::move(s), &shared, *shared.tls)->Run();
      } else {
        std::make_shared<Session<beast::tcp_stream>>(std::move(s), &shared)->Run();
      }
      Accept();
    });
  }
};

Server::Server(Handler handler, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->shared.handler = std::move(handler);
  impl_->shared.max_body_bytes = options.max_body_bytes;
  impl_->shared.stream_router = std::move(options.stream_router);
  impl_->threads = std::max(1, options.threads);
  impl_->ioc = std::make_unique<net::io_context>(impl_->threads);
}

Server::~Server() { Stop(); }

Status Server::EnableTls(const std::string& cert_file, const std::string& key_file) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started || impl_->stopped) {
    return FailedPrecondition("Server::EnableTls must be called before Start()");
  }
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  // No session tickets: a ticket arriving after the handshake would look to
  // a keep-alive client like the server talking out of turn.
  SSL_CTX_set_num_tickets(ctx->native_handle(), 0);
  beast::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return InvalidArgument("tls_cert_file: cannot load the certificate chain " + cert_file + ": " +
                           ec.message() + " (want a PEM file, e.g. from 'openssl req -x509')");
  }
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) {
    return InvalidArgument("tls_key_file: cannot load the private key " + key_file + ": " +
                           ec.message() + " (want an unencrypted PEM key matching tls_cert_file)");
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return InvalidArgument("tls_key_file: " + key_file + " does not match the certificate in " +
                           cert_file);
  }
  impl_->shared.tls = std::move(ctx);
  return OkStatus();
}

Result<int> Server::Listen(const std::string& host, int port) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->acceptor || impl_->started || impl_->stopped) {
    return FailedPrecondition("Server::Listen may be called once, before Start()");
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("listen port " + std::to_string(port) + " is not in 0..65535");
  }
  std::string name = host.empty() ? "0.0.0.0" : host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(name, ec);
  if (ec) {
    tcp::resolver resolver(*impl_->ioc);
    auto results = resolver.resolve(name, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return InvalidArgument("cannot listen on " + where + ": cannot resolve host \"" + name +
                             "\"" + (ec ? ": " + ec.message() : ""));
    }
    // Prefer IPv4 for names like "localhost" that map to both families.
    address = results.begin()->endpoint().address();
    for (const auto& entry : results) {
      if (entry.endpoint().address().is_v4()) {
        address = entry.endpoint().address();
        break;
      }
    }
  }
  tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  tcp::acceptor acceptor(*impl_->ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    std::string message = "cannot listen on " + where + ": " + ec.message();
    if (ec == net::error::address_in_use) {
      return Unavailable(message + " (is another stokerd running? pick another port)");
    }
    if (ec == net::error::access_denied) return PermissionDenied(message);
    return Unavailable(message);
  }
  int bound = acceptor.local_endpoint(ec).port();
  if (ec) return Internal("cannot read the bound port of " + where + ": " + ec.message());
  impl_->acceptor.emplace(std::move(acceptor));
  return bound;
}

void Server::Start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started || impl_->stopped) return;
  impl_->started = true;
  if (impl_->acceptor) {
    impl_->accept_retry.emplace(*impl_->ioc);
    impl_->Accept();
  }
  impl_->work.emplace(impl_->ioc->get_executor());
  net::io_context* ioc = impl_->ioc.get();
  for (int i = 0; i < impl_->threads; ++i) {
    impl_->workers.emplace_back([ioc] { ioc->run(); });
  }
}

void Server::Stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  // Handlers already running finish; nothing else starts.
  impl_->ioc->stop();
  for (std::thread& t : impl_->workers) t.join();
  impl_->workers.clear();
  impl_->work.reset();
  impl_->accept_retry.reset();
  impl_->acceptor.reset();
  // Destroys every pending operation, and with them every Session and its
  // socket: connected clients see the connection close.
  impl_->ioc.reset();
}

FileBody::~FileBody() {
  if (fd >= 0) ::close(fd);
}

}  // namespace stoker::http
