#include "health/health_host.hpp"

#include <malloc.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include <boost/core/demangle.hpp>
#include <boost/dll/shared_library.hpp>
#include <nlohmann/json.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "config_reader.hpp"
#include "health/loaded_plugin.hpp"
#include "health/python_host.hpp"
#include "pvc/health_plugin.hpp"
#include "pvc/schema.hpp"

namespace pvc {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {


std::string two_decimals(double seconds) { return fmt::format("{:.2f}", seconds); }

std::chrono::microseconds process_cpu() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::microseconds(ts.tv_nsec / 1000);
}

std::string local_timestamp(std::chrono::system_clock::time_point t) {
    auto secs = std::chrono::system_clock::to_time_t(t);
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    localtime_r(&secs, &tm);
    return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:06d}", tm, micros);
}

// Runs `work` on its own detached thread and waits for it until `deadline`.
// The thread keeps running after a timeout (it cannot be cancelled); its
// result is then dropped.
template <class R>
std::optional<R> call_until(std::function<R()> work, Clock::time_point deadline) {
    struct State {
        std::mutex m;
        std::condition_variable cv;
        std::optional<R> result;
    };
    auto st = std::make_shared<State>();
    std::thread([st, work = std::move(work)]() mutable {
        R r = work();
        std::lock_guard g(st->m);
        st->result = std::move(r);
        st->cv.notify_all();
    }).detach();
    std::unique_lock lk(st->m);
    st->cv.wait_until(lk, deadline, [&] { return st->result.has_value(); });
    return std::move(st->result);
}

// A native plugin .so (health_plugin.hpp). The library outlives the object.
class NativePlugin final : public health::LoadedPlugin {
public:
    NativePlugin(boost::dll::shared_library lib, std::shared_ptr<const Config> cfg, std::unique_ptr<HealthPlugin> p)
        : lib_(std::move(lib)), cfg_(std::move(cfg)), plugin_(std::move(p)), name_(plugin_->name()) {}
    ~NativePlugin() override { plugin_.reset(); }
    const std::string& name() const override { return name_; }
    const char* kind() const override { return "native"; }

    health::RunOutcome run(const std::string& coordinator_state) override {
        health::RunOutcome out;
        auto t0 = Clock::now();
        try {
            HealthResult r = plugin_->run(coordinator_state);
            out.runtime = std::chrono::duration<double>(Clock::now() - t0).count();
            out.health_delta = r.health_delta;
            out.message = r.message.empty() ? "N/A" : r.message;
            out.data = r.data.dump();
            out.ok = true;
        } catch (const std::exception& e) {
            out.error_type = boost::core::demangle(typeid(e).name());
            out.error_text = e.what();
        } catch (...) {
            out.error_type = "unknown";
            out.error_text = "unknown exception";
        }
        return out;
    }
    void cleanup() noexcept override {
        try {
            plugin_->cleanup();
        } catch (...) {
        }
    }

private:
    boost::dll::shared_library lib_;
    std::shared_ptr<const Config> cfg_;
    std::unique_ptr<HealthPlugin> plugin_;
    std::string name_;
};

struct LoadAttempt {
    std::shared_ptr<health::LoadedPlugin> plugin;
    std::string error;
    std::string traceback;
};

LoadAttempt load_native(const std::filesystem::path& file, std::shared_ptr<const Config> cfg, const Logger& log) {
    LoadAttempt out;
    try {
        boost::dll::shared_library lib(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
        if (!lib.has("pvc_health_plugin_abi") || !lib.has("pvc_health_plugin_create")) {
            out.error = fmt::format("{} is not a pvc health plugin (no pvc_health_plugin_abi/pvc_health_plugin_create)",
                                    file.filename().string());
            return out;
        }
        // A foreign symbol of that name need not be terminated: read at most 512 bytes.
        const char* theirs = &lib.get<const char>("pvc_health_plugin_abi");
        std::string abi(theirs, ::strnlen(theirs, 512));
        if (abi != abi_fingerprint()) {
            out.error = fmt::format("{} has ABI fingerprint '{}', this daemon requires '{}' (rebuild the plugin against this pvc)",
                                    file.filename().string(), abi, abi_fingerprint());
            return out;
        }
        auto& create = lib.get_alias<std::unique_ptr<HealthPlugin>(const HealthPluginContext&)>("pvc_health_plugin_create");
        HealthPluginContext ctx{*cfg, log.child(file.stem().string()), cfg->zookeeper_hosts};
        auto plugin = create(ctx);
        if (!plugin) {
            out.error = fmt::format("{}: the factory returned no plugin", file.filename().string());
            return out;
        }
        plugin->setup();
        out.plugin = std::make_shared<NativePlugin>(std::move(lib), std::move(cfg), std::move(plugin));
    } catch (const std::exception& e) {
        out.error = e.what();
    } catch (...) {
        out.error = "unknown exception";
    }
    return out;
}

}  // namespace

struct Slot {
    std::string name;
    std::shared_ptr<health::LoadedPlugin> impl;
    // guarded by Core::m
    int delta = 0;
    std::string message = "Initializing";
    std::string runtime = "0.00";
    bool in_flight = false;
    int failures = 0;
    std::chrono::seconds backoff{0};
    Clock::time_point next_allowed{};
};

struct Job {
    std::shared_ptr<Slot> slot;
    Clock::time_point started;
    bool done = false;       // run() returned before the deadline
    bool finished = false;   // ... and its result was processed (written)
    bool abandoned = false;  // deadline passed first
};

// One module's plugin-like entry: its items folded into one result.
struct ModuleEntry {
    int delta = 0;
    std::string message;
    std::string data;  // JSON text
    bool operator==(const ModuleEntry&) const = default;
};

namespace {

bool same_items(const std::vector<KeepaliveReport::HealthItem>& a, const std::vector<KeepaliveReport::HealthItem>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        return x.name == y.name && x.delta == y.delta && x.message == y.message;
    });
}

bool reserved_name(std::string_view name) { return name.starts_with(HealthHost::module_entry_prefix); }

// Entry name -> entry, for every module that reports at least one item:
// delta = the items' sum, message = their messages in item-name order joined
// by "; ", data = {"<item>": {"health_delta": n, "message": "..."}}.
std::map<std::string, ModuleEntry> module_entries(
    const std::map<std::string, std::vector<KeepaliveReport::HealthItem>>& items) {
    std::map<std::string, ModuleEntry> out;
    for (const auto& [module, list] : items) {
        if (list.empty()) continue;
        auto sorted = list;
        std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.name < b.name; });
        ModuleEntry e;
        nlohmann::json data = nlohmann::json::object();
        for (const auto& it : sorted) {
            e.delta += it.delta;
            e.message += (e.message.empty() ? "" : "; ") + it.message;
            data[it.name] = {{"health_delta", it.delta}, {"message", it.message}};
        }
        e.data = data.dump();
        out[std::string(HealthHost::module_entry_prefix) + module] = std::move(e);
    }
    return out;
}

}  // namespace

struct HealthHost::Core : std::enable_shared_from_this<HealthHost::Core> {
    std::shared_ptr<const Config> cfg;
    Logger log;
    std::shared_ptr<zk::Session> zk;
    std::shared_ptr<health::NodeView> node;

    mutable std::mutex m;
    std::condition_variable cv;
    std::vector<std::shared_ptr<Slot>> slots;
    std::string router_state = "client";
    bool loaded = false;
    bool pass_running = false;
    bool stopping = false;
    bool shut = false;
    std::optional<Clock::time_point> last_pass_start;
    std::optional<int> health;
    PassStats stats;
    std::mutex health_write;  // orders pass writes of monitoring_health against shutdown's "None"
    // Module health (core/README.md, "Module health"). Guarded by m: the
    // items each module reported last, and whether they changed since a pass
    // last took them.
    std::map<std::string, std::vector<KeepaliveReport::HealthItem>> module_items;
    bool module_dirty = false;
    // The module entries in ZooKeeper as the passes wrote them (pass thread
    // only: passes never overlap, pass_running under m orders them).
    std::map<std::string, ModuleEntry> published;

    std::chrono::seconds base_interval() const {
        return std::chrono::seconds(std::max(1, cfg->monitoring_interval.value_or(cfg->keepalive_interval)));
    }
    std::chrono::seconds plugin_timeout() const { return std::chrono::seconds(std::max(1, cfg->plugin_timeout)); }

    std::string key(std::string_view k) const { return schema::path(k, {cfg->node}); }
    std::string plugin_key(std::string_view k, const std::string& plugin) const {
        return schema::path(k, {cfg->node, plugin});
    }

    bool write(const std::vector<zk::KeyValue>& kvs) {
        try {
            return zk->write(kvs);
        } catch (const std::exception& e) {
            log.error("Failed to write monitoring data: {}", e.what());
            return false;
        }
    }

    std::vector<zk::KeyValue> result_keys(const std::string& name, int64_t last_run, int delta,
                                          const std::string& message, const std::string& data,
                                          const std::string& runtime) const {
        return {{plugin_key("monitoring_plugin.name", name), name},
                {plugin_key("monitoring_plugin.last_run", name), std::to_string(last_run)},
                {plugin_key("monitoring_plugin.health_delta", name), std::to_string(delta)},
                {plugin_key("monitoring_plugin.message", name), message},
                {plugin_key("monitoring_plugin.data", name), data},
                {plugin_key("monitoring_plugin.runtime", name), runtime}};
    }

    // collectd-style: every consecutive failure doubles the spacing of the
    // plugin's attempts (from the pass spacing, up to an hour); success resets it.
    // Caller holds m. Returns a log line when the back-off changed.
    std::optional<std::string> note_outcome(Slot& s, bool ok, Clock::time_point started) {
        if (ok) {
            if (s.failures == 0) return std::nullopt;
            int n = s.failures;
            s.failures = 0;
            s.backoff = 0s;
            s.next_allowed = {};
            return fmt::format("Monitoring plugin {} succeeded again after {} failure(s): back to every pass", s.name, n);
        }
        ++s.failures;
        auto cap = std::max(base_interval(), std::chrono::seconds(3600));
        auto next = s.backoff == 0s ? base_interval() * 2 : std::min(cap, s.backoff * 2);
        s.next_allowed = started + next;
        if (next == s.backoff) return std::nullopt;
        s.backoff = next;
        return fmt::format("Monitoring plugin {} failed {} time(s) in a row: next attempt in {} seconds", s.name,
                           s.failures, next.count());
    }

    void execute(std::shared_ptr<Job> job, std::string coordinator_state) {
        auto& slot = *job->slot;
        auto start_unix = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
        health::RunOutcome out = slot.impl->run(coordinator_state);
        std::optional<std::string> backoff_line;
        std::string runtime = two_decimals(out.runtime);
        bool late = false;
        {
            std::lock_guard g(m);
            if (job->abandoned) {
                // Deadline already reported (and counted as a failure); drop the late result.
                slot.in_flight = false;
                cv.notify_all();
                late = true;
            } else {
                job->done = true;
                if (out.ok) {
                    slot.delta = out.health_delta;
                    slot.message = out.message;
                    slot.runtime = runtime;
                } else if (out.partial_delta) {
                    slot.delta = *out.partial_delta;
                }
                backoff_line = note_outcome(slot, out.ok, job->started);
            }
        }
        if (late) {
            auto secs = std::chrono::duration<double>(Clock::now() - job->started).count();
            log.info("Monitoring plugin {} returned after {} seconds (past its deadline); it will run again",
                     slot.name, two_decimals(secs));
            return;
        }
        if (out.ok) {
            write(result_keys(slot.name, start_unix, out.health_delta, out.message, out.data, runtime));
        } else {
            log.error("Monitoring plugin {} failed: {}: {}", slot.name, out.error_type, out.error_text);
            if (!out.traceback.empty()) log.child(slot.name).info("{}", out.traceback);
        }
        if (backoff_line) (out.ok ? log.ok("{}", *backoff_line) : log.warn("{}", *backoff_line));
        std::lock_guard g(m);
        job->finished = true;
        slot.in_flight = false;
        cv.notify_all();
    }

    // The real plugins' names then the module entries': monitoring_plugins.
    std::string plugin_list(const std::map<std::string, ModuleEntry>& entries) const {
        std::string list;
        {
            std::lock_guard g(m);
            for (auto& s : slots) list += (list.empty() ? "" : " ") + s->name;
        }
        for (auto& [n, e] : entries) list += (list.empty() ? "" : " ") + n;
        return list;
    }

    // Publishes the module entries that changed since the last pass and
    // returns them all (their deltas count in this pass's health). Nothing is
    // written when nothing changed. A failed write is tried again next pass.
    std::map<std::string, ModuleEntry> sync_modules() {
        std::map<std::string, ModuleEntry> want;
        {
            std::lock_guard g(m);
            if (!module_dirty) return published;
            want = module_entries(module_items);
            module_dirty = false;
        }
        bool retry = false;
        auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
        // New and changed entries; a new one joins monitoring_plugins in the
        // transaction that creates its keys (readers of the list need all five).
        std::vector<zk::KeyValue> kvs;
        auto listed = published;
        bool added = false;
        for (auto& [n, e] : want) {
            auto it = published.find(n);
            if (it != published.end() && it->second == e) continue;
            added |= it == published.end();
            for (auto& kv : result_keys(n, now, e.delta, e.message, e.data, "0.00")) kvs.push_back(std::move(kv));
            listed[n] = e;
        }
        if (!kvs.empty()) {
            if (added) kvs.push_back({key("node.monitoring.plugins"), plugin_list(listed)});
            if (write(kvs)) {
                for (auto& [n, e] : want) published[n] = e;
            } else {
                retry = true;
            }
        }
        // Entries gone: out of monitoring_plugins first, then their keys.
        std::vector<std::string> gone;
        for (auto& [n, e] : published)
            if (!want.count(n)) gone.push_back(n);
        if (!gone.empty()) {
            auto remaining = published;
            for (auto& n : gone) remaining.erase(n);
            if (write({{key("node.monitoring.plugins"), plugin_list(remaining)}})) {
                for (auto& n : gone) {
                    try {
                        zk->remove_recursive(plugin_key("monitoring_plugin.name", n));
                    } catch (const std::exception& e) {
                        log.error("Failed to remove monitoring data of {}: {}", n, e.what());
                    }
                    published.erase(n);
                }
            } else {
                retry = true;
            }
        }
        if (retry) {
            std::lock_guard g(m);
            module_dirty = true;
        }
        return want;
    }

    void run_pass(std::string coordinator_state) {
        auto wall0 = Clock::now();
        auto cpu0 = process_cpu();
        auto start_time = std::chrono::system_clock::now();
        std::vector<std::shared_ptr<Job>> jobs;
        std::vector<std::string> still_running;
        {
            std::lock_guard g(m);
            for (auto& s : slots) {
                if (stopping) break;
                if (s->in_flight) {
                    still_running.push_back(s->name);
                    continue;
                }
                if (s->failures > 0 && wall0 < s->next_allowed) continue;  // backing off (logged on change)
                s->in_flight = true;
                auto job = std::make_shared<Job>();
                job->slot = s;
                job->started = wall0;
                jobs.push_back(job);
            }
        }
        for (auto& n : still_running)
            log.warn("Monitoring plugin {} skipped: its timed-out run has not returned yet", n);
        auto self = shared_from_this();
        for (auto& job : jobs) {
            try {
                std::thread([self, job, coordinator_state] { self->execute(job, coordinator_state); }).detach();
            } catch (const std::system_error& e) {
                log.error("Monitoring plugin {} failed: {}: {}", job->slot->name, "ThreadError", e.what());
                std::lock_guard g(m);
                job->done = job->finished = true;
                job->slot->in_flight = false;
            }
        }

        std::vector<std::string> timed_out;
        std::vector<std::string> backoff_lines;
        {
            std::unique_lock lk(m);
            auto deadline = wall0 + plugin_timeout();
            cv.wait_until(lk, deadline, [&] {
                return stopping || std::all_of(jobs.begin(), jobs.end(), [](auto& j) { return j->done; });
            });
            for (auto& j : jobs) {
                if (j->done) continue;
                j->abandoned = true;
                if (stopping) continue;  // shutdown cut the pass short: not the plugin's failure
                timed_out.push_back(j->slot->name);
                if (auto line = note_outcome(*j->slot, false, j->started)) backoff_lines.push_back(*line);
            }
            // Results already returned are being written: wait for them (bounded by ZooKeeper's own timeouts).
            cv.wait_for(lk, zk->options().op_timeout + 1s, [&] {
                return std::all_of(jobs.begin(), jobs.end(), [](auto& j) { return j->abandoned || j->finished; });
            });
        }
        for (auto& n : timed_out)
            log.error("Monitoring plugin {} failed: Timeout: no result after {} seconds", n, plugin_timeout().count());
        for (auto& l : backoff_lines) log.warn("{}", l);

        // Node health: 100 minus every loaded plugin's current delta, at least 0.
        struct Detail {
            std::string name, message, runtime;
            int delta;
        };
        // Then the modules' entries (core/README.md, "Module health").
        std::vector<Detail> details;
        int total = 100;
        bool stop_now;
        {
            std::lock_guard g(m);
            stop_now = stopping;
        }
        auto modules = stop_now ? std::map<std::string, ModuleEntry>{} : sync_modules();
        std::optional<int> previous;
        bool plugins;
        {
            std::lock_guard g(m);
            for (auto& s : slots) {
                details.push_back({s->name, s->message, s->runtime, s->delta});
                total -= s->delta;
            }
            stop_now = stopping;
            previous = health;
            plugins = !slots.empty();
        }
        for (auto& [n, e] : modules) {
            details.push_back({n, e.message, "0.00", e.delta});
            total -= e.delta;
        }
        if (total < 0) total = 0;
        // A pass only for the modules (no plugin loaded) writes the health
        // only when it changed.
        if (!plugins && previous == total) stop_now = true;
        std::sort(details.begin(), details.end(), [](auto& a, auto& b) { return a.name < b.name; });

        if (!stop_now) {
            std::lock_guard w(health_write);
            bool still_open;
            {
                std::lock_guard g(m);
                still_open = !stopping;
            }
            if (still_open) write({{key("node.monitoring.health"), std::to_string(total)}});
        }
        if (cfg->log_keepalives && cfg->log_keepalive_plugin_details) {
            for (auto& d : details)
                log.child(fmt::format("{} ({}s)", d.name, d.runtime)).tick("{} [-{}]", d.message, d.delta);
        }
        auto wall = Clock::now() - wall0;
        const char* cst_colour = coordinator_state == "primary"   ? ansi::green
                                 : coordinator_state == "secondary" ? ansi::blue
                                                                    : ansi::cyan;
        const char* health_colour = total > 90 ? ansi::green : total > 50 ? ansi::yellow : ansi::red;
        if (cfg->log_colours)
            log.tick("{}{} healthcheck @ {}{} [{}{}{}{}] result is {}{}%{} in {} seconds", ansi::purple, cfg->node,
                     local_timestamp(start_time), ansi::end, ansi::bold, cst_colour, coordinator_state, ansi::end,
                     health_colour, total, ansi::end, two_decimals(std::chrono::duration<double>(wall).count()));
        else  // as the keepalive line: no escape codes in a log without colours
            log.tick("{} healthcheck @ {} [{}] result is {}% in {} seconds", cfg->node, local_timestamp(start_time),
                     coordinator_state, total, two_decimals(std::chrono::duration<double>(wall).count()));

        {
            std::lock_guard g(m);
            health = total;
            stats.passes++;
            stats.last_wall = std::chrono::duration_cast<std::chrono::microseconds>(wall);
            stats.last_cpu = process_cpu() - cpu0;
            pass_running = false;
            cv.notify_all();
        }
        // The plugins' runs (their threads, Python's temporaries) leave free
        // memory in malloc's arenas: give the free pages back to the system
        // (once per pass, i.e. at most every monitoring_interval).
        if (!jobs.empty()) malloc_trim(0);
    }
};

HealthHost::HealthHost(const Config& cfg, Logger log, std::shared_ptr<zk::Session> zk, Executor& /*ex*/)
    : core_(std::make_shared<Core>()) {
    // Plugin calls do not use the executor's bounded pool on purpose: a hung
    // plugin would hold a pool thread forever. Each call gets its own thread.
    core_->cfg = std::make_shared<const Config>(cfg);
    core_->log = std::move(log);
    core_->zk = std::move(zk);
    auto node = std::make_shared<health::NodeView>();
    node->name = cfg.host.hostname;  // the node's name in ZooKeeper (pvc.node names only the log key)
    std::weak_ptr<Core> weak = core_;
    node->coordinator_state = [weak]() -> std::string {
        if (auto c = weak.lock()) {
            std::lock_guard g(c->m);
            return c->router_state;
        }
        return "client";
    };
    node->health = [weak]() -> std::optional<int> {
        if (auto c = weak.lock()) {
            std::lock_guard g(c->m);
            return c->health;
        }
        return std::nullopt;
    };
    core_->node = node;
}

HealthHost::~HealthHost() {
    std::lock_guard g(core_->m);
    core_->stopping = true;
    core_->cv.notify_all();
}

void HealthHost::load() {
    auto& c = *core_;
    const auto& dir = c.cfg->plugin_directory;
    // 1. Non-directory entries directly inside the directory, code-point order.
    std::vector<std::string> files;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code e2;
        if (it->is_directory(e2)) continue;
        files.push_back(it->path().filename().string());
    }
    std::sort(files.begin(), files.end());

    // 2. Load them all at once (setup() may run commands), bounded by one
    //    plugin_timeout in total; handle the outcomes in file order.
    auto deadline = Clock::now() + c.plugin_timeout();
    auto flat = flat_config(*c.cfg);
    std::vector<std::shared_ptr<std::optional<LoadAttempt>>> attempts;
    struct Wait {
        std::mutex m;
        std::condition_variable cv;
        size_t pending = 0;
    };
    auto wait = std::make_shared<Wait>();
    wait->pending = files.size();
    for (auto& f : files) {
        auto path = dir / f;
        auto slot = std::make_shared<std::optional<LoadAttempt>>();
        attempts.push_back(slot);
        bool native = path.extension() == ".so";
        std::thread([wait, slot, path, native, cfg = c.cfg, log = c.log, zk = c.zk, node = c.node, flat]() {
            LoadAttempt a;
            if (native) {
                a = load_native(path, cfg, log);
            } else {
                auto p = health::load_python_plugin(path, flat, log, zk, node);
                a.plugin = std::move(p.plugin);
                a.error = std::move(p.error);
                a.traceback = std::move(p.traceback);
            }
            std::lock_guard g(wait->m);
            *slot = std::move(a);
            wait->pending--;
            wait->cv.notify_all();
        }).detach();
    }
    {
        std::unique_lock lk(wait->m);
        wait->cv.wait_until(lk, deadline, [&] { return wait->pending == 0; });
    }

    try {
        c.zk->ensure_path(c.key("node.monitoring.data"));
    } catch (const std::exception& e) {
        c.log.error("Failed to create {}: {}", c.key("node.monitoring.data"), e.what());
    }
    std::vector<std::shared_ptr<Slot>> loaded;
    std::set<std::string> names;
    for (size_t i = 0; i < files.size(); ++i) {
        c.log.info("Loading monitoring plugin from {}/{}", dir.string(), files[i]);
        std::optional<LoadAttempt> a;
        {
            std::lock_guard g(wait->m);
            a = *attempts[i];
        }
        if (!a) {
            c.log.warn("Failed to load monitoring plugin: Timeout: setup gave no result after {} seconds",
                       c.plugin_timeout().count());
            continue;
        }
        if (!a->plugin) {
            c.log.warn("Failed to load monitoring plugin: {}", a->error);
            if (!a->traceback.empty()) c.log.child(files[i]).info("{}", a->traceback);
            continue;
        }
        const auto& name = a->plugin->name();
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
            c.log.warn("Failed to load monitoring plugin: invalid plugin name '{}'", name);
            continue;
        }
        if (reserved_name(name)) {
            c.log.warn("Failed to load monitoring plugin: the name '{}' is reserved for module health entries ({}*)",
                       name, module_entry_prefix);
            continue;
        }
        if (names.count(name)) {
            c.log.warn("Failed to load monitoring plugin: a plugin named '{}' is already loaded", name);
            continue;
        }
        names.insert(name);
        c.write(c.result_keys(name, 0, 0, "Initializing", "{}", "0.00"));
        auto s = std::make_shared<Slot>();
        s->name = name;
        s->impl = a->plugin;
        loaded.push_back(s);
        c.log.ok("Successfully loaded monitoring plugin '{}'", name);
    }

    std::string list;
    for (auto& s : loaded) list += (list.empty() ? "" : " ") + s->name;
    c.write({{c.key("node.monitoring.plugins"), list}});

    // Stale entries: any unlisted one once a plugin loaded (as the
    // reference); module entries (ours, published again by the next pass
    // that has items) always.
    try {
        auto kids = c.zk->children(c.key("node.monitoring.data"));
        for (auto& k : kids.value_or(std::vector<std::string>{}))
            if (!names.count(k) && (!loaded.empty() || reserved_name(k)))
                c.zk->remove_recursive(c.plugin_key("monitoring_plugin.name", k));
    } catch (const std::exception& e) {
        c.log.error("Failed to remove stale monitoring data: {}", e.what());
    }
    std::lock_guard g(c.m);
    c.slots = std::move(loaded);
    c.loaded = true;
}

void HealthHost::on_keepalive(const std::string& router_state) {
    auto& c = *core_;
    {
        std::lock_guard g(c.m);
        c.router_state = router_state;
        if (c.stopping || !c.loaded || (c.slots.empty() && !c.module_dirty) || c.pass_running) return;
        auto now = Clock::now();
        if (c.cfg->monitoring_interval && c.last_pass_start) {
            auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(*c.cfg->monitoring_interval));
            // Keepalive ticks jitter: accept a tick slightly early.
            auto slack = std::min<Clock::duration>(500ms, interval / 10);
            if (now - *c.last_pass_start + slack < interval) return;
        }
        c.pass_running = true;
        c.last_pass_start = now;
    }
    try {
        std::thread([core = core_, router_state] { core->run_pass(router_state); }).detach();
    } catch (const std::system_error& e) {  // no thread available: skip this pass, never throw into the keepalive
        c.log.error("Failed to start a health pass: {}", e.what());
        std::lock_guard g(c.m);
        c.pass_running = false;
    }
}

void HealthHost::set_module_health(std::map<std::string, std::vector<KeepaliveReport::HealthItem>> items) {
    auto& c = *core_;
    std::lock_guard g(c.m);
    for (auto& [module, list] : items) {
        auto& held = c.module_items[module];
        if (same_items(held, list)) continue;
        held = std::move(list);
        c.module_dirty = true;
    }
}

std::optional<int> HealthHost::health() const {
    std::lock_guard g(core_->m);
    return core_->health;
}

std::vector<std::string> HealthHost::plugin_names() const {
    std::lock_guard g(core_->m);
    std::vector<std::string> out;
    for (auto& s : core_->slots) out.push_back(s->name);
    return out;
}

HealthHost::PassStats HealthHost::stats() const {
    std::lock_guard g(core_->m);
    return core_->stats;
}

bool HealthHost::pass_running() const {
    std::lock_guard g(core_->m);
    return core_->pass_running;
}

void HealthHost::shutdown(std::chrono::milliseconds bound) {
    auto& c = *core_;
    auto deadline = Clock::now() + bound;
    std::vector<std::shared_ptr<Slot>> slots;
    {
        std::unique_lock lk(c.m);
        if (c.shut) return;
        c.shut = true;
        c.stopping = true;
        c.cv.notify_all();
        c.cv.wait_until(lk, deadline, [&] { return !c.pass_running; });
        slots = c.slots;
    }
    c.log.system("Stopping monitoring check timer");

    // cleanup() of every plugin at once, within what is left of the bound.
    struct Left {
        std::mutex m;
        std::condition_variable cv;
        std::set<std::string> names;
    };
    auto left = std::make_shared<Left>();
    for (auto& s : slots) left->names.insert(s->name);
    for (auto& s : slots) {
        std::thread([left, impl = s->impl] {
            impl->cleanup();
            std::lock_guard g(left->m);
            left->names.erase(impl->name());
            left->cv.notify_all();
        }).detach();
    }
    {
        std::unique_lock lk(left->m);
        left->cv.wait_until(lk, deadline, [&] { return left->names.empty(); });
        if (!left->names.empty()) {
            std::string n;
            for (auto& x : left->names) n += (n.empty() ? "" : ", ") + x;
            c.log.warn("Monitoring plugin cleanup did not finish in time: {}", n);
        }
    }
    {
        std::lock_guard w(c.health_write);
        c.write({{c.key("node.monitoring.health"), "None"}});
    }
    std::lock_guard g(c.m);
    c.health.reset();
}

}  // namespace pvc
