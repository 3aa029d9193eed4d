// The module SDK: what a module .so exports and what the core gives it.
//
// A module exports, with PVC_MODULE(Class, metadata...) in one of its sources:
//   .pvc_modinfo       — an ELF section of "key=value\0" entries the daemon
//                        reads from the file without loading it: name,
//                        version, serves (the pvc.functions.enable_* flag the
//                        module serves, or "always"), need ("required": the
//                        daemon may not start when the module cannot be
//                        loaded; "optional": a loud warning, the node runs
//                        without it), start (order, lowest first; stop is the
//                        reverse) and abi (PVC_ABI_FINGERPRINT, pvc/abi.hpp)
//   pvc_module_create  — std::unique_ptr<pvc::Module>() (Boost.DLL alias)
//
//   PVC_MODULE(HelloModule,
//              PVC_MODULE_NAME("hello")
//              PVC_MODULE_VERSION("1.0.0")
//              PVC_MODULE_SERVES("enable_hello")      // or PVC_MODULE_SERVES_ALWAYS
//              PVC_MODULE_REQUIRED                    // or PVC_MODULE_OPTIONAL
//              PVC_MODULE_START_ORDER("50"))
//
// The daemon discovers modules in module_directory (libpvc-module-*.so),
// loads those whose flag is on (and every "always" one), refuses a module
// whose fingerprint differs from its own, and stops before writing anything
// when an enabled flag has no module.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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

#include "pvc/abi.hpp"
#include "pvc/config.hpp"
#include "pvc/log.hpp"
#include "pvc/zk.hpp"

namespace pvc {

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

// Figures a module adds to the keepalive (node-lifecycle.md §5.2, hypervisor.md §14.2).
// Each contributor sets only what it owns; the core writes everything in one transaction.
struct KeepaliveReport {
    bool has_vm_figures = false;             // set by the hypervisor module
    int domains_count = 0;                   // domainscount
    long memalloc_mib = 0;
    long memprov_mib = 0;
    int vcpualloc = 0;
    std::vector<std::string> running_domains;
    int own_osds = -1;                       // storage: for the log line (-1 = unknown)
    // Extra keys to write in the same transaction (path, value).
    std::vector<zk::KeyValue> extra_writes;
};

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
    // Called once after registration, on the core's thread; set up watches here.
    virtual void start(NodeContext& ctx) = 0;
    // Orderly stop; must not touch running VMs. Called once.
    virtual void stop() = 0;
    // Fill this module's part of the keepalive from cached state. Must not block.
    virtual void contribute(KeepaliveReport&) {}
};

using ModuleFactory = std::unique_ptr<Module>();

}  // namespace pvc

// Metadata entries for PVC_MODULE: each is one "key=value\0" string literal.
#define PVC_MODULE_NAME(NAME) "name=" NAME "\0"
#define PVC_MODULE_VERSION(VERSION) "version=" VERSION "\0"
#define PVC_MODULE_SERVES(FLAG) "serves=" FLAG "\0"
#define PVC_MODULE_SERVES_ALWAYS "serves=always\0"
#define PVC_MODULE_REQUIRED "need=required\0"
#define PVC_MODULE_OPTIONAL "need=optional\0"
#define PVC_MODULE_START_ORDER(N) "start=" N "\0"

// The section the daemon reads (the macro appends the fingerprint; the daemon
// refuses a section that names a key twice) and the factory.
#define PVC_MODULE(CLASS, METADATA)                                                                  \
    namespace pvc_module_exports {                                                                   \
    extern "C" BOOST_SYMBOL_EXPORT __attribute__((used, section(".pvc_modinfo")))                    \
    const char pvc_module_info[] = METADATA "abi=" PVC_ABI_FINGERPRINT "\0";                         \
    std::unique_ptr<::pvc::Module> create_module() { return std::make_unique<CLASS>(); }             \
    BOOST_DLL_ALIAS(pvc_module_exports::create_module, pvc_module_create)                            \
    }
