#include "cluster_view.hpp"

#include <algorithm>
#include <set>

namespace pvc::api {

namespace {

std::vector<std::string_view> split_path(std::string_view p) {
    std::vector<std::string_view> out;
    size_t pos = 1;
    while (pos <= p.size()) {
        size_t s = p.find('/', pos);
        if (s == std::string_view::npos) s = p.size();
        out.push_back(p.substr(pos, s - pos));
        pos = s + 1;
    }
    return out;
}

// Containers of the schema-10 tree the API reads ("*" = any one name).
const std::vector<std::vector<std::string_view>>& container_patterns() {
    static const std::vector<std::vector<std::string_view>> p = {
        {"config"},
        {"nodes"}, {"nodes", "*"}, {"nodes", "*", "monitoring_data"}, {"nodes", "*", "monitoring_data", "*"},
        {"domains"}, {"domains", "*"}, {"domains", "*", "tags"}, {"domains", "*", "tags", "*"},
        {"networks"}, {"networks", "*"}, {"networks", "*", "dhcp4_reservations"},
        {"networks", "*", "dhcp4_reservations", "*"}, {"networks", "*", "dhcp4_leases"},
        {"networks", "*", "dhcp4_leases", "*"}, {"networks", "*", "firewall_rules"},
        {"networks", "*", "firewall_rules", "*"}, {"networks", "*", "firewall_rules", "*", "*"},
        {"ceph"}, {"ceph", "osds"}, {"ceph", "osds", "*"}, {"ceph", "osds", "*", "fsid"},
        {"ceph", "pools"}, {"ceph", "pools", "*"},
        {"ceph", "volumes"}, {"ceph", "volumes", "*"}, {"ceph", "volumes", "*", "*"},
        {"ceph", "snapshots"}, {"ceph", "snapshots", "*"}, {"ceph", "snapshots", "*", "*"},
        {"ceph", "snapshots", "*", "*", "*"},
    };
    return p;
}

bool matches(const std::vector<std::string_view>& segs, const std::vector<std::string_view>& pattern) {
    if (segs.size() != pattern.size()) return false;
    for (size_t i = 0; i < segs.size(); ++i)
        if (pattern[i] != "*" && pattern[i] != segs[i]) return false;
    return true;
}

std::string object_root(const std::string& path) {
    auto segs = split_path(path);
    if (segs.size() < 2) return "/" + std::string(segs.empty() ? "" : segs[0]);
    return "/" + std::string(segs[0]) + "/" + std::string(segs[1]);
}

const char* const roots[] = {"/config", "/nodes", "/domains", "/networks", "/ceph"};

thread_local uint64_t partial_reads_here = 0;

}  // namespace

uint64_t ClusterView::partial_reads() { return partial_reads_here; }

bool is_container(const std::string& path) {
    auto segs = split_path(path);
    for (const auto& p : container_patterns())
        if (matches(segs, p)) return true;
    return false;
}

bool is_excluded(const std::string& path) {
    auto segs = split_path(path);
    if (!segs.empty() && segs[0] == "logs") return true;
    return segs.size() == 3 && segs[0] == "domains" && segs[2] == "consolelog";
}

WriterFirstMutex::WriterFirstMutex() {
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&rw_, &a);
    pthread_rwlockattr_destroy(&a);
}
WriterFirstMutex::~WriterFirstMutex() { pthread_rwlock_destroy(&rw_); }
void WriterFirstMutex::lock() { pthread_rwlock_wrlock(&rw_); }
void WriterFirstMutex::unlock() { pthread_rwlock_unlock(&rw_); }
void WriterFirstMutex::lock_shared() { pthread_rwlock_rdlock(&rw_); }
void WriterFirstMutex::unlock_shared() { pthread_rwlock_unlock(&rw_); }

ClusterView::ClusterView(std::shared_ptr<zk::Session> zk) : zk_(std::move(zk)) {}
ClusterView::~ClusterView() { stop(); }

void ClusterView::start() {
    {
        std::lock_guard g(feed_m_);
        if (feeding_) return;
        feeding_ = true;
        for (const char* r : roots) queue_.emplace_back(r);
    }
    feeder_ = std::thread([this] { feed(); });
}

void ClusterView::enqueue(const std::string& path) {
    std::lock_guard g(feed_m_);
    queue_.push_back(path);
    feed_cv_.notify_all();
}

void ClusterView::feed() {
    for (;;) {
        std::string path;
        {
            std::unique_lock l(feed_m_);
            bool work = feed_cv_.wait_for(l, std::chrono::seconds(1), [&] {
                return feed_stop_ || (!queue_.empty() && in_flight_ < in_flight_cap);
            });
            if (feed_stop_) return;
            if (!work) {
                l.unlock();
                heal();
                continue;
            }
            path = std::move(queue_.front());
            queue_.pop_front();
            in_flight_ += is_container(path) ? 2 : 1;
        }
        size_t armed = 0;
        try {
            armed = add(path);
        } catch (const std::exception&) {
            // The session is closing: nothing more to arm.
        }
        size_t expected = is_container(path) ? 2 : 1;
        if (armed < expected) {
            std::lock_guard g(feed_m_);
            in_flight_ -= std::min(in_flight_, expected - armed);
            if (in_flight_ == 0) ready_cv_.notify_all();
        }
    }
}

// A watch armed while the session was flapping (taken over, expired) may
// have had its first read fail after the session's re-arming pass: it would
// never answer. One silent for 10 s while the session is connected is armed
// again (its children, if any, stay mirrored; the container's children
// watch lists them again).
void ClusterView::heal() {
    if (!zk_->connected()) return;
    auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<zk::Watch>> cancel;
    std::vector<std::string> again;
    size_t unseen = 0;
    {
        std::unique_lock<WriterFirstMutex> l(m_);
        if (stopped_) return;
        for (auto it = entries_.begin(); it != entries_.end();) {
            Entry& e = it->second;
            bool silent = !e.data_seen || (e.container && !e.children_seen);
            if (!silent || !e.data_watch || now - e.armed < std::chrono::seconds(10)) {
                ++it;
                continue;
            }
            unseen += (e.data_seen ? 0 : 1) + (e.container && !e.children_seen ? 1 : 0);
            cancel.push_back(std::move(e.data_watch));
            if (e.children_watch) cancel.push_back(std::move(e.children_watch));
            again.push_back(it->first);
            it = entries_.erase(it);
        }
    }
    if (again.empty()) return;
    watch_count_ -= cancel.size();
    for (auto& w : cancel) w->cancel();
    std::lock_guard g(feed_m_);
    in_flight_ -= std::min(in_flight_, unseen);
    for (auto& p : again) queue_.push_back(std::move(p));
    feed_cv_.notify_all();
}

void ClusterView::stop() {
    {
        std::lock_guard g(feed_m_);
        feed_stop_ = true;
        feed_cv_.notify_all();
    }
    if (feeder_.joinable()) feeder_.join();
    std::vector<std::shared_ptr<zk::Watch>> cancel;
    {
        std::unique_lock<WriterFirstMutex> l(m_);
        if (stopped_) return;
        stopped_ = true;
        for (auto& [p, e] : entries_) {
            if (e.data_watch) cancel.push_back(std::move(e.data_watch));
            if (e.children_watch) cancel.push_back(std::move(e.children_watch));
        }
    }
    for (auto& w : cancel) w->cancel();
}

bool ClusterView::ready() const {
    std::lock_guard g(feed_m_);
    // A latch: once the first load is complete, later arrivals (new VMs
    // being armed) never make requests wait.
    if (feeding_ && queue_.empty() && in_flight_ == 0) loaded_ = true;
    return loaded_;
}

bool ClusterView::wait_ready(std::chrono::milliseconds timeout) const {
    auto until = std::chrono::steady_clock::now() + timeout;
    std::unique_lock l(ready_m_);
    while (!ready()) {
        if (ready_cv_.wait_until(l, std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds(50))) ==
                std::cv_status::timeout &&
            std::chrono::steady_clock::now() >= until)
            return ready();
    }
    return true;
}

bool ClusterView::wait_settled(std::chrono::milliseconds timeout) const {
    auto until = std::chrono::steady_clock::now() + timeout;
    std::unique_lock l(ready_m_);
    for (;;) {
        {
            std::lock_guard g(feed_m_);
            if (queue_.empty() && in_flight_ == 0) return true;
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= until) return false;
        // seen() notifies under feed_m_, not ready_m_: a short poll covers a
        // notification missed between the check and the wait.
        ready_cv_.wait_until(l, std::min(until, now + std::chrono::milliseconds(10)));
    }
}

bool ClusterView::listed_not_loaded(const std::string& path) const {
    if (is_excluded(path)) return false;
    auto slash = path.rfind('/');
    if (slash == 0 || slash == std::string::npos) return false;  // a root: loaded before ready()
    std::string parent = path.substr(0, slash);
    auto it = entries_.find(parent);
    if (it == entries_.end()) return listed_not_loaded(parent);
    const Entry& p = it->second;
    if (!p.container) return false;
    if (!p.children_seen) return true;
    return std::binary_search(p.children.begin(), p.children.end(), path.substr(slash + 1));
}

size_t ClusterView::size() const {
    std::shared_lock<WriterFirstMutex> l(m_);
    return entries_.size();
}

// Returns the watches whose first answer is accounted for (armed, or
// counted by erase_subtree); 0 when the path was there already.
size_t ClusterView::add(const std::string& path) {
    bool container = is_container(path);
    {
        std::unique_lock<WriterFirstMutex> l(m_);
        if (stopped_ || entries_.count(path)) return 0;
        Entry& e = entries_[path];
        e.container = container;
    }
    // The watches' first calls come on the event thread, after these return.
    auto dw = zk_->watch_data(path, [this, path](const std::optional<std::string>& d, const zk::Stat&) { on_data(path, d); });
    std::shared_ptr<zk::Watch> cw;
    if (container)
        cw = zk_->watch_children(path, [this, path](const std::optional<std::vector<std::string>>& k) { on_children(path, k); });
    watch_count_ += container ? 2 : 1;
    std::unique_lock<WriterFirstMutex> l(m_);
    auto it = entries_.find(path);
    if (it == entries_.end() || stopped_) {
        // Removed meanwhile: erase_subtree counted its answers as seen.
        l.unlock();
        dw->cancel();
        if (cw) cw->cancel();
        watch_count_ -= container ? 2 : 1;
        return container ? 2 : 1;
    }
    it->second.data_watch = std::move(dw);
    it->second.children_watch = std::move(cw);
    it->second.armed = std::chrono::steady_clock::now();
    return container ? 2 : 1;
}

void ClusterView::seen() {
    std::lock_guard g(feed_m_);
    if (in_flight_ > 0) --in_flight_;
    feed_cv_.notify_all();
    if (in_flight_ == 0) ready_cv_.notify_all();
}

void ClusterView::bump(const std::string& path) {
    ++gen_;
    ++object_gen_[object_root(path)];
    ++root_gen_[path.substr(0, path.find('/', 1))];
}

void ClusterView::on_data(const std::string& path, const std::optional<std::string>& data) {
    std::unique_lock<WriterFirstMutex> l(m_);
    auto it = entries_.find(path);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (!e.data_seen) {
        e.data_seen = true;
        seen();
    }
    if (e.value == data) return;
    e.value = data;
    bump(path);
}

void ClusterView::erase_subtree(const std::string& path, std::vector<std::shared_ptr<zk::Watch>>& cancel) {
    auto it = entries_.find(path);
    if (it == entries_.end()) return;
    std::vector<std::string> kids = it->second.children;
    Entry& e = it->second;
    if (!e.data_seen) seen();
    if (e.container && !e.children_seen) seen();
    if (e.data_watch) cancel.push_back(std::move(e.data_watch));
    if (e.children_watch) cancel.push_back(std::move(e.children_watch));
    entries_.erase(it);
    for (const auto& k : kids) erase_subtree(path + "/" + k, cancel);
}

void ClusterView::on_children(const std::string& path, const std::optional<std::vector<std::string>>& kids_in) {
    std::vector<std::string> kids = kids_in.value_or(std::vector<std::string>{});
    std::sort(kids.begin(), kids.end());
    std::vector<std::string> added;
    std::vector<std::shared_ptr<zk::Watch>> cancel;
    bool first_answer = false;
    {
        std::unique_lock<WriterFirstMutex> l(m_);
        auto it = entries_.find(path);
        if (it == entries_.end() || stopped_) return;
        Entry& e = it->second;
        if (!e.children_seen) {
            e.children_seen = true;
            first_answer = true;
        }
        if (kids != e.children) {
            std::vector<std::string> removed;
            std::set_difference(e.children.begin(), e.children.end(), kids.begin(), kids.end(),
                                std::back_inserter(removed));
            std::set_difference(kids.begin(), kids.end(), e.children.begin(), e.children.end(),
                                std::back_inserter(added));
            e.children = kids;
            bump(path);
            for (const auto& r : removed) {
                erase_subtree(path + "/" + r, cancel);
                bump(path + "/" + r);
            }
        }
    }
    watch_count_ -= cancel.size();
    for (auto& w : cancel) w->cancel();
    for (const auto& a : added) {
        std::string child = path + "/" + a;
        if (!is_excluded(child)) enqueue(child);
    }
    // The first answer counts as seen only once its children are queued:
    // counted before, the last container answering during the first load
    // left an instant with nothing queued and nothing in flight, and
    // ready() latched with that container's children not yet mirrored (a
    // request then answered from a partial view).
    if (first_answer) seen();
}

std::optional<std::string> ClusterView::Reader::get(const std::string& path) const {
    if (zk_) {
        auto it = values_.find(path);
        if (it == values_.end()) it = values_.emplace(path, zk_->get(path)).first;
        return it->second;
    }
    auto it = view_->entries_.find(path);
    if (it == view_->entries_.end()) {
        if (view_->listed_not_loaded(path)) ++partial_reads_here;
        return std::nullopt;
    }
    if (!it->second.data_seen) ++partial_reads_here;
    return it->second.value;
}

bool ClusterView::Reader::exists(const std::string& path) const {
    return get(path).has_value();
}

std::vector<std::string> ClusterView::Reader::children(const std::string& path) const {
    if (zk_) {
        auto it = children_.find(path);
        if (it == children_.end())
            it = children_.emplace(path, zk_->children(path).value_or(std::vector<std::string>{})).first;
        return it->second;
    }
    auto it = view_->entries_.find(path);
    if (it == view_->entries_.end()) {
        if (view_->listed_not_loaded(path)) ++partial_reads_here;
        return {};
    }
    if (it->second.container && !it->second.children_seen) ++partial_reads_here;
    return it->second.children;
}

void ClusterView::Reader::prefetch(const std::vector<std::string>& paths) const {
    if (!zk_) return;
    std::vector<std::string> want;
    for (const auto& p : paths)
        if (!values_.count(p)) want.push_back(p);
    if (want.empty()) return;
    auto got = zk_->get_many(want);
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) values_.emplace(want[i], std::move(got[i]));
}

uint64_t ClusterView::Reader::root_generation(const std::string& root) const {
    if (!view_) return 0;
    auto it = view_->root_gen_.find(root);
    return it == view_->root_gen_.end() ? 0 : it->second;
}

uint64_t ClusterView::Reader::generation(const std::string& object_root) const {
    if (!view_) return 0;
    auto it = view_->object_gen_.find(object_root);
    return it == view_->object_gen_.end() ? 0 : it->second;
}

}  // namespace pvc::api
