#include "shared.hpp"

#include <algorithm>

#include "pvc/schema.hpp"

namespace pvc::hv {

struct Stopper::Waiter {
    std::mutex m;
    std::condition_variable cv;
    uint64_t count = 0;
    bool stopping = false;
};

void Stopper::add(const std::shared_ptr<Waiter>& w) {
    std::lock_guard g(m_);
    std::erase_if(waiters_, [](const auto& weak) { return weak.expired(); });
    if (stopping_) {
        std::lock_guard wg(w->m);
        w->stopping = true;
    }
    waiters_.push_back(w);
}

void Stopper::stop() {
    std::lock_guard g(m_);
    stopping_ = true;
    cv_.notify_all();
    for (auto& weak : waiters_) {
        if (auto w = weak.lock()) {
            std::lock_guard wg(w->m);
            w->stopping = true;
            w->cv.notify_all();
        }
    }
}

Wakeup::Wakeup(Stopper& stopper) : w_(std::make_shared<Stopper::Waiter>()) { stopper.add(w_); }

uint64_t Wakeup::seen() const {
    std::lock_guard g(w_->m);
    return w_->count;
}

void Wakeup::notify() {
    std::lock_guard g(w_->m);
    w_->count++;
    w_->cv.notify_all();
}

bool Wakeup::wait_until(uint64_t seen, Clock::time_point deadline) {
    std::unique_lock l(w_->m);
    w_->cv.wait_until(l, deadline, [&] { return w_->stopping || w_->count != seen; });
    return !w_->stopping;
}

bool RunningList::add(const std::string& uuid) {
    std::lock_guard g(m_);
    if (std::find(list_.begin(), list_.end(), uuid) != list_.end()) return false;
    list_.push_back(uuid);
    return true;
}

bool RunningList::remove(const std::string& uuid) {
    std::lock_guard g(m_);
    auto it = std::find(list_.begin(), list_.end(), uuid);
    if (it == list_.end()) return false;
    list_.erase(it);
    return true;
}

bool RunningList::contains(const std::string& uuid) const {
    std::lock_guard g(m_);
    return std::find(list_.begin(), list_.end(), uuid) != list_.end();
}

std::vector<std::string> RunningList::snapshot() const {
    std::lock_guard g(m_);
    return list_;
}

std::string RunningList::text() const {
    std::lock_guard g(m_);
    std::string out;
    for (const auto& u : list_) {
        if (!out.empty()) out += ' ';
        out += u;
    }
    return out;
}

Read Shared::get(const std::string& path, zk::Stat* stat) const {
    try {
        auto v = zk->get(path, stat);
        return v ? Read::of(std::move(*v)) : Read::absent();
    } catch (const std::exception& e) {
        log.debug("read of {} failed: {}", path, e.what());
        return Read::error();
    }
}

std::vector<Read> Shared::get_many(const std::vector<std::string>& paths, std::vector<zk::Stat>* stats) const {
    std::vector<Read> out;
    out.reserve(paths.size());
    try {
        for (auto& v : zk->get_many(paths, stats)) out.push_back(v ? Read::of(std::move(*v)) : Read::absent());
    } catch (const std::exception& e) {
        log.debug("read of {} failed: {}", paths.empty() ? std::string() : paths.front(), e.what());
        out.assign(paths.size(), Read::error());
    }
    return out;
}

bool Shared::write(const std::vector<zk::KeyValue>& kvs) const {
    try {
        if (zk->write(kvs)) return true;
    } catch (const std::exception& e) {
        log.error("ZooKeeper write failed: {}", e.what());
        return false;
    }
    log.error("ZooKeeper write of {} failed", kvs.empty() ? std::string("nothing") : kvs.front().first);
    return false;
}

bool Shared::set_existing(const std::string& uuid, const std::string& key_path, const std::string& value) const {
    try {
        zk::Transaction tx(*zk);
        tx.check(schema::path("domain.name", {uuid}), -1).set(key_path, value);
        return tx.commit() == zk::Status::ok;
    } catch (const std::exception&) {
        return false;
    }
}

void Shared::publish_running() const {
    std::lock_guard g(publish_m);
    const auto key = schema::path("node.running_domains", {me});
    const auto text = running.text();
    // Compared with what ZooKeeper holds, not with what this object last wrote:
    // the keepalive also writes the list (and a failed read just writes).
    if (get(key).is(text)) return;
    try {
        zk::Transaction tx(*zk);
        tx.set(key, text, -1);
        if (tx.commit() == zk::Status::ok) return;
    } catch (const std::exception&) {
    }
    write({{key, text}});
}

}  // namespace pvc::hv
