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
//
// The threading contract (docs/sdk-guide.md §5):
// - configure(), registration(), start(), drain_before_shutdown() and stop()
//   are called once each, in that order, on the core's start-up/shutdown
//   thread (drain_before_shutdown() only when the daemon shuts down in order).
// - Core events (CoreEvents) are delivered on one core strand, never on the
//   emitting thread (keepalive, ZooKeeper's event thread, pool threads);
//   slots must not block. A slot's exception is logged and counted.
// - A subscription ends when its Subscription object goes: afterwards its
//   slot is never called (a call in progress is waited for).
// - transition() runs on the core strand, once per hand-over phase; the core
//   goes on to the next phase, and publishes `primary` / `secondary`, only
//   after every module called `done` or transition_deadline passed.
// - contribute() runs on the keepalive thread and must not block.
// - Blocking work goes to Executor::blocking (short) or a ModulePool (long
//   procedures, with a stop token); every posted task's exception is caught,
//   logged and counted by the Executor (failed_tasks()).
// - Services between modules: NodeContext::services (provide<T>/get<T>).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <stop_token>
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
#include "pvc/events.hpp"
#include "pvc/log.hpp"
#include "pvc/service_registry.hpp"
#include "pvc/zk.hpp"

namespace pvc {


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
class PVC_SDK_API Executor {
    friend class ModulePool;

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

// A module's part of one keepalive. Filled from cached
// state by Module::contribute on the keepalive's thread: it must not block.
// The core writes everything in its one transaction and logs one line.
struct PVC_SDK_API KeepaliveReport {
    std::string router_state;                // read-only: this node's router state at the tick

    // Keys written in the keepalive transaction (paths from schema::path).
    std::vector<zk::KeyValue> writes;
    // The module fields of the keepalive detail line ("VMs: 3"), between
    // Health and Load: each module reports its own, ordered by `position`
    // across modules (the hypervisor's VMs 10, the storage module's OSDs 20,
    // as the reference's line has them).
    struct LogField {
        std::string value;
        int position = 0;
    };
    std::map<std::string, LogField, std::less<>> log_fields;  // by label

    // This module's health items: what is wrong with its part of the node
    // now (a refused network, a firewall nft refused...). An extension of
    // the reference's health plugins, documented in core/README.md ("Module health"): the
    // core publishes a module that reports at least one item as the
    // plugin-like entry `module-<module name>` under monitoring_data (delta =
    // the sum of the items' deltas, message = their messages, data = the
    // items), listed in monitoring_plugins after the real plugins, and node
    // health = 100 - sum of plugin deltas - sum of module deltas (floor 0).
    // Report every item again at every keepalive while it holds: an item not
    // reported any more is cleared at the next health pass (the entry goes
    // when the module reports none). Names are unique within the module.
    struct HealthItem {
        std::string name;     // e.g. "network 1001"
        int delta = 0;        // as a plugin's health_delta: 10 degraded, 50 severe
        std::string message;  // for people: "Network 1001: ip4_network '10.300.0.0/24' ..."
    };
    std::vector<HealthItem> health;

    void write(std::string path, std::string value) { writes.emplace_back(std::move(path), std::move(value)); }
    void log_field(std::string label, std::string value, int position) {
        log_fields[std::move(label)] = {std::move(value), position};
    }
    void health_item(std::string name, int delta, std::string message) {
        health.push_back({std::move(name), delta, std::move(message)});
    }
};

// A module's own named pool for long procedures (a VM's shutdown or
// migration waits for its timeouts). Each task gets the pool's stop token; stop()
// requests stop and joins. Exceptions are caught, logged (with the pool's
// name) and counted by the Executor.
class PVC_SDK_API ModulePool {
public:
    ModulePool(Executor& ex, std::string name, unsigned threads) : ex_(ex), name_(std::move(name)), pool_(threads) {}
    ~ModulePool() { stop(); }
    ModulePool(const ModulePool&) = delete;
    ModulePool& operator=(const ModulePool&) = delete;

    // Runs fn(std::stop_token) on the pool.
    template <class Fn>
    void post(std::string what, Fn fn) {
        boost::asio::post(pool_, [this, what = name_ + ": " + what, fn = std::move(fn),
                                  token = stop_.get_token()]() mutable { ex_.guarded(what, [&] { fn(token); }); });
    }
    std::stop_token stop_token() const { return stop_.get_token(); }
    bool stopping() const { return stop_.stop_requested(); }
    // Requests stop and waits for the running tasks; queued ones still run
    // (and see the stop requested).
    void stop() {
        stop_.request_stop();
        pool_.join();
    }
    const std::string& name() const { return name_; }

private:
    Executor& ex_;
    std::string name_;
    std::stop_source stop_;
    boost::asio::thread_pool pool_;
};

// Delivers every core event on `core` through the executor (guarded tasks).
inline void deliver_core_events(CoreEvents& events, Executor& ex, const Strand& core) {
    events.deliver_with([&ex, core](std::function<void()> call) {
        ex.post(core, "a core event subscriber", std::move(call));
    });
}

// The node's primary/secondary transitions (docs/architecture.md §7.3).
enum class Transition { takeover, relinquish };
// The hand-over phases (docs/wire-contract.md §5.4). The core runs the
// reference's phases A..G under its locks on /config/primary_node/sync_lock
// and calls each module's transition hook once in every phase that moves
// something on its side, in this order, waiting for `done` before the next:
//   phase  takeover (candidate)                      relinquish (old primary)
//   B      -                                         DHCP, DNS, metadata API, API stop
//   C      upstream floating address up              upstream floating address down
//   D      cluster + storage floating addresses up   ... down
//   E      169.254.169.254/32 on lo up               ... down
//   F      managed networks' gateways up             ... down
//   G      DHCP, metadata API, API start             -
// A module acts in the phases that concern it and calls `done` at once in
// the others.
enum class TransitionPhase : char { B = 'B', C = 'C', D = 'D', E = 'E', F = 'F', G = 'G' };
// The phases a transition calls the hooks in, in order.
inline constexpr TransitionPhase takeover_phases[] = {TransitionPhase::C, TransitionPhase::D, TransitionPhase::E,
                                                      TransitionPhase::F, TransitionPhase::G};
inline constexpr TransitionPhase relinquish_phases[] = {TransitionPhase::B, TransitionPhase::C, TransitionPhase::D,
                                                        TransitionPhase::E, TransitionPhase::F};
// How long the core waits for the modules' part of one phase; a module that
// overran is not waited for in later phases.
inline constexpr std::chrono::seconds transition_deadline{30};

struct PVC_SDK_API NodeContext {
    const Config& config;
    Logger logger;                           // prefix = module name
    std::shared_ptr<zk::Session> zk;
    Executor& executor;
    CoreEvents& events;                      // delivered on the core strand; hold the Subscriptions
    ServiceRegistry& services;               // between modules: provide<T>() / get<T>()
};

class PVC_SDK_API Module {
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
    // Keys a module rewrites at every start (the fencing module's node.ipmi.*)
    // it also writes from start().
    virtual void registration(std::vector<zk::KeyValue>&) const {}
    // Values of this module's keys that must never appear in a log line
    // (passwords), as configure() read them: the core masks them in every
    // line from then on.
    virtual void secrets(std::vector<std::string>&) const {}
    // Fill this module's part of the keepalive from cached state. Must not block.
    virtual void contribute(KeepaliveReport&) {}
    // This module's part of one phase of a takeover (e.g. floating addresses
    // up) or relinquish (TransitionPhase above), on the core strand. Call
    // `done` once, from any thread, when finished; a late call is harmless.
    virtual void transition(Transition, TransitionPhase, std::function<void()> done) { done(); }
    // Work of this module in progress that the node must finish before it lets
    // go of anything at shutdown (the hypervisor's flush or unflush of this
    // node). Called at the start of an orderly shutdown, once `shutdown` is
    // published, on the shutdown thread; may block until that work ends (the
    // keepalive goes on meanwhile, so the node is not taken for dead), but
    // must end when ZooKeeper is unreachable. Modules drain one after another
    // in start order, before the primary hand-over.
    virtual void drain_before_shutdown() {}
    // Host set-up the ZooKeeper connection itself depends on (the network
    // module's cluster bridge and node address: ZooKeeper is reached over
    // them), done after configure() and before the daemon connects, on the
    // core's start-up thread. No ZooKeeper here; a failure is logged by the
    // module and the start goes on (the connection then decides).
    virtual void prepare_host(const Config&, const Logger&) {}
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
