#include "table.hpp"

#include <algorithm>

#include "common.hpp"

namespace pvc::cli {
namespace {

// Visible width: escapes (ESC [ ... m) do not count.
size_t visible_width(const std::string& s) {
    size_t w = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\x1b') {
            while (i < s.size() && s[i] != 'm') ++i;
            continue;
        }
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++w;  // count UTF-8 lead bytes only
    }
    return w;
}

std::string pad(const std::string& s, size_t width) {
    size_t w = visible_width(s);
    return w >= width ? s : s + std::string(width - w, ' ');
}

}  // namespace

void Table::print(std::ostream& out) const {
    std::vector<size_t> widths(headers_.size(), 0);
    for (size_t c = 0; c < headers_.size(); ++c) widths[c] = visible_width(headers_[c]);
    for (const auto& row : rows_)
        for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], visible_width(row[c]));
    auto line = [&](const std::vector<std::string>& row, bool header) {
        std::string text;
        for (size_t c = 0; c < headers_.size(); ++c) {
            std::string cell = c < row.size() ? row[c] : "";
            bool last = c + 1 == headers_.size();
            std::string padded = last ? cell : pad(cell, widths[c]) + "  ";
            text += header ? bold(padded) : padded;
        }
        while (!text.empty() && text.back() == ' ') text.pop_back();
        out << text << '\n';
    };
    line(headers_, true);
    for (const auto& row : rows_) line(row, false);
}

std::string colour_state(const std::string& state, const std::string& text) {
    if (!use_color()) return text;
    const char* code = nullptr;
    if (state == "start" || state == "run" || state == "ready" || state == "primary" || state == "on")
        code = "32";  // green
    else if (state == "fail" || state == "dead" || state == "fenced" || state == "delete")
        code = "31";  // red
    else if (state == "stop" || state == "disable" || state == "flushed" || state == "shutdown" || state == "secondary" ||
             state == "client")
        code = "34";  // blue
    else if (state == "migrate" || state == "migrate-live" || state == "unmigrate" || state == "restart" ||
             state == "flush" || state == "unflush" || state == "fence-flush" || state == "init" ||
             state == "takeover" || state == "relinquish" || state == "provision" || state == "restore")
        code = "33";  // yellow
    if (!code) return text;
    return std::string("\x1b[") + code + "m" + text + "\x1b[0m";
}

std::string colour_state(const std::string& state) { return colour_state(state, state); }

std::string bold(const std::string& text) { return use_color() ? "\x1b[1m" + text + "\x1b[0m" : text; }

void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields) {
    size_t w = 0;
    for (const auto& [k, v] : fields) w = std::max(w, k.size() + 1);
    for (const auto& [k, v] : fields) out << bold(pad(k + ":", w)) << "  " << v << '\n';
}

}  // namespace pvc::cli
