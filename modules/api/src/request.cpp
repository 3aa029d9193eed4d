#include "request.hpp"

namespace pvc::api {

namespace {
int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
}  // namespace

std::string percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '%' && i + 2 < s.size()) {
            int h = hex(s[i + 1]), l = hex(s[i + 2]);
            if (h >= 0 && l >= 0) {
                out += static_cast<char>(h * 16 + l);
                i += 2;
                continue;
            }
        }
        out += (plus_is_space && c == '+') ? ' ' : c;
    }
    return out;
}

void Params::parse(std::string_view encoded) {
    size_t pos = 0;
    while (pos <= encoded.size()) {
        size_t amp = encoded.find('&', pos);
        if (amp == std::string_view::npos) amp = encoded.size();
        std::string_view item = encoded.substr(pos, amp - pos);
        if (!item.empty()) {
            size_t eq = item.find('=');
            std::string_view k = item.substr(0, eq);
            std::string_view v = eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
            pairs_.emplace_back(percent_decode(k, true), percent_decode(v, true));
        }
        pos = amp + 1;
    }
}

std::optional<std::string> Params::get(std::string_view name) const {
    for (const auto& [k, v] : pairs_)
        if (k == name) return v;
    return std::nullopt;
}

std::vector<std::string> Params::all(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : pairs_)
        if (k == name) out.push_back(v);
    return out;
}

Target parse_target(std::string_view target) {
    Target t;
    size_t q = target.find('?');
    std::string_view path = target.substr(0, q);
    if (q != std::string_view::npos) t.query = std::string(target.substr(q + 1));
    size_t hash = t.query.find('#');
    if (hash != std::string::npos) t.query.resize(hash);
    constexpr std::string_view prefix = "/api/v1";
    if (path.substr(0, prefix.size()) != prefix) return t;
    std::string_view rest = path.substr(prefix.size());
    if (!rest.empty() && rest[0] != '/') return t;  // "/api/v10"
    t.under_api = true;
    if (rest.empty() || rest == "/") return t;
    rest.remove_prefix(1);
    size_t pos = 0;
    while (true) {
        size_t slash = rest.find('/', pos);
        std::string_view seg = rest.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
        t.segments.push_back(percent_decode(seg, false));
        if (slash == std::string_view::npos) break;
        pos = slash + 1;
    }
    return t;
}

bool truthy(const std::optional<std::string>& value) {
    if (!value) return false;
    std::string v;
    for (char c : *value) v += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return v == "y" || v == "yes" || v == "t" || v == "true" || v == "on" || v == "1";
}

}  // namespace pvc::api
