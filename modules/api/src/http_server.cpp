#include "http_server.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace pvc::api {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
    ServerOptions opt;
    Handler handler;
    Logger log;
    net::io_context ioc;
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::optional<tcp::acceptor> acceptor;
    std::optional<ssl::context> tls;
    std::unique_ptr<net::thread_pool> workers;
    std::vector<std::thread> io_threads;
    std::stop_source stop_source;
    Counters counters;
    std::mutex m;
    std::map<uint64_t, std::function<void()>> closers;
    uint64_t next_id = 0;
    bool running = false;
    uint16_t port = 0;

    Impl(ServerOptions o, Handler h, Logger l) : opt(std::move(o)), handler(std::move(h)), log(std::move(l)) {}
    void accept();
    void run_io() {
        for (;;) {
            try {
                ioc.run();
                return;
            } catch (const std::exception& e) {
                log.error("API server: a socket handler failed: {}", e.what());
            } catch (...) {
                log.error("API server: a socket handler failed");
            }
        }
    }
};

namespace {

std::string json_message(const std::string& m) {
    std::string out = "{\"message\": \"";
    for (char c : m) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"}\n";
}

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
public:
    Session(std::shared_ptr<HttpServer::Impl> srv, Stream&& stream, std::string peer)
        : srv_(std::move(srv)), stream_(std::move(stream)), peer_(std::move(peer)) {
        ++srv_->counters.open;
    }
    ~Session() {
        --srv_->counters.open;
        std::lock_guard g(srv_->m);
        srv_->closers.erase(id_);
    }

    void run() {
        {
            std::weak_ptr<Session> weak = this->shared_from_this();
            std::lock_guard g(srv_->m);
            id_ = ++srv_->next_id;
            srv_->closers[id_] = [weak] {
                if (auto s = weak.lock())
                    net::post(s->stream_.get_executor(), [s] {
                        beast::error_code ec;
                        beast::get_lowest_layer(s->stream_).socket().shutdown(tcp::socket::shutdown_both, ec);
                        beast::get_lowest_layer(s->stream_).close();
                    });
            };
        }
        if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
            beast::get_lowest_layer(stream_).expires_after(srv_->opt.limits.request_timeout);
            stream_.async_handshake(ssl::stream_base::server,
                                    [self = this->shared_from_this()](beast::error_code ec) {
                                        if (!ec) self->read();
                                    });
        } else {
            read();
        }
    }

private:
    void read() {
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(srv_->opt.limits.header_bytes));
        parser_->body_limit(srv_->opt.limits.body_bytes);
        beast::get_lowest_layer(stream_).expires_after(srv_->opt.limits.request_timeout);
        http::async_read(stream_, buffer_, *parser_,
                         [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    }

    void on_read(beast::error_code ec) {
        if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
            ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::bad_descriptor)
            return close();
        started_ = Clock::now();
        if (ec == http::error::body_limit) {
            return fail(413, "Request body too large (at most " + std::to_string(srv_->opt.limits.body_bytes) + " bytes)");
        }
        if (ec == http::error::header_limit) return fail(431, "Request header fields too large");
        if (ec) {
            if (!parser_->is_header_done() && buffer_.size() == 0) return close();
            return fail(400, "Bad request: " + ec.message());
        }
        auto& req = parser_->get();
        HttpRequest r;
        r.method = std::string(req.method_string());
        r.target = std::string(req.target());
        r.body = std::move(req.body());
        r.content_type = std::string(req[http::field::content_type]);
        for (const auto& f : req)
            if (beast::iequals(f.name_string(), "x-api-key")) r.api_key = std::string(f.value());
        r.peer = peer_;
        keep_alive_ = req.keep_alive();
        version_ = req.version();
        method_ = r.method;
        auto q = r.target.find('?');
        path_ = r.target.substr(0, q);
        auto srv = srv_;
        net::post(*srv_->workers, [self = this->shared_from_this(), srv, r = std::move(r)] {
            HttpResponse res;
            try {
                res = srv->handler(r, srv->stop_source.get_token());
            } catch (const std::exception& e) {
                srv->log.error("API: {} {} failed: {}", r.method, self->path_, e.what());
                res = HttpResponse{500, "application/json", json_message("Internal Server Error"), {}};
            } catch (...) {
                res = HttpResponse{500, "application/json", json_message("Internal Server Error"), {}};
            }
            net::post(self->stream_.get_executor(), [self, res = std::move(res)]() mutable { self->write(std::move(res)); });
        });
    }

    void fail(unsigned status, const std::string& message) {
        keep_alive_ = false;
        version_ = 11;
        if (method_.empty()) method_ = "-";
        if (path_.empty()) path_ = "-";
        write(HttpResponse{status, "application/json", json_message(message), {}});
    }

    void write(HttpResponse r) {
        auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), version_);
        res->set(http::field::server, "pvcnoded");
        res->set(http::field::content_type, r.content_type);
        for (const auto& [k, v] : r.headers) res->set(k, v);
        res->keep_alive(keep_alive_);
        if (method_ == "HEAD") {
            res->content_length(r.body.size());  // the GET's length, no body
        } else {
            res->body() = std::move(r.body);
            res->prepare_payload();
        }
        status_ = r.status;
        beast::get_lowest_layer(stream_).expires_after(srv_->opt.limits.request_timeout);
        http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code ec, std::size_t) {
            self->on_written(ec, res->need_eof());
        });
    }

    void on_written(beast::error_code ec, bool eof) {
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_).count();
        auto& c = srv_->counters;
        ++c.requests;
        c.total_us += static_cast<uint64_t>(us);
        if (status_ >= 400 && status_ < 500) ++c.errors_4xx;
        if (status_ >= 500) ++c.errors_5xx;
        // The path only: a query string is the client's business, and no key is ever in it.
        srv_->log.info("API {} {} {} {} {:.1f} ms", peer_, method_, path_, status_, us / 1000.0);
        method_.clear();
        path_.clear();
        if (ec || eof) return close();
        read();
    }

    void close() {
        beast::error_code ec;
        if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
            beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(2));
            stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
                beast::get_lowest_layer(self->stream_).close();
            });
        } else {
            // A lingering close: the client may still be sending a body we
            // refused; reading (and discarding) it for up to a second lets
            // it finish and read our answer instead of a reset.
            stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
            if (ec) return stream_.close();
            stream_.expires_after(std::chrono::seconds(1));
            drain();
        }
    }

    void drain() {
        if constexpr (!std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
            stream_.async_read_some(net::buffer(scratch_), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                if (ec) return self->stream_.close();
                self->drain();
            });
        }
    }

    std::shared_ptr<HttpServer::Impl> srv_;
    Stream stream_;
    std::string peer_;
    beast::flat_buffer buffer_;
    std::array<char, 16384> scratch_{};
    std::optional<http::request_parser<http::string_body>> parser_;
    uint64_t id_ = 0;
    bool keep_alive_ = true;
    unsigned version_ = 11;
    unsigned status_ = 0;
    std::string method_, path_;
    Clock::time_point started_ = Clock::now();
};

}  // namespace

void HttpServer::Impl::accept() {
    acceptor->async_accept(net::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !self->acceptor->is_open()) return;
        if (!ec) {
            std::string peer;
            beast::error_code pec;
            auto ep = socket.remote_endpoint(pec);
            if (!pec) peer = ep.address().to_string();
            if (self->counters.open.load() >= self->opt.limits.connections) {
                ++self->counters.rejected_connections;
                socket.close(pec);
            } else if (self->tls) {
                std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
                    self, beast::ssl_stream<beast::tcp_stream>(std::move(socket), *self->tls), peer)
                    ->run();
            } else {
                std::make_shared<Session<beast::tcp_stream>>(self, beast::tcp_stream(std::move(socket)), peer)->run();
            }
        }
        self->accept();
    });
}

HttpServer::HttpServer(ServerOptions options, Handler handler, Logger log)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler), std::move(log))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
    auto& i = *impl_;
    if (i.running) return;
    if (i.opt.tls) {
        i.tls.emplace(ssl::context::tls_server);
        i.tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3);
        try {
            i.tls->use_certificate_chain_file(i.opt.cert_file);
            i.tls->use_private_key_file(i.opt.key_file, ssl::context::pem);
        } catch (const std::exception& e) {
            throw std::runtime_error("cannot load the TLS certificate " + i.opt.cert_file + " or key " + i.opt.key_file +
                                     ": " + e.what());
        }
    }
    beast::error_code ec;
    auto addr = net::ip::make_address(i.opt.address, ec);
    if (ec) throw std::runtime_error("listen_address " + i.opt.address + " is not an address");
    tcp::endpoint ep(addr, i.opt.port);
    i.acceptor.emplace(i.ioc);
    i.acceptor->open(ep.protocol(), ec);
    if (!ec) i.acceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) {
        // The floating address may arrive a moment after the takeover asks
        // for the listener (the network module adds it in parallel).
        int one = 1;
        if (addr.is_v4()) ::setsockopt(i.acceptor->native_handle(), IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
#ifdef IPV6_FREEBIND
        else ::setsockopt(i.acceptor->native_handle(), IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one);
#endif
    }
    if (!ec) i.acceptor->bind(ep, ec);
    if (!ec) i.acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
        i.acceptor.reset();
        throw std::runtime_error("cannot listen on " + i.opt.address + ":" + std::to_string(i.opt.port) + ": " +
                                 ec.message());
    }
    i.port = i.acceptor->local_endpoint().port();
    i.stop_source = std::stop_source();
    i.workers = std::make_unique<net::thread_pool>(i.opt.limits.workers);
    i.ioc.restart();
    i.work.emplace(i.ioc.get_executor());
    i.accept();
    for (int t = 0; t < 2; ++t) i.io_threads.emplace_back([impl = impl_] { impl->run_io(); });
    i.running = true;
}

void HttpServer::stop() {
    auto& i = *impl_;
    if (!i.running) return;
    i.running = false;
    // No new connections; the handlers' waits end; every connection closed.
    std::promise<void> closed;
    net::post(i.ioc, [&] {
        beast::error_code ec;
        i.acceptor->close(ec);
        closed.set_value();
    });
    closed.get_future().wait();
    i.stop_source.request_stop();
    std::vector<std::function<void()>> closers;
    {
        std::lock_guard g(i.m);
        for (auto& [id, c] : i.closers) closers.push_back(c);
    }
    for (auto& c : closers) c();
    i.workers->join();
    // The closed sockets' operations complete (aborted) and release their
    // sessions; then the loop runs out of work.
    i.work.reset();
    auto until = Clock::now() + std::chrono::seconds(3);
    while (!i.ioc.stopped() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    i.ioc.stop();
    for (auto& t : i.io_threads) t.join();
    i.io_threads.clear();
    i.acceptor.reset();
    i.workers.reset();
    i.tls.reset();
}

bool HttpServer::running() const { return impl_->running; }
uint16_t HttpServer::port() const { return impl_->port; }
const HttpServer::Counters& HttpServer::counters() const { return impl_->counters; }

}  // namespace pvc::api
