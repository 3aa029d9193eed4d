#include "pvc/log.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
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

// The daemon's log sink: formats lines once and hands them to spdlog sinks
// (stdout, file) and to the ZooKeeper ring writer.
class LogSink {
public:
    explicit LogSink(const Config* cfg) {
        if (cfg) {
            colours_ = cfg->log_colours;
            dates_ = cfg->log_dates;
            debug_ = cfg->debug;
            ring_max_ = cfg->node_log_lines > 0 ? static_cast<size_t>(cfg->node_log_lines) : 0;
            zk_enabled_ = cfg->zookeeper_logging && ring_max_ > 0;
            for (std::string s : {cfg->ipmi_password, cfg->dns_database.pass.value_or(""),
                                  cfg->metadata_database.pass.value_or("")})
                if (s.size() >= 3 && s != "null") secrets_.push_back(std::move(s));
            std::vector<spdlog::sink_ptr> sinks;
            if (cfg->stdout_logging) sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
            if (cfg->file_logging && !cfg->log_directory.empty()) {
                file_path_ = (cfg->log_directory / "pvc.log").string();
                try {
                    file_sink_ = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file_path_, false);
                    sinks.push_back(file_sink_);
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "cannot open log file %s: %s\n", file_path_.c_str(), e.what());
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

    void write(LogState state, const std::string& prefix, std::string_view message) {
        if (state == LogState::debug && !debug_) return;
        std::string text(message);
        for (const auto& s : secrets_) {
            for (size_t pos = text.find(s); pos != std::string::npos; pos = text.find(s, pos))
                text.replace(pos, s.size(), "********");
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
        if (zk_enabled_) {
            // The ZooKeeper copy always starts with a timestamp.
            std::string zline = dates_ && state != LogState::none ? line : timestamp() + " " + line;
            std::lock_guard g(m_);
            ring_.push_back(std::move(zline));
            while (ring_.size() > ring_max_) ring_.pop_front();
            dirty_ = true;
            cv_.notify_one();
        }
    }

    void attach_zk(std::shared_ptr<zk::Session> session, const std::string& node) {
        if (!zk_enabled_) return;
        std::lock_guard g(m_);
        if (writer_.joinable()) return;
        session_ = std::move(session);
        node_ = node;
        try {
            session_->ensure_path(schema::path("logs.node", {node_}));
            if (auto existing = session_->get(schema::path("logs.messages", {node_})); existing && !existing->empty()) {
                // Keep what earlier runs left, in front of this run's lines.
                std::deque<std::string> old;
                size_t start = 0;
                while (start <= existing->size()) {
                    size_t nl = existing->find('\n', start);
                    if (nl == std::string::npos) nl = existing->size();
                    old.emplace_back(existing->substr(start, nl - start));
                    start = nl + 1;
                }
                for (auto& l : ring_) old.push_back(std::move(l));
                ring_ = std::move(old);
                while (ring_.size() > ring_max_) ring_.pop_front();
            }
        } catch (const std::exception& e) {
            logger_->log(spdlog::level::warn, fmt::format("cannot prepare ZooKeeper log key: {}", e.what()));
        }
        dirty_ = true;
        stop_ = false;
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
        if (file_sink_) {
            // basic_file_sink has no reopen; truncate=false re-creates it appended.
            auto fresh = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file_path_, false);
            auto& sinks = logger_->sinks();
            for (auto& s : sinks)
                if (s == file_sink_) s = fresh;
            file_sink_ = fresh;
        }
    }

private:
    void run_writer() {
        std::unique_lock lk(m_);
        for (;;) {
            cv_.wait(lk, [this] { return dirty_ || stop_; });
            if (!dirty_ && stop_) return;
            std::string joined;
            for (size_t i = 0; i < ring_.size(); ++i) {
                if (i) joined.push_back('\n');
                joined += ring_[i];
            }
            dirty_ = false;
            lk.unlock();
            bool ok = false;
            try {
                ok = session_->write(schema::path("logs.messages", {node_}), joined);
            } catch (const std::exception&) {
                ok = false;
            }
            lk.lock();
            if (!ok) {
                dirty_ = true;
                if (stop_ && std::chrono::steady_clock::now() >= drain_deadline_) return;
                cv_.wait_for(lk, std::chrono::milliseconds(500));
            }
            if (stop_ && !dirty_) return;
        }
    }

    bool colours_ = false, dates_ = false, debug_ = false, zk_enabled_ = false;
    std::vector<std::string> secrets_;
    std::shared_ptr<spdlog::logger> logger_;
    std::shared_ptr<spdlog::sinks::basic_file_sink_mt> file_sink_;
    std::string file_path_;

    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::string> ring_;
    size_t ring_max_ = 0;
    bool dirty_ = false, stop_ = false;
    std::chrono::steady_clock::time_point drain_deadline_;
    std::thread writer_;
    std::shared_ptr<zk::Session> session_;
    std::string node_;
};

void Logger::log(LogState state, std::string_view message) const {
    if (sink_) sink_->write(state, prefix_, message);
    else std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
}

bool Logger::debug_enabled() const { return !sink_ || sink_->debug(); }

std::shared_ptr<LogSink> make_log_sink(const Config* config) { return std::make_shared<LogSink>(config); }

void attach_zookeeper(const std::shared_ptr<LogSink>& sink, std::shared_ptr<zk::Session> session,
                      const std::string& node) {
    sink->attach_zk(std::move(session), node);
}

void reopen_log_file(const std::shared_ptr<LogSink>& sink) { sink->reopen(); }

void shutdown_log_sink(const std::shared_ptr<LogSink>& sink) { sink->stop_zk(std::chrono::seconds(15)); }

}  // namespace pvc
