#include "shared.hpp"

#include <algorithm>

#include "pvc/schema.hpp"

namespace pvc::hv {

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
