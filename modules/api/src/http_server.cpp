#include "http_server.hpp"

#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
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
using namespace std::chrono_literals;

namespace {

// TLS 1.2 suites with forward secrecy (ECDHE or DHE key exchange) and an
// AEAD cipher; TLS 1.3's suites all are. No static-RSA key exchange, no CBC
// with SHA-1 (AES128-SHA and the like).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";

// How often a running request's budgets are looked at.
constexpr auto kBudgetTick = 100ms;

// One client for the per-client limits: an IPv4 address (also mapped into
// IPv6), or an IPv6 /64 (what one host is usually given).
std::string client_of(const net::ip::address& a) {
    if (a.is_v6()) {
        auto v6 = a.to_v6();
        if (v6.is_v4_mapped()) return net::ip::make_address_v4(net::ip::v4_mapped, v6).to_string();
        auto b = v6.to_bytes();
        std::fill(b.begin() + 8, b.end(), 0);
        return net::ip::address_v6(b).to_string() + "/64";
    }
    return a.to_string();
}

std::string seconds_text(std::chrono::milliseconds d) {
    return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s" : fmt::format("{:.1f} s", d.count() / 1000.0);
}

// The handlers' threads. A job runs when a thread is free and its client has
// fewer than `per_client` jobs running (in order of arrival otherwise), so
// one client's slow requests never hold the others' back. Each thread keeps
// the queue alive: a thread still running a job when close() gives up on it
// is detached and ends after that job.
class WorkQueue : public std::enable_shared_from_this<WorkQueue> {
public:
    WorkQueue(unsigned threads, unsigned per_client, std::shared_ptr<HttpServer::Counters> counters)
        : size_(std::max(1u, threads)), per_client_(std::max(1u, per_client)), counters_(std::move(counters)) {}

    void start() {
        std::lock_guard g(m_);
        exited_.assign(size_, false);
        for (unsigned t = 0; t < size_; ++t) threads_.emplace_back([self = shared_from_this(), t] { self->run(t); });
    }

    // Dropped (with what it holds) once the queue is closed.
    void post(const std::string& client, std::function<void()> job) {
        {
            std::lock_guard g(m_);
            if (closed_) return;
            jobs_.push_back({client, std::move(job)});
            ++counters_->waiting;
        }
        cv_.notify_one();
    }

    // Drops the jobs not started and waits until the running ones end, at
    // most until `until`. Returns how many were still running then.
    unsigned close(Clock::time_point until) {
        std::deque<Job> dropped;
        std::vector<std::thread> join, detach;
        unsigned left = 0;
        {
            std::unique_lock lk(m_);
            closed_ = true;
            dropped.swap(jobs_);
            counters_->waiting -= static_cast<unsigned>(dropped.size());
            cv_.notify_all();
            idle_cv_.wait_until(lk, until, [&] {
                return running_ == 0 && std::all_of(exited_.begin(), exited_.end(), [](bool e) { return e; });
            });
            left = running_;
            for (unsigned t = 0; t < threads_.size(); ++t) {
                if (!threads_[t].joinable()) continue;
                bool self = threads_[t].get_id() == std::this_thread::get_id();
                (exited_[t] && !self ? join : detach).push_back(std::move(threads_[t]));
            }
        }
        for (auto& t : join) t.join();
        for (auto& t : detach) t.detach();
        dropped.clear();  // the sessions they hold, outside the lock
        return left;
    }

private:
    struct Job {
        std::string client;
        std::function<void()> run;
    };

    void run(unsigned index) {
        std::unique_lock lk(m_);
        for (;;) {
            auto it = jobs_.end();
            cv_.wait(lk, [&] { return closed_ || (it = runnable()) != jobs_.end(); });
            if (closed_) break;
            Job job = std::move(*it);
            jobs_.erase(it);
            --counters_->waiting;
            ++counters_->running;
            ++running_;
            ++by_client_[job.client];
            lk.unlock();
            try {
                job.run();
            } catch (...) {
                // A job catches what its handler throws; nothing leaves the thread.
            }
            job.run = nullptr;  // what it held goes before the lock is taken again
            lk.lock();
            --counters_->running;
            --running_;
            if (auto c = by_client_.find(job.client); c != by_client_.end() && --c->second == 0) by_client_.erase(c);
            if (running_ == 0) idle_cv_.notify_all();
        }
        exited_[index] = true;
        idle_cv_.notify_all();
    }

    std::deque<Job>::iterator runnable() {
        for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
            auto c = by_client_.find(it->client);
            if (c == by_client_.end() || c->second < per_client_) return it;
        }
        return jobs_.end();
    }

    const unsigned size_, per_client_;
    const std::shared_ptr<HttpServer::Counters> counters_;
    std::mutex m_;
    std::condition_variable cv_, idle_cv_;
    std::deque<Job> jobs_;
    std::map<std::string, unsigned> by_client_;  // jobs running, by client
    unsigned running_ = 0;
    bool closed_ = false;
    std::vector<std::thread> threads_;
    std::vector<bool> exited_;
};

// Lines for the operator (a handler's failure, a request over its budget,
// refused connections) go to the whole log, ZooKeeper's node log included,
// at most `burst` a minute: a client can cause them at will. Beyond that
// they go to the local log only, and the next shared line says how many did.
class OperatorLog {
public:
    OperatorLog(Logger log, unsigned burst) : log_(std::move(log)), burst_(burst) {}

    void line(LogState state, std::string text) {
        unsigned skipped = 0;
        bool shared = false;
        {
            std::lock_guard g(m_);
            auto now = Clock::now();
            if (now - window_ >= 60s) {
                window_ = now;
                count_ = 0;
            }
            shared = count_ < burst_;
            if (shared) {
                ++count_;
                skipped = std::exchange(skipped_, 0);
            } else {
                ++skipped_;
            }
        }
        if (!shared) return log_.local().log(state, text);
        if (skipped) text += fmt::format(" ({} such line(s) before this one went to the local log only)", skipped);
        log_.log(state, text);
    }

private:
    Logger log_;
    const unsigned burst_;
    std::mutex m_;
    Clock::time_point window_{};
    unsigned count_ = 0, skipped_ = 0;
};

// One request's cancellation: the stop source behind the handler's token,
// why it was stopped, and the CPU clock of the thread running the handler
// (read by the session's budget check while that thread runs it).
struct RequestControl {
    enum class Why { none, client_gone, cpu, time, stopping };

    std::stop_source source;
    std::atomic<Why> why{Why::none};
    std::optional<std::stop_callback<std::function<void()>>> on_server_stop;

    void cancel(Why w) {
        Why none = Why::none;
        why.compare_exchange_strong(none, w);
        source.request_stop();
    }
    // On the worker thread, around the handler.
    void begin() {
        std::lock_guard g(m_);
        started_ = Clock::now();
        has_clock_ = pthread_getcpuclockid(pthread_self(), &clock_) == 0 && ::clock_gettime(clock_, &cpu0_) == 0;
        running_ = true;
    }
    void end() {
        std::lock_guard g(m_);
        running_ = false;  // from here the thread may go: its clock is not read again
    }
    // A streamed request's budgets count from the end of its body (an
    // upload's length is the client's; its pace is bounded per piece).
    void body_done() {
        std::lock_guard g(m_);
        streaming = false;
        started_ = Clock::now();
        if (running_ && has_clock_) ::clock_gettime(clock_, &cpu0_);
    }
    std::atomic<bool> streaming{false};
    std::chrono::nanoseconds cpu_used() {
        std::lock_guard g(m_);
        timespec now{};
        if (!running_ || !has_clock_ || ::clock_gettime(clock_, &now) != 0) return {};
        return std::chrono::seconds(now.tv_sec - cpu0_.tv_sec) + std::chrono::nanoseconds(now.tv_nsec - cpu0_.tv_nsec);
    }
    std::optional<Clock::time_point> started() {
        std::lock_guard g(m_);
        return started_;
    }

private:
    std::mutex m_;
    bool running_ = false, has_clock_ = false;
    clockid_t clock_{};
    timespec cpu0_{};
    std::optional<Clock::time_point> started_;
};

// A streamed body between the connection's strand, which reads the socket
// only when the handler asks for more (so a fast client is held back by TCP,
// never buffered here), and the handler's thread. One piece at a time.
class BodyChannel : public BodyStream {
public:
    static constexpr std::size_t kPiece = 1024 * 1024;

    BodyChannel(std::stop_token stop, std::optional<std::uint64_t> length)
        : stop_(std::move(stop)), length_(length), piece_(kPiece) {}

    std::int64_t read(char* out, std::size_t size) override {
        std::unique_lock lk(m_);
        asked_ = true;
        for (;;) {
            if (pos_ < have_) {
                std::size_t n = std::min(size, have_ - pos_);
                std::memcpy(out, piece_.data() + pos_, n);
                pos_ += n;
                return static_cast<std::int64_t>(n);
            }
            if (done_) return 0;
            if (!error_.empty()) return -1;
            if (stop_.stop_requested()) {
                error_ = "the request was stopped";
                return -1;
            }
            if (!pending_) {
                pending_ = true;
                have_ = pos_ = 0;
                auto fill = fill_;
                lk.unlock();
                if (fill) fill();
                lk.lock();
                continue;
            }
            cv_.wait(lk, stop_, [&] { return !pending_; });
        }
    }
    std::string error() const override {
        std::lock_guard g(m_);
        return error_;
    }
    std::optional<std::uint64_t> content_length() const override { return length_; }
    std::uint64_t received() const override {
        std::lock_guard g(m_);
        return received_;
    }

    // The connection's side.
    void set_fill(std::function<void()> f) {
        std::lock_guard g(m_);
        fill_ = std::move(f);
    }
    bool asked() const {
        std::lock_guard g(m_);
        return asked_;
    }
    char* piece() { return piece_.data(); }  // written only while a piece is pending
    void filled(std::size_t n, bool done) {
        {
            std::lock_guard g(m_);
            have_ = n;
            pos_ = 0;
            received_ += n;
            pending_ = false;
            done_ = done;
        }
        cv_.notify_all();
    }
    void fail(const std::string& why) {
        {
            std::lock_guard g(m_);
            if (error_.empty() && !done_) error_ = why;
            pending_ = false;
        }
        cv_.notify_all();
    }

private:
    const std::stop_token stop_;
    const std::optional<std::uint64_t> length_;
    mutable std::mutex m_;
    std::condition_variable_any cv_;
    std::vector<char> piece_;
    std::size_t have_ = 0, pos_ = 0;
    std::uint64_t received_ = 0;
    bool pending_ = false, done_ = false, asked_ = false;
    std::string error_;
    std::function<void()> fill_;
};

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
    ServerOptions opt;
    Handler handler;
    Logger log, access;  // access: the per-request lines, local log only
    OperatorLog ops;
    net::io_context ioc;
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::optional<tcp::acceptor> acceptor;
    std::optional<ssl::context> tls;
    std::shared_ptr<WorkQueue> queue;
    std::vector<std::thread> io_threads;
    std::stop_source stop_source;
    const std::shared_ptr<Counters> counters = std::make_shared<Counters>();  // shared with the queue
    std::mutex m;  // closers, per_client, refusal figures
    std::map<uint64_t, std::function<void()>> closers;
    std::map<std::string, unsigned> per_client;  // open connections by client
    // Connections in the reserve that have not sent a valid key yet, oldest
    // first (by id): when every connection is taken, a new one pushes the
    // oldest of them out, so idle sockets cannot hold the reserve either.
    std::map<uint64_t, std::function<void()>> candidates;
    std::atomic<unsigned> authenticated{0};      // open connections that sent a valid key
    uint64_t next_id = 0;
    unsigned refused_since_note = 0;
    Clock::time_point last_refusal_note{};
    std::mutex post_m;     // io_open, and posting a handler's answer to the sockets' threads
    bool io_open = false;  // those threads still run
    bool running = false;
    uint16_t port = 0;

    Impl(ServerOptions o, Handler h, Logger l)
        : opt(std::move(o)), handler(std::move(h)), log(l), access(l.local()), ops(l, 10) {}
    void accept();
    void admit(tcp::socket socket);
    // A handler's answer, to the connection's strand (nowhere once the server stopped).
    template <class Executor, class F>
    void deliver(const Executor& ex, F&& f) {
        std::lock_guard g(post_m);
        if (io_open) net::post(ex, std::forward<F>(f));
    }
    void run_io() {
        for (;;) {
            try {
                ioc.run();
                return;
            } catch (const std::exception& e) {
                ops.line(LogState::error, fmt::format("API server: a socket handler failed: {}", e.what()));
            } catch (...) {
                ops.line(LogState::error, "API server: a socket handler failed");
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

bool quiet_close(const beast::error_code& ec) {
    return ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
           ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::bad_descriptor;
}

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
    static constexpr bool is_tls = std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>;
    using Why = RequestControl::Why;

public:
    Session(std::shared_ptr<HttpServer::Impl> srv, Stream&& stream, std::string peer, std::string client, bool reserve)
        : srv_(std::move(srv)), stream_(std::move(stream)), peer_(std::move(peer)), client_(std::move(client)),
          reserve_(reserve) {
        ++srv_->counters->open;
    }
    ~Session() {
        if (channel_) channel_->fail("the connection was closed");
        --srv_->counters->open;
        if (authenticated_) --srv_->authenticated;
        std::lock_guard g(srv_->m);
        srv_->closers.erase(id_);
        srv_->candidates.erase(id_);
        if (auto c = srv_->per_client.find(client_); c != srv_->per_client.end() && --c->second == 0)
            srv_->per_client.erase(c);
    }

    void run() {
        {
            std::weak_ptr<Session> weak = this->shared_from_this();
            std::lock_guard g(srv_->m);
            id_ = ++srv_->next_id;
            auto closer = [weak] {
                if (auto s = weak.lock()) net::post(s->stream_.get_executor(), [s] { s->close_now(); });
            };
            srv_->closers[id_] = closer;
            if (reserve_) srv_->candidates[id_] = closer;
        }
        if constexpr (is_tls) {
            lowest().expires_after(header_wait());
            stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
                if (!ec) self->read();
            });
        } else {
            read();
        }
    }

private:
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
    std::chrono::milliseconds header_wait() const {
        return std::min(srv_->opt.limits.header_timeout, srv_->opt.limits.request_timeout);
    }

    // A request's header must come within the header timeout (a connection
    // that sends nothing is closed then), the whole request within the
    // request timeout.
    void read() {
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(srv_->opt.limits.header_bytes));
        // The body's limit is the route's (streamed or not), set once the
        // header is read; an announced length is checked then. (Not `none`:
        // this Beast compares an announced length with the optional limit,
        // and any length is "greater" than none.)
        parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
        body_limit_ = srv_->opt.limits.body_bytes;
        stream_parser_.reset();
        channel_.reset();
        piece_filled_ = 0;
        deferred_error_.reset();
        streamed_ = body_done_ = body_broken_ = reading_body_ = expect_continue_ = continue_sent_ = false;
        held_.reset();
        read_started_ = Clock::now();
        lowest().expires_after(header_wait());
        http::async_read_header(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
            self->on_header(ec);
        });
    }

    void on_header(beast::error_code ec) {
        if (quiet_close(ec)) return close();
        started_ = Clock::now();
        auto& req = parser_->get();
        if (parser_->is_header_done()) {
            method_ = std::string(req.method_string());
            auto target = req.target();
            path_ = std::string(target.substr(0, target.find('?')));
        }
        if (ec == http::error::header_limit) return fail(431, "Request header fields too large");
        if (ec == http::error::body_limit) return too_large();  // its Content-Length says so already
        if (ec) {
            if (!parser_->is_header_done() && buffer_.size() == 0) return close();
            return fail(400, "Bad request: " + ec.message());
        }
        version_ = req.version();
        unsigned hosts = 0, keys = 0;
        api_key_.reset();
        for (const auto& f : req) {
            if (beast::iequals(f.name_string(), "host")) ++hosts;
            if (beast::iequals(f.name_string(), "x-api-key")) {
                ++keys;
                api_key_ = std::string(f.value());
            }
        }
        if (version_ >= 11 && hosts == 0) return fail(400, "Bad request: an HTTP/1.1 request needs a Host header");
        if (hosts > 1) return fail(400, "Bad request: more than one Host header");
        if (keys > 1) return fail(400, "Bad request: more than one X-Api-Key header");
        if (api_key_ && !authenticated_ && srv_->opt.key_valid && srv_->opt.key_valid(*api_key_)) {
            authenticated_ = true;
            ++srv_->authenticated;
            if (reserve_) {
                std::lock_guard g(srv_->m);
                srv_->candidates.erase(id_);
            }
        }
        if (reserve_ && !authenticated_)
            return fail(503, "Too many connections: only requests with a valid X-Api-Key are served now");
        if (srv_->opt.streamed)
            if (auto limit = srv_->opt.streamed(method_, std::string_view(req.target().data(), req.target().size())))
                return start_stream(*limit);
        body_limit_ = srv_->opt.limits.body_limit(method_, path_);
        if (auto len = parser_->content_length(); len && *len > body_limit_) return too_large();
        parser_->body_limit(body_limit_);
        lowest().expires_at(read_started_ + srv_->opt.limits.request_timeout);
        http::async_read(stream_, buffer_, *parser_,
                         [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    }

    void on_read(beast::error_code ec) {
        if (quiet_close(ec)) return close();
        if (ec == http::error::body_limit) return too_large();
        if (ec) return fail(400, "Bad request: " + ec.message());
        auto& req = parser_->get();
        HttpRequest r;
        r.method = method_;
        r.target = std::string(req.target());
        r.body = std::move(req.body());
        r.content_type = std::string(req[http::field::content_type]);
        r.api_key = std::move(api_key_);
        r.peer = peer_;
        keep_alive_ = req.keep_alive();
        dispatch(std::move(r));
    }

    // To a worker; meanwhile the socket is watched for the client leaving
    // and the request's budgets are checked.
    void dispatch(HttpRequest r) {
        auto ctl = std::make_shared<RequestControl>();
        ctl->on_server_stop.emplace(srv_->stop_source.get_token(), [c = ctl.get()] { c->cancel(Why::stopping); });
        ctl_ = ctl;
        busy_ = true;
        ++seq_;
        if (streamed_) {
            std::optional<std::uint64_t> length;
            if (auto cl = stream_parser_->content_length()) length = *cl;
            channel_ = std::make_shared<BodyChannel>(ctl->source.get_token(), length);
            std::weak_ptr<Session> weak = this->shared_from_this();
            std::weak_ptr<BodyChannel> ch = channel_;
            channel_->set_fill([weak, ch, srv = srv_, ex = stream_.get_executor(), seq = seq_] {
                srv->deliver(ex, [weak, ch, seq] {
                    if (auto s = weak.lock()) s->fill_body(seq);
                    else if (auto c = ch.lock()) c->fail("the connection was closed");
                });
            });
            if (body_done_) channel_->filled(0, true);
            ctl->streaming = !body_done_;
            r.body_stream = channel_;
        }
        if (!ctl->streaming) watch_peer();
        check_budget_later();
        auto queue = srv_->queue;
        queue->post(client_, [self = this->shared_from_this(), srv = srv_, ctl, seq = seq_, path = path_,
                              ex = stream_.get_executor(), r = std::move(r)] {
            if (ctl->source.stop_requested()) return;  // its client left, or the server stops, before it ran
            HttpResponse res;
            ctl->begin();
            try {
                res = srv->handler(r, ctl->source.get_token());
            } catch (const RequestCancelled&) {
                res = HttpResponse{503, "application/json", json_message("The request was cancelled"), {}};
            } catch (const std::exception& e) {
                if (!ctl->source.stop_requested())
                    srv->ops.line(LogState::error, fmt::format("API: {} {} failed: {}", r.method, path, e.what()));
                res = HttpResponse{500, "application/json", json_message("Internal Server Error"), {}};
            } catch (...) {
                res = HttpResponse{500, "application/json", json_message("Internal Server Error"), {}};
            }
            ctl->end();
            // Stopped: nobody to answer, or answered (a budget) already.
            if (ctl->source.stop_requested()) return;
            srv->deliver(ex, [self, seq, res = std::move(res)]() mutable {
                self->on_result(seq, std::move(res));
            });
        });
    }

    void on_result(uint64_t seq, HttpResponse res) {
        if (seq != seq_ || !busy_ || closed_) return;
        end_request();
        if (streamed_ && !body_done_) return answer_early(std::move(res));
        write(std::move(res));
    }

    // ---- a streamed body (ServerOptions::streamed)

    // After the header: the rest is read piece by piece as the handler asks.
    void start_stream(std::uint64_t limit) {
        auto& req = parser_->get();
        if (auto len = parser_->content_length(); len && limit != UINT64_MAX && *len > limit)
            return fail(413, "Request body too large (at most " + std::to_string(limit) + " bytes)");
        expect_continue_ = beast::iequals(req[http::field::expect], "100-continue");
        HttpRequest r;
        r.method = method_;
        r.target = std::string(req.target());
        r.content_type = std::string(req[http::field::content_type]);
        r.api_key = std::move(api_key_);
        r.peer = peer_;
        keep_alive_ = req.keep_alive();
        stream_parser_.emplace(std::move(*parser_));
        parser_.reset();
        stream_parser_->body_limit(limit);
        streamed_ = true;
        body_done_ = stream_parser_->is_done();
        dispatch(std::move(r));
    }

    // The handler asked for a piece (its thread waits for it).
    void fill_body(uint64_t seq) {
        if (seq != seq_ || closed_ || !channel_ || !stream_parser_ || body_done_ || body_broken_) {
            if (channel_) channel_->fail("the connection was closed");
            return;
        }
        if (deferred_error_) return body_failed(*std::exchange(deferred_error_, std::nullopt));
        if (expect_continue_ && !continue_sent_) {
            continue_sent_ = true;
            static const std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
            lowest().expires_after(srv_->opt.limits.request_timeout);
            net::async_write(stream_, net::buffer(interim), [self = this->shared_from_this(), seq](beast::error_code ec, std::size_t) {
                if (ec) return self->body_failed(ec);
                self->fill_body(seq);
            });
            return;
        }
        read_piece();
    }

    void read_piece() {
        reading_body_ = true;
        auto& body = stream_parser_->get().body();
        body.data = channel_->piece() + piece_filled_;
        body.size = BodyChannel::kPiece - piece_filled_;
        body.more = true;
        // The client's pace is bounded per piece, not per request: an upload
        // of any length goes on while data comes. By a timer of our own that
        // cancels the read: the stream's own time-out closes the socket, and
        // the client is to be told what became of its upload.
        lowest().expires_never();
        body_timed_out_ = false;
        body_timer_.expires_after(srv_->opt.limits.request_timeout);
        body_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
            if (ec || !self->reading_body_ || self->closed_) return;
            self->body_timed_out_ = true;
            beast::error_code ignored;
            self->lowest().socket().cancel(ignored);
        });
        http::async_read_some(stream_, buffer_, *stream_parser_,
                              [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
    }

    void on_body(beast::error_code ec) {
        reading_body_ = false;
        body_timer_.cancel();
        if (closed_) return;
        if (ec == http::error::need_buffer) ec = {};
        if (ec == net::error::operation_aborted && body_timed_out_) ec = beast::error::timeout;
        // Handed to the route when full (or at the body's end): one hand-over
        // per piece, not one per socket read.
        piece_filled_ = BodyChannel::kPiece - stream_parser_->get().body().size;
        const std::size_t n = piece_filled_;
        if (held_) {
            // Answered already; the rest of the body is read and dropped.
            piece_filled_ = 0;
            if (!ec && !stream_parser_->is_done() && held_drain_) return read_piece();
            if (!ec && stream_parser_->is_done()) body_done_ = true;
            else keep_alive_ = false;
            HttpResponse res = std::move(*held_);
            held_.reset();
            return write(std::move(res));
        }
        if (ec) {
            if (n == 0) return body_failed(ec);
            // What came before the failure goes to the route first.
            piece_filled_ = 0;
            deferred_error_ = ec;
            return channel_->filled(n, false);
        }
        const bool done = stream_parser_->is_done();
        if (!done && n < BodyChannel::kPiece) return read_piece();
        if (done) body_done_ = true;
        piece_filled_ = 0;
        channel_->filled(n, done);
        if (done) {
            ctl_->body_done();
            if (busy_) watch_peer();
        }
    }

    void body_failed(beast::error_code ec) {
        body_broken_ = true;
        keep_alive_ = false;
        std::string why;
        if (ec == beast::error::timeout)
            why = "the client sent nothing for " + seconds_text(srv_->opt.limits.request_timeout);
        else if (ec == http::error::body_limit)
            why = "the body is larger than this route's limit";
        else if (ec == http::error::partial_message || ec == net::error::eof || ec == net::error::connection_reset)
            why = "the client closed the connection before the end of the body";
        else
            why = "the body could not be read: " + ec.message();
        if (channel_) channel_->fail(why);
    }

    // The handler answered before the body's end. A client given no `100
    // Continue` sends no body; an authenticated one (or any, without keys)
    // has the rest read and dropped, so it can read the answer after
    // sending everything, as HTTP clients do; another is answered and cut
    // off (it may see a reset instead of the answer).
    void answer_early(HttpResponse res) {
        if (body_broken_ || (expect_continue_ && !continue_sent_)) {
            keep_alive_ = false;
            if (!reading_body_) return write(std::move(res));
        }
        held_ = std::move(res);
        held_drain_ = !body_broken_ && (authenticated_ || !srv_->opt.key_valid) && !(expect_continue_ && !continue_sent_);
        if (reading_body_) {
            if (!held_drain_) {
                beast::error_code ec;
                lowest().socket().cancel(ec);  // the piece being read; on_body then answers
            }
            return;
        }
        piece_filled_ = 0;
        if (held_drain_ && !deferred_error_) return read_piece();
        keep_alive_ = false;
        HttpResponse r = std::move(*held_);
        held_.reset();
        write(std::move(r));
    }

    void end_request() {
        busy_ = false;
        budget_timer_.cancel();
        if (watching_) {
            watching_ = false;
            beast::error_code ec;
            lowest().socket().cancel(ec);  // the peer watch; no other operation is pending
        }
    }

    // The client's close (FIN or RST) makes the socket readable: peeked, not
    // read, so a pipelined next request stays for the parser.
    void watch_peer() {
        watching_ = true;
        lowest().socket().async_wait(tcp::socket::wait_read, [self = this->shared_from_this(), seq = seq_](beast::error_code ec) {
            self->on_peer(seq, ec);
        });
    }

    void on_peer(uint64_t seq, beast::error_code ec) {
        if (seq != seq_ || !busy_ || !watching_ || closed_) return;
        watching_ = false;
        if (ec == net::error::operation_aborted) return;
        bool gone = static_cast<bool>(ec);
        if (!gone) {
            std::array<unsigned char, 8> b{};
            ssize_t n = ::recv(lowest().socket().native_handle(), b.data(), b.size(), MSG_PEEK | MSG_DONTWAIT);
            if (n == 0) {
                gone = true;
            } else if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return watch_peer();
                gone = true;
            } else if (is_tls && b[0] == 21) {
                gone = true;  // a TLS alert record (close_notify): the client is done
            }
            // Otherwise the client sent its next request already: it is still there.
        }
        if (!gone) return;
        ctl_->cancel(Why::client_gone);
        ++srv_->counters->client_gone;
        end_request();
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_).count();
        srv_->access.info("API {} {} {} 499 {:.1f} ms (the client closed the connection; the request was stopped)", peer_,
                          method_, path_, us / 1000.0);
        close_now();
    }

    void check_budget_later() {
        budget_timer_.expires_after(kBudgetTick);
        budget_timer_.async_wait([self = this->shared_from_this(), seq = seq_](beast::error_code ec) {
            if (!ec) self->check_budget(seq);
        });
    }

    void check_budget(uint64_t seq) {
        if (seq != seq_ || !busy_ || closed_) return;
        const auto& l = srv_->opt.limits;
        if (ctl_->streaming) return check_budget_later();
        if (ctl_->cpu_used() > l.cpu_budget) return over_budget(Why::cpu, "its CPU budget of " + seconds_text(l.cpu_budget));
        if (auto s = ctl_->started(); s && Clock::now() - *s > l.time_budget)
            return over_budget(Why::time, "its time budget of " + seconds_text(l.time_budget));
        check_budget_later();
    }

    void over_budget(Why why, const std::string& what) {
        ctl_->cancel(why);
        ++srv_->counters->over_budget;
        end_request();
        srv_->ops.line(LogState::warning, fmt::format("API: {} {} from {} was stopped: it ran over {}", method_, path_,
                                                      peer_, what));
        keep_alive_ = false;
        write(HttpResponse{503, "application/json", json_message("The request was stopped: it ran over " + what), {}});
    }

    void too_large() {
        fail(413, "Request body too large (at most " + std::to_string(body_limit_) + " bytes)");
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
        lowest().expires_after(srv_->opt.limits.request_timeout);
        http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code ec, std::size_t) {
            self->on_written(ec, res->need_eof());
        });
    }

    void on_written(beast::error_code ec, bool eof) {
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_).count();
        auto& c = *srv_->counters;
        ++c.requests;
        c.total_us += static_cast<uint64_t>(us);
        if (status_ >= 400 && status_ < 500) ++c.errors_4xx;
        if (status_ >= 500) ++c.errors_5xx;
        // The path only: a query string is the client's business, and no key
        // is ever in it. The local log only: any client causes one a request.
        srv_->access.info("API {} {} {} {} {:.1f} ms", peer_, method_, path_, status_, us / 1000.0);
        method_.clear();
        path_.clear();
        if (ec || eof) return close();
        read();
    }

    void close() {
        closed_ = true;
        beast::error_code ec;
        if constexpr (is_tls) {
            lowest().expires_after(std::chrono::seconds(2));
            stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) { self->lowest().close(); });
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

    // At once, nothing more sent (the server stops, the client left).
    void close_now() {
        closed_ = true;
        budget_timer_.cancel();
        body_timer_.cancel();
        beast::error_code ec;
        lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
        lowest().close();
    }

    void drain() {
        if constexpr (!is_tls) {
            stream_.async_read_some(net::buffer(scratch_), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                if (ec) return self->stream_.close();
                self->drain();
            });
        }
    }

    std::shared_ptr<HttpServer::Impl> srv_;
    Stream stream_;
    std::string peer_, client_;
    bool reserve_ = false;        // accepted into the connections kept for authenticated clients
    bool authenticated_ = false;  // sent a valid key
    net::steady_timer budget_timer_{stream_.get_executor()};
    beast::flat_buffer buffer_;
    std::array<char, 16384> scratch_{};
    std::optional<http::request_parser<http::string_body>> parser_;
    // A streamed request's body (ServerOptions::streamed).
    std::optional<http::request_parser<http::buffer_body>> stream_parser_;
    std::shared_ptr<BodyChannel> channel_;
    bool streamed_ = false, body_done_ = false, body_broken_ = false, reading_body_ = false;
    bool expect_continue_ = false, continue_sent_ = false;
    std::optional<HttpResponse> held_;  // the answer given before the body's end, sent once it is dropped
    bool held_drain_ = false;
    std::size_t piece_filled_ = 0;  // of the piece being read
    std::optional<beast::error_code> deferred_error_;  // a read's failure, after the bytes it brought
    net::steady_timer body_timer_{stream_.get_executor()};  // a streamed body's piece
    bool body_timed_out_ = false;
    std::optional<std::string> api_key_;
    std::shared_ptr<RequestControl> ctl_;  // of the request being handled
    uint64_t id_ = 0, seq_ = 0;
    bool busy_ = false, watching_ = false, closed_ = false;
    bool keep_alive_ = true;
    unsigned version_ = 11;
    unsigned status_ = 0;
    std::string method_, path_;
    std::size_t body_limit_ = 0;  // this request's (ServerLimits::body_limit)
    Clock::time_point started_ = Clock::now(), read_started_ = Clock::now();
};

}  // namespace

void HttpServer::Impl::accept() {
    acceptor->async_accept(net::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !self->acceptor->is_open()) return;
        if (!ec) self->admit(std::move(socket));
        self->accept();
    });
}

// The connection limits, at accept: all of them, one client's, and the
// reserve: past `connections - reserved_connections` connections without a
// valid key, a new one is served only if its first request has one.
void HttpServer::Impl::admit(tcp::socket socket) {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    std::string peer = ec ? "" : ep.address().to_string();
    std::string client = ec ? "" : client_of(ep.address());
    const auto& l = opt.limits;
    std::string refused;
    bool reserve = false;
    bool note = false;
    unsigned refused_count = 0;
    std::function<void()> evict;
    {
        std::lock_guard g(m);
        unsigned open = counters->open.load();
        unsigned& mine = per_client[client];
        if (mine >= l.connections_per_client)
            refused = std::to_string(mine) + " connections are open from " + client + ", its limit";
        else if (open >= l.connections && candidates.empty())
            refused = "all " + std::to_string(l.connections) + " connections are in use";
        if (refused.empty()) {
            ++mine;
            unsigned reserved = opt.key_valid ? std::min(l.reserved_connections, l.connections) : 0;
            unsigned anonymous = open - std::min(open, authenticated.load());
            reserve = anonymous >= l.connections - reserved;
            if (open >= l.connections) {
                evict = std::move(candidates.begin()->second);
                candidates.erase(candidates.begin());
                reserve = true;
            }
        } else {
            if (mine == 0) per_client.erase(client);
            ++refused_since_note;
            // One line per 10 s at most, whatever the rate of refusals.
            if (Clock::now() - last_refusal_note >= 10s) {
                note = true;
                refused_count = std::exchange(refused_since_note, 0);
                last_refusal_note = Clock::now();
            }
        }
    }
    if (!refused.empty()) {
        ++counters->rejected_connections;
        if (note)
            ops.line(LogState::warning, fmt::format("API: refused {} connection(s) in 10 s; the last from {}: {}",
                                                    refused_count, peer, refused));
        socket.close(ec);
        return;
    }
    if (evict) evict();
    auto self = shared_from_this();
    if (tls) {
        std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            self, beast::ssl_stream<beast::tcp_stream>(std::move(socket), *tls), peer, client, reserve)
            ->run();
    } else {
        std::make_shared<Session<beast::tcp_stream>>(self, beast::tcp_stream(std::move(socket)), peer, client, reserve)->run();
    }
}

HttpServer::HttpServer(ServerOptions options, Handler handler, Logger log)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler), std::move(log))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
    auto& i = *impl_;
    if (i.running) return;
    if (i.opt.tls) {
        i.tls.emplace(ssl::context::tls_server);
        i.tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                           ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
        SSL_CTX* native = i.tls->native_handle();
        if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1 ||
            SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1 || SSL_CTX_set_dh_auto(native, 1) != 1)
            throw std::runtime_error("cannot set the TLS versions and ciphers");
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
    i.queue = std::make_shared<WorkQueue>(i.opt.limits.workers, i.opt.limits.workers_per_client, i.counters);
    i.queue->start();
    i.ioc.restart();
    i.work.emplace(i.ioc.get_executor());
    {
        std::lock_guard g(i.post_m);
        i.io_open = true;
    }
    i.accept();
    for (int t = 0; t < 2; ++t) i.io_threads.emplace_back([impl = impl_] { impl->run_io(); });
    i.running = true;
}

void HttpServer::stop() {
    auto& i = *impl_;
    if (!i.running) return;
    i.running = false;
    const auto until = Clock::now() + i.opt.limits.stop_bound;
    // No new connections; every request's stop token; every connection closed.
    auto closed = std::make_shared<std::promise<void>>();
    auto acceptor_closed = closed->get_future();
    net::post(i.ioc, [impl = impl_, closed] {
        beast::error_code ec;
        impl->acceptor->close(ec);
        closed->set_value();
    });
    acceptor_closed.wait_until(until);
    i.stop_source.request_stop();
    std::vector<std::function<void()>> closers;
    {
        std::lock_guard g(i.m);
        for (auto& [id, c] : i.closers) closers.push_back(c);
    }
    for (auto& c : closers) c();
    // The handlers see their token and return; one that does not within the
    // bound is left running on its own thread. It holds its session, so this
    // server's state (and the handler with what it captured) stays until it
    // returns; its answer then goes nowhere.
    if (unsigned left = i.queue->close(until)) {
        i.counters->abandoned += left;
        i.log.error("API: {} request(s) still running {} after the stop; left to end on their own", left,
                    seconds_text(i.opt.limits.stop_bound));
    }
    // (The queue object stays until the next start(): the sockets' threads
    // may still read the pointer; a closed queue drops what they post.)
    // The closed sockets' operations complete (aborted) and release their
    // sessions; then the loop runs out of work.
    i.work.reset();
    const auto drained = std::max(until, Clock::now() + 200ms);
    while (!i.ioc.stopped() && Clock::now() < drained) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    {
        std::lock_guard g(i.post_m);
        i.io_open = false;
    }
    i.ioc.stop();
    for (auto& t : i.io_threads) t.join();
    i.io_threads.clear();
    i.acceptor.reset();
    i.tls.reset();
}

bool HttpServer::running() const { return impl_->running; }
uint16_t HttpServer::port() const { return impl_->port; }
const HttpServer::Counters& HttpServer::counters() const { return *impl_->counters; }

}  // namespace pvc::api
