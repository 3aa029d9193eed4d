// Serial console log of one VM copied into /domains/<uuid>/consolelog
// (the reference's console log watcher): the last N lines of <console_log_directory>/<name>.log,
// uploaded 0.5 s after the file changes (inotify, through the module's one
// InotifyHub), so idle VMs cost nothing: no timer runs while the file is
// watched. A poll covers a file that cannot be watched (0.5 s while its
// directory exists, else 10 s).
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/steady_timer.hpp>

#include "inotify_hub.hpp"
#include "pvc/module.hpp"

namespace pvc::hv {

// Last `lines` lines of `text` (CRLF / lone CR as LF, each line keeps its
// newline), invalid UTF-8 replaced by U+FFFD.
std::string tail_lines(const std::string& text, int lines);

// <dir>/<name>.log for a VM name read from ZooKeeper, or nullopt when the name
// is not one plain file name (empty, `.`, `..`, a `/`, a control character, too
// long): a name never reaches outside `dir`.
std::optional<std::filesystem::path> console_log_file(const std::filesystem::path& dir, std::string_view name);

class ConsoleLog : public std::enable_shared_from_this<ConsoleLog> {
public:
    // `hub` may be null (no inotify): the file is polled.
    ConsoleLog(std::shared_ptr<zk::Session> zk, Executor& ex, Strand strand, std::shared_ptr<InotifyHub> hub,
               std::string uuid, std::filesystem::path file, int lines);
    // Creates the file (mode 0600) if missing, never through a symbolic link.
    // Blocking (file system only).
    void prepare();
    // Idempotent.
    void start();
    // Stops polling; `final_upload` does one last upload (blocking).
    void stop(bool final_upload);
    bool started() const { return started_; }

private:
    void schedule(std::chrono::milliseconds after);
    void watch();     // (re)arms the inotify watch on the file (strand)
    void unwatch();   // strand
    void on_event(uint32_t mask);  // strand
    void tick();
    void upload();

    std::shared_ptr<zk::Session> zk_;
    Executor& ex_;
    Strand strand_;
    std::string uuid_;
    std::filesystem::path file_;
    int lines_;
    std::shared_ptr<InotifyHub> hub_;
    boost::asio::steady_timer timer_;
    int watch_id_ = -1;                 // strand only; the hub's subscription
    bool timer_armed_ = false;          // strand only
    std::atomic<bool> started_{false};
    std::atomic<bool> in_flight_{false};
    std::mutex m_;
    std::filesystem::file_time_type last_mtime_{};
    std::string last_text_;
    bool uploaded_once_ = false;
};

}  // namespace pvc::hv
