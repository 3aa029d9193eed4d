#include "settings.hpp"

#include <boost/asio/ip/address.hpp>

namespace pvc::api {

namespace {

void unknown_keys(const ConfigNode& section, std::initializer_list<std::string_view> known, ConfigProblems& problems) {
    for (const auto& k : section.keys()) {
        bool ok = false;
        for (auto n : known) ok = ok || k == n;
        if (!ok) problems.add(section.at(k), "unknown key '" + k + "'");
    }
}

}  // namespace

ApiSettings read_api_settings(const Config& config, ConfigProblems& problems) {
    ApiSettings s;
    s.node = config.node;
    s.coordinator = config.daemon_mode == "coordinator";
    s.server.address = "127.0.0.1";
    // With networking, the upstream floating address (the network module's
    // key, validated by it).
    if (ConfigNode f = config.document.at("pvc.cluster.networks.upstream.floating_ip");
        config.enable_networking && f.is_scalar() && !f.scalar().empty())
        s.server.address = f.scalar().substr(0, f.scalar().find('/'));
    ConfigNode api = config.document.at("pvc.api");
    if (!api.exists() || api.is_null()) return s;
    if (!api.section(problems)) {
        problems.add(api, "must be a mapping");
        return s;
    }
    unknown_keys(api, {"listen_address", "listen_port", "authentication", "ssl", "limits"}, problems);

    ConfigNode address = api.child("listen_address", problems);
    if (auto a = address.string(problems)) {
        boost::system::error_code ec;
        boost::asio::ip::make_address(*a, ec);
        if (ec) problems.add(address, "'" + *a + "' is not an IP address");
        else s.server.address = *a;
    }
    int port = 7370;
    api.child("listen_port", problems).read(problems, port, 1, 65535);
    s.server.port = static_cast<uint16_t>(port);

    ConfigNode auth = api.child("authentication", problems);
    if (auth.has_value() && auth.section(problems)) {
        unknown_keys(auth, {"enabled", "secret_key", "tokens"}, problems);
        auth.child("enabled", problems).read(problems, s.auth_enabled);
        ConfigNode tokens = auth.child("tokens", problems);
        if (tokens.has_value() && !tokens.is_sequence()) {
            problems.add(tokens, "must be a list of {description, token}");
        } else if (tokens.has_value()) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                ConfigNode item = tokens.item(i);
                if (!item.is_map()) {
                    problems.add(item, "must be a mapping {description, token}");
                    continue;
                }
                unknown_keys(item, {"description", "token"}, problems);
                ApiToken t;
                item.child("description", problems).read(problems, t.description);
                ConfigNode tok = item.child("token", problems);
                if (auto v = tok.required_string(problems)) {
                    // The reference's sample ships an empty token, which makes an
                    // empty X-Api-Key valid: refused.
                    if (v->empty()) problems.add(tok, "an empty token would let an empty X-Api-Key in");
                    else t.token = *v;
                }
                if (!t.token.empty()) s.tokens.push_back(std::move(t));
            }
        }
    }

    ConfigNode ssl = api.child("ssl", problems);
    if (ssl.has_value() && ssl.section(problems)) {
        unknown_keys(ssl, {"enabled", "cert_file", "key_file"}, problems);
        ssl.child("enabled", problems).read(problems, s.server.tls);
        ConfigNode cert = ssl.child("cert_file", problems), key = ssl.child("key_file", problems);
        cert.read(problems, s.server.cert_file);
        key.read(problems, s.server.key_file);
        if (s.server.tls && s.server.cert_file.empty()) problems.add(ssl, "ssl.enabled needs cert_file");
        if (s.server.tls && s.server.key_file.empty()) problems.add(ssl, "ssl.enabled needs key_file");
    }

    ConfigNode limits = api.child("limits", problems);
    if (limits.has_value() && limits.section(problems)) {
        unknown_keys(limits, {"max_body_bytes", "max_header_bytes", "max_connections", "max_connections_per_client",
                              "reserved_connections", "max_requests_per_client", "header_timeout", "request_timeout",
                              "cpu_budget", "time_budget"},
                     problems);
        auto& l = s.server.limits;
        auto secs = [](std::chrono::milliseconds d) { return static_cast<int>(d.count() / 1000); };
        int body = static_cast<int>(l.body_bytes), header = static_cast<int>(l.header_bytes);
        int conns = static_cast<int>(l.connections), per_client = static_cast<int>(l.connections_per_client);
        int reserved = static_cast<int>(l.reserved_connections), requests = static_cast<int>(l.workers_per_client);
        int header_timeout = secs(l.header_timeout), timeout = secs(l.request_timeout);
        int cpu = secs(l.cpu_budget), time = secs(l.time_budget);
        limits.child("max_body_bytes", problems).read(problems, body, 1024, 256 * 1024 * 1024);
        limits.child("max_header_bytes", problems).read(problems, header, 1024, 1024 * 1024);
        limits.child("max_connections", problems).read(problems, conns, 1, 10000);
        limits.child("max_connections_per_client", problems).read(problems, per_client, 1, 10000);
        ConfigNode reserved_node = limits.child("reserved_connections", problems);
        reserved = conns / 4;  // default: a quarter of max_connections
        reserved_node.read(problems, reserved, 0, 10000);
        limits.child("max_requests_per_client", problems).read(problems, requests, 1, static_cast<int>(l.workers));
        limits.child("header_timeout", problems).read(problems, header_timeout, 1, 3600);
        limits.child("request_timeout", problems).read(problems, timeout, 1, 3600);
        limits.child("cpu_budget", problems).read(problems, cpu, 1, 3600);
        limits.child("time_budget", problems).read(problems, time, 1, 7 * 24 * 3600);
        if (reserved >= conns)
            problems.add(reserved_node, "reserved_connections (" + std::to_string(reserved) +
                                            ") must be less than max_connections (" + std::to_string(conns) + ")");
        l.body_bytes = static_cast<std::size_t>(body);
        l.header_bytes = static_cast<std::size_t>(header);
        l.connections = static_cast<unsigned>(conns);
        l.connections_per_client = static_cast<unsigned>(per_client);
        l.reserved_connections = static_cast<unsigned>(reserved);
        l.workers_per_client = static_cast<unsigned>(requests);
        l.header_timeout = std::chrono::seconds(header_timeout);
        l.request_timeout = std::chrono::seconds(timeout);
        l.cpu_budget = std::chrono::seconds(cpu);
        l.time_budget = std::chrono::seconds(time);
    }
    return s;
}

}  // namespace pvc::api
