#include "domain.hpp"

#include <libvirt/libvirt.h>

#include <algorithm>

#include "domain_xml.hpp"
#include "migration.hpp"
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

namespace {
bool is_migrate(VmState s) { return s == VmState::migrate || s == VmState::migrate_live || s == VmState::unmigrate; }
}  // namespace

Domain::Domain(Shared& shared, std::string uuid)
    : sh_(shared), uuid_(std::move(uuid)), log_(shared.log.child(shared.log.prefix())), strand_(shared.ex.make_strand()) {}

std::string Domain::path(std::string_view key) const { return schema::path(key, {uuid_}); }

Domain::Cached Domain::cached() const {
    std::lock_guard g(m_);
    return cached_;
}

void Domain::ensure_console(const std::string& name) {
    if (name.empty() || name == console_name_) return;
    if (console_) console_->stop(false);
    console_name_ = name;
    std::filesystem::path file;
    if (!sh_.config.console_log_directory.empty()) file = sh_.config.console_log_directory / (name + ".log");
    console_ = std::make_shared<ConsoleLog>(sh_.zk, sh_.ex, strand_, uuid_, file, sh_.config.console_log_lines);
    console_->prepare();
}

void Domain::attach() {
    auto s = read();
    {
        std::lock_guard g(m_);
        prev_lastnode_ = s.lastnode;
    }
    remember(s);
    ensure_console(s.name);
    std::weak_ptr<Domain> weak = weak_from_this();
    try {
        watch_ = sh_.zk->watch_data(path("domain.state"), [weak](const std::optional<std::string>&, const zk::Stat&) {
            if (auto self = weak.lock()) self->request_dispatch();
        });
    } catch (const std::exception& e) {
        log_.error("VM {}: cannot watch its state: {}", uuid_, e.what());
    }
}

void Domain::detach() {
    gone_ = true;
    if (watch_) watch_->cancel();
    auto self = shared_from_this();
    boost::asio::post(sh_.procedures, [self] {
        if (self->console_) self->console_->stop(false);
    });
}

void Domain::stop_console() {
    if (console_) console_->stop(true);
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
        boost::asio::post(self->sh_.procedures, [self] {
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

Domain::Snapshot Domain::read() {
    Snapshot s;
    s.state = sh_.get(path("domain.state"));
    s.node = sh_.get(path("domain.node")).value_or("");
    s.lastnode = sh_.get(path("domain.last_node")).value_or("");
    s.method = sh_.get(path("domain.meta.migrate_method")).value_or("none");
    s.name = sh_.get(path("domain.name")).value_or("");
    s.xml = sh_.get(path("domain.xml")).value_or("");
    return s;
}

void Domain::remember(const Snapshot& s) {
    long mem = 0;
    if (auto x = parse_domain_xml(s.xml)) mem = x->memory_mib;
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
    auto s = read();
    if (!s.state) return;  // being deleted (or not yet complete): nothing to do
    remember(s);
    ensure_console(s.name);
    auto st = parse_vm_state(*s.state);
    bool running = sh_.lv.running(uuid_);
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
        log_.info("VM {}: running here but assigned to {}; terminating", uuid_, s.node);
        destroy_sequence();
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (console_) console_->stop(true);
        break;
    }
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
        case VmState::stop: hard_stop(true); break;
        case VmState::invalid: set_fail("Invalid state '" + *s.state + "'"); break;
        default: break;  // disable, fail, provision, restore, delete: left alone
        }
        return;
    }
    switch (st) {
    case VmState::start: start_vm(); break;
    case VmState::migrate:
    case VmState::migrate_live:
    case VmState::unmigrate: receive(); break;
    case VmState::restart: sh_.write({{path("domain.state"), "start"}}); break;
    case VmState::shutdown:
        // Nothing runs: the shutdown is complete (the reference leaves `shutdown` forever).
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (console_) console_->stop(true);
        sh_.write({{path("domain.state"), "stop"}});
        break;
    case VmState::stop:
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (console_) console_->stop(true);
        break;
    case VmState::invalid: set_fail("Invalid state '" + *s.state + "'"); break;
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
    if (auto d = sh_.lv.lookup(uuid_)) {
        int st = 0, reason = 0;
        if (virDomainGetState(d.get(), &st, &reason, 0) == 0 && st == VIR_DOMAIN_RUNNING) {
            if (char* xml = virDomainGetXMLDesc(d.get(), 0)) {
                if (auto x = parse_domain_xml(xml); x && x->graphics) value = *x->graphics;
                free(xml);
            }
        }
    }
    sh_.set_existing(uuid_, path("domain.console.vnc"), value);
}

void Domain::adopt() {
    if (console_) console_->start();
    if (sh_.running.add(uuid_)) sh_.publish_running();
}

// §9.1
void Domain::start_vm() {
    if (console_) console_->start();
    if (auto d = sh_.lv.lookup(uuid_)) {
        int st = 0, reason = 0;
        if (virDomainGetState(d.get(), &st, &reason, 0) == 0 && st == VIR_DOMAIN_RUNNING) {
            adopt();
            sh_.write({{path("domain.failed_reason"), ""}});
            return;
        }
        // A leftover (paused, crashed...) object would make createXML fail: remove it
        // before any lock is touched, so no lock of a live QEMU is ever freed.
        log_.warn("VM {}: found in state {}; destroying before start", uuid_, state_name(st));
        virDomainDestroy(d.get());
    }
    std::vector<std::string> volumes;
    {
        auto list = sh_.get(path("domain.storage.volumes")).value_or("");
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
    if (sh_.get(path("domain.state")) == std::optional<std::string>("fail")) return;
    auto xml = sh_.get(path("domain.xml"));
    if (!xml || xml->empty()) {
        set_fail("No domain XML");
        return;
    }
    log_.info("VM {}: starting", uuid_);
    if (auto err = sh_.lv.create_xml(*xml)) {
        set_fail(*err);
        return;
    }
    if (sh_.running.add(uuid_)) sh_.publish_running();
    sh_.write({{path("domain.failed_reason"), ""}});
    log_.ok("VM {}: started", uuid_);
}

// §9.2, with the recommendation: a timed-out shutdown destroys, then starts.
void Domain::restart_vm() {
    log_.info("VM {}: restarting", uuid_);
    auto r = graceful_shutdown(true);
    if (r == ShutdownResult::aborted) return;
    if (!sh_.stopper.sleep(200ms)) return;
    start_vm();
    write_state_from({"stop", "restart", "start"}, "start");
}

// §9.3 (recommendation: destroy on timeout).
Domain::ShutdownResult Domain::graceful_shutdown(bool restarting) {
    log_.info("VM {}: shutting down", uuid_);
    if (auto d = sh_.lv.lookup(uuid_)) virDomainShutdown(d.get());
    auto finish = [&](ShutdownResult r) {
        if (sh_.running.remove(uuid_)) sh_.publish_running();
        if (console_) console_->stop(true);
        // A restart keeps `restart` until the VM runs again: interrupted here
        // (daemon stopped), the next daemon finishes it instead of leaving `stop`.
        if (restarting) sh_.stopper.sleep(1s);
        else write_state_from({"shutdown", "migrate", "unmigrate"}, "stop");
        return r;
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(sh_.config.vm_shutdown_timeout);
    while (true) {
        auto st = parse_vm_state(sh_.get(path("domain.state")).value_or(""));
        if (st != VmState::shutdown && st != VmState::restart && st != VmState::migrate && st != VmState::unmigrate) {
            log_.info("VM {}: shutdown aborted by a state change", uuid_);
            return ShutdownResult::aborted;
        }
        if (!sh_.lv.running(uuid_)) {
            log_.ok("VM {}: shut down", uuid_);
            return finish(ShutdownResult::off);
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            log_.warn("VM {}: shutdown timed out after {} s; destroying", uuid_, sh_.config.vm_shutdown_timeout);
            destroy_sequence();
            return finish(ShutdownResult::timed_out);
        }
        if (!sh_.stopper.sleep(200ms)) return ShutdownResult::aborted;
    }
}

void Domain::destroy_sequence() {
    if (auto d = sh_.lv.lookup(uuid_)) {
        virDomainDestroy(d.get());
        sh_.stopper.sleep(200ms);
        int st = 0, reason = 0;
        if (virDomainGetState(d.get(), &st, &reason, 0) == 0 && st == VIR_DOMAIN_RUNNING) virDomainDestroy(d.get());
    }
}

// §9.4
void Domain::hard_stop(bool write_stop) {
    log_.info("VM {}: stopping", uuid_);
    destroy_sequence();
    if (sh_.running.remove(uuid_)) sh_.publish_running();
    if (write_stop) write_state_from({"stop"}, "stop");
    if (console_) console_->stop(true);
}

bool Domain::acquire_unbounded(zk::Lock& lock) {
    // No timeout per the reference, but the wait ends when the daemon stops.
    while (!sh_.stopper.stopping()) {
        if (lock.acquire(std::chrono::milliseconds(2000))) return true;
        if (!sh_.zk->connected()) sh_.stopper.sleep(200ms);
    }
    return false;
}

// §10.3
void Domain::send(const Snapshot& s, bool live_required) {
    const std::string target = sh_.get(path("domain.node")).value_or("");
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
    auto node_now = sh_.get(path("domain.node")).value_or("");
    auto lastnode_now = sh_.get(path("domain.last_node")).value_or("");
    if (node_now != target || node_now == sh_.me || node_now == lastnode_now) return abort("target changed");
    if (!is_migrate(parse_vm_state(sh_.get(path("domain.state")).value_or("")))) return abort("state changed");

    bool migrated = false;
    if (s.method != "shutdown") {
        const auto dest = destination_uri(sh_.config, target);
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
        if (console_) console_->stop(true);
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

// §10.4
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
        if (round == 0) {
            if (!acquire_unbounded(phase_c)) return finish();
        } else if (!phase_c.acquire(std::chrono::seconds(30))) {
            return finish();
        }
        auto state = parse_vm_state(sh_.get(path("domain.state")).value_or(""));
        auto node = sh_.get(path("domain.node")).value_or("");
        auto st = sh_.lv.state(uuid_);
        if (st == VIR_DOMAIN_RUNNING) {
            if (sh_.running.add(uuid_)) sh_.publish_running();
            sh_.write({{path("domain.state"), "start"}});
            log_.ok("VM {}: migration received", uuid_);
        } else if (st) {
            sh_.write({{path("domain.state"), "fail"}, {path("domain.failed_reason"), "Failed to receive migration"}});
            log_.error("VM {}: received domain is not running", uuid_);
        } else if (node == sh_.me && state == VmState::stop) {
            // The source shut the VM down: start it here.
            sh_.write({{path("domain.state"), "start"}});
        } else if (node == sh_.me && is_migrate(state) && round + 1 < max_rounds) {
            // The source may not have queued yet (client-initiated race, §10.5): cycle again.
            phase_c.release();
            if (!sh_.stopper.sleep(1s)) return finish();
            continue;
        } else if (node == sh_.me && is_migrate(state)) {
            // Nothing was sent (the source does not run it): end in a defined state, not in `migrate`.
            sh_.write({{path("domain.state"), "fail"},
                       {path("domain.failed_reason"), "Migration source did not send the VM"}});
            log_.error("VM {}: nothing was sent by the migration source", uuid_);
        } else {
            log_.warn("VM {}: migration aborted or failed on the source", uuid_);
        }
        break;
    }
    {
        auto s = read();
        std::lock_guard g(m_);
        prev_lastnode_ = s.lastnode;
    }
    finish();
}

}  // namespace pvc::hv
