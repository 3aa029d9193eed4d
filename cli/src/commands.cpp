#include "commands.hpp"

#include "common.hpp"

namespace pvc::cli {

void add_format_option(CLI::App* cmd, std::string& format) {
    cmd->add_option("--format", format, "Output format: table (default) or json")
        ->check(CLI::IsMember({"table", "json"}));
}

void wait_for(const std::string& what, const std::function<bool()>& done, std::chrono::milliseconds poll,
              const std::function<void()>& progress) {
    auto start = std::chrono::steady_clock::now();
    while (true) {
        if (progress) progress();
        if (done()) return;
        double limit = globals().wait_timeout;
        if (limit > 0 && std::chrono::steady_clock::now() - start > std::chrono::duration<double>(limit))
            throw Failure("gave up after " + std::to_string(static_cast<long>(limit)) + " s waiting for " + what);
        pause(poll);
    }
}

}  // namespace pvc::cli
