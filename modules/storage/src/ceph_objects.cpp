#include "ceph_objects.hpp"

#include <nlohmann/json.hpp>

#include "pvc/command.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "stats.hpp"

namespace pvc::storage {

namespace {

// A device path from ZooKeeper, before it becomes an argument: an absolute
// path under /dev, no "..", nothing a tool could read as an option.
bool plausible_device(const std::string& d) {
    if (d.rfind("/dev/", 0) != 0 || d.find("..") != std::string::npos || d.size() > 255) return false;
    for (unsigned char c : d)
        if (c <= ' ' || c == 0x7f) return false;
    return true;
}

}  // namespace

std::optional<OsdDiskInfo> parse_ceph_volume(const std::string& text, const std::string& osd_id) {
    auto doc = nlohmann::json::parse(text);
    if (!doc.is_object()) return std::nullopt;
    for (const auto& [id, entries] : doc.items()) {
        if (!entries.is_array()) continue;
        for (const auto& e : entries) {
            if (!e.is_object() || e.value("type", "") != "block") continue;
            const auto tags = e.value("tags", nlohmann::json::object());
            if (!tags.is_object() || tags.value("ceph.osd_id", "") != osd_id) continue;
            OsdDiskInfo info;
            const auto devices = e.value("devices", nlohmann::json::array());
            if (devices.is_array() && !devices.empty() && devices[0].is_string()) info.device = devices[0];
            info.osd_fsid = tags.value("ceph.osd_fsid", "");
            info.cluster_fsid = tags.value("ceph.cluster_fsid", "");
            info.vg = e.value("vg_name", "");
            info.lv = e.value("lv_name", "");
            if (info.device.empty() || info.osd_fsid.empty() || info.cluster_fsid.empty() || info.vg.empty() ||
                info.lv.empty())
                return std::nullopt;
            return info;
        }
    }
    return std::nullopt;
}

CephObjects::CephObjects(std::shared_ptr<zk::Session> zk, Logger log, Executor& ex, Options options)
    : zk_(std::move(zk)), log_(std::move(log)), ex_(ex), options_(std::move(options)), strand_(ex.make_strand()) {}

CephObjects::~CephObjects() { stop(); }

template <class Fn>
void CephObjects::on_strand(std::string what, Fn fn) {
    ex_.post(strand_, std::move(what), [life = life_, fn = std::move(fn)]() mutable {
        std::lock_guard g(life->m);
        if (life->alive) fn();
    });
}

void CephObjects::start() {
    osds_watch_ = zk_->watch_children(schema::path("base.osd"), [this](const auto& ids) {
        on_strand("OSD list", [this, ids] { on_osds(ids); });
    });
    pools_watch_ = zk_->watch_children(schema::path("base.pool"), [this](const auto& names) {
        on_strand("pool list", [this, names] { on_pools(names); });
    });
    volume_pools_watch_ = zk_->watch_children(schema::path("base.volume"), [this](const auto& names) {
        on_strand("volume pools", [this, names] { on_volume_pools(names); });
    });
}

void CephObjects::stop() {
    {
        std::lock_guard g(life_->m);
        if (!life_->alive) return;
        life_->alive = false;
    }
    std::lock_guard wait_refresh(life_->refresh_m);
    osds_watch_.reset();
    pools_watch_.reset();
    volume_pools_watch_.reset();
    osd_watches_.clear();
    volume_watches_.clear();
}

void CephObjects::warn_once(const std::string& key, const std::string& text) {
    if (warned_.insert(key).second) log_.warn("{}", text);
}

void CephObjects::on_osds(const std::optional<std::vector<std::string>>& ids) {
    std::vector<std::string> valid;
    for (const auto& id : ids.value_or(std::vector<std::string>{})) {
        if (valid_osd_id(id)) valid.push_back(id);
        else warn_once("osd:" + id, "Ignoring OSD '" + id + "' under /ceph/osds: not an OSD id");
    }
    log_.info("OSD list: {}", join(valid, " "));
    std::set<std::string> now(valid.begin(), valid.end());
    for (auto it = osd_watches_.begin(); it != osd_watches_.end();) {
        if (now.count(it->first)) {
            ++it;
            continue;
        }
        std::lock_guard g(m_);
        osd_node_.erase(it->first);
        refreshed_.erase(it->first);
        it = osd_watches_.erase(it);
    }
    for (const auto& id : valid) {
        if (osd_watches_.count(id)) continue;
        {
            std::lock_guard g(m_);
            osd_node_.emplace(id, "");
        }
        osd_watches_[id] = zk_->watch_data(schema::path("osd.node", {id}), [this, id](const auto& v, const zk::Stat&) {
            on_strand("OSD " + id + " node", [this, id, v] { on_osd_node(id, v); });
        });
    }
}

void CephObjects::on_osd_node(const std::string& id, const std::optional<std::string>& node) {
    if (!osd_watches_.count(id)) return;
    {
        std::lock_guard g(m_);
        osd_node_[id] = node.value_or("");
    }
    // OSD information refresh: when the OSD object appears with this node (at start, or a new OSD).
    if (node && *node == options_.node && refreshed_.insert(id).second) {
        ex_.blocking("OSD " + id + " information refresh", [this, life = life_, id] {
            std::lock_guard r(life->refresh_m);
            {
                std::lock_guard g(life->m);
                if (!life->alive) return;
            }
            refresh_osd(id);
        });
    }
}

bool CephObjects::refresh_osd(const std::string& id) {
    struct Count {
        CephObjects& o;
        ~Count() {
            std::lock_guard g(o.m_);
            ++o.refreshes_;
        }
    } count{*this};
    log_.info("Updating stored disk information for OSD {}", id);
    std::string device;
    try {
        auto vg = zk_->get(schema::path("osd.vg", {id})).value_or("");
        auto lv = zk_->get(schema::path("osd.lv", {id})).value_or("");
        device = (!vg.empty() && !lv.empty()) ? "/dev/" + vg + "/" + lv : zk_->get(schema::path("osd.device", {id})).value_or("");
    } catch (const std::exception& e) {
        log_.error("Failed to read the stored disk information of OSD {}: {}", id, e.what());
        return false;
    }
    if (!plausible_device(device)) {
        log_.error("Failed to find updated OSD information via ceph-volume for OSD {}: stored device '{}' is not a device path",
                   id, device);
        return false;
    }
    auto argv = options_.ceph_volume;
    for (const char* a : {"lvm", "list", "--format", "json"}) argv.emplace_back(a);
    argv.push_back(device);
    auto r = run_command(argv, {}, options_.command_timeout);
    std::optional<OsdDiskInfo> info;
    try {
        if (r.exit_status == 0) info = parse_ceph_volume(r.output, id);
    } catch (const std::exception&) {
    }
    if (!info) {
        log_.error("Failed to find updated OSD information via ceph-volume for {}", device);
        return false;
    }
    bool ok = zk_->write({{schema::path("osd.device", {id}), info->device},
                          {schema::path("osd.fsid", {id}), ""},
                          {schema::path("osd.ofsid", {id}), info->osd_fsid},
                          {schema::path("osd.cfsid", {id}), info->cluster_fsid},
                          {schema::path("osd.lvm", {id}), ""},
                          {schema::path("osd.vg", {id}), info->vg},
                          {schema::path("osd.lv", {id}), info->lv}});
    if (!ok) log_.error("Failed to store the disk information of OSD {}", id);
    return ok;
}

void CephObjects::on_pools(const std::optional<std::vector<std::string>>& names) {
    std::vector<std::string> valid;
    for (const auto& n : names.value_or(std::vector<std::string>{})) {
        if (valid_pool_name(n)) valid.push_back(n);
        else warn_once("pool:" + n, "Ignoring pool '" + n + "' under /ceph/pools: not a valid Ceph pool name");
    }
    log_.info("Pool list: {}", join(valid, " "));
    std::set<std::string> now(valid.begin(), valid.end());
    {
        std::lock_guard g(m_);
        pools_ = valid;
        for (auto it = volumes_.begin(); it != volumes_.end();)
            it = now.count(it->first) ? std::next(it) : volumes_.erase(it);
    }
    for (auto it = volume_watches_.begin(); it != volume_watches_.end();)
        it = now.count(it->first) ? std::next(it) : volume_watches_.erase(it);
    for (const auto& pool : valid) {
        if (volume_watches_.count(pool)) continue;
        volume_watches_[pool] = zk_->watch_children(schema::path("base.volume") + "/" + pool, [this, pool](const auto& v) {
            on_strand("volume list " + pool, [this, pool, v] { on_volumes(pool, v); });
        });
    }
}

void CephObjects::on_volume_pools(const std::optional<std::vector<std::string>>& names) {
    std::set<std::string> pools;
    {
        std::lock_guard g(m_);
        pools.insert(pools_.begin(), pools_.end());
    }
    for (const auto& n : names.value_or(std::vector<std::string>{}))
        if (!pools.count(n))
            warn_once("volumes:" + n, "Ignoring the volume list of '" + n + "' under /ceph/volumes: no such pool");
}

void CephObjects::on_volumes(const std::string& pool, const std::optional<std::vector<std::string>>& names) {
    if (!volume_watches_.count(pool)) return;
    auto list = names.value_or(std::vector<std::string>{});
    log_.info("Volume list [{}]: {}", pool, join(list, " "));
    std::lock_guard g(m_);
    volumes_[pool] = std::move(list);
}

std::vector<std::string> CephObjects::osd_ids() const {
    std::lock_guard g(m_);
    std::vector<std::string> out;
    for (const auto& [id, node] : osd_node_) out.push_back(id);
    return out;
}

int CephObjects::own_osds() const {
    std::lock_guard g(m_);
    int n = 0;
    for (const auto& [id, node] : osd_node_) n += node == options_.node;
    return n;
}

std::vector<std::string> CephObjects::pools() const {
    std::lock_guard g(m_);
    return pools_;
}

std::vector<std::string> CephObjects::volumes(const std::string& pool) const {
    std::lock_guard g(m_);
    auto it = volumes_.find(pool);
    return it == volumes_.end() ? std::vector<std::string>{} : it->second;
}

int CephObjects::refreshes() const {
    std::lock_guard g(m_);
    return refreshes_;
}

}  // namespace pvc::storage
