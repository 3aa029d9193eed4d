// The string helpers every part of pvc shares (core, modules, the pvc CLI):
// one definition each, so "a,,b" and "  x " mean the same everywhere.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"

namespace pvc {

// `s` without leading and trailing whitespace (space, \t, \n, \r, \v, \f).
PVC_SDK_API std::string trim(std::string_view s);
// The items with `sep` between them.
PVC_SDK_API std::string join(const std::vector<std::string>& items, std::string_view sep);
// The non-empty pieces of `s` between `sep`s: "a,,b" gives a and b, "" gives none.
PVC_SDK_API std::vector<std::string> split(std::string_view s, char sep);
// Every piece of `s` between `sep`s, empty ones included, as Python's
// str.split(sep): "a,,b" gives a, "" and b; "" gives one empty piece.
PVC_SDK_API std::vector<std::string> split_all(std::string_view s, char sep);
// The whitespace-separated words of `s`, as Python's str.split().
PVC_SDK_API std::vector<std::string> words(std::string_view s);

}  // namespace pvc
