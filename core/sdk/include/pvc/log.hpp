// Logging in the reference's format over spdlog.
//
//   [>>> | prompt] [YYYY/MM/DD HH:MM:SS.ffffff ] [prefix - ]message
//
// Sinks: stdout, <log_directory>/pvc.log, and ZooKeeper (/logs/<node>/messages,
// the last node_log_lines lines), each enabled by its config flag; a
// Logger::local() line skips ZooKeeper.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "pvc/export.hpp"

namespace pvc {

struct Config;
namespace zk { class Session; }

// ANSI codes of the reference's console format.
namespace ansi {
inline constexpr const char* green = "\033[92m";
inline constexpr const char* red = "\033[91m";
inline constexpr const char* yellow = "\033[93m";
inline constexpr const char* purple = "\033[95m";
inline constexpr const char* blue = "\033[94m";
inline constexpr const char* cyan = "\033[96m";
inline constexpr const char* white = "\033[97m";
inline constexpr const char* bold = "\033[1m";
inline constexpr const char* end = "\033[0m";
}  // namespace ansi

// Local time as `strftime_format` followed by ".ffffff" (microseconds).
PVC_SDK_API std::string timestamp_us(const char* strftime_format);

// The reference's log states: o ok, e error, w warning, t tick, i info, s system, d debug.
enum class LogState { ok, error, warning, tick, info, system, debug, none };

class LogSink;  // implementation detail (src/)

// A named logger: a prefix in front of every line ("" for the daemon itself).
class PVC_SDK_API Logger {
public:
    Logger() = default;
    Logger(std::shared_ptr<LogSink> sink, std::string prefix) : sink_(std::move(sink)), prefix_(std::move(prefix)) {}

    void log(LogState state, std::string_view message) const;
    Logger child(std::string prefix) const {
        Logger l(sink_, std::move(prefix));
        l.local_ = local_;
        return l;
    }
    // The same logger for lines that stay in the node's own log (stdout,
    // file) and never reach the ZooKeeper node log: what any client can cause
    // once per request (an HTTP access line) must not push an operator's
    // lines out of that ring.
    Logger local() const {
        Logger l(sink_, prefix_);
        l.local_ = true;
        return l;
    }
    const std::string& prefix() const { return prefix_; }
    bool debug_enabled() const;

    template <class... A> void ok(fmt::format_string<A...> f, A&&... a) const { log(LogState::ok, fmt::format(f, std::forward<A>(a)...)); }
    template <class... A> void error(fmt::format_string<A...> f, A&&... a) const { log(LogState::error, fmt::format(f, std::forward<A>(a)...)); }
    template <class... A> void warn(fmt::format_string<A...> f, A&&... a) const { log(LogState::warning, fmt::format(f, std::forward<A>(a)...)); }
    template <class... A> void tick(fmt::format_string<A...> f, A&&... a) const { log(LogState::tick, fmt::format(f, std::forward<A>(a)...)); }
    template <class... A> void info(fmt::format_string<A...> f, A&&... a) const { log(LogState::info, fmt::format(f, std::forward<A>(a)...)); }
    template <class... A> void system(fmt::format_string<A...> f, A&&... a) const { log(LogState::system, fmt::format(f, std::forward<A>(a)...)); }
    template <class... A> void debug(fmt::format_string<A...> f, A&&... a) const {
        if (debug_enabled()) log(LogState::debug, fmt::format(f, std::forward<A>(a)...));
    }

private:
    std::shared_ptr<LogSink> sink_;
    std::string prefix_;
    bool local_ = false;  // never copied to ZooKeeper
};

// Builds the daemon's log sink from the logging keys of `config`.
// Without a config (early start-up, tools) logs plain lines to stderr.
PVC_SDK_API std::shared_ptr<LogSink> make_log_sink(const Config* config);
// Masks `secret` (a password a module read, Module::secrets) as ******** in
// every line logged from now on.
PVC_SDK_API void add_log_secret(const std::shared_ptr<LogSink>& sink, std::string secret);
// Starts copying lines into ZooKeeper (zookeeper_logging); lines logged
// before are kept in the ring and written at once.
PVC_SDK_API void attach_zookeeper(const std::shared_ptr<LogSink>& sink, std::shared_ptr<zk::Session> session,
                      const std::string& node);
// Reopen the log file (SIGHUP) and flush/stop the ZooKeeper writer (shutdown, bounded).
PVC_SDK_API void reopen_log_file(const std::shared_ptr<LogSink>& sink);
PVC_SDK_API void shutdown_log_sink(const std::shared_ptr<LogSink>& sink);

}  // namespace pvc
