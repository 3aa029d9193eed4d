#include "hypervisor.hpp"

#include "device_task.hpp"

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <set>

#include <libvirt/virterror.h>

#include <nlohmann/json.hpp>

#include <thread>

#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/target.hpp"

namespace pvc::hv {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
Settings read_settings(const Config& config) {
    ConfigProblems ignored;  // Module::configure reported them before start
    return Settings::read(config, ignored);
}
}  // namespace

Hypervisor::Hypervisor(NodeContext& ctx) : Hypervisor(ctx, Options{}) {}

Hypervisor::Hypervisor(NodeContext& ctx, Options options)
    : ctx_(ctx), log_(ctx.logger), settings_(options.settings ? *options.settings : read_settings(ctx.config)),
      rbd_(std::move(options.rbd_locks)), procedures_(options.procedure_threads, ctx.logger),
      migrations_(settings_.max_parallel_migrations), strand_(ctx.executor.make_strand()) {
    if (!rbd_) rbd_ = std::make_unique<services::RbdLocksOrNone>(ctx.services, log_);
    lv_ = std::make_unique<Connection>(settings_.libvirt_uri, log_, [this](const std::string& uuid, int event, int) {
        on_libvirt_event(uuid, event);
    });
    shared_.reset(new Shared{ctx.config, settings_, log_, ctx.zk, ctx.executor, ctx.config.node, *lv_, *rbd_,
                             stopper_, procedures_, migrations_, running_, flush_wake_,
                             InotifyHub::create(ctx.executor.make_strand()), {}});
    if (!shared_->inotify) log_.warn("No inotify instance ({}): console logs are polled", std::strerror(errno));
}

Hypervisor::~Hypervisor() {
    stop();
    procedures_.join();
}

void Hypervisor::start() {
    if (started_.exchange(true)) return;
    // Not fatal (the reference exits): the daemon keeps its other
    // duties; owned VMs are left as they are, their dispatches retried until
    // libvirt answers (README, degraded modes).
    std::string err;
    if (!lv_->get(&err)) log_.error("{}; VMs left as they are until it answers", err);
    {
        std::lock_guard g(tick_target_->m);
        tick_target_->hv = this;
        tick_target_->log = log_;
        tick_target_->attached = true;
    }
    selector_watch_ = ctx_.zk->watch_data(schema::path("base.config.migration_target_selector"),
                                          [this](const std::optional<std::string>& value, const zk::Stat&) {
                                              std::lock_guard g(selector_m_);
                                              selector_seen_ = value.value_or("");
                                          });
    children_watch_ = ctx_.zk->watch_children(schema::path("base.domain"), [this](const auto& children) {
        boost::asio::post(strand_, [this, children] { on_children(children); });
    });
    domainstate_watch_ = ctx_.zk->watch_data(schema::path("node.state.domain", {shared_->me}),
                                             [this](const std::optional<std::string>& v, const zk::Stat& st) {
        boost::asio::post(strand_, [this, v, version = st.version] { on_domainstate(v, version); });
    });
    tick_sub_ = ctx_.events.keepalive_tick.subscribe([target = tick_target_, &ex = ctx_.executor] {
        if (!target->attached) return;
        if (target->busy.exchange(true)) {
            if (!target->skipping.exchange(true))
                target->log.warn("Keepalive collection still running; tick skipped, previous figures kept");
            return;
        }
        ex.blocking([target] {
            struct Done {
                TickTarget& t;
                ~Done() {
                    if (t.skipping.exchange(false)) t.log.info("Keepalive collection finished; collections resume");
                    t.busy = false;
                }
            } done{*target};
            try {
                std::lock_guard g(target->m);
                if (target->hv) target->hv->on_keepalive_tick();
            } catch (const std::exception& e) {
                target->log.error("Keepalive collection failed: {}", e.what());
            }
        });
    });
    // Hot-plug tasks for VMs running here (docs/sdk-guide.md §8).
    if (auto tasks = ctx_.services.get<services::TaskHandlers>()) {
        task_handles_.push_back(tasks->handle("vm.device_attach", device_task(ctx_.zk, *lv_, true)));
        task_handles_.push_back(tasks->handle("vm.device_detach", device_task(ctx_.zk, *lv_, false)));
    }
    log_.info("Hypervisor started on {} (libvirt {})", shared_->me, lv_->uri());
}

void Hypervisor::stop() {
    if (!started_ || stopper_.stopping()) return;
    stopper_.stop();
    task_handles_.clear();
    if (selector_watch_) selector_watch_->cancel();
    if (children_watch_) children_watch_->cancel();
    if (domainstate_watch_) domainstate_watch_->cancel();
    lv_->close();
    tick_sub_.reset();  // no tick reaches us after this
    tick_target_->attached = false;
    {
        // Waits for a collection in progress; none starts afterwards.
        std::lock_guard g(tick_target_->m);
        tick_target_->hv = nullptr;
    }
    procedures_.join();
    // Drain work already queued on our strand (it sees `stopping` and returns).
    auto barrier = std::make_shared<std::promise<void>>();
    auto done = barrier->get_future();
    boost::asio::post(strand_, [barrier] { barrier->set_value(); });
    done.wait_for(5s);
    std::vector<std::shared_ptr<Domain>> all;
    {
        std::lock_guard g(table_m_);
        for (auto& [u, d] : domains_) all.push_back(d);
    }
    for (auto& d : all) {
        if (d->cached().node == shared_->me) d->stop_console();
        d->detach();
    }
    if (shared_->inotify) shared_->inotify->close();
    log_.info("Hypervisor stopped");
}

std::shared_ptr<Domain> Hypervisor::domain(const std::string& uuid) const {
    std::lock_guard g(table_m_);
    auto it = domains_.find(uuid);
    return it == domains_.end() ? nullptr : it->second;
}

void Hypervisor::on_children(const std::optional<std::vector<std::string>>& children) {
    if (stopper_.stopping()) return;
    std::set<std::string> now;
    if (children) now.insert(children->begin(), children->end());
    std::vector<std::shared_ptr<Domain>> added, removed;
    {
        std::lock_guard g(table_m_);
        for (auto it = domains_.begin(); it != domains_.end();) {
            if (!now.count(it->first)) {
                removed.push_back(it->second);
                order_.erase(std::remove(order_.begin(), order_.end(), it->first), order_.end());
                it = domains_.erase(it);
            } else {
                ++it;
            }
        }
        for (const auto& uuid : now) {
            if (domains_.count(uuid)) continue;
            auto d = std::make_shared<Domain>(*shared_, uuid);
            domains_.emplace(uuid, d);
            order_.push_back(uuid);
            added.push_back(d);
        }
    }
    for (auto& d : removed) {
        log_.info("VM {}: removed", d->uuid());
        d->removed();
    }
    if (added.empty()) return;
    // The first reads of a batch (at start, every VM of the cluster: its keys
    // and XML) leave much free memory behind: the last attach of the batch
    // returns the free pages to the system.
    auto left = std::make_shared<std::atomic<size_t>>(added.size());
    for (auto& d : added)
        procedures_.post([d, left] {
            d->attach();
            if (left->fetch_sub(1) == 1) malloc_trim(0);
        });
}

void Hypervisor::on_libvirt_event(const std::string& uuid, int event) {
    dirty_ = true;  // the next keepalive refreshes everything from libvirt
    if (auto d = domain(uuid)) d->on_libvirt_event();  // a procedure waiting for it
    if (event != VIR_DOMAIN_EVENT_STOPPED && event != VIR_DOMAIN_EVENT_CRASHED) return;
    boost::asio::post(strand_, [this, uuid] {
        if (stopper_.stopping()) return;
        // A crashed or guest-powered-off VM: the dispatcher starts it again if it should run.
        if (auto d = domain(uuid)) d->request_dispatch();
    });
}

// ---- flush / unflush ----

void Hypervisor::on_domainstate(const std::optional<std::string>& value, int32_t version) {
    if (stopper_.stopping() || !value) return;
    // `flushed` and `ready` are the terminal values the worker writes itself; others are not ours.
    if (*value != "flush" && *value != "unflush") return;
    if (worker_) {
        worker_->cancel = true;
        flush_wake_.notify();
    }
    queued_ = std::make_shared<Job>();
    queued_->action = *value;
    queued_->version = version;
    maybe_start_worker();
}

void Hypervisor::maybe_start_worker() {
    if (worker_ || !queued_ || stopper_.stopping()) return;
    worker_ = std::move(queued_);
    worker_active_ = true;
    procedures_.post([this, job = worker_] {
        try {
            run_job(*job);
        } catch (const std::exception& e) {
            log_.error("Node {} failed: {}", job->action, e.what());
        }
        boost::asio::post(strand_, [this] {
            worker_.reset();
            worker_active_ = false;
            maybe_start_worker();
        });
    });
}

void Hypervisor::run_job(Job& job) {
    bool completed = job.action == "flush" ? flush(job) : unflush(job);
    if (!completed) {
        log_.info("Node {} of {} cancelled", job.action, shared_->me);
        return;
    }
    // Conditional on the domainstate version that asked for it: a newer request wins.
    zk::Transaction tx(*ctx_.zk);
    if (job.action == "flush") tx.set(schema::path("node.running_domains", {shared_->me}), running_.text());
    tx.set(schema::path("node.state.domain", {shared_->me}), job.action == "flush" ? "flushed" : "ready", job.version);
    auto st = zk::Status::other;
    try {
        st = tx.commit();
    } catch (const std::exception&) {
    }
    if (st == zk::Status::ok) log_.ok("Node {} of {} complete", job.action, shared_->me);
    else log_.info("Node {} of {} superseded ({})", job.action, shared_->me, zk::to_string(st));
}

namespace {
// The version an in-flight VM's state must pass to count: the one read before
// the job's write; after a failed write (it may or may not have applied) any
// value counts, as the next read of the state would.
int32_t in_flight_after(bool written, const zk::Stat& read_before) { return written ? read_before.version : -1; }
}  // namespace

Domain::Seen Hypervisor::state_of(const std::string& uuid, bool& watched) {
    watched = true;
    auto d = domain(uuid);
    if (!d) return {Read::absent(), -1};  // deleted: nothing moves
    auto s = d->seen();
    if (!s.state.failed()) return s;
    watched = false;
    zk::Stat stat;
    auto r = shared_->get(schema::path("domain.state", {uuid}), &stat);
    return {r, r.present() ? stat.version : -1};
}

bool Hypervisor::wait_settled(Job& job, std::vector<InFlight>& inflight, size_t keep) {
    // Woken by state watch deliveries and cancellation; the earliest bound is the timer.
    for (auto seen = flush_wake_.seen();; seen = flush_wake_.seen()) {
        bool all_watched = true;
        std::erase_if(inflight, [&](const InFlight& e) {
            if (Clock::now() >= e.deadline) return true;
            bool watched = true;
            auto s = state_of(e.uuid, watched);
            all_watched = all_watched && watched;
            // Unknown, or not yet changed by our write: still moving, within its bound.
            if (s.state.failed() || (s.state.present() && s.version <= e.version)) return false;
            auto st = s.state.value_or("");
            return !(st == "migrate" || st == "migrate-live" || st == "unmigrate" || st == "shutdown");
        });
        if (inflight.size() <= keep) return true;
        if (cancelled(job)) return false;
        auto until = std::min_element(inflight.begin(), inflight.end(), [](auto& a, auto& b) {
            return a.deadline < b.deadline;
        })->deadline;
        if (!all_watched) until = std::min(until, Clock::now() + 1s);  // a watch that cannot tell: read again
        if (!flush_wake_.wait_until(seen, until)) return false;
    }
}

bool Hypervisor::wait_state_change(Job& job, const std::string& uuid, int32_t version) {
    for (auto seen = flush_wake_.seen();; seen = flush_wake_.seen()) {
        bool watched = true;
        auto s = state_of(uuid, watched);
        if (!s.state.failed() && (!s.state.present() || s.version > version)) return true;
        if (cancelled(job)) return false;
        if (!flush_wake_.wait_until(seen, Clock::now() + (watched ? 30s : 2s))) return false;
    }
}

std::optional<Read> Hypervisor::read_for(Job& job, const std::string& path, zk::Stat* stat) {
    for (bool logged = false;;) {
        auto r = shared_->get(path, stat);
        if (!r.failed()) return r;
        if (!logged) log_.warn("Node {}: cannot read {}; waiting for ZooKeeper", job.action, path);
        logged = true;
        // Retried every 2 s; a cancellation or the stop ends the wait at once.
        auto seen = flush_wake_.seen();
        if (cancelled(job) || !flush_wake_.wait_until(seen, Clock::now() + 2s) || job.cancel) return std::nullopt;
    }
}

bool Hypervisor::flush(Job& job) {
    const auto& me = shared_->me;
    log_.info("Flushing node {}", me);
    const size_t bound = std::max(1, settings_.max_parallel_migrations);
    std::vector<InFlight> inflight;
    for (const auto& uuid : running_.snapshot()) {
        if (cancelled(job)) return false;
        auto key = [&](std::string_view k) { return schema::path(k, {uuid}); };
        std::optional<Read> state;
        zk::Stat state_stat;
        while (true) {
            state = read_for(job, key("domain.state"), &state_stat);
            if (!state) return false;
            if (!state->is("restart") && !state->is("shutdown")) break;
            if (!wait_state_change(job, uuid, state_stat.version)) return false;
        }
        if (!state->present()) continue;  // not a PVC VM (or being deleted)
        auto node_read = read_for(job, key("domain.node"));
        auto lastnode_read = node_read ? read_for(job, key("domain.last_node")) : std::nullopt;
        if (!lastnode_read) return false;
        auto node = node_read->value_or("");
        auto lastnode = lastnode_read->value_or("");
        const std::string home = lastnode.empty() ? node : lastnode;
        std::optional<std::string> target;
        try {
            target = target::find_target(*ctx_.zk, uuid, {me});
        } catch (const std::exception& e) {
            log_.error("VM {}: target selection failed: {}", uuid, e.what());
        }
        bool written = false;
        if (target && *target == home) {
            // The best place is its home: send it home (the reference shuts it down instead).
            log_.info("VM {}: flushing home to {}", uuid, home);
            written = shared_->write(
                {{key("domain.state"), "migrate"}, {key("domain.node"), home}, {key("domain.last_node"), ""}});
        } else if (target) {
            log_.info("VM {}: flushing to {}", uuid, *target);
            written = shared_->write(
                {{key("domain.state"), "migrate"}, {key("domain.node"), *target}, {key("domain.last_node"), home}});
        } else if (state->is("start")) {
            log_.info("VM {}: no migration target; shutting down", uuid);
            written = shared_->write({{key("domain.state"), "shutdown"}, {key("domain.meta.autostart"), "True"}});
        } else {
            continue;
        }
        inflight.push_back({uuid, in_flight_after(written, state_stat), Clock::now() + 120s});
        if (!wait_settled(job, inflight, bound - 1)) return false;
    }
    return wait_settled(job, inflight, 0);
}

bool Hypervisor::unflush(Job& job) {
    const auto& me = shared_->me;
    log_.info("Readying node {}", me);
    const size_t bound = std::max(1, settings_.max_parallel_migrations);
    std::vector<std::string> order;
    {
        std::lock_guard g(table_m_);
        order = order_;
    }
    std::vector<InFlight> inflight;
    for (const auto& uuid : order) {
        if (cancelled(job)) return false;
        auto key = [&](std::string_view k) { return schema::path(k, {uuid}); };
        auto node_read = read_for(job, key("domain.node"));
        auto autostart = node_read ? read_for(job, key("domain.meta.autostart")) : std::nullopt;
        auto lastnode = autostart ? read_for(job, key("domain.last_node")) : std::nullopt;
        zk::Stat state_stat;
        auto state = lastnode ? read_for(job, key("domain.state"), &state_stat) : std::nullopt;
        if (!state) return false;
        auto node = node_read->value_or("");
        if (autostart->is("True") && node == me) {
            log_.info("VM {}: autostarting", uuid);
            shared_->write({{key("domain.state"), "start"}, {key("domain.node"), me}, {key("domain.last_node"), ""},
                            {key("domain.meta.autostart"), "False"}});
            continue;
        }
        if (lastnode->value_or("") != me) continue;
        if (state->is("start")) {
            log_.info("VM {}: returning home", uuid);
            bool written = shared_->write(
                {{key("domain.state"), "migrate"}, {key("domain.node"), me}, {key("domain.last_node"), ""}});
            inflight.push_back({uuid, in_flight_after(written, state_stat), Clock::now() + 120s});
            if (!wait_settled(job, inflight, bound - 1)) return false;
        } else {
            // Not running: re-assign only (the reference sets `migrate` and leaves it stuck).
            shared_->write({{key("domain.node"), me}, {key("domain.last_node"), ""}});
        }
    }
    return wait_settled(job, inflight, 0);
}

// ---- keepalive ----

void Hypervisor::contribute(KeepaliveReport& report) {
    // The primary publishes the configured migration selector: a client's
    // change is put back at the next keepalive, as the reference does.
    if (report.router_state == "primary") {
        std::optional<std::string> seen;
        {
            std::lock_guard g(selector_m_);
            seen = selector_seen_;
        }
        if (seen != settings_.migration_target_selector)
            report.write(schema::path("base.config.migration_target_selector"), settings_.migration_target_selector);
    }
    std::lock_guard g(figures_m_);
    report.log_field("VMs", std::to_string(domains_count_), 10);
    // Until the first collection the keys keep what they hold.
    if (!have_figures_) return;
    auto key = [&](std::string_view k) { return schema::path(k, {shared_->me}); };
    report.write(key("node.memory.allocated"), std::to_string(memalloc_));
    report.write(key("node.memory.provisioned"), std::to_string(memprov_));
    report.write(key("node.vcpu.allocated"), std::to_string(vcpualloc_));
    report.write(key("node.count.provisioned_domains"), std::to_string(domains_count_));
    report.write(key("node.running_domains"), running_.text());
}

// A flush or unflush of this node in progress is completed before the node
// lets go of anything (the reference waits without limit, as here; systemd's
// stop timeout is the bound). The core's keepalive goes on meanwhile, so
// nobody takes the node for dead while its VMs move. The state is read from
// ZooKeeper each 0.5 s; a value that cannot be read ends the wait: a flush
// cannot progress without ZooKeeper either.
void Hypervisor::drain_before_shutdown() {
    if (!ctx_.zk->connected()) {
        log_.warn("ZooKeeper unavailable; not waiting for a flush of this node");
        return;
    }
    const std::string key = schema::path("node.state.domain", {shared_->me});
    std::string waited_for, last;
    for (;;) {
        std::optional<std::string> state;
        try {
            state = ctx_.zk->get(key);
        } catch (const std::exception& e) {
            log_.warn("Cannot read this node's domain state ({}); not waiting for a flush", e.what());
            return;
        }
        last = state.value_or("<absent>");
        if (last != "flush" && last != "unflush") break;
        if (waited_for.empty()) {
            waited_for = last;
            log_.info("Waiting for the {} of this node in progress to complete before shutdown", waited_for);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!waited_for.empty()) log_.ok("The {} of this node ended (domain state {}); shutting down", waited_for, last);
}

void Hypervisor::on_keepalive_tick() {
    bool full = dirty_.exchange(false) || ticks_ % full_collect_every == 0;
    ++ticks_;
    collect(full);
}

bool Hypervisor::collect(bool full, std::optional<std::chrono::milliseconds> deadline_after) {
    if (stopper_.stopping() || collecting_.exchange(true)) return false;
    struct Reset {
        std::atomic<bool>& f;
        ~Reset() { f = false; }
    } reset{collecting_};

    if (!full) {
        publish_figures(-1);
        return true;
    }
    // Its own deadline: by default the next tick is due by then.
    const auto deadline =
        Clock::now() + deadline_after.value_or(std::chrono::seconds(std::max(1, ctx_.config.keepalive_interval)));
    auto give_up = [&](const std::string& why) {
        dirty_ = true;  // the next collection is a full one
        if (!degraded_.exchange(true)) log_.warn("Keepalive collection incomplete ({}); previous figures kept", why);
        return false;
    };

    auto listed = lv_->list_active();
    if (!listed) return give_up("libvirt unreachable");
    auto& active = *listed;
    std::set<std::string> running_here;
    std::map<std::string, Usage> usage;
    zk::Transaction stats(*ctx_.zk);
    for (auto& d : active) {
        if (Clock::now() >= deadline) return give_up("deadline passed while asking libvirt");
        int st = 0, reason = 0;
        if (virDomainGetState(d.get(), &st, &reason, 0) < 0) {
            // A domain gone since the listing is ordinary; any other error
            // (connection lost) says nothing about what runs here.
            if (virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) continue;
            return give_up("libvirt: " + last_error());
        }
        // PAUSED and PMSUSPENDED domains are present: counted, never restarted.
        if (!active_state(st)) continue;
        auto uuid = uuid_of(d.get());
        if (uuid.empty()) continue;
        running_here.insert(uuid);
        if (auto dom = domain(uuid)) {
            dom->note_libvirt_state(st, reason);
            // Backstop for what no event asks: a stray (assigned elsewhere; its
            // dispatch found libvirt unreachable, or it appeared here), or a VM
            // that arrived after its receiver gave up (migrate state, node here).
            auto c = dom->cached();
            if (dom->idle() && (c.node != shared_->me || is_migrate(parse_vm_state(c.state)))) dom->request_dispatch();
        }
        virDomainInfo info{};
        if (virDomainGetInfo(d.get(), &info) == 0)
            usage[uuid] = Usage{static_cast<long>(info.memory / 1024), static_cast<int>(info.nrVirtCpu)};
        if (domain(uuid)) {
            if (auto json = domain_stats(d.get(), uuid)) {
                stats.check(schema::path("domain.name", {uuid}), -1);
                stats.set(schema::path("domain.stats", {uuid}), *json);
            }
        }
    }
    // Only a complete collection changes the running list.
    for (auto& d : active) {
        if (auto uuid = uuid_of(d.get()); running_here.count(uuid)) running_.add(uuid);
    }
    for (const auto& uuid : running_.snapshot()) {
        if (running_here.count(uuid)) continue;
        // Backstop for a missed lifecycle event: a VM that should run here but does not.
        if (auto d = domain(uuid)) {
            auto c = d->cached();
            if (c.state == "start" && c.node == shared_->me && d->idle()) d->request_dispatch();
            if (!d->idle()) continue;  // a procedure is changing it right now
        }
        running_.remove(uuid);
    }
    for (auto it = devices_.begin(); it != devices_.end();)
        it = running_here.count(it->first) ? std::next(it) : devices_.erase(it);
    {
        std::lock_guard g(usage_m_);
        usage_ = std::move(usage);
    }
    publish_figures(static_cast<int>(active.size()));
    if (degraded_.exchange(false)) log_.info("Keepalive collection complete again");
    // All stats in one transaction; a VM deleted meanwhile fails its check, so
    // fall back to one write per VM only then (and only within the deadline).
    auto committed = zk::Status::other;
    if (!stats.empty()) {
        try {
            committed = ctx_.zk->commit(stats);
        } catch (const std::exception& e) {
            committed = zk::Status::connection_loss;
            log_.debug("VM stats not written: {}", e.what());
        }
    }
    if (!stats.empty() && committed != zk::Status::ok && committed != zk::Status::connection_loss &&
        committed != zk::Status::timeout && committed != zk::Status::session_expired) {
        const auto& ops = stats.ops();
        for (size_t i = 0; i + 1 < ops.size() && Clock::now() < deadline; i += 2) {
            auto uuid = ops[i].path.substr(ops[i].path.rfind('/') + 1);
            shared_->set_existing(uuid, ops[i + 1].path, ops[i + 1].data);
        }
    }
    return true;
}

// memalloc/memprov/vcpualloc with the accounting the reference intends, from the
// usage the last full collection read (XML memory for VMs it has not seen).
void Hypervisor::publish_figures(int domains_count) {
    long memalloc = 0, memprov = 0;
    int vcpus = 0;
    auto running = running_.snapshot();
    {
        std::lock_guard g(usage_m_);
        for (const auto& uuid : running) {
            if (auto it = usage_.find(uuid); it != usage_.end()) {
                memalloc += it->second.memory_mib;
                vcpus += it->second.vcpus;
            } else if (auto d = domain(uuid)) {
                memalloc += d->cached().memory_mib;
            }
        }
    }
    memprov = memalloc;
    {
        std::lock_guard g(table_m_);
        for (auto& [uuid, d] : domains_) {
            auto c = d->cached();
            if (c.node == shared_->me && !running_.contains(uuid)) memprov += c.memory_mib;
        }
    }
    std::lock_guard g(figures_m_);
    have_figures_ = true;
    // Between full collections libvirt's active count is taken as the running list.
    domains_count_ = domains_count >= 0 ? domains_count : static_cast<int>(running.size());
    memalloc_ = memalloc;
    memprov_ = memprov;
    vcpualloc_ = vcpus;
}

std::optional<std::string> Hypervisor::domain_stats(virDomainPtr dom, const std::string& uuid) {
    using nlohmann::json;
    virDomainInfo info{};
    if (virDomainGetInfo(dom, &info) < 0) return std::nullopt;
    json j;
    j["state"] = state_name(info.state);
    j["maxmem"] = info.maxMem;
    j["livemem"] = info.memory;
    j["cpus"] = info.nrVirtCpu;
    j["cputime"] = info.cpuTime;

    static const char* mem_tags[] = {"swap_in", "swap_out", "major_fault", "minor_fault", "unused", "available",
                                     "actual", "rss", "usable", "last_update", "disk_caches", "hugetlb_pgalloc",
                                     "hugetlb_pgfail"};
    json mem = json::object();
    virDomainMemoryStatStruct ms[VIR_DOMAIN_MEMORY_STAT_NR];
    int n = virDomainMemoryStats(dom, ms, VIR_DOMAIN_MEMORY_STAT_NR, 0);
    for (int i = 0; i < n; i++) {
        int tag = ms[i].tag;
        if (tag >= 0 && tag < static_cast<int>(std::size(mem_tags))) mem[mem_tags[tag]] = ms[i].val;
    }
    j["mem_stats"] = mem;

    json cpu = json::object();
    int nparams = virDomainGetCPUStats(dom, nullptr, 0, -1, 1, 0);
    if (nparams > 0) {
        std::vector<virTypedParameter> params(nparams);
        if (virDomainGetCPUStats(dom, params.data(), nparams, -1, 1, 0) > 0) {
            for (auto& p : params)
                if (p.type == VIR_TYPED_PARAM_ULLONG) cpu[p.field] = p.value.ul;
            virTypedParamsClear(params.data(), nparams);
        }
    }
    j["cpu_stats"] = cpu;

    // The device list comes from the live XML, read once per libvirt domain instance.
    auto& dev = devices_[uuid];
    unsigned id = virDomainGetID(dom);
    if (!dev.ok || dev.libvirt_id != id) {
        dev = Devices{};
        dev.libvirt_id = id;
        if (char* xml = virDomainGetXMLDesc(dom, 0)) {
            auto parsed = try_parse_domain_xml(xml);
            free(xml);
            if (parsed) {
                for (auto& d : parsed->disks) dev.disks.emplace_back(d.source, d.target);
                for (auto& i : parsed->interfaces)
                    if (i.type == "bridge") dev.bridges.emplace_back(i.target, i.source);
                dev.ok = true;
            }
        }
    }
    json disks = json::array(), nets = json::array();
    for (auto& [name, target] : dev.disks) {
        virDomainBlockStatsStruct bs{};
        if (name.empty() || virDomainBlockStats(dom, target.c_str(), &bs, sizeof bs) < 0) return std::nullopt;
        disks.push_back({{"name", name}, {"rd_req", bs.rd_req}, {"rd_bytes", bs.rd_bytes},
                         {"wr_req", bs.wr_req}, {"wr_bytes", bs.wr_bytes}, {"err", bs.errs}});
    }
    for (auto& [target, bridge] : dev.bridges) {
        virDomainInterfaceStatsStruct is{};
        if (virDomainInterfaceStats(dom, target.c_str(), &is, sizeof is) < 0) return std::nullopt;
        nets.push_back({{"name", target}, {"bridge", bridge}, {"rd_bytes", is.rx_bytes},
                        {"rd_packets", is.rx_packets}, {"rd_errors", is.rx_errs}, {"rd_drops", is.rx_drop},
                        {"wr_bytes", is.tx_bytes}, {"wr_packets", is.tx_packets}, {"wr_errors", is.tx_errs},
                        {"wr_drops", is.tx_drop}});
    }
    j["disk_stats"] = disks;
    j["net_stats"] = nets;
    return j.dump();
}

}  // namespace pvc::hv
