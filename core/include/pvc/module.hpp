// The module SDK: what a module .so exports and what the core gives it.
//
// A module exports (Boost.DLL, extern "C" aliases):
//   pvc_module_abi     — int, must equal pvc::module_abi exactly
//   pvc_module_create  — std::unique_ptr<pvc::Module>()
// Use PVC_MODULE(ClassName) at namespace scope in one source of the module.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/dll/alias.hpp>

#include "pvc/config.hpp"
#include "pvc/log.hpp"
#include "pvc/zk.hpp"

namespace pvc {

// Bumped whenever anything in core/include/pvc changes incompatibly.
inline constexpr int module_abi = 2;

using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

// One io_context (the daemon's event loop) plus a bounded pool for blocking
// work (libvirt lifecycle calls, process spawns). Blocking work never runs
// on the io_context; results are posted back to the caller's strand.
//
// No exception ends the process: Boost's thread_pool calls std::terminate
// when a task throws, and an io_context handler that throws ends io.run().
// Every task posted through the Executor (blocking work, its completion,
// strand posts) and every handler run by run_io() is therefore wrapped: an
// exception ends that task only, is logged with what the task was, and is
// counted (failed_tasks()). Code that must finish an interrupted action
// retries it itself; the Executor only keeps the process alive.
class Executor {
public:
    explicit Executor(unsigned blocking_threads = 4) : pool_(blocking_threads) {}
    boost::asio::io_context& io() { return io_; }
    Strand make_strand() { return boost::asio::make_strand(io_); }
    // Where task failures are logged (until set: stderr).
    void set_logger(Logger log) {
        std::lock_guard g(log_m_);
        log_ = std::move(log);
    }

    // Runs `work` on the blocking pool, then `done(result)` on `strand`.
    // When `work` throws, `done` is not called.
    template <class Work, class Done>
    void blocking(std::string what, Strand strand, Work work, Done done) {
        boost::asio::post(pool_, [this, what = std::move(what), strand, work = std::move(work),
                                  done = std::move(done)]() mutable {
            guarded(what, [&] {
                auto result = work();
                boost::asio::post(strand, [this, what, done = std::move(done), result = std::move(result)]() mutable {
                    guarded(what, [&] { done(std::move(result)); });
                });
            });
        });
    }
    template <class Work, class Done>
    void blocking(Strand strand, Work work, Done done) {
        blocking("a blocking task", std::move(strand), std::move(work), std::move(done));
    }
    template <class Work>
    void blocking(std::string what, Work work) {
        boost::asio::post(pool_, [this, what = std::move(what), work = std::move(work)]() mutable {
            guarded(what, work);
        });
    }
    template <class Work>
    void blocking(Work work) { blocking("a blocking task", std::move(work)); }
    // Runs `fn` on `strand` (the io_context), guarded like the pool's tasks.
    template <class Fn>
    void post(Strand strand, std::string what, Fn fn) {
        boost::asio::post(strand, [this, what = std::move(what), fn = std::move(fn)]() mutable { guarded(what, fn); });
    }
    // Runs the io_context on the calling thread until it is stopped; a
    // handler that throws (also one posted to a strand directly) is logged
    // and counted and the loop goes on.
    void run_io() {
        for (;;) {
            try {
                io_.run();
                return;
            } catch (const std::exception& e) {
                report("an event-loop handler", e.what());
            } catch (...) {
                report("an event-loop handler", "unknown exception");
            }
        }
    }
    // Tasks and handlers ended by an exception since start.
    uint64_t failed_tasks() const { return failed_.load(); }
    void stop_pool() { pool_.stop(); pool_.join(); }

private:
    template <class Fn>
    void guarded(const std::string& what, Fn&& fn) noexcept {
        try {
            fn();
        } catch (const std::exception& e) {
            report(what, e.what());
        } catch (...) {
            report(what, "unknown exception");
        }
    }
    void report(const std::string& what, const char* why) noexcept {
        uint64_t n = ++failed_;
        try {
            std::lock_guard g(log_m_);
            log_.error("{} failed: {} (task failures so far: {})", what, why, n);
        } catch (...) {
        }
    }

    boost::asio::io_context io_;
    boost::asio::thread_pool pool_;
    std::mutex log_m_;
    Logger log_;
    std::atomic<uint64_t> failed_{0};
};

// A typed event the core publishes; subscribers are called on the thread that
// emits (the core's strand) and must not block.
template <class... Args>
class Signal {
public:
    using Slot = std::function<void(Args...)>;
    void subscribe(Slot s) {
        std::lock_guard g(m_);
        slots_.push_back(std::move(s));
    }
    void emit(Args... args) const {
        std::vector<Slot> copy;
        {
            std::lock_guard g(m_);
            copy = slots_;
        }
        for (auto& s : copy) s(args...);
    }

private:
    mutable std::mutex m_;
    std::vector<Slot> slots_;
};

// A module's part of one keepalive (node-lifecycle.md §5). Filled from cached
// state by Module::contribute on the keepalive's thread: it must not block.
// The core writes everything in its one transaction and logs one line.
struct KeepaliveReport {
    std::string router_state;                // read-only: this node's router state at the tick

    // Keys written in the keepalive transaction (paths from schema::path).
    std::vector<zk::KeyValue> writes;
    // Values of the keepalive log line's module fields (keepalive_log_fields).
    std::map<std::string, std::string, std::less<>> log_fields;

    void write(std::string path, std::string value) { writes.emplace_back(std::move(path), std::move(value)); }
    void log_field(std::string label, std::string value) { log_fields[std::move(label)] = std::move(value); }
};

// The module fields of the reference's keepalive detail line, in its order,
// with the text shown when no loaded module fills them (node-lifecycle.md §5.7).
struct KeepaliveLogField {
    std::string_view label;
    std::string_view unset;
};
inline constexpr KeepaliveLogField keepalive_log_fields[] = {{"VMs", "0"}, {"OSDs", "0"}};

struct CoreEvents {
    Signal<std::string> daemon_state;        // own daemonstate as written by the core
    Signal<std::string> router_state;        // own routerstate as seen in ZooKeeper
    Signal<> keepalive_tick;                 // after each keepalive write
    Signal<> session_recovered;              // ZooKeeper session expired and was re-established
};

struct NodeContext {
    const Config& config;
    Logger logger;                           // prefix = module name
    std::shared_ptr<zk::Session> zk;
    Executor& executor;
    CoreEvents& events;
};

class Module {
public:
    virtual ~Module() = default;
    virtual std::string_view name() const = 0;
    // Reads and validates this module's own keys from the document (the core's
    // Config gives what the core reads: node name, intervals, directories),
    // reporting every problem into the shared list; never throws for bad
    // config. Called before start(), and by `pvcnoded --check-config`.
    virtual void configure(const Config&, ConfigProblems&) {}
    // This module's keys in the flat dictionary legacy plugins see, as read by
    // configure().
    virtual void flat_keys(nlohmann::json&) const {}
    // Called once after registration, on the core's thread; set up watches here.
    virtual void start(NodeContext& ctx) = 0;
    // Orderly stop; must not touch running VMs. Called once.
    virtual void stop() = 0;
    // Values this module gives its node keys when a new node is registered
    // (called before start()). Keys nobody gives get the schema's
    // register_default; every node key is created whatever the functions.
    virtual void registration(std::vector<zk::KeyValue>&) const {}
    // Fill this module's part of the keepalive from cached state. Must not block.
    virtual void contribute(KeepaliveReport&) {}
};

using ModuleFactory = std::unique_ptr<Module>();

}  // namespace pvc

#define PVC_MODULE(CLASS)                                                                   \
    namespace pvc_module_exports {                                                          \
    extern "C" BOOST_SYMBOL_EXPORT const int pvc_module_abi = ::pvc::module_abi;            \
    std::unique_ptr<::pvc::Module> create_module() { return std::make_unique<CLASS>(); }    \
    BOOST_DLL_ALIAS(pvc_module_exports::create_module, pvc_module_create)                   \
    }
