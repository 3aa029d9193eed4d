// The hand-over sequences (docs/wire-contract.md §5.4, core/README.md
// "Hand-over"): the reference's phases on /config/primary_node/sync_lock, so
// a reference Python coordinator and this daemon order their floating
// addresses and services through the same kazoo locks, in both directions.
// The modules' part of each phase runs inside that phase (TransitionRun);
// `primary` / `secondary` is published only after the last phase.
//
// The reference's sleeps only make the peer queue its next lock in time. We
// wait for what they wait for instead: the peer's contender showing up in
// the sync_lock (polled, bounded by at least the reference's sleep), so a
// hand-over with a present peer goes as fast as the locks let it, and one
// without a peer is not slowed at all.
#include "daemon/daemon.hpp"

#include <algorithm>
#include <regex>

#include "daemon/module_host.hpp"
#include "daemon/transition.hpp"
#include "pvc/schema.hpp"

namespace pvc {

namespace {

using std::chrono::milliseconds;

// Bounds of the waits for the peer's contender (see the file's comment).
constexpr milliseconds candidate_waits_for_old_primary{2000};  // phase A (the reference sleeps 1 s)
constexpr milliseconds candidate_waits_for_phase_b{1000};      // after A (the reference sleeps 0.1 s)
constexpr milliseconds candidate_holds_phase{1000};            // C..G (the reference sleeps 0.5 / 0.2 s)
constexpr milliseconds old_primary_waits_for_candidate{1000};  // phase 0 (the reference sleeps 0.2 s)
constexpr milliseconds old_primary_holds_b{200};               // phase B (the reference sleeps 0.2 s)
constexpr milliseconds old_primary_waits_for_next{1000};       // before C..G, a candidate seen
constexpr milliseconds old_primary_after_b{100};               // before C, no candidate seen (the reference's 0.1 s)
constexpr milliseconds candidate_end_wait{2000};               // end (the reference sleeps 2 s)
constexpr milliseconds write_requeue_after{1000};              // see take_write in take_over()
constexpr milliseconds old_primary_g_timeout{60000};           // phase G (as the reference)

// The sequence number of a lock contender's name ("" when it is none).
std::string sequence_of(const std::string& name) {
    static const std::regex re("(__lock__|__rlock__)(-?\\d{10})$");
    std::smatch m;
    return std::regex_search(name, m, re) ? m[2].str() : std::string();
}
bool is_read_contender(const std::string& name) { return name.find("__rlock__") != std::string::npos; }

const char* phase_name(TransitionPhase p) {
    static const char names[][2] = {"B", "C", "D", "E", "F", "G"};
    return names[static_cast<char>(p) - 'B'];
}

}  // namespace

bool Daemon::old_primary_expected() {
    auto nodes = zk_->children(schema::path("base.node"));
    if (!nodes) return false;
    for (const auto& n : *nodes) {
        if (n == cfg_.host.hostname) continue;
        auto r = zk_->get(schema::path("node.state.router", {n})).value_or("");
        if (r == "primary" || r == "relinquish") return true;
    }
    return false;
}

bool Daemon::wait_for_contender(bool read, const std::string& after, milliseconds bound) {
    const std::string sync = schema::path("base.config.primary_node.sync_lock");
    const auto until = std::chrono::steady_clock::now() + bound;
    for (;;) {
        if (auto kids = zk_->raw_children(sync))
            for (const auto& k : *kids) {
                std::string seq = sequence_of(k);
                if (!seq.empty() && is_read_contender(k) == read && seq > after) return true;
            }
        if (std::chrono::steady_clock::now() >= until) return false;
        if (!pause(milliseconds(10))) return false;
    }
}

// Candidate (router state `takeover`). Each step is done once: a retry after
// an interruption (ZooKeeper unreachable) takes the primary_node lock again
// and goes on with the first phase not yet done.
void Daemon::take_over() {
    log_.system("Taking over primary coordinator role");
    auto wanted = [this] { return cached_router_state() == "takeover"; };
    auto give_up = [&] { return !wanted() || stopping(); };
    const std::string sync = schema::path("base.config.primary_node.sync_lock");
    TransitionRun modules(modules_->modules(), Transition::takeover, executor_, core_strand_, transition_deadline, log_);
    // Acquires a sync_lock phase lock; false when no longer wanted, throws on an interruption.
    auto take = [&](zk::Lock& lock, std::optional<milliseconds> timeout = std::nullopt) {
        if (lock.acquire(timeout, give_up)) return true;
        if (lock.interrupted() && wanted()) throw zk::Error(zk::Status::connection_loss, "ZooKeeper unreachable");
        return false;
    };
    // A write lock of C..G queued behind the old primary's read lock: kazoo
    // 2.8.0's ReadLock (a reference node's) may wait for it although it came
    // first (it takes the last write contender, not the one before it), each
    // then waiting for the other. A write lock still waiting after
    // write_requeue_after gives its place up until the read locks before it
    // are gone, then queues again: a stall of that bound instead of a
    // deadlock; a read lock that is simply still held is waited for as before.
    auto take_write = [&](zk::Lock& w) {
        for (;;) {
            if (take(w, write_requeue_after)) return true;
            if (!wanted()) return false;
            std::vector<std::string> readers;
            if (auto kids = zk_->raw_children(sync))
                for (const auto& k : *kids)
                    if (is_read_contender(k) && !sequence_of(k).empty()) readers.push_back(k);
            log_.info("Hand-over: a write lock on {} waited {} ms for {} read lock(s); queueing again once they are "
                      "released", sync, write_requeue_after.count(), readers.size());
            for (;;) {
                auto kids = zk_->raw_children(sync);
                bool left = kids && std::any_of(readers.begin(), readers.end(), [&](const std::string& r) {
                    return std::find(kids->begin(), kids->end(), r) != kids->end();
                });
                if (!left) break;
                if (!wanted() || !pause(milliseconds(10))) return false;
            }
        }
    };
    int next = 0;      // 0 = A, 1 = B, 2..6 = C..G, 7 = end
    bool peer = false;  // the old primary's read lock was seen queued behind our phase A
    bool done = false;
    until_done("Takeover", wanted, [&] {
        // Phase 0: the primary_node lock, held to the end (contenders time out on it).
        zk::Lock primary(zk_, schema::path("base.config.primary_node"), zk::LockKind::exclusive);
        if (!primary.acquire(std::nullopt, give_up)) {
            if (primary.interrupted() && wanted()) throw zk::Error(zk::Status::connection_loss, "ZooKeeper unreachable");
            return !wanted();
        }
        zk_->ensure_path(sync);
        if (next == 0) {
            // A: held until the old primary's read lock queued behind it.
            bool expected = old_primary_expected();
            zk::Lock a(zk_, sync, zk::LockKind::write);
            if (!take(a)) return !wanted();
            std::string seq = sequence_of(a.contender());
            peer = expected && wait_for_contender(true, seq, candidate_waits_for_old_primary);
            zk_->write(sync, "");
            a.release();
            log_.debug("Hand-over phase A done ({})", peer ? "the old primary follows" : "no old primary queued");
            // Until the old primary's phase-B write lock is queued (its A is released at once).
            if (peer) wait_for_contender(false, seq, candidate_waits_for_phase_b);
            next = 1;
        }
        if (next == 1) {
            // B: waits for the old primary's phase-B write lock (its services stopped).
            zk::Lock b(zk_, sync, zk::LockKind::read);
            if (!take(b)) return !wanted();
            b.release();
            next = 2;
        }
        // The next phase's write lock, queued before this phase's is released.
        std::unique_ptr<zk::Lock> queued;
        auto next_lock = [&] {
            return queued ? std::move(queued) : std::make_unique<zk::Lock>(zk_, sync, zk::LockKind::write);
        };
        for (; next <= 6; ++next) {
            TransitionPhase p = takeover_phases[next - 2];
            auto w = next_lock();
            if (!take_write(*w)) return !wanted();
            log_.debug("Hand-over phase {} (takeover)", phase_name(p));
            modules.phase(p);
            // Held until the old primary's read lock of this phase is queued
            // behind it, and our next phase's write lock queued behind that
            // before this one goes: the old primary's part of this phase then
            // comes after ours and before our next, however fast it is.
            if (peer) wait_for_contender(true, sequence_of(w->contender()), candidate_holds_phase);
            zk_->write(sync, "");
            queued = std::make_unique<zk::Lock>(zk_, sync, zk::LockKind::write);
            queued->enqueue();
            w->release();
        }
        if (next == 7) {
            // end: the reference sleeps 2 s so its peer's phase G ends first;
            // a write lock queued behind the peer's G read lock waits exactly for that.
            auto end_lock = next_lock();
            zk::Lock& end = *end_lock;
            if (take(end, candidate_end_wait)) {
                zk_->write(sync, "");
                end.release();
            } else if (!wanted()) {
                return true;
            }
            next = 8;
        }
        done = write_own("node.state.router", "primary");
        return done;
    });
    if (done) log_.ok("Node is now primary");
}

// Old primary (router state `relinquish`).
void Daemon::relinquish() {
    log_.system("Relinquishing primary coordinator role");
    auto wanted = [this] { return cached_router_state() == "relinquish"; };
    auto give_up = [&] { return !wanted() || stopping(); };
    const std::string sync = schema::path("base.config.primary_node.sync_lock");
    TransitionRun modules(modules_->modules(), Transition::relinquish, executor_, core_strand_, transition_deadline,
                          log_);
    auto take = [&](zk::Lock& lock, std::optional<milliseconds> timeout = std::nullopt) {
        if (lock.acquire(timeout, give_up)) return true;
        if (lock.interrupted() && wanted()) throw zk::Error(zk::Status::connection_loss, "ZooKeeper unreachable");
        return false;
    };
    int next = 0;           // 0 = phase 0, 1 = A, 2 = B, 3..6 = C..F, 7 = G
    bool candidate = false;  // the candidate's contenders were seen
    std::string last;        // the sequence of our last phase lock
    // Before each of C..G: until the candidate's write lock of that phase is
    // queued after our last lock, so our part comes after its part.
    auto after_candidate = [&](milliseconds otherwise) {
        wait_for_contender(false, last, candidate ? old_primary_waits_for_next : otherwise);
    };
    bool done = false;
    until_done("Relinquish", wanted, [&] {
        zk_->ensure_path(sync);
        if (next == 0) {
            // 0: until the candidate's phase-A write lock is there.
            candidate = wait_for_contender(false, "", old_primary_waits_for_candidate);
            next = 1;
        }
        if (next == 1) {
            // A: after the candidate's phase A.
            zk::Lock a(zk_, sync, zk::LockKind::read);
            if (!take(a)) return !wanted();
            a.release();
            next = 2;
        }
        if (next == 2) {
            // B: the services stop under our write lock, the candidate's read lock waiting.
            zk::Lock b(zk_, sync, zk::LockKind::write);
            if (!take(b)) return !wanted();
            last = sequence_of(b.contender());
            if (wait_for_contender(true, last, old_primary_holds_b)) candidate = true;
            log_.debug("Hand-over phase B (relinquish)");
            modules.phase(TransitionPhase::B);
            zk_->write(sync, "");
            b.release();
            next = 3;
        }
        for (; next <= 6; ++next) {
            // C..F: each after the candidate's same phase.
            TransitionPhase p = relinquish_phases[next - 2];
            after_candidate(p == TransitionPhase::C ? old_primary_after_b : milliseconds(0));
            zk::Lock r(zk_, sync, zk::LockKind::read);
            if (!take(r)) return !wanted();
            last = sequence_of(r.contender());
            log_.debug("Hand-over phase {} (relinquish)", phase_name(p));
            modules.phase(p);
            r.release();
        }
        if (next == 7) {
            // G: after the candidate's phase G, at most 60 s (a timeout is ignored).
            after_candidate(milliseconds(0));
            zk::Lock g(zk_, sync, zk::LockKind::read);
            if (take(g, old_primary_g_timeout)) g.release();
            else if (!wanted()) return true;
            next = 8;
        }
        done = write_own("node.state.router", "secondary");
        return done;
    });
    if (done) log_.ok("Node is now secondary");
}

}  // namespace pvc
