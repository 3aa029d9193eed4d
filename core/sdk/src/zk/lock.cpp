// kazoo-compatible Lock / WriteLock / ReadLock (docs/wire-contract.md §4.1).
#include "zk/session_impl.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <random>
#include <regex>

namespace pvc::zk {

namespace {

constexpr const char* kLockMarker = "__lock__";
constexpr const char* kReadMarker = "__rlock__";

std::string random_hex(size_t n) {
    static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; ++i) out += hex[rng() & 0xf];
    return out;
}

// 32 lowercase hex digits of a random (version 4) UUID, as Python's uuid4().hex.
std::string uuid4_hex() {
    std::string h = random_hex(32);
    h[12] = '4';
    h[16] = "89ab"[std::stoi(h.substr(16, 1), nullptr, 16) & 3];
    return h;
}

// A time-based-looking (version 1) UUID string for the contender's data.
std::string uuid1_string() {
    std::string h = random_hex(32);
    h[12] = '1';
    h[16] = "89ab"[std::stoi(h.substr(16, 1), nullptr, 16) & 3];
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

struct Contender {
    std::string name;
    std::string marker;
    std::string seq;
};

std::vector<Contender> contenders(const std::vector<std::string>& kids) {
    static const std::regex re("(__lock__|__rlock__)(-?\\d{10})$");
    std::vector<Contender> out;
    for (const auto& k : kids) {
        std::smatch m;
        if (std::regex_search(k, m, re)) out.push_back({k, m[1].str(), m[2].str()});
    }
    return out;
}

}  // namespace

Lock::Lock(std::shared_ptr<Session> session, std::string path, LockKind kind, std::string identifier)
    : session_(std::move(session)), path_(std::move(path)), kind_(kind), identifier_(std::move(identifier)) {
    if (identifier_.empty()) identifier_ = uuid1_string();
    prefix_ = uuid4_hex() + (kind_ == LockKind::read ? kReadMarker : kLockMarker);
}

Lock::~Lock() {
    try {
        release();
    } catch (const std::exception& e) {
        spdlog::warn("lock {}: release failed: {}", path_, e.what());
    }
}

bool Lock::acquire(std::optional<std::chrono::milliseconds> timeout) { return acquire(timeout, StopCheck{}); }

bool Lock::acquire(std::optional<std::chrono::milliseconds> timeout, std::stop_token stop) {
    return acquire(timeout, StopCheck([stop] { return stop.stop_requested(); }));
}

// Removes a contender of ours; when the connection is down, the session does
// it once it is back (a left-over contender would block everyone after us).
static void remove_contender(detail::SessionImpl& impl, const std::string& full) {
    Status s = impl.remove(full);
    if (s == Status::connection_loss || s == Status::timeout) {
        spdlog::warn("lock contender {}: delete failed ({}); it is removed once ZooKeeper is reachable again", full,
                     to_string(s));
        impl.remove_when_reconnected(full);
    } else if (s != Status::ok && s != Status::no_node && s != Status::closed && s != Status::session_expired) {
        throw Error(s, "ZooKeeper delete " + full + ": " + to_string(s));
    }
}

bool Lock::acquire(std::optional<std::chrono::milliseconds> timeout, const StopCheck& stop) {
    using Clock = std::chrono::steady_clock;
    if (held()) return true;  // not re-entrant: a second acquire of a held Lock is a no-op
    struct Dequeue {
        bool& queued;
        ~Dequeue() { queued = false; }  // held, or given up: no longer only queued
    } dequeue{queued_};
    interrupted_ = false;
    auto* impl = dynamic_cast<detail::SessionImpl*>(session_.get());
    if (!impl) throw Error(Status::other, "zk::Lock needs a session from zk::Session::connect");
    const auto deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
    auto expired = [&] { return Clock::now() >= deadline || (stop && stop()); };
    auto give_up = [&] {
        if (!node_.empty()) {
            try {
                remove_contender(*impl, path_ + "/" + node_);
            } catch (...) {
            }
        }
        node_.clear();
        return false;
    };

    bool create_tried = false;
    for (;;) {
        if (!session_ || impl->options().hosts.empty()) return give_up();
        try {
            // Step 1/2 (and again if our contender vanished with an expired session).
            if (node_.empty()) {
                session_->ensure_path(path_);
                if (create_tried) {
                    // Step 7: an earlier create may have succeeded with its reply lost.
                    if (auto kids = session_->raw_children(path_))
                        for (const auto& k : *kids)
                            if (k.rfind(prefix_, 0) == 0) node_ = k;
                }
                if (node_.empty()) {
                    create_tried = true;
                    std::string created = session_->create(path_ + "/" + prefix_, identifier_, true, true);
                    node_ = created.substr(path_.size() + 1);
                }
            }
            // Step 3.
            auto kids = session_->raw_children(path_);
            auto all = contenders(kids ? *kids : std::vector<std::string>{});
            const Contender* self = nullptr;
            for (const auto& c : all)
                if (c.name == node_) self = &c;
            if (!self) {  // our ephemeral is gone (session expired): contend again
                node_.clear();
                continue;
            }
            const Contender* pred = nullptr;
            for (const auto& c : all) {
                bool blocks = c.marker == kLockMarker || (kind_ == LockKind::write && c.marker == kReadMarker);
                if (!blocks || c.name == node_ || !(c.seq < self->seq)) continue;
                if (!pred || pred->seq < c.seq) pred = &c;
            }
            if (!pred) return true;  // Step 4: held.
            if (expired()) return give_up();
            // Step 4: wait on the predecessor only; our contender keeps its place.
            switch (impl->wait_for_change(path_ + "/" + pred->name, deadline, stop)) {
                case detail::WaitResult::changed: break;
                case detail::WaitResult::timeout: return give_up();  // Step 5
                case detail::WaitResult::closed: node_.clear(); return false;
            }
        } catch (const Error& e) {
            if (e.status == Status::closed) {
                node_.clear();
                return false;
            }
            interrupted_ = true;
            if (expired()) return give_up();
            spdlog::warn("lock {}: {}; retrying", path_, e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (expired()) return give_up();
        }
    }
}

void Lock::enqueue() {
    if (!node_.empty()) return;
    session_->ensure_path(path_);
    try {
        std::string created = session_->create(path_ + "/" + prefix_, identifier_, true, true);
        node_ = created.substr(path_.size() + 1);
    } catch (const Error&) {
        // Step 7: the create may have succeeded with its reply lost.
        if (auto kids = session_->raw_children(path_))
            for (const auto& k : *kids)
                if (k.rfind(prefix_, 0) == 0) node_ = k;
        if (node_.empty()) throw;
    }
    queued_ = true;
}

void Lock::release() {
    if (node_.empty()) return;
    std::string full = path_ + "/" + node_;
    node_.clear();
    if (auto* impl = dynamic_cast<detail::SessionImpl*>(session_.get())) remove_contender(*impl, full);
}

}  // namespace pvc::zk
