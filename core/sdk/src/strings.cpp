#include "pvc/strings.hpp"

namespace pvc {

namespace {
constexpr std::string_view whitespace = " \t\n\r\v\f";
}

std::string trim(std::string_view s) {
    auto b = s.find_first_not_of(whitespace);
    if (b == std::string_view::npos) return {};
    auto e = s.find_last_not_of(whitespace);
    return std::string(s.substr(b, e - b + 1));
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        out += items[i];
    }
    return out;
}

std::vector<std::string> split_all(std::string_view s, char sep) {
    std::vector<std::string> out;
    for (;;) {
        auto pos = s.find(sep);
        out.emplace_back(s.substr(0, pos));
        if (pos == std::string_view::npos) return out;
        s.remove_prefix(pos + 1);
    }
}

std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    for (auto& piece : split_all(s, sep))
        if (!piece.empty()) out.push_back(std::move(piece));
    return out;
}

std::vector<std::string> words(std::string_view s) {
    std::vector<std::string> out;
    for (;;) {
        auto b = s.find_first_not_of(whitespace);
        if (b == std::string_view::npos) return out;
        s.remove_prefix(b);
        auto e = s.find_first_of(whitespace);
        out.emplace_back(s.substr(0, e));
        if (e == std::string_view::npos) return out;
        s.remove_prefix(e);
    }
}

}  // namespace pvc
