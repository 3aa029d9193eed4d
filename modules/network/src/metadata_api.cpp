#include "metadata_api.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace pvc::network {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool has_mac(const std::string& xml, const std::string& mac) {
    auto d = try_parse_domain_xml(xml);
    if (!d) return false;
    return std::any_of(d->interfaces.begin(), d->interfaces.end(),
                       [&](const DomainInterface& i) { return lower(i.mac) == mac; });
}

// The MAC whose entry under `list` ("network.lease" or "network.reservation")
// of a managed network holds `ip`.
std::optional<std::string> mac_of(zk::Session& zk, const std::vector<std::string>& vnis, const std::string& list,
                                  const std::string& ip_key, const std::string& ip) {
    for (const auto& vni : vnis) {
        auto macs = zk.children(schema::path(list, {vni}));
        if (!macs || macs->empty()) continue;
        std::vector<std::string> paths;
        for (const auto& mac : *macs) paths.push_back(schema::path(ip_key, {vni, mac}));
        auto ips = zk.get_many(paths);
        for (size_t i = 0; i < ips.size(); ++i)
            if (ips[i] && *ips[i] == ip) return lower((*macs)[i]);
    }
    return std::nullopt;
}

}  // namespace

std::optional<VmDetails> find_vm(zk::Session& zk, const std::string& ip, std::map<std::string, std::string>* cache) {
    auto networks = zk.children(schema::path("base.network"));
    if (!networks || networks->empty()) return std::nullopt;
    std::vector<std::string> managed;
    {
        std::vector<std::string> paths;
        for (const auto& vni : *networks) paths.push_back(schema::path("network.type", {vni}));
        auto types = zk.get_many(paths);
        for (size_t i = 0; i < types.size(); ++i)
            if (types[i] && *types[i] == "managed") managed.push_back((*networks)[i]);
    }
    auto mac = mac_of(zk, managed, "network.lease", "lease.ip", ip);
    if (!mac) mac = mac_of(zk, managed, "network.reservation", "reservation.ip", ip);
    if (!mac) return std::nullopt;
    std::string uuid;
    if (cache) {
        auto it = cache->find(*mac);
        if (it != cache->end()) {
            auto xml = zk.get(schema::path("domain.xml", {it->second}));
            if (xml && has_mac(*xml, *mac)) uuid = it->second;
            else cache->erase(it);
        }
    }
    if (uuid.empty()) {
        auto uuids = zk.children(schema::path("base.domain"));
        if (!uuids || uuids->empty()) return std::nullopt;
        std::vector<std::string> paths;
        for (const auto& u : *uuids) paths.push_back(schema::path("domain.xml", {u}));
        auto xmls = zk.get_many(paths);
        for (size_t i = 0; i < xmls.size() && uuid.empty(); ++i)
            if (xmls[i] && has_mac(*xmls[i], *mac)) uuid = (*uuids)[i];
        if (uuid.empty()) return std::nullopt;
        if (cache) (*cache)[*mac] = uuid;
    }
    auto v = zk.get_many({schema::path("domain.name", {uuid}), schema::path("domain.profile", {uuid})});
    if (!v[0]) return std::nullopt;  // removed meanwhile
    return VmDetails{uuid, *v[0], v[1].value_or("")};
}

// The server: one I/O thread (accept, read, write), lookups on a small pool.
struct MetadataApi::Impl {
    explicit Impl(unsigned workers) : pool(workers) {}
    asio::io_context io;
    std::optional<tcp::acceptor> acceptor;
    asio::thread_pool pool;
    std::thread thread;
    uint16_t port = 0;
    bool running = false;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket s, MetadataApi& api, asio::thread_pool& pool)
        : stream_(std::move(s)), api_(api), pool_(pool) {}
    void start() { read(); }

private:
    void read() {
        parser_.emplace();
        parser_->header_limit(8 * 1024);
        parser_->body_limit(8 * 1024);
        stream_.expires_after(std::chrono::seconds(30));
        http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) return self->close();
            self->handle();
        });
    }
    void handle() {
        auto req = parser_->release();
        std::string source;
        beast::error_code ec;
        auto ep = stream_.socket().remote_endpoint(ec);
        if (!ec) {
            auto a = ep.address();
            if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
            source = a.to_string();
        }
        // The lookup may wait on ZooKeeper and the database: not on the I/O thread.
        asio::post(pool_, [self = shared_from_this(), req = std::move(req), source]() mutable {
            MetadataReply r;
            try {
                r = self->api_.answer(std::string(req.method_string()), std::string(req.target()), source);
            } catch (const std::exception& e) {
                r = {500, "text/plain; charset=utf-8", std::string("internal error: ") + e.what() + "\n"};
            }
            auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status),
                                                                            req.version());
            res->set(http::field::server, "pvcnoded");
            res->set(http::field::content_type, r.content_type);
            res->keep_alive(req.keep_alive());
            res->body() = std::move(r.body);
            res->prepare_payload();
            asio::post(self->stream_.get_executor(), [self, res] {
                self->stream_.expires_after(std::chrono::seconds(30));
                http::async_write(self->stream_, *res, [self, res](beast::error_code ec, std::size_t) {
                    if (ec || !res->keep_alive()) return self->close();
                    self->read();
                });
            });
        });
    }
    void close() {
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.socket().close(ec);
    }

    beast::tcp_stream stream_;
    MetadataApi& api_;
    asio::thread_pool& pool_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
};

void accept(tcp::acceptor& acc, asio::io_context& io, MetadataApi& api, asio::thread_pool& pool) {
    acc.async_accept(asio::make_strand(io), [&acc, &io, &api, &pool](beast::error_code ec, tcp::socket s) {
        if (ec == asio::error::operation_aborted || !acc.is_open()) return;
        if (!ec) std::make_shared<Session>(std::move(s), api, pool)->start();
        accept(acc, io, api, pool);
    });
}

}  // namespace

MetadataApi::MetadataApi(Options o, std::shared_ptr<zk::Session> zk, Logger log)
    : o_(std::move(o)), zk_(std::move(zk)), log_(std::move(log)) {}

MetadataApi::~MetadataApi() { stop(); }

void MetadataApi::start() {
    if (impl_) return;
    auto impl = std::make_unique<Impl>(std::max(1u, o_.workers));
    beast::error_code ec;
    auto addr = asio::ip::make_address(o_.address, ec);
    if (ec) throw std::runtime_error(fmt::format("'{}' is not an address", o_.address));
    tcp::endpoint ep(addr, o_.port);
    impl->acceptor.emplace(impl->io);
    impl->acceptor->open(ep.protocol(), ec);
    if (!ec) impl->acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl->acceptor->bind(ep, ec);
    if (!ec) impl->acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", o_.address, o_.port, ec.message()));
    impl->port = impl->acceptor->local_endpoint().port();
    accept(*impl->acceptor, impl->io, *this, impl->pool);
    impl->thread = std::thread([io = &impl->io, log = log_] {
        for (;;) {
            try {
                io->run();
                return;
            } catch (const std::exception& e) {
                log.error("Metadata API: {}", e.what());
            }
        }
    });
    impl->running = true;
    impl_ = std::move(impl);
}

void MetadataApi::stop() {
    if (!impl_) return;
    // No more accepts or reads; then the lookups in progress end (each by
    // its deadlines); their replies are dropped with the io_context.
    impl_->io.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
    impl_->pool.join();
    beast::error_code ec;
    impl_->acceptor->close(ec);
    impl_.reset();
}

bool MetadataApi::running() const { return impl_ && impl_->running; }

uint16_t MetadataApi::port() const { return impl_ ? impl_->port : 0; }

std::string MetadataApi::problem() const {
    std::lock_guard g(m_);
    return problem_;
}

std::optional<std::string> MetadataApi::user_data(const std::string& profile) {
    std::lock_guard g(db_m_);
    try {
        if (db_ && db_->broken()) db_.reset();
        if (!db_) db_ = std::make_unique<Pg>(o_.db, o_.db_deadline);
        auto rows = db_->exec(
            "SELECT userdata.userdata FROM profile JOIN userdata ON profile.userdata = userdata.id WHERE profile.name = $1",
            {profile}, o_.db_deadline);
        {
            std::lock_guard p(m_);
            if (!problem_.empty()) log_.ok("Metadata API: the provisioner database answers again");
            problem_.clear();
        }
        if (rows.rows.empty() || !rows.rows[0][0]) return std::string();
        return *rows.rows[0][0];
    } catch (const std::exception& e) {
        db_.reset();
        std::string why = fmt::format("PostgreSQL database {} at {}:{}: {}", o_.db.dbname, o_.db.host, o_.db.port,
                                      e.what());
        std::lock_guard p(m_);
        if (why != problem_) log_.error("Metadata API: {}", why);
        problem_ = why;
        return std::nullopt;
    }
}

MetadataReply MetadataApi::answer(const std::string& method, const std::string& target_in, const std::string& source) {
    std::string target = target_in.substr(0, target_in.find('?'));
    if (target == "/") {
        if (method != "GET") return {405, "text/plain; charset=utf-8", "method not allowed\n"};
        // The reference's answer, status 209 included.
        return {209, "application/json", nlohmann::json{{"message", "PVC Provisioner Metadata API version 1"}}.dump() + "\n"};
    }
    // /<version>/meta-data/..., /<version>/user-data (the version is ignored).
    auto parts = split_all(target.substr(1), '/');
    if (parts.size() < 2 || parts[0].empty()) return {404, "text/plain; charset=utf-8", "not found\n"};
    std::string rest = target.substr(parts[0].size() + 1);
    static const std::vector<std::string> routes = {"/meta-data/", "/meta-data", "/meta-data/instance-id",
                                                    "/meta-data/name", "/meta-data/profile", "/user-data"};
    if (std::find(routes.begin(), routes.end(), rest) == routes.end())
        return {404, "text/plain; charset=utf-8", "not found\n"};
    if (method != "GET") return {405, "text/plain; charset=utf-8", "method not allowed\n"};
    if (rest == "/meta-data/" || rest == "/meta-data") return {200, "text/html; charset=utf-8", "instance-id\nname\nprofile"};
    std::optional<VmDetails> vm;
    {
        std::map<std::string, std::string> cache;
        {
            std::lock_guard g(m_);
            cache = cache_;
        }
        vm = find_vm(*zk_, source, &cache);
        std::lock_guard g(m_);
        cache_ = std::move(cache);
    }
    if (!vm) return {404, "text/plain; charset=utf-8", fmt::format("no VM has the address {}\n", source)};
    if (rest == "/meta-data/instance-id") return {200, "text/html; charset=utf-8", vm->uuid};
    if (rest == "/meta-data/name") return {200, "text/html; charset=utf-8", vm->name};
    if (rest == "/meta-data/profile") return {200, "text/html; charset=utf-8", vm->profile};
    // user-data
    if (vm->profile.empty()) return {200, "text/html; charset=utf-8", ""};
    auto data = user_data(vm->profile);
    if (!data) return {503, "text/plain; charset=utf-8", "the provisioner database is not reachable\n"};
    log_.info("Metadata API: user data of profile {} for VM {} ({})", vm->profile, vm->name, source);
    return {200, "text/html; charset=utf-8", *data};
}

}  // namespace pvc::network
