#include "domain.hpp"

#include <libvirt/libvirt.h>

#include <algorithm>

#include "migration.hpp"
#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"

namespace pvc::hv {

using namespace std::chrono_literals;

VmState parse_vm_state(std::string_view s) {
    if (s == "start") return VmState::start;
    if (s == "restart") return VmState::restart;
    if (s == "shutdown") return VmState::shutdown;
    if (s == "stop") return VmState::stop;
    if (s == "disable") return VmState::disable;
    if (s == "fail") return VmState::fail;
    if (s == "migrate") return VmState::migrate;
    if (s == "migrate-live") return VmState::migrate_live;
    if (s == "unmigrate") return VmState::unmigrate;
    if (s == "provision") return VmState::provision;
    if (s == "restore") return VmState::restore;
    if (s == "delete") return VmState::remove;
    return VmState::invalid;
}

bool is_migrate(VmState s) { return s == VmState::migrate || s == VmState::migrate_live || s == VmState::unmigrate; }

Domain::Domain(Shared& shared, std::string uuid)
    : sh_(shared), uuid_(std::move(uuid)), log_(shared.log.child(shared.log.prefix())), strand_(shared.ex.make_strand()),
      retry_timer_(strand_), wake_(shared.stopper) {}

std::string Domain::path(std::string_view key) const { return schema::path(key, {uuid_}); }

Domain::Cached Domain::cached() const {
    std::lock_guard g(m_);
    return cached_;
}

std::shared_ptr<ConsoleLog> Domain::console() const {
    std::lock_guard g(console_m_);
    return console_;
}

void Domain::ensure_console(const std::string& name) {
    std::lock_guard g(console_m_);
    if (name.empty() || name == console_name_) return;
    if (console_) console_->stop(false);
    console_.reset();
    console_name_ = name;
    std::filesystem::path file;
    if (!sh_.settings.console_log_directory.empty()) {
        auto safe = console_log_file(sh_.settings.console_log_directory, name);
        if (!safe) {
            // Logged once per name: the VM runs, without a console log.
            log_.warn("VM {}: name '{}' cannot be used as a file name; no console log", uuid_, name);
            return;
        }
        file = *safe;
    }
    console_ = std::make_shared<ConsoleLog>(sh_.zk, sh_.ex, strand_, sh_.inotify, uuid_, file, sh_.settings.console_log_lines);
    console_->prepare();
}

void Domain::attach() {
    if (auto s = read()) {
        {
            std::lock_guard g(m_);
            prev_lastnode_ = s->lastnode;
        }
        remember(*s);
        ensure_console(s->name);
    }
    // Unreadable now: the watch's first dispatch reads again (and retries).
    std::weak_ptr<Domain> weak = weak_from_this();
    try {
        auto w = sh_.zk->watch_data(path("domain.state"),
                                    [weak](const std::optional<std::string>& v, const zk::Stat& st) {
            if (auto self = weak.lock()) self->on_state(v, st);
        });
        std::lock_guard g(console_m_);
        watch_ = w;
        if (gone_) watch_->cancel();  // detached while the watch was being set up
    } catch (const std::exception& e) {
        log_.error("VM {}: cannot watch its state: {}", uuid_, e.what());
        retry_later();
    }
}

void Domain::on_state(const std::optional<std::string>& value, const zk::Stat& stat) {
    {
        std::lock_guard g(seen_m_);
        seen_.state = value ? Read::of(*value) : Read::absent();
        seen_.version = stat.version;
    }
    wake_.notify();
    sh_.state_changes.notify();
    request_dispatch();
}

Domain::Seen Domain::seen() const {
    std::lock_guard g(seen_m_);
    return seen_;
}

void Domain::detach() {
    gone_ = true;
    {
        std::lock_guard g(console_m_);
        if (watch_) watch_->cancel();
    }
    auto self = shared_from_this();
    boost::asio::post(strand_, [self] { self->retry_timer_.cancel(); });
    sh_.procedures.post([self] {
        if (auto c = self->console()) c->stop(false);
    });
}

void Domain::removed() {
    detach();
    auto self = shared_from_this();
    sh_.procedures.post([self] { self->destroy_if_removed(); });
}

void Domain::destroy_if_removed() {
    // Only a confirmed removal counts: the domain's root read as absent (not
    // an error) and libvirt's answer, both asked again until known (≤ 1 min).
    auto root_absent = [&]() -> std::optional<bool> {
        auto r = sh_.get(path("domain.name"));
        if (r.failed()) return std::nullopt;
        return !r.present();
    };
    for (int attempt = 0; attempt < 30; attempt++) {
        if (attempt > 0 && !sh_.stopper.sleep(2s)) return;
        if (sh_.stopper.stopping()) return;
        auto gone = root_absent();
        if (!gone) continue;
        if (!*gone) return;  // re-defined with the same UUID (rename): its new object decides
        auto lv = sh_.lv.status(uuid_);
        if (lv.unknown()) continue;
        if (!lv.active()) return;
        gone = root_absent();
        if (!gone) continue;
        if (!*gone) return;
        log_.warn("VM {}: removed from the cluster while it runs here; destroying it", uuid_);
        virDomainDestroy(lv.dom.get());
        if (!Connection::status_of(lv.dom.get()).inactive()) continue;
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        return;
    }
    log_.error("VM {}: removed from the cluster, but its domain here could not be confirmed destroyed", uuid_);
}

void Domain::stop_console() {
    if (auto c = console()) c->stop(true);
}

void Domain::retry_later(Retry why, const std::string& detail) {
    using namespace std::chrono;
    unsigned failures = 0;
    if (why == Retry::zookeeper) {
        failures = read_failures_++;
        if (failures == 0) log_.warn("VM {}: cannot read its keys from ZooKeeper; nothing done, retrying", uuid_);
    } else {
        failures = libvirt_failures_++;
        if (failures == 0)
            log_.warn("VM {}: libvirt cannot tell whether it runs here ({}); nothing done, retrying", uuid_,
                      detail.empty() ? "no answer" : detail);
    }
    auto delay = std::min(milliseconds(5000), milliseconds(200) * (1u << std::min(failures, 5u)));
    auto self = shared_from_this();
    boost::asio::post(strand_, [self, delay] {
        if (self->gone_ || self->sh_.stopper.stopping()) return;
        self->retry_timer_.expires_after(delay);
        self->retry_timer_.async_wait([self](const boost::system::error_code& ec) {
            if (!ec) self->request_dispatch();
        });
    });
}

void Domain::libvirt_answered() {
    if (libvirt_failures_.exchange(0) > 0) log_.info("VM {}: libvirt answers again", uuid_);
}

void Domain::note_libvirt_state(int state, int reason) {
    if (state == VIR_DOMAIN_PAUSED || state == VIR_DOMAIN_PMSUSPENDED) {
        if (!paused_warned_.exchange(true)) {
            if (state == VIR_DOMAIN_PAUSED)
                log_.warn("VM {}: present here but paused ({}); kept as it is, not restarted", uuid_,
                          paused_reason(state, reason));
            else
                log_.warn("VM {}: present here but suspended by its guest (PMSUSPENDED); kept as it is, not restarted",
                          uuid_);
        }
    } else if (state == VIR_DOMAIN_RUNNING && paused_warned_.exchange(false)) {
        log_.info("VM {}: running again", uuid_);
    }
}

void Domain::request_dispatch() {
    auto self = shared_from_this();
    boost::asio::post(strand_, [self] {
        if (self->gone_ || self->sh_.stopper.stopping()) return;
        if (self->busy_) {
            self->pending_ = true;
            return;
        }
        self->busy_ = true;
        self->busy_flag_ = true;
        self->sh_.procedures.post([self] {
            try {
                self->run_dispatch();
            } catch (const std::exception& e) {
                // A bug or an unexpected library error must never take the daemon down.
                self->log_.error("VM {}: dispatch failed: {}", self->uuid_, e.what());
            }
            boost::asio::post(self->strand_, [self] {
                self->busy_ = false;
                self->busy_flag_ = false;
                if (self->pending_) {
                    self->pending_ = false;
                    self->request_dispatch();
                }
            });
        });
    });
}

std::optional<Domain::Snapshot> Domain::read() {
    // `state` is read first and last: a client writes state, node and lastnode
    // in one transaction (state always included), so an unchanged state version
    // means the keys between belong to one moment. A moved version reads again.
    // All in one round trip: ZooKeeper answers a session's reads in order.
    const std::vector<std::string> paths{path("domain.state"), path("domain.node"), path("domain.last_node"),
                                         path("domain.meta.migrate_method"), path("domain.name"),
                                         path("domain.xml"), path("domain.storage.volumes"), path("domain.state")};
    for (int attempt = 0; attempt < 20 && !sh_.stopper.stopping(); attempt++) {
        std::vector<zk::Stat> stats;
        auto r = sh_.get_many(paths, &stats);
        for (const Read& one : r)
            if (one.failed()) return std::nullopt;
        Snapshot s;
        const Read &state = r[0], &again = r[7];
        if (!state.present() || !again.present()) return s;
        if (stats[7].version != stats[0].version) continue;
        s.state = again.value_or("");
        s.node = r[1].value_or("");
        s.lastnode = r[2].value_or("");
        s.method = r[3].value_or("none");
        s.name = r[4].value_or("");
        s.xml = r[5].value_or("");
        s.volumes = r[6].value_or("");
        s.version = stats[7].version;
        return s;
    }
    return std::nullopt;
}

bool Domain::confirm(const char* act) {
    auto now = read();
    if (now && decision_ && now->state == decision_->state && now->node == decision_->node) {
        decision_->version = now->version;
        return true;
    }
    if (!now) {
        log_.warn("VM {}: cannot confirm its node and state; not going to {}", uuid_, act);
        retry_later();
    } else {
        log_.info("VM {}: node/state changed to {}/{}; not going to {}", uuid_, now->node, now->state.value_or("<none>"), act);
        request_dispatch();  // a node-only change does not fire the state watch
    }
    return false;
}

void Domain::decide(const Snapshot& s) {
    // Kept between dispatches for every VM of the cluster: only what confirm()
    // and the shutdown wait compare (state, node, version), not the XML (a
    // few KiB per VM, 1,000 VMs of other nodes on every node).
    Snapshot d;
    d.state = s.state;
    d.node = s.node;
    d.lastnode = s.lastnode;
    d.method = s.method;
    d.name = s.name;
    d.volumes = s.volumes;
    d.version = s.version;
    decision_ = std::move(d);
}

void Domain::remember(const Snapshot& s) {
    long mem = 0;
    if (auto x = try_parse_domain_xml(s.xml)) mem = x->memory_mib().value_or(0);
    std::lock_guard g(m_);
    cached_.name = s.name;
    cached_.state = s.state.value_or("");
    cached_.node = s.node;
    cached_.lastnode = s.lastnode;
    cached_.memory_mib = mem;
    // Settled values are what a migration abort restores.
    if (s.state && !is_migrate(parse_vm_state(*s.state))) prev_lastnode_ = s.lastnode;
}

void Domain::run_dispatch() {
    if (gone_ || sh_.stopper.stopping()) return;
    auto read_now = read();
    if (!read_now) return retry_later();
    if (read_failures_ > 0) log_.info("VM {}: its keys are readable again", uuid_);
    read_failures_ = 0;
    decide(*read_now);
    const Snapshot& s = *read_now;
    if (!s.state) return;  // being deleted (or not yet complete): nothing to do
    remember(s);
    ensure_console(s.name);
    auto st = parse_vm_state(*s.state);
    if (st != VmState::invalid) warned_state_.clear();
    // "Running" = present in an active libvirt state (PAUSED and PMSUSPENDED
    // included). A libvirt that cannot be asked is no answer: nothing is
    // started, destroyed or written on it.
    auto lv = sh_.lv.status(uuid_);
    if (lv.unknown()) {
        if (s.node == sh_.me) return retry_later(Retry::libvirt, lv.error);
        // Not ours: it runs here only as a stray, which the keepalive
        // collection dispatches again once libvirt lists it.
        return;
    }
    libvirt_answered();
    const bool running = lv.active();
    if (running) note_libvirt_state(lv.state, lv.reason);
    if (s.node == sh_.me) {
        owner_dispatch(s, st, running);
        refresh_vnc();
        return;
    }
    if (!running) return;
    switch (st) {
    case VmState::migrate:
    case VmState::unmigrate: send(s, s.method == "live"); break;
    case VmState::migrate_live: send(s, true); break;
    case VmState::shutdown: graceful_shutdown(false); break;
    default:
        // Any other state, unknown ones included: one VM never runs on two nodes.
        if (!confirm("terminate it")) break;
        log_.info("VM {}: running here but assigned to {}; terminating", uuid_, s.node);
        if (!destroy_sequence()) break;
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (auto c = console()) c->stop(true);
        break;
    }
}

void Domain::warn_unknown_state(const std::string& state) {
    // Newer clients write states this daemon does not know (`mirror`, `import`):
    // they are not ours to act on, nor to overwrite.
    if (state == warned_state_) return;
    warned_state_ = state;
    log_.warn("VM {}: unknown state '{}'; leaving it alone", uuid_, state);
}

void Domain::owner_dispatch(const Snapshot& s, VmState st, bool running) {
    if (running) {
        switch (st) {
        case VmState::start: adopt(); break;
        case VmState::migrate:
        case VmState::migrate_live:
        case VmState::unmigrate:
            adopt();
            sh_.write({{path("domain.state"), "start"}});
            break;
        case VmState::restart: restart_vm(); break;
        case VmState::shutdown: graceful_shutdown(false); break;
        case VmState::stop:
            if (confirm("stop it")) hard_stop(true);
            break;
        case VmState::remove:
            // Undefined while it runs (the client's `stop` was never handled):
            // its keys are about to go and nobody would ever stop it.
            if (!confirm("destroy it before its removal")) break;
            log_.warn("VM {}: state delete while it runs here; destroying it", uuid_);
            hard_stop(false);
            break;
        case VmState::invalid: warn_unknown_state(*s.state); break;
        default: break;  // disable, fail, provision, restore: left alone
        }
        return;
    }
    switch (st) {
    case VmState::start: start_vm(&s.volumes); break;
    case VmState::migrate:
    case VmState::migrate_live:
    case VmState::unmigrate: receive(); break;
    case VmState::restart: sh_.write({{path("domain.state"), "start"}}); break;
    case VmState::shutdown:
        // Nothing runs: the shutdown is complete (the reference leaves `shutdown` forever).
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (auto c = console()) c->stop(true);
        sh_.write({{path("domain.state"), "stop"}});
        break;
    case VmState::stop:
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (auto c = console()) c->stop(true);
        break;
    case VmState::invalid: warn_unknown_state(*s.state); break;
    default: break;
    }
}

void Domain::set_fail(const std::string& reason) {
    log_.error("VM {}: {}", uuid_, reason);
    sh_.write({{path("domain.state"), "fail"}, {path("domain.failed_reason"), reason}});
}

bool Domain::write_state_from(std::initializer_list<std::string_view> expected, const std::string& value) {
    try {
        zk::Stat stat;
        auto current = sh_.zk->get(path("domain.state"), &stat);
        if (!current || std::find(expected.begin(), expected.end(), *current) == expected.end()) return false;
        zk::Transaction tx(*sh_.zk);
        tx.set(path("domain.state"), value, stat.version);
        return tx.commit() == zk::Status::ok;
    } catch (const std::exception& e) {
        log_.error("VM {}: state write failed: {}", uuid_, e.what());
        return false;
    }
}

void Domain::refresh_vnc() {
    std::string value;
    auto lv = sh_.lv.status(uuid_);
    if (lv.unknown()) return;  // unknown is not "no console": the key keeps its value
    if (lv.active()) {
        char* xml = virDomainGetXMLDesc(lv.dom.get(), 0);
        if (!xml) return;
        if (auto x = try_parse_domain_xml(xml); x && x->graphics) value = x->graphics->listen + ":" + x->graphics->port;
        free(xml);
    }
    sh_.set_existing(uuid_, path("domain.console.vnc"), value);
}

void Domain::adopt() {
    if (auto c = console()) c->start();
    sh_.running.add(uuid_);
    sh_.publish_running();  // also when the keepalive's statistics pass added it first
}

// Start (owner): a domain libvirt runs is adopted; otherwise a leftover is
// removed, the RBD locks prepared and the domain created from /xml.
void Domain::start_vm(const std::string* volumes_read) {
    if (auto c = console()) c->start();
    auto lv = sh_.lv.status(uuid_);
    if (lv.unknown()) return retry_later(Retry::libvirt, lv.error);  // before any lock is touched
    if (lv.active()) {
        // Running, paused or suspended: a QEMU holds the guest; never re-created.
        note_libvirt_state(lv.state, lv.reason);
        adopt();
        sh_.write({{path("domain.failed_reason"), ""}});
        return;
    }
    if (lv.dom) {
        // A SHUTOFF or CRASHED leftover would make createXML fail: remove it
        // before any lock is touched, so no lock of a live QEMU is ever freed.
        log_.warn("VM {}: found in state {}; destroying before start", uuid_, state_name(lv.state));
        virDomainDestroy(lv.dom.get());
        auto after = Connection::status_of(lv.dom.get());
        if (!after.inactive()) return retry_later(Retry::libvirt, after.error.empty() ? "leftover still active" : after.error);
    }
    std::vector<std::string> volumes;
    {
        std::string list;
        if (volumes_read) {
            list = *volumes_read;
        } else {
            auto read_list = sh_.get(path("domain.storage.volumes"));
            if (read_list.failed()) return retry_later();
            list = read_list.value_or("");
        }
        size_t start = 0;
        while (true) {
            auto pos = list.find(',', start);
            volumes.push_back(list.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
            if (pos == std::string::npos) break;
            start = pos + 1;
        }
    }
    if (auto reason = sh_.rbd.prepare_start(uuid_, volumes)) {
        set_fail(*reason);
        return;
    }
    auto now = sh_.get_many({path("domain.state"), path("domain.xml")});
    const Read &state = now[0], &xml = now[1];
    if (state.failed() || xml.failed()) return retry_later();
    if (state.is("fail")) return;
    if (xml.value_or("").empty()) {
        set_fail("No domain XML");
        return;
    }
    log_.info("VM {}: starting", uuid_);
    bool connection_error = false;
    if (auto err = sh_.lv.create_xml(xml.value_or(""), &connection_error)) {
        // libvirt unreachable is not the VM's failure: started again later.
        if (connection_error) return retry_later(Retry::libvirt, *err);
        set_fail(*err);
        return;
    }
    sh_.running.add(uuid_);
    sh_.publish_running();
    sh_.write({{path("domain.failed_reason"), ""}});
    log_.ok("VM {}: started", uuid_);
}

// Restart (owner, running); unlike the reference, a timed-out shutdown destroys, then starts.
void Domain::restart_vm() {
    log_.info("VM {}: restarting", uuid_);
    auto r = graceful_shutdown(true);
    if (r == ShutdownResult::aborted) return;
    if (!sh_.stopper.sleep(200ms)) return;
    start_vm(nullptr);
    write_state_from({"stop", "restart", "start"}, "start");
}

// Graceful shutdown; unlike the reference, a timed-out one destroys the domain.
Domain::ShutdownResult Domain::graceful_shutdown(bool restarting) {
    if (!confirm("shut it down")) return ShutdownResult::aborted;
    log_.info("VM {}: shutting down", uuid_);
    if (auto d = sh_.lv.lookup(uuid_)) sh_.lv.request_shutdown(d.get());
    auto finish = [&](ShutdownResult r) {
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (auto c = console()) c->stop(true);
        // A restart keeps `restart` until the VM runs again: interrupted here
        // (daemon stopped), the next daemon finishes it instead of leaving `stop`.
        if (restarting) sh_.stopper.sleep(1s);
        else write_state_from({"shutdown", "migrate", "unmigrate"}, "stop");
        return r;
    };
    using Clock = std::chrono::steady_clock;
    const int32_t confirmed = decision_->version;
    const auto deadline = Clock::now() + std::chrono::seconds(sh_.config.vm_shutdown_timeout);
    // No polling: the wait ends on a delivery of the state watch, a lifecycle
    // event of this domain, the deadline or the daemon's stop.
    for (auto seen = wake_.seen();; seen = wake_.seen()) {
        auto now = seen_state(confirmed);
        // An unreadable state is no reason to abort: keep waiting for the guest.
        if (!now.state.failed()) {
            auto st = parse_vm_state(now.state.value_or(""));
            if (st != VmState::shutdown && st != VmState::restart && st != VmState::migrate && st != VmState::unmigrate) {
                log_.info("VM {}: shutdown aborted by a state change", uuid_);
                return ShutdownResult::aborted;
            }
        }
        // Off only when libvirt says so; unknown keeps waiting (and asking).
        if (sh_.lv.status(uuid_).inactive()) {
            log_.ok("VM {}: shut down", uuid_);
            return finish(ShutdownResult::off);
        }
        if (Clock::now() >= deadline) {
            if (!confirm("destroy it after the shutdown timeout")) return ShutdownResult::aborted;
            log_.warn("VM {}: shutdown timed out after {} s; destroying", uuid_, sh_.config.vm_shutdown_timeout);
            if (!destroy_sequence()) return ShutdownResult::aborted;
            return finish(ShutdownResult::timed_out);
        }
        // libvirt is asked again now and then in case its event was lost (a
        // reconnection); ZooKeeper only when the watch cannot tell.
        auto until = std::min(deadline, Clock::now() + (now.watched ? libvirt_recheck : unwatched_recheck));
        if (!wake_.wait_until(seen, until)) return ShutdownResult::aborted;
    }
}

Domain::StateNow Domain::seen_state(int32_t since) {
    auto s = seen();
    if (s.state.failed()) {
        // The watch has not delivered (or could not be set up): read it.
        return {sh_.get(path("domain.state")), false};
    }
    // A delivery older than the value the procedure confirmed says nothing new.
    if (s.state.present() && s.version < since) return {Read::error(), true};
    return {s.state, true};
}

bool Domain::destroy_sequence() {
    auto lv = sh_.lv.status(uuid_);
    if (lv.active()) {
        virDomainPtr d = lv.dom.get();
        auto seen = wake_.seen();
        virDomainDestroy(d);
        // Destroyed again if still active 200 ms later; its STOPPED event ends the wait earlier.
        const auto until = std::chrono::steady_clock::now() + 200ms;
        lv = Connection::status_of(d);
        while (lv.active() && std::chrono::steady_clock::now() < until && wake_.wait_until(seen, until)) {
            seen = wake_.seen();
            lv = Connection::status_of(d);
        }
        if (lv.active()) {
            virDomainDestroy(d);
            lv = Connection::status_of(d);
        }
    }
    if (lv.inactive()) return true;
    retry_later(Retry::libvirt, lv.unknown() ? lv.error : std::string("still active after destroy"));
    return false;
}

// Hard stop (owner): destroy the domain.
void Domain::hard_stop(bool write_stop) {
    log_.info("VM {}: stopping", uuid_);
    if (!destroy_sequence()) return;  // not confirmed gone: nothing written, tried again
    if (sh_.running.remove(uuid_)) sh_.publish_running();
    if (write_stop) write_state_from({"stop"}, "stop");
    if (auto c = console()) c->stop(true);
}

bool Domain::acquire_unbounded(zk::Lock& lock) {
    // No timeout per the reference, but the wait ends when the daemon stops
    // (or the session closes). One wait on the predecessor, as kazoo does:
    // repeated timed attempts would lose our place in the queue each time.
    return lock.acquire(std::nullopt, [this] { return sh_.stopper.stopping(); });
}

// Migration, source side: the reference's sync-lock phases, then live or shutdown migration.
void Domain::send(const Snapshot& s, bool live_required) {
    const std::string target = s.node;
    log_.info("VM {}: migrating to {}", uuid_, target);
    zk::Lock node_lock(sh_.zk, path("domain.node"), zk::LockKind::exclusive);
    zk::Lock state_lock(sh_.zk, path("domain.state"), zk::LockKind::exclusive);
    zk::Lock sync_lock(sh_.zk, path("domain.migrate.sync_lock"), zk::LockKind::exclusive);
    if (!acquire_unbounded(node_lock) || !acquire_unbounded(state_lock)) return;
    std::string prev_lastnode;
    {
        std::lock_guard g(m_);
        prev_lastnode = prev_lastnode_;
    }
    auto abort = [&](const std::string& why) {
        log_.warn("VM {}: migration to {} aborted: {}", uuid_, target, why);
        sh_.write({{path("domain.state"), "start"}, {path("domain.node"), sh_.me},
                   {path("domain.last_node"), prev_lastnode}});
        // Every lock is released, the sync lock included (the reference leaks it).
        sync_lock.release();
        state_lock.release();
        node_lock.release();
    };
    if (s.node == s.lastnode || s.node == sh_.me) return abort("node equals lastnode or this node");
    if (!sh_.stopper.sleep(500ms)) return;
    if (!sync_lock.acquire(std::chrono::seconds(30))) return abort("peer not responding");
    auto now = read();
    if (!now) return retry_later();  // locks released by their destructors; nothing written
    if (now->node != target || now->node == sh_.me || now->node == now->lastnode) return abort("target changed");
    if (!now->state || !is_migrate(parse_vm_state(*now->state))) return abort("state changed");
    decide(*now);  // what the shutdown fallback confirms against

    bool migrated = false;
    if (s.method != "shutdown") {
        const auto dest = destination_uri(sh_.settings, target);
        sh_.migrations.acquire();
        for (int attempt = 1; attempt <= 3 && !sh_.stopper.stopping(); attempt++) {
            auto dom = sh_.lv.lookup(uuid_);
            if (!dom) break;
            auto err = migrate_live(dom.get(), dest);
            if (!err) {
                migrated = true;
                break;
            }
            log_.warn("VM {}: live migration attempt {} to {} failed: {}", uuid_, attempt, dest, *err);
            sh_.stopper.sleep(500ms);
        }
        sh_.migrations.release();
    }
    if (migrated) {
        log_.ok("VM {}: live migration to {} done", uuid_, target);
        if (auto c = console()) c->stop(true);
        if (sh_.running.remove(uuid_)) sh_.publish_running();
    } else if (live_required) {
        return abort("live migration failed and live migration is required");
    } else {
        log_.info("VM {}: migrating to {} by shutdown", uuid_, target);
        graceful_shutdown(false);
    }
    sync_lock.release();
    state_lock.release();
    node_lock.release();
}

// The receiver's phase C (its second take of the sync lock), in every round:
// no time limit. A round after the first can come before the source's turn
// (the reference's race between a client's state lock and the receiver's
// first round); the source then holds
// the sync lock for its whole transfer or shutdown fallback, however long, and
// only what it leaves when it releases says whether the VM arrived or must be
// started here. Given up only when the daemon stops, or when the state leaves
// the migration (the source's abort writes `start`; a reference source keeps
// the sync lock after an abort). `stop` is the shutdown fallback's result,
// written while the source still holds the lock: kept waiting.
bool Domain::await_source(zk::Lock& lock) {
    bool left = false;
    const int32_t since = decision_ ? decision_->version : -1;
    bool ok = lock.acquire(std::nullopt, [&] {
        if (sh_.stopper.stopping() || gone_) return true;
        auto s = seen();
        // The watch cannot tell, or tells only what came before the migration: keep waiting.
        if (s.state.failed() || (s.state.present() && s.version < since)) return false;
        auto st = parse_vm_state(s.state.value_or(""));
        left = !s.state.present() || (!is_migrate(st) && st != VmState::stop);
        return left;
    });
    if (!ok && left)
        log_.info("VM {}: state changed while waiting for the migration source; receive ended", uuid_);
    return ok;
}

// Migration, receiver side: the reference's sync-lock phases A and C.
void Domain::receive() {
    log_.info("VM {}: receiving migration", uuid_);
    const auto sync_path = path("domain.migrate.sync_lock");
    sh_.write({{sync_path, uuid_}});
    auto finish = [&] { sh_.write({{sync_path, ""}}); };
    {
        zk::Lock phase_a(sh_.zk, sync_path, zk::LockKind::exclusive);
        if (!phase_a.acquire(std::chrono::seconds(30))) {
            log_.warn("VM {}: migration source did not answer", uuid_);
            return finish();
        }
        if (!sh_.stopper.sleep(1s)) return finish();
    }
    constexpr int max_rounds = 10;
    for (int round = 0; round < max_rounds; round++) {
        zk::Lock phase_c(sh_.zk, sync_path, zk::LockKind::exclusive);
        if (!await_source(phase_c)) return finish();
        auto keys = read();
        auto state = keys && keys->state ? parse_vm_state(*keys->state) : VmState::invalid;
        auto node = keys ? keys->node : std::string();
        auto lv = sh_.lv.status(uuid_);
        const bool last = round + 1 >= max_rounds;
        if (lv.active()) {
            // Running (or paused as it was on the source). Published even if
            // the keepalive's statistics pass listed it first.
            note_libvirt_state(lv.state, lv.reason);
            sh_.running.add(uuid_);
            sh_.publish_running();
            sh_.write({{path("domain.state"), "start"}});
            log_.ok("VM {}: migration received", uuid_);
        } else if ((lv.unknown() || !keys) && !last) {
            // libvirt or ZooKeeper unreadable: decide nothing now, cycle again.
            phase_c.release();
            if (!sh_.stopper.sleep(1s)) return finish();
            continue;
        } else if (lv.unknown() || !keys) {
            log_.warn("VM {}: cannot read its {}; migration result left undecided", uuid_,
                      lv.unknown() ? "libvirt state" : "keys");
            retry_later(lv.unknown() ? Retry::libvirt : Retry::zookeeper, lv.error);
        } else if (lv.dom && node == sh_.me) {
            sh_.write({{path("domain.state"), "fail"}, {path("domain.failed_reason"), "Failed to receive migration"}});
            log_.error("VM {}: received domain is not running ({})", uuid_, state_name(lv.state));
        } else if (node == sh_.me && state == VmState::stop) {
            // The source shut the VM down: start it here.
            sh_.write({{path("domain.state"), "start"}});
        } else if (node == sh_.me && is_migrate(state) && !last) {
            // The source may not have queued yet (client-initiated race): cycle again.
            phase_c.release();
            if (!sh_.stopper.sleep(1s)) return finish();
            continue;
        } else if (node == sh_.me && is_migrate(state)) {
            // Nothing was sent yet. The state stays `migrate`, as in the reference: the
            // source may be slow (waiting for a lock, restarting) and still
            // run the VM; `fail` with this node would make it terminate its
            // copy. A VM that arrives later is adopted by the keepalive
            // collection (an active domain here in a migrate state).
            log_.warn("VM {}: nothing sent by the migration source yet; state left {} (operator: unmigrate, or "
                      "start it where it runs)", uuid_, *keys->state);
        } else {
            log_.warn("VM {}: migration aborted or failed on the source", uuid_);
        }
        break;
    }
    if (auto s = read()) {
        std::lock_guard g(m_);
        prev_lastnode_ = s->lastnode;
    }
    finish();
}

}  // namespace pvc::hv
