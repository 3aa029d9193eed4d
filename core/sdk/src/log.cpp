#include "pvc/log.hpp"
#include "log_batch.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/details/file_helper.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "pvc/config.hpp"
#include "pvc/schema.hpp"
#include "pvc/zk.hpp"

namespace pvc {


namespace {

std::string timestamp() { return timestamp_us("%Y/%m/%d %H:%M:%S"); }

struct Prompt {
    const char* colour;
    const char* plain;
};

Prompt prompt_of(LogState s) {
    switch (s) {
        case LogState::ok: return {ansi::green, "ok: "};
        case LogState::error: return {ansi::red, "failed: "};
        case LogState::warning: return {ansi::yellow, "warning: "};
        case LogState::tick: return {ansi::purple, "tick: "};
        case LogState::info: return {ansi::blue, "info: "};
        case LogState::system: return {ansi::cyan, "system: "};
        case LogState::debug: return {ansi::white, "debug: "};
        case LogState::none: break;
    }
    return {"", ""};
}

spdlog::level::level_enum level_of(LogState s) {
    switch (s) {
        case LogState::error: return spdlog::level::err;
        case LogState::warning: return spdlog::level::warn;
        case LogState::debug: return spdlog::level::debug;
        default: return spdlog::level::info;
    }
}

}  // namespace

std::string timestamp_us(const char* strftime_format) {
    using namespace std::chrono;
    auto now = system_clock::now();
    auto us = duration_cast<microseconds>(now.time_since_epoch()).count() % 1000000;
    std::time_t t = system_clock::to_time_t(now);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, strftime_format, &tm);
    return fmt::format("{}.{:06d}", buf, us);
}

// <log_directory>/pvc.log, reopened in place on SIGHUP (logrotate). The sink
// object itself never changes, so threads logging meanwhile never walk a sink
// list being rewritten; the file handle is swapped under the sink's own mutex,
// between two lines, so no line is lost or split across the two files.
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
    explicit ReopenableFileSink(std::string path) : path_(std::move(path)), file_(open(path_)) {}

    // Throws spdlog::spdlog_ex if the file cannot be opened; the old one is kept then.
    void reopen() {
        auto fresh = open(path_);  // opened before the lock: a slow open holds up no logging thread
        std::lock_guard g(mutex_);
        file_.swap(fresh);
    }  // the old file is closed here, after the lock is released

    const std::string& path() const { return path_; }

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t formatted;
        formatter_->format(msg, formatted);
        file_->write(formatted);
    }
    void flush_() override { file_->flush(); }

private:
    static std::unique_ptr<spdlog::details::file_helper> open(const std::string& path) {
        auto f = std::make_unique<spdlog::details::file_helper>();
        f->open(path, false);  // append, as the reference
        return f;
    }

    std::string path_;
    std::unique_ptr<spdlog::details::file_helper> file_;
};

// The last `max` lines joined by '\n' (the /logs/<node> value), kept as that
// joined value and updated per line, so a write costs one copy instead of a
// rebuild. Dropped lines are cut off the front lazily: `head_` bytes of
// `joined_` are dead until compact().
class LogRing {
public:
    explicit LogRing(size_t max) : max_(max) {}

    void push(std::string_view line) {
        if (max_ == 0) return;
        if (!lengths_.empty()) joined_.push_back('\n');
        joined_.append(line);
        lengths_.push_back(line.size());
        while (lengths_.size() > max_) {
            head_ += lengths_.front() + 1;  // the line and the '\n' after it
            lengths_.pop_front();
        }
        // Amortised O(1) per line: move the live part only once as much is dead.
        if (head_ > joined_.size() - head_) compact();
    }
    // Lines kept in front of the current ones (what an earlier run left).
    void prepend(const std::string& value) {
        LogRing merged(max_);
        size_t start = 0;
        for (;;) {
            size_t nl = value.find('\n', start);
            merged.push(std::string_view(value).substr(start, nl == std::string::npos ? nl : nl - start));
            if (nl == std::string::npos) break;
            start = nl + 1;
        }
        size_t pos = head_;
        for (size_t len : lengths_) {
            merged.push(std::string_view(joined_).substr(pos, len));
            pos += len + 1;
        }
        *this = std::move(merged);
    }
    const std::string& value() {
        compact();
        return joined_;
    }
    size_t lines() const { return lengths_.size(); }

private:
    void compact() {
        joined_.erase(0, head_);
        head_ = 0;
    }

    size_t max_;
    std::string joined_;
    size_t head_ = 0;
    std::deque<size_t> lengths_;
};

// The daemon's log sink: formats lines once and hands them to spdlog sinks
// (stdout, file) and to the ZooKeeper ring writer.
class LogSink {
public:
    explicit LogSink(const Config* cfg) {
        if (cfg) {
            colours_ = cfg->log_colours;
            dates_ = cfg->log_dates;
            debug_ = cfg->debug;
            size_t ring_max = cfg->node_log_lines > 0 ? static_cast<size_t>(cfg->node_log_lines) : 0;
            zk_enabled_ = cfg->zookeeper_logging && ring_max > 0;
            ring_ = LogRing(ring_max);
            zk_period_ = std::chrono::milliseconds(cfg->zookeeper_log_interval_ms);
            gather_ = std::min(zk_period_ / 4, std::chrono::milliseconds(200));
            batch_ = std::chrono::milliseconds(cfg->zookeeper_log_batch_ms);
            routine_delay_ = std::max(batch_, gather_);
            std::vector<spdlog::sink_ptr> sinks;
            if (cfg->stdout_logging) sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
            if (cfg->file_logging && !cfg->log_directory.empty()) {
                std::string path = (cfg->log_directory / "pvc.log").string();
                try {
                    file_sink_ = std::make_shared<ReopenableFileSink>(path);
                    sinks.push_back(file_sink_);
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "cannot open log file %s: %s\n", path.c_str(), e.what());
                }
            }
            logger_ = std::make_shared<spdlog::logger>("pvc", sinks.begin(), sinks.end());
        } else {
            debug_ = true;
            logger_ = std::make_shared<spdlog::logger>("pvc", std::make_shared<spdlog::sinks::stderr_sink_mt>());
        }
        logger_->set_pattern("%v");
        logger_->set_level(spdlog::level::trace);
        logger_->flush_on(spdlog::level::trace);  // the reference appends unbuffered
    }

    ~LogSink() { stop_zk(std::chrono::milliseconds(2000)); }

    bool debug() const { return debug_; }

    // A value masked in every later line; "null" (the reference's unset
    // password) and values shorter than 3 characters are not secrets.
    void add_secret(std::string s) {
        if (s.size() < 3 || s == "null") return;
        std::lock_guard g(secrets_m_);
        if (std::find(secrets_.begin(), secrets_.end(), s) == secrets_.end()) secrets_.push_back(std::move(s));
    }

    void write(LogState state, const std::string& prefix, std::string_view message, bool to_zookeeper = true) {
        if (state == LogState::debug && !debug_) return;
        std::string text(message);
        {
            std::lock_guard g(secrets_m_);
            for (const auto& s : secrets_) {
                for (size_t pos = text.find(s); pos != std::string::npos; pos = text.find(s, pos))
                    text.replace(pos, s.size(), "********");
            }
        }
        std::string body = prefix.empty() ? text : prefix + " - " + text;
        std::string head;
        if (state != LogState::none) {
            Prompt p = prompt_of(state);
            head = colours_ ? fmt::format("{}>>>{} ", p.colour, ansi::end) : std::string(p.plain);
            if (dates_) head += timestamp() + " ";
        }
        std::string line = head + body;
        logger_->log(level_of(state), line);
        if (zk_enabled_ && to_zookeeper) {
            // The ZooKeeper copy always starts with a timestamp.
            std::string zline = dates_ && state != LogState::none ? line : timestamp() + " " + line;
            const bool urgent = state == LogState::warning || state == LogState::error;
            std::lock_guard g(m_);
            ring_.push(zline);
            // Only the first line after a write wakes the writer (it then
            // waits on its own until the batch is due), and the first warning
            // or error, which brings it forward; none while a batch is held.
            bool wake = false;
            if (!dirty_) {
                first_dirty_ = std::chrono::steady_clock::now();
                dirty_ = true;
                wake = true;
            }
            if (urgent && !urgent_) {
                first_urgent_ = std::chrono::steady_clock::now();
                urgent_ = true;
                wake = true;
            }
            if (wake && held_ == 0) cv_.notify_one();
        }
    }

    // A batch of lines (the keepalive's) logged on one thread: they wake no
    // writer; release() writes the ring at once on that thread when the lines
    // not written yet are due (below) and the session is connected (so a
    // keepalive costs the writer thread no wake-up at all), else hands them
    // to the writer.
    void hold() {
        std::lock_guard g(m_);
        ++held_;
    }

    void release() noexcept {
        try {
            std::unique_lock lk(m_);
            if (held_ > 0) --held_;
            if (!dirty_ || held_ > 0) return;
            // Never on a lost connection: the keepalive thread must not wait
            // out a second ZooKeeper timeout for its log lines (the writer
            // retries them on its own thread).
            // The batch is complete: no gather for it, only the window of
            // routine lines and the interval.
            const auto now = std::chrono::steady_clock::now();
            if (!writer_.joinable() || stop_ || writing_ || !session_ || !session_->connected() ||
                now < last_write_ + zk_period_ || (!urgent_ && now < first_dirty_ + batch_)) {
                cv_.notify_one();
                return;
            }
            if (!write_locked(lk)) cv_.notify_one();  // the writer retries
        } catch (const std::exception&) {
            // Nothing written: the lines stay in the ring for the writer.
        }
    }

    void attach_zk(std::shared_ptr<zk::Session> session, const std::string& node) {
        if (!zk_enabled_) return;
        {
            std::lock_guard g(m_);
            if (writer_.joinable() || attaching_) return;
            attaching_ = true;
        }
        const std::string messages = schema::path("logs.messages", {node});
        std::optional<std::string> existing;
        zk::Stat stat;
        // Without m_: logging threads go on while these requests run.
        try {
            session->ensure_path(schema::path("logs.node", {node}));
            existing = session->get(messages, &stat);
        } catch (const std::exception& e) {
            logger_->log(spdlog::level::warn, fmt::format("cannot prepare ZooKeeper log key: {}", e.what()));
        }
        std::lock_guard g(m_);
        session_ = std::move(session);
        path_ = messages;
        // Keep what earlier runs left, in front of this run's lines.
        if (existing && !existing->empty()) ring_.prepend(*existing);
        version_ = existing ? stat.version : -1;
        // The lines logged so far (the start-up's) are written at once.
        if (!dirty_) first_dirty_ = std::chrono::steady_clock::now();
        dirty_ = true;
        if (!urgent_) first_urgent_ = std::chrono::steady_clock::now();
        urgent_ = true;
        stop_ = false;
        attaching_ = false;
        writer_ = std::thread([this] { run_writer(); });
    }

    void stop_zk(std::chrono::milliseconds bound) {
        {
            std::lock_guard g(m_);
            if (!writer_.joinable()) return;
            stop_ = true;
            drain_deadline_ = std::chrono::steady_clock::now() + bound;
            cv_.notify_one();
        }
        writer_.join();
    }

    void reopen() {
        if (!file_sink_) return;
        try {
            file_sink_->reopen();
        } catch (const std::exception& e) {
            logger_->log(spdlog::level::err, fmt::format("cannot reopen log file {} (still writing to the old one): {}",
                                                         file_sink_->path(), e.what()));
        }
    }

private:
    // Each write sends the whole ring (the value readers expect: the last
    // node_log_lines lines), 100-200 KB once it is full, into ZooKeeper's
    // transaction log and its in-memory copy of recent transactions. So:
    // routine lines (all but warnings and errors: the keepalive's, info,
    // debug) are written routine_delay_ (zookeeper_log_batch_ms, 60 s in
    // the sample) after the oldest of them was logged, all in one write; a
    // warning or error brings the write forward to a gather_ after it (at
    // most 200 ms, for the lines logged with it), and the lines waiting go
    // with it. Either way at most one write per zk_period_
    // (zookeeper_log_interval_ms, 1 s). An idle node writes its ring about
    // once a minute instead of at each keepalive. At shutdown the last
    // lines are written at once. The keepalive's lines are a held batch
    // that release() writes when due instead.
    std::chrono::steady_clock::time_point due_locked() const {
        auto batch = urgent_ ? first_urgent_ + gather_ : first_dirty_ + routine_delay_;
        return std::max(last_write_ + zk_period_, batch);
    }

    void run_writer() {
        std::unique_lock lk(m_);
        for (;;) {
            cv_.wait(lk, [this] { return dirty_ || stop_; });
            if (!dirty_ && stop_ && !writing_) return;
            // Until the batch is due; a warning logged meanwhile wakes us
            // with an earlier time.
            while (!stop_ && dirty_ && !writing_) {
                auto when = due_locked();
                if (std::chrono::steady_clock::now() >= when) break;
                cv_.wait_until(lk, when);
            }
            if (writing_) {
                // release() is writing on its thread: it may take these lines too.
                written_cv_.wait(lk, [this] { return !writing_; });
                continue;
            }
            if (!dirty_) {
                if (stop_) return;
                continue;
            }
            // The drain at shutdown only over a connected session: a write
            // would wait an operation timeout for a connection (with
            // ZooKeeper gone the shutdown has closed the session, and
            // nothing is waited for).
            if (stop_ && !session_->connected()) return;
            bool ok = write_locked(lk);
            if (!ok) {
                if (stop_ && (std::chrono::steady_clock::now() >= drain_deadline_ || !session_->connected())) return;
                cv_.wait_for(lk, std::chrono::milliseconds(500));
            }
            if (stop_ && !dirty_) return;
        }
    }

    // One write of the ring as it is now, by whichever thread calls it (the
    // writer or release()); `lk` holds m_ and is released during the request.
    // The value goes through one reused buffer (no 200 KB allocation, copy
    // or page faults per write beyond the snapshot itself).
    bool write_locked(std::unique_lock<std::mutex>& lk) {
        try {
            out_.assign(ring_.value());
        } catch (const std::exception&) {
            return false;  // no memory for the snapshot: the lines stay for a later write
        }
        writing_ = true;
        const bool was_urgent = urgent_;
        const auto was_first = first_dirty_, was_first_urgent = first_urgent_;
        dirty_ = false;
        urgent_ = false;
        lk.unlock();
        bool ok = write_ring();
        lk.lock();
        writing_ = false;
        last_write_ = std::chrono::steady_clock::now();
        if (!ok) {
            // Not written: the lines stay due as they were (with any logged meanwhile).
            first_dirty_ = dirty_ ? std::min(first_dirty_, was_first) : was_first;
            dirty_ = true;
            if (was_urgent) {
                first_urgent_ = urgent_ ? std::min(first_urgent_, was_first_urgent) : was_first_urgent;
                urgent_ = true;
            }
        }
        written_cv_.notify_all();
        return ok;
    }

    // One request per write: a versioned set while the znode's version is
    // known (this sink is its only writer), a read only after a miss. Only
    // the thread that set writing_ runs it (out_ and version_ are its own).
    bool write_ring() {
        for (int attempt = 0; attempt < 2; ++attempt) {
            try {
                if (version_ < 0) {
                    zk::Stat st;
                    if (!session_->exists(path_, &st)) {
                        session_->create(path_, out_);
                        version_ = 0;
                        return true;
                    }
                    version_ = st.version;
                }
                zk::Transaction tx(*session_);
                tx.set(path_, std::move(out_), version_);
                // The buffer comes back after the request: its capacity serves
                // the next write (tx is ours and not const; only ops() is).
                struct TakeBack {
                    zk::Transaction& tx;
                    std::string& out;
                    ~TakeBack() { out = std::move(const_cast<std::string&>(tx.ops().front().data)); }
                } take_back{tx, out_};
                zk::Status st = session_->commit(tx);
                if (st == zk::Status::ok) {
                    ++version_;
                    return true;
                }
                version_ = -1;
                // Changed or removed behind our back: read it and try once more.
                if (st != zk::Status::bad_version && st != zk::Status::no_node) return false;
            } catch (const std::exception&) {
                version_ = -1;
                return false;
            }
        }
        return false;
    }

    bool colours_ = false, dates_ = false, debug_ = false, zk_enabled_ = false;
    std::mutex secrets_m_;  // secrets_: added once the modules read their keys, read by every line
    std::vector<std::string> secrets_;
    std::shared_ptr<spdlog::logger> logger_;
    std::shared_ptr<ReopenableFileSink> file_sink_;

    std::mutex m_;
    std::condition_variable cv_;
    std::condition_variable written_cv_;  // a write by release() ended
    LogRing ring_{0};
    std::chrono::milliseconds zk_period_{1000};
    std::chrono::milliseconds gather_{200};
    std::chrono::milliseconds batch_{0};           // zookeeper_log_batch_ms
    std::chrono::milliseconds routine_delay_{200};  // max(batch_, gather_)
    bool dirty_ = false, stop_ = false, attaching_ = false, writing_ = false;
    bool urgent_ = false;                          // a warning or error among the lines not written yet
    int held_ = 0;                                 // hold() without release() yet
    std::chrono::steady_clock::time_point last_write_{};
    std::string out_;                              // the value being written (writing_'s owner only)
    std::chrono::steady_clock::time_point drain_deadline_;
    std::chrono::steady_clock::time_point first_dirty_;  // the oldest line not written yet
    std::chrono::steady_clock::time_point first_urgent_;  // the oldest warning or error not written yet
    std::thread writer_;
    std::shared_ptr<zk::Session> session_;
    std::string path_;
    int32_t version_ = -1;  // of path_, known after each successful write; -1 = read it first
};

void Logger::log(LogState state, std::string_view message) const {
    if (sink_) sink_->write(state, prefix_, message, !local_);
    else std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
}

bool Logger::debug_enabled() const { return !sink_ || sink_->debug(); }

std::shared_ptr<LogSink> make_log_sink(const Config* config) { return std::make_shared<LogSink>(config); }

void add_log_secret(const std::shared_ptr<LogSink>& sink, std::string secret) {
    if (sink) sink->add_secret(std::move(secret));
}

void attach_zookeeper(const std::shared_ptr<LogSink>& sink, std::shared_ptr<zk::Session> session,
                      const std::string& node) {
    sink->attach_zk(std::move(session), node);
}

void reopen_log_file(const std::shared_ptr<LogSink>& sink) { sink->reopen(); }

void shutdown_log_sink(const std::shared_ptr<LogSink>& sink) { sink->stop_zk(std::chrono::seconds(15)); }

void hold_zookeeper_log(const std::shared_ptr<LogSink>& sink) {
    if (sink) sink->hold();
}

void release_zookeeper_log(const std::shared_ptr<LogSink>& sink) noexcept {
    if (sink) sink->release();
}

}  // namespace pvc
