// The reference's value encodings (docs/wire-contract.md §1.2) and small zk helpers.
#include <pvc/zk.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>

namespace pvc::zk {

const char* to_string(Status s) {
    switch (s) {
        case Status::ok: return "ok";
        case Status::no_node: return "no_node";
        case Status::node_exists: return "node_exists";
        case Status::bad_version: return "bad_version";
        case Status::not_empty: return "not_empty";
        case Status::connection_loss: return "connection_loss";
        case Status::session_expired: return "session_expired";
        case Status::timeout: return "timeout";
        case Status::closed: return "closed";
        case Status::other: return "other";
        case Status::too_large: return "too_large";
    }
    return "unknown";
}

const char* to_string(SessionEvent e) {
    switch (e) {
        case SessionEvent::connected: return "connected";
        case SessionEvent::suspended: return "suspended";
        case SessionEvent::reconnected: return "reconnected";
        case SessionEvent::expired_recovered: return "expired_recovered";
        case SessionEvent::closed: return "closed";
    }
    return "unknown";
}

std::string connect_string(const std::vector<std::string>& coordinators) {
    std::string out;
    for (const auto& raw : coordinators) {
        std::string c = raw;
        c.erase(std::remove_if(c.begin(), c.end(), [](unsigned char ch) { return std::isspace(ch); }), c.end());
        if (c.empty()) continue;
        if (!out.empty()) out += ',';
        // "host:port" is kept; a bare host (or a bracketed IPv6 literal) gets the default port.
        bool has_port = false;
        if (c.front() == '[') {
            auto close = c.find(']');
            has_port = close != std::string::npos && close + 1 < c.size() && c[close + 1] == ':';
        } else {
            has_port = std::count(c.begin(), c.end(), ':') == 1;
        }
        out += has_port ? c : c + ":2181";
    }
    return out;
}

std::string py_bool(bool b) { return b ? "True" : "False"; }

// Python's float repr: the shortest digits that round-trip, fixed notation
// when the decimal exponent is in [-4, 16), scientific ("1e+16", "1.5e-07") otherwise.
std::string py_float(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
    bool neg = !sci.empty() && sci.front() == '-';
    if (neg) sci.remove_prefix(1);
    auto epos = sci.find('e');
    std::string_view mant = sci.substr(0, epos);
    int exp = 0;
    std::string_view es = sci.substr(epos + 1);
    if (!es.empty() && es.front() == '+') es.remove_prefix(1);
    std::from_chars(es.data(), es.data() + es.size(), exp);
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    int decpt = exp + 1;  // position of the decimal point relative to the digits
    std::string out = neg ? "-" : "";
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
        } else if (static_cast<size_t>(decpt) >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        int e = decpt - 1;
        out += e < 0 ? "e-" : "e+";
        std::string ev = std::to_string(e < 0 ? -e : e);
        if (ev.size() < 2) ev = "0" + ev;
        out += ev;
    }
    return out;
}

std::optional<bool> lenient_bool(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    std::string l;
    for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* t : {"y", "yes", "t", "true", "on", "1"})
        if (l == t) return true;
    for (const char* f : {"n", "no", "f", "false", "off", "0"})
        if (l == f) return false;
    return std::nullopt;
}

}  // namespace pvc::zk
