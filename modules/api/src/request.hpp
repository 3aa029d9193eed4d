// One API request as the routes see it: the path below
// /api/v1 split into decoded segments, and the parameters of the query
// string and an application/x-www-form-urlencoded body, merged (a
// single-valued parameter's query-string value wins).
//
// These parsers take whatever a client sends: they never throw on bad
// input and are covered by a corpus test (tests/request_parser_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pvc::api {

// Percent-decoding: "%2F" -> '/', '+' -> ' ' when `plus_is_space` (form and
// query encoding, not paths). An invalid escape ("%G1", a trailing "%") is
// kept as written, as Werkzeug does.
std::string percent_decode(std::string_view s, bool plus_is_space);

class Params {
public:
    // "a=1&b=2&a=3" (query string or form body); appended after the pairs already held.
    void parse(std::string_view encoded);
    // The first value (query before form), nullopt when absent.
    std::optional<std::string> get(std::string_view name) const;
    // Every value, in order (list parameters: ?user_tags=a&user_tags=b).
    std::vector<std::string> all(std::string_view name) const;
    bool has(std::string_view name) const { return get(name).has_value(); }
    const std::vector<std::pair<std::string, std::string>>& pairs() const { return pairs_; }

private:
    std::vector<std::pair<std::string, std::string>> pairs_;
};

struct Target {
    bool under_api = false;             // the path starts with /api/v1
    std::vector<std::string> segments;  // below /api/v1, decoded ("/api/v1/" -> {}; "/api/v1/vm/" -> {"vm", ""})
    std::string query;                  // raw, after '?'
};
// Splits a request target ("/api/v1/vm/web1?limit=x"). Segments are split on
// '/' before decoding, so an encoded "%2F" stays inside one segment.
Target parse_target(std::string_view target);

// Python's strtobool, case-insensitive, anything else (or absent) false.
bool truthy(const std::optional<std::string>& value);

}  // namespace pvc::api
