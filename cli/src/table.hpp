// Plain-text tables for the default (human) output. Colour is applied per
// cell after padding, so escapes never disturb the column widths.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pvc::cli {

class Table {
public:
    explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    bool empty() const { return rows_.empty(); }
    void print(std::ostream& out) const;

private:
    std::vector<std::string> headers_;
    std::vector<std::vector<std::string>> rows_;
};

// ANSI colour for a state word (start/run/ready green, fail/dead red, ...)
// when colour is on; `text` unchanged otherwise.
std::string colour_state(const std::string& state, const std::string& text);
std::string colour_state(const std::string& state);
std::string bold(const std::string& text);

// Prints "Label:  value" lines with the labels aligned.
void print_fields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace pvc::cli
