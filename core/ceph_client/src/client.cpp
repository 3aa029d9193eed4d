// The operations of pvc/ceph_client.hpp: checks, Ceph (librados monitor
// commands as JSON, librbd), then the /ceph mirrors in ZooKeeper.
#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cerrno>
#include <regex>
#include <thread>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "connection.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/command.hpp"
#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "rbd_info.hpp"

namespace pvc::ceph {

using schema::path;

namespace {

// A Ceph name part: not empty, at most 255 bytes, not "." or "..", no '/',
// no '@' (the snapshot separator), no whitespace or control characters.
bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
    for (unsigned char c : name)
        if (c <= ' ' || c == 0x7f || c == '/' || c == '@') return false;
    return true;
}

std::string volumes_of(const std::string& pool) { return path("base.volume") + "/" + pool; }
std::string snapshots_of(const std::string& pool) { return path("base.snapshot") + "/" + pool; }
std::string snapshots_of(const std::string& pool, const std::string& volume) {
    return path("base.snapshot") + "/" + pool + "/" + volume;
}

Result done(std::string message, Written written = {}) {
    return {200, std::move(message), std::move(written)};
}
Result refused(std::string message) { return {400, std::move(message)}; }

// "Error EINVAL: <status>" as the `ceph` command prints a refused command.
std::string mon_error(const MonReply& r) {
    std::string s = r.status;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return "Error " + errno_name(r.rc) + ": " + (s.empty() ? errno_text(r.rc) : s);
}

// A monitor command that must succeed: CephFailure otherwise.
void mon(Connection& c, const Json& cmd) {
    auto r = mon_command(c, cmd.dump());
    if (r.rc < 0) throw CephFailure(r.rc, mon_error(r));
}

bool positive_int(const std::string& s, long long& out) {
    if (s.empty() || s.size() > 12 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        return false;
    out = std::stoll(s);
    return out > 0;
}

}  // namespace

// An object (a pool; a pool's volume; a volume's snapshot) that a write may
// have left different in Ceph and ZooKeeper; `value`: what a PG count change
// asked for.
struct Pending {
    Pending(std::string p, std::string v = {}, std::string s = {}, std::string val = {})
        : pool(std::move(p)), volume(std::move(v)), snapshot(std::move(s)), value(std::move(val)) {}
    std::string pool, volume, snapshot, value;
    // Settled this many more times before it is forgotten: an undo that
    // timed out may still be done (librados sends a monitor command again
    // once the monitor is back), after a reconciliation found the object.
    int recheck = 0;
};

struct Client::Impl {
    std::shared_ptr<zk::Session> zk;
    Settings settings;
    Connector connector;

    Impl(std::shared_ptr<zk::Session> z, Settings s) : zk(std::move(z)), settings(s), connector(std::move(s)) {}

    std::string bound() const { return std::to_string(settings.timeout.count()) + " s"; }

    // Runs `fn` with the connection. Ceph's refusals are 400 `prefix: text`;
    // no answer in time is 503 and the connection is dropped; a ZooKeeper
    // error before anything was done is 500.
    template <class Fn>
    Result with_ceph(const std::string& prefix, Fn fn) {
        std::shared_ptr<Connection> conn;
        try {
            conn = connector.get();
            if (has_pending()) {
                try {
                    reconcile(*conn, true);
                } catch (const std::exception&) {
                }
            }
            return fn(*conn);
        } catch (const CephFailure& f) {
            if (f.unreachable()) {
                if (conn) connector.drop(conn);
                else connector.drop_all();
                return {503, prefix + ": Ceph did not answer within its bounds (" + bound() + " per call): " + f.what() +
                                 "; nothing was recorded in ZooKeeper."};
            }
            return refused(prefix + ": " + f.what());
        } catch (const zk::Error& e) {
            return {500, prefix + ": ZooKeeper: " + e.what()};
        }
    }

    bool exists(const std::string& p) { return zk->exists(p); }

    // The VM (name) whose rbdlist holds `pool/volume`, or any volume of
    // `pool` when `volume` is empty; the volume found in `which`.
    std::optional<std::string> vm_using(const std::string& pool, const std::string& volume, std::string* which = nullptr) {
        auto uuids = zk->children(path("base.domain"));
        if (!uuids) return std::nullopt;
        std::vector<std::string> paths;
        for (const auto& u : *uuids) paths.push_back(path("domain.storage.volumes", {u}));
        auto lists = zk->get_many(paths);
        for (size_t i = 0; i < uuids->size(); ++i) {
            std::string list = lists[i].value_or("");
            size_t start = 0;
            while (start <= list.size()) {
                size_t comma = list.find(',', start);
                std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                bool hit = volume.empty() ? item.rfind(pool + "/", 0) == 0 : item == pool + "/" + volume;
                if (hit) {
                    if (which) *which = item;
                    return zk->get(path("domain.name", {(*uuids)[i]})).value_or((*uuids)[i]);
                }
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
        }
        return std::nullopt;
    }

    // Every key under `root` (itself first, parents before children) with its data.
    void subtree(const std::string& root, std::vector<std::pair<std::string, std::string>>& out) {
        auto data = zk->get(root);
        if (!data) return;
        out.emplace_back(root, *data);
        if (auto kids = zk->children(root))
            for (const auto& k : *kids) subtree(root + "/" + k, out);
    }

    // Moves the subtrees `from[i]` to `to[i]` in one transaction (new keys
    // created parent first, old removed children first), `set` applied to
    // the new keys' data. False when the transaction failed.
    bool move(const std::vector<std::pair<std::string, std::string>>& moves,
              const std::vector<std::pair<std::string, std::string>>& set, Written* written = nullptr);

    // Volume `stats` with snapshot_count changed by `delta`, in the same
    // transaction as `tx`'s other ops (guarded by the stats' version).
    zk::Status with_snapshot_count(const std::string& pool, const std::string& volume, int delta,
                                   const std::function<void(zk::Transaction&)>& ops);

    std::optional<std::uint64_t> pool_free_bytes(Connection& c, const std::string& pool);
    Result check_size(Connection& c, const std::string& pool, const std::string& size, std::uint64_t& bytes);
    void resize_live(const std::string& pool, const std::string& volume, std::uint64_t bytes);
    // A volume just made in Ceph (created or cloned): its keys written to
    // ZooKeeper (`w`), or else the volume removed from Ceph again, so neither
    // side holds it without the other. nullopt: recorded; else the removal's
    // result (< 0: it failed too; the volume is recorded by reconcile()). A
    // failure to read its information is thrown, after the removal.
    std::optional<int> record_or_remove(Connection& c, Io& io, const std::string& pool, const std::string& name,
                                        Written& w);
    Result write_image(Connection& c, const std::string& pool, const std::string& volume, const Upload& up,
                       std::uint64_t limit, std::uint64_t& written, const std::string& failed, const std::string& left);

    // ---- half-done writes: Ceph did its part and ZooKeeper did not (or the
    // reverse). Each object a write may have left different in the two is
    // remembered here and in the pool's journal object in Ceph (so another
    // process finds it: the primary's API at each keepalive, the next `pvc`
    // on its first write), and reconcile() makes ZooKeeper match Ceph for it.
    std::mutex pending_m;
    std::vector<Pending> pending;
    bool journals_read = false;
    void remember(Connection* c, const Pending& p);
    void forget(Connection& c, const Pending& p);
    // ZooKeeper made to match Ceph for `p`; false when either could not be
    // asked (it stays pending).
    bool settle(Connection& c, const Pending& p);
    // Every pending object, and the journals of every pool when
    // `journals` (the pools ZooKeeper records); how many are left.
    std::size_t reconcile(Connection& c, bool journals);
    // A librados call that may wait on the monitor without a bound of its
    // own (a pool missing from the client's map is looked up, the latest OSD
    // map asked for): on a thread, waited for `timeout` + 1 s; nullopt past
    // it (the call is left to end on its own, holding the connection; at
    // most four at once, more are not started).
    std::optional<int> bounded(Connection& c, std::function<int(Connection&)> fn);
    const std::shared_ptr<std::atomic<int>> abandoned = std::make_shared<std::atomic<int>>(0);
    // A pool in Ceph: 1, not: 0, Ceph did not say: nullopt.
    std::optional<int> pool_known(Connection& c, const std::string& pool) {
        auto rc = bounded(c, [pool](Connection& conn) { return static_cast<int>(rados_pool_lookup(conn.cluster, pool.c_str())); });
        if (!rc) return std::nullopt;
        if (*rc == -ENOENT) return 0;
        if (*rc < 0) return std::nullopt;
        return 1;
    }
    bool has_pending() {
        std::lock_guard g(pending_m);
        return !pending.empty() || !journals_read;
    }
    // Before a ZooKeeper record (tests stop ZooKeeper there).
    void before_record() {
        if (settings.before_record) settings.before_record();
    }
};

namespace {
// The journal object of a pool, and a pending object's key in it.
constexpr const char* kJournal = "pvc.pending";
std::string journal_key(const Pending& p) {
    if (p.volume.empty()) return "pool";
    if (p.snapshot.empty()) return "volume/" + p.volume;
    return "snapshot/" + p.volume + "/" + p.snapshot;
}
std::optional<Pending> journal_entry(const std::string& pool, const std::string& key, const std::string& value) {
    Pending p{pool, "", "", value};
    if (key == "pool") return p;
    auto slash = key.find('/');
    if (slash == std::string::npos) return std::nullopt;
    std::string kind = key.substr(0, slash), rest = key.substr(slash + 1);
    if (kind == "volume" && valid_name(rest)) {
        p.volume = rest;
        return p;
    }
    auto second = rest.find('/');
    if (kind == "snapshot" && second != std::string::npos) {
        p.volume = rest.substr(0, second);
        p.snapshot = rest.substr(second + 1);
        if (valid_name(p.volume) && valid_name(p.snapshot)) return p;
    }
    return std::nullopt;
}
bool same(const Pending& a, const Pending& b) {
    return a.pool == b.pool && a.volume == b.volume && a.snapshot == b.snapshot;
}
const char* const kLater = "the next storage request or the primary's next keepalive brings ZooKeeper in line with Ceph";
}  // namespace

bool Client::Impl::move(const std::vector<std::pair<std::string, std::string>>& moves,
                        const std::vector<std::pair<std::string, std::string>>& set, Written* written) {
    zk::Transaction tx(*zk);
    std::vector<std::pair<std::string, std::string>> removes;
    for (const auto& [from, to] : moves) {
        std::vector<std::pair<std::string, std::string>> keys;
        subtree(from, keys);
        for (const auto& [p, data] : keys) {
            std::string np = to + p.substr(from.size());
            std::string value = data;
            for (const auto& [sp, sv] : set)
                if (sp == np) value = sv;
            tx.create(np, value);
            if (written) written->emplace_back(np, value);
        }
        for (auto it = keys.rbegin(); it != keys.rend(); ++it) removes.push_back(*it);
    }
    for (const auto& [p, data] : removes) {
        tx.remove(p);
        if (written) written->emplace_back(p, std::nullopt);
    }
    return zk->commit(tx) == zk::Status::ok;
}

zk::Status Client::Impl::with_snapshot_count(const std::string& pool, const std::string& volume, int delta,
                                             const std::function<void(zk::Transaction&)>& ops) {
    zk::Status st = zk::Status::ok;
    for (int attempt = 0; attempt < 10; ++attempt) {
        zk::Transaction tx(*zk);
        ops(tx);
        zk::Stat stat;
        auto stats = zk->get(path("volume.stats", {pool, volume}), &stat);
        if (stats) {
            // The reference re-serialises the stats with the count changed;
            // stats it cannot read are left as they are.
            auto j = Json::parse(*stats, nullptr, false);
            if (!j.is_discarded() && j.is_object() && j.contains("snapshot_count") &&
                j["snapshot_count"].is_number_integer()) {
                j["snapshot_count"] = std::max<long long>(0, j["snapshot_count"].get<long long>() + delta);
                tx.set(path("volume.stats", {pool, volume}), py_dumps(j), stat.version);
            }
        }
        st = zk->commit(tx);
        if (st != zk::Status::bad_version) return st;
    }
    return st;
}

std::optional<std::uint64_t> Client::Impl::pool_free_bytes(Connection& c, const std::string& pool) {
    // The primary's figure of the last keepalive; a pool too new for one
    // asks Ceph (`df`, the pool's max_avail).
    auto stats = zk->get(path("pool.stats", {pool}));
    if (stats) {
        auto j = Json::parse(*stats, nullptr, false);
        if (!j.is_discarded() && j.is_object() && j.contains("free_bytes") && j["free_bytes"].is_number())
            return j["free_bytes"].get<std::uint64_t>();
    }
    auto r = mon_command(c, R"({"prefix":"df","format":"json"})");
    if (r.rc < 0) throw CephFailure(r.rc, mon_error(r));
    auto j = Json::parse(r.out, nullptr, false);
    if (j.is_discarded() || !j.contains("pools")) return std::nullopt;
    for (const auto& p : j["pools"])
        if (p.value("name", "") == pool && p.contains("stats")) return p["stats"].value("max_avail", std::uint64_t{0});
    return std::nullopt;
}

Result Client::Impl::check_size(Connection& c, const std::string& pool, const std::string& size, std::uint64_t& bytes) {
    bool unit_error = false;
    auto b = parse_size(size, &unit_error);
    if (!b) {
        if (unit_error) return refused("ERROR: Requested volume size '" + size + "' does not have a valid SI unit");
        return refused("ERROR: Requested volume size '" + size +
                       "' is not a size: digits, optionally followed by one of the units B K M G T P E Z Y R Q");
    }
    auto free = pool_free_bytes(c, pool);
    if (!free) return refused("ERROR: No pool with name '" + pool + "' is present in the cluster.");
    if (*b >= *free)
        return refused("ERROR: Requested volume size '" + human_size(*b) +
                       "' is greater than the available free space in the pool ('" + human_size(*free) + "')");
    bytes = *b;
    return done("");
}

// ---------------------------------------------------------------- client

Client::Client(std::shared_ptr<zk::Session> zk, Settings settings)
    : impl_(std::make_unique<Impl>(std::move(zk), std::move(settings))) {}
Client::~Client() = default;

void Client::disconnect() { impl_->connector.drop_all(); }

std::optional<std::string> Client::volume_info(const std::string& pool, const std::string& volume) {
    try {
        auto c = impl_->connector.get();
        Io io(*c, pool);
        return rbd_info_json(*c, io, volume);
    } catch (const CephFailure&) {
        return std::nullopt;
    }
}

// ---------------------------------------------------------------- pools

Result Client::add_pool(const std::string& pool, const std::string& pgs, const std::string& replcfg,
                        const std::optional<std::string>& tier_given) {
    static const std::regex repl_re("^copies=([0-9]{1,6}),mincopies=([0-9]{1,6})$");
    std::smatch m;
    if (!std::regex_match(replcfg, m, repl_re) || std::stoll(m[1]) == 0 || std::stoll(m[2]) == 0)
        return refused("ERROR: Replication configuration \"" + replcfg + "\" is not valid.");
    const std::string copies = m[1], mincopies = m[2];
    if (!valid_name(pool)) return refused("ERROR: Pool name \"" + pool + "\" is not valid.");
    std::string tier = tier_given.value_or("default");
    if (tier != "default" && tier != "hdd" && tier != "ssd" && tier != "nvme")
        return refused("ERROR: Tier \"" + tier + "\" is not valid (hdd, ssd, nvme or default).");
    const std::string prefix = "ERROR: Failed to create pool \"" + pool + "\" with " + pgs + " PGs";
    long long pg = 0;
    if (!positive_int(pgs, pg)) return refused(prefix + ": the PG count must be a positive integer");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (impl_->exists(path("pool.name", {pool})))
            return refused("ERROR: Pool \"" + pool + "\" is already present in the cluster.");
        // A pool Ceph has but ZooKeeper lacks (a creation whose record
        // failed) is taken over, never removed on failure.
        bool existed = rados_pool_lookup(c.cluster, pool.c_str()) >= 0;
        Json create = {{"prefix", "osd pool create"}, {"pool", pool}, {"pg_num", pg}, {"pgp_num", pg},
                       {"pool_type", "replicated"}};
        if (tier != "default") {
            auto r = mon_command(c, Json{{"prefix", "osd crush rule create-replicated"}, {"name", tier + "_tier"},
                                         {"root", "default"}, {"type", "host"}, {"class", tier}}.dump());
            if (r.rc < 0) {
                if (CephFailure(r.rc, "").unreachable()) throw CephFailure(r.rc, mon_error(r));
                return refused("ERROR: Failed to create CRUSH rule " + tier + " for pool " + pool + ": " + mon_error(r));
            }
            create["rule"] = tier + "_tier";
        }
        try {
            mon(c, create);
        } catch (const CephFailure& f) {
            // No answer in time: Ceph may still make it; reconciled then.
            if (f.unreachable()) impl_->remember(nullptr, {pool});
            throw;
        }
        auto undo = [&]() -> int {
            if (existed) return -EEXIST;
            return mon_command(c, Json{{"prefix", "osd pool rm"}, {"pool", pool}, {"pool2", pool},
                                       {"yes_i_really_really_mean_it", true}}.dump()).rc;
        };
        auto step = [&](const Json& cmd, const std::string& what) -> std::optional<Result> {
            auto r = mon_command(c, cmd.dump());
            if (r.rc >= 0) return std::nullopt;
            undo();
            if (CephFailure(r.rc, "").unreachable()) throw CephFailure(r.rc, mon_error(r));
            return refused(what + ": " + mon_error(r));
        };
        if (auto r = step({{"prefix", "osd pool set"}, {"pool", pool}, {"var", "size"}, {"val", copies}},
                          "ERROR: Failed to set pool \"" + pool + "\" size of " + copies))
            return *r;
        if (auto r = step({{"prefix", "osd pool set"}, {"pool", pool}, {"var", "min_size"}, {"val", mincopies}},
                          "ERROR: Failed to set pool \"" + pool + "\" minimum size of " + mincopies))
            return *r;
        if (auto r = step({{"prefix", "osd pool application enable"}, {"pool", pool}, {"app", "rbd"}},
                          "ERROR: Failed to enable RBD application on pool \"" + pool + "\" "))
            return *r;
        std::vector<zk::KeyValue> kvs = {{path("pool.name", {pool}), ""},
                                         {path("pool.pgs", {pool}), pgs},
                                         {path("pool.tier", {pool}), tier},
                                         {path("pool.stats", {pool}), "{}"},
                                         {volumes_of(pool), ""},
                                         {snapshots_of(pool), ""}};
        bool ok = false;
        std::string why = "the write failed";
        impl_->before_record();
        try {
            ok = impl_->zk->write(kvs);
        } catch (const zk::Error& e) {
            why = e.what();
        }
        if (!ok) {
            // Remembered first: ZooKeeper may have kept the record after all
            // (a time-out is no answer), and the undo may fail.
            impl_->remember(&c, {pool});
            int rc = undo();
            if (rc < 0 && !existed) {
                Pending again{pool};
                again.recheck = 3;
                impl_->remember(nullptr, again);
            }
            return {500, "ERROR: Created pool \"" + pool + "\" in Ceph but could not record it in ZooKeeper (" + why +
                             "); " +
                             (existed ? std::string("the pool stays in Ceph (it existed before)")
                              : rc < 0 ? "removing it from Ceph again failed too (" + errno_text(rc) + "): it stays"
                                       : std::string("it was removed from Ceph again")) +
                             "; " + kLater + "."};
        }
        Written w(kvs.begin(), kvs.end());
        return done("Created RBD pool \"" + pool + "\" with " + pgs + " PGs", w);
    });
}

Result Client::remove_pool(const std::string& pool) {
    const std::string missing = "ERROR: No pool with name '" + pool + "' is present in the cluster.";
    if (!valid_name(pool)) return refused(missing);
    const std::string prefix = "ERROR: Failed to remove pool '" + pool + "'";
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("pool.name", {pool}))) return refused(missing);
        std::string which;
        if (auto vm = impl_->vm_using(pool, "", &which))
            return refused(prefix + ": volume '" + which + "' is used by VM '" + *vm +
                           "'; remove it from the VM first.");
        auto r = mon_command(c, Json{{"prefix", "osd pool rm"}, {"pool", pool}, {"pool2", pool},
                                     {"yes_i_really_really_mean_it", true}}
                                    .dump());
        // ENOENT: gone from Ceph already (a removal ZooKeeper missed).
        if (r.rc < 0 && r.rc != -ENOENT) throw CephFailure(r.rc, mon_error(r));
        Written w;
        bool ok = true;
        impl_->before_record();
        for (const auto& p : {path("pool.name", {pool}), volumes_of(pool), snapshots_of(pool)}) {
            try {
                impl_->zk->remove_recursive(p);
                w.emplace_back(p, std::nullopt);
            } catch (const zk::Error&) {
                ok = false;
            }
        }
        if (!ok) {
            impl_->remember(&c, {pool});
            return {500, "ERROR: Removed pool '" + pool + "' from Ceph but could not remove all of its keys from "
                         "ZooKeeper; " + std::string(kLater) + " (or remove the pool again)."};
        }
        return done("Removed RBD pool '" + pool + "' and all volumes.", w);
    });
}

Result Client::set_pool_pgs(const std::string& pool, const std::string& pgs) {
    const std::string missing = "ERROR: No pool with name '" + pool + "' is present in the cluster.";
    if (!valid_name(pool)) return refused(missing);
    long long n = 0;
    if (!positive_int(pgs, n) || (n & (n - 1)) != 0)
        return refused("ERROR: Invalid PGs number '" + pgs + "': must be a non-zero power of 2.");
    const std::string prefix = "ERROR: Failed to set pg_num on pool " + pool + " to " + pgs;
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        auto stored = impl_->zk->get(path("pool.pgs", {pool}));
        if (!impl_->exists(path("pool.name", {pool}))) return refused(missing);
        mon(c, {{"prefix", "osd pool set"}, {"pool", pool}, {"var", "pg_num"}, {"val", pgs}});
        // As the reference: pgp_num only when the count does not grow
        // (Ceph moves pgp_num along with a growing pg_num by itself).
        long long old = 0;
        if (stored && positive_int(*stored, old) && old >= n)
            mon(c, {{"prefix", "osd pool set"}, {"pool", pool}, {"var", "pgp_num"}, {"val", pgs}});
        bool ok = false;
        impl_->before_record();
        try {
            ok = impl_->zk->write(path("pool.pgs", {pool}), pgs);
        } catch (const zk::Error&) {
        }
        if (!ok) {
            impl_->remember(&c, {pool, "", "", pgs});
            return {500, "ERROR: Set pg_num of pool '" + pool + "' to " + pgs +
                             " in Ceph but could not record it in ZooKeeper; " + std::string(kLater) + "."};
        }
        return done("Set PGs count to " + pgs + " for RBD pool '" + pool + "'.", {{path("pool.pgs", {pool}), pgs}});
    });
}

// ---------------------------------------------------------------- volumes

namespace {
Written volume_keys(const std::string& pool, const std::string& volume, const std::string& info) {
    return {{path("volume.name", {pool, volume}), ""},
            {path("volume.stats", {pool, volume}), info},
            {snapshots_of(pool, volume), ""}};
}
std::vector<zk::KeyValue> as_kvs(const Written& w) {
    std::vector<zk::KeyValue> kvs;
    for (const auto& [p, v] : w) kvs.emplace_back(p, v.value_or(""));
    return kvs;
}
}  // namespace

std::optional<int> Client::Impl::record_or_remove(Connection& c, Io& io, const std::string& pool, const std::string& name,
                                                  Written& w) {
    std::string info;
    try {
        info = rbd_info_json(c, io, name);
    } catch (const CephFailure&) {
        rbd_remove(io.get(), name.c_str());
        throw;
    }
    w = volume_keys(pool, name, info);
    bool ok = false;
    before_record();
    try {
        ok = zk->write(as_kvs(w));
    } catch (const zk::Error&) {
    }
    if (ok) return std::nullopt;
    // Remembered first: ZooKeeper may have kept the record after all (a
    // time-out is no answer), and the removal may fail.
    remember(&c, {pool, name});
    return rbd_remove(io.get(), name.c_str());
}

Result Client::add_volume(const std::string& pool, const std::string& volume, const std::string& size) {
    const std::string prefix = "ERROR: Failed to create RBD volume '" + volume + "'";
    if (!valid_name(pool)) return refused("ERROR: No pool with name '" + pool + "' is present in the cluster.");
    if (!valid_name(volume)) return refused(prefix + ": the name is not valid (no '/', '@', blanks or control characters)");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("pool.name", {pool})))
            return refused("ERROR: No pool with name '" + pool + "' is present in the cluster.");
        std::uint64_t bytes = 0;
        if (auto r = impl_->check_size(c, pool, size, bytes); !r.ok()) return r;
        Io io(c, pool);
        int order = 0;
        int rc = rbd_create(io.get(), volume.c_str(), bytes, &order);
        if (rc < 0) {
            CephFailure f(rc, "rbd: create error: " + errno_text(rc));
            if (f.unreachable()) impl_->remember(nullptr, {pool, volume});  // it may be made yet
            throw f;
        }
        Written w;
        if (auto removed = impl_->record_or_remove(c, io, pool, volume, w)) {
            rc = *removed;
            return {500, "ERROR: Created RBD volume '" + volume + "' in Ceph but could not record it in ZooKeeper; " +
                             (rc < 0 ? "removing it from Ceph again failed too (" + errno_text(rc) + "): it stays"
                                     : std::string("it was removed from Ceph again")) +
                             "; " + kLater + "."};
        }
        return done("Created RBD volume '" + volume + "' of size '" + human_size(bytes) + "' in pool '" + pool + "'.", w);
    });
}

Result Client::resize_volume(const std::string& pool, const std::string& volume, const std::string& size) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    std::string prefix = "ERROR: Failed to resize RBD volume '" + volume + "' to size '" + size + "' in pool '" + pool + "'";
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        std::uint64_t bytes = 0;
        if (auto r = impl_->check_size(c, pool, size, bytes); !r.ok()) return r;
        // As `rbd resize --size <human size>`: rounded up to that precision.
        const std::string h = human_size(bytes);
        bytes = parse_size(h).value_or(bytes);
        prefix = "ERROR: Failed to resize RBD volume '" + volume + "' to size '" + h + "' in pool '" + pool + "'";
        Io io(c, pool);
        {
            Image image(io, volume, false);
            rbd_image_info_t info{};
            int rc = rbd_stat(image.get(), &info, sizeof info);
            if (rc < 0) throw CephFailure(rc, "rbd: error getting information: " + errno_text(rc));
            if (bytes < info.size)
                return refused(prefix + ": rbd: shrinking an image is only allowed with the --allow-shrink flag");
            rc = rbd_resize2(image.get(), bytes, false, nullptr, nullptr);
            if (rc < 0) throw CephFailure(rc, "rbd: resize error: " + errno_text(rc));
        }
        impl_->resize_live(pool, volume, bytes);
        std::string info;
        try {
            info = rbd_info_json(c, io, volume);
        } catch (const CephFailure& f) {
            info = "{}";
        }
        Written w = volume_keys(pool, volume, info);
        bool ok = false;
        impl_->before_record();
        try {
            ok = impl_->zk->write(as_kvs(w));
        } catch (const zk::Error&) {
        }
        if (!ok) {
            impl_->remember(&c, {pool, volume});
            return {500, "ERROR: Resized RBD volume '" + volume + "' to '" + h + "' in Ceph but could not record its "
                         "new size in ZooKeeper; " + std::string(kLater) + "."};
        }
        return done("Resized RBD volume '" + volume + "' to size '" + h + "' in pool '" + pool + "'.", w);
    });
}

// The live part of a resize (the reference's): when the VM named by the
// volume's name up to its first '_' runs (state `start`) with this volume
// as a disk, libvirt on the VM's node resizes that disk (block resize, in
// bytes). Failures are ignored as the reference does (the guest sees the new
// size at its next start); bounded: at most 10 s, then abandoned.
void Client::Impl::resize_live(const std::string& pool, const std::string& volume, std::uint64_t bytes) {
    std::string vm = volume.substr(0, volume.find('_'));
    std::optional<std::string> uuid;
    try {
        auto uuids = zk->children(path("base.domain"));
        if (!uuids) return;
        for (const auto& u : *uuids)
            if (zk->get(path("domain.name", {u})).value_or("") == vm) uuid = u;
        if (!uuid || zk->get(path("domain.state", {*uuid})).value_or("") != "start") return;
        auto xml = try_parse_domain_xml(zk->get(path("domain.xml", {*uuid})).value_or(""));
        if (!xml) return;
        std::string target;
        for (const auto& d : xml->disks)
            if (d.source == pool + "/" + volume) target = d.target;
        std::string node = zk->get(path("domain.node", {*uuid})).value_or("");
        if (target.empty() || node.empty()) return;
        std::string uri = settings.vm_uri;
        for (auto [what, with] : {std::pair<std::string, std::string>{"{node}", node}, {"{cluster_domain}", settings.cluster_domain}})
            for (size_t p = uri.find(what); p != std::string::npos; p = uri.find(what, p + with.size()))
                uri.replace(p, what.size(), with);
        auto state = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
        auto finished = std::make_shared<bool>(false);
        std::thread([uri, vm, target, bytes, state, finished] {
            virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});
            if (virConnectPtr conn = virConnectOpen(uri.c_str())) {
                if (virDomainPtr dom = virDomainLookupByName(conn, vm.c_str())) {
                    virDomainBlockResize(dom, target.c_str(), bytes, VIR_DOMAIN_BLOCK_RESIZE_BYTES);
                    virDomainFree(dom);
                }
                virConnectClose(conn);
            }
            std::lock_guard g(state->first);
            *finished = true;
            state->second.notify_all();
        }).detach();
        std::unique_lock l(state->first);
        state->second.wait_for(l, std::chrono::seconds(10), [&] { return *finished; });
    } catch (const std::exception&) {
    }
}

Result Client::rename_volume(const std::string& pool, const std::string& volume, const std::string& new_name) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    const std::string prefix =
        "ERROR: Failed to rename volume '" + volume + "' to '" + new_name + "' in pool '" + pool + "'";
    if (!valid_name(new_name)) return refused(prefix + ": the new name is not valid (no '/', '@', blanks or control characters)");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        if (auto vm = impl_->vm_using(pool, volume))
            return refused(prefix + ": it is used by VM '" + *vm + "' (rename the VM's volumes with the VM).");
        if (impl_->exists(path("volume.name", {pool, new_name})))
            return refused(prefix + ": rbd: rename error: " + errno_text(-EEXIST));
        Io io(c, pool);
        int rc = rbd_rename(io.get(), volume.c_str(), new_name.c_str());
        if (rc < 0) throw CephFailure(rc, "rbd: rename error: " + errno_text(rc));
        std::string info;
        try {
            info = rbd_info_json(c, io, new_name);
        } catch (const CephFailure&) {
            info = impl_->zk->get(path("volume.stats", {pool, volume})).value_or("{}");
        }
        Written w;
        bool ok = false;
        impl_->before_record();
        try {
            ok = impl_->move({{path("volume.name", {pool, volume}), path("volume.name", {pool, new_name})},
                              {snapshots_of(pool, volume), snapshots_of(pool, new_name)}},
                             {{path("volume.stats", {pool, new_name}), info}}, &w);
        } catch (const zk::Error&) {
        }
        if (!ok) {
            impl_->remember(&c, {pool, volume});
            impl_->remember(&c, {pool, new_name});
            rc = rbd_rename(io.get(), new_name.c_str(), volume.c_str());
            return {500, "ERROR: Renamed RBD volume '" + volume + "' to '" + new_name +
                             "' in Ceph but could not move its keys in ZooKeeper; " +
                             (rc < 0 ? "renaming it back failed too (" + errno_text(rc) + ")"
                                     : std::string("it was renamed back in Ceph")) +
                             "; " + kLater + "."};
        }
        return done("Renamed RBD volume '" + volume + "' to '" + new_name + "' in pool '" + pool + "'.", w);
    });
}

Result Client::clone_volume(const std::string& pool, const std::string& volume, const std::string& new_name) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    const std::string prefix =
        "ERROR: Failed to clone RBD volume '" + volume + "' to '" + new_name + "' in pool '" + pool + "'";
    if (!valid_name(new_name)) return refused(prefix + ": the new name is not valid (no '/', '@', blanks or control characters)");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        Io io(c, pool);
        {
            Image src(io, volume, true);
            int rc = rbd_copy(src.get(), io.get(), new_name.c_str());
            if (rc < 0) {
                CephFailure f(rc, "rbd: copy failed: " + errno_text(rc));
                if (f.unreachable()) impl_->remember(nullptr, {pool, new_name});  // it may be made yet
                throw f;
            }
        }
        Written w;
        if (auto removed = impl_->record_or_remove(c, io, pool, new_name, w)) {
            const int rc = *removed;
            return {500, "ERROR: Cloned RBD volume '" + volume + "' to '" + new_name +
                             "' in Ceph but could not record it in ZooKeeper; " +
                             (rc < 0 ? "removing the clone failed too (" + errno_text(rc) + "): it stays"
                                     : std::string("the clone was removed from Ceph again")) +
                             "; " + kLater + "."};
        }
        return done("Cloned RBD volume '" + volume + "' to '" + new_name + "' in pool '" + pool + "'", w);
    });
}

Result Client::remove_volume(const std::string& pool, const std::string& volume) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    const std::string prefix = "ERROR: Failed to remove RBD volume '" + volume + "' in pool '" + pool + "'";
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        if (auto vm = impl_->vm_using(pool, volume))
            return refused(prefix + ": it is used by VM '" + *vm + "'; remove it from the VM first.");
        Io io(c, pool);
        try {
            Image image(io, volume, false);
            for (const auto& s : snapshot_names(image.get())) rbd_snap_remove(image.get(), s.c_str());  // errors ignored
        } catch (const CephFailure& f) {
            if (f.code != -ENOENT) throw;
        }
        int rc = rbd_remove(io.get(), volume.c_str());
        // ENOENT: gone from Ceph already (a removal ZooKeeper missed).
        if (rc == -ENOTEMPTY)
            throw CephFailure(rc, "rbd: image has snapshots that could not be removed (a protected snapshot?)");
        if (rc == -EBUSY) throw CephFailure(rc, "rbd: error: image still has watchers (it is in use)");
        if (rc < 0 && rc != -ENOENT) throw CephFailure(rc, "rbd: delete error: " + errno_text(rc));
        Written w;
        bool ok = true;
        impl_->before_record();
        for (const auto& p : {path("volume.name", {pool, volume}), snapshots_of(pool, volume)}) {
            try {
                impl_->zk->remove_recursive(p);
                w.emplace_back(p, std::nullopt);
            } catch (const zk::Error&) {
                ok = false;
            }
        }
        if (!ok) {
            impl_->remember(&c, {pool, volume});
            return {500, "ERROR: Removed RBD volume '" + volume + "' from Ceph but could not remove its keys from "
                         "ZooKeeper; " + std::string(kLater) + " (or remove the volume again)."};
        }
        return done("Removed RBD volume '" + volume + "' in pool '" + pool + "'.", w);
    });
}

// Streams the upload into the image in 4 MiB writes (the only buffer: the
// memory an upload takes does not grow with its size). `failed` starts the
// message of a failure, `left` says what a failure after N bytes leaves in
// the volume ("{n}" replaced by N).
Result Client::Impl::write_image(Connection& c, const std::string& pool, const std::string& volume, const Upload& up,
                                 std::uint64_t limit, std::uint64_t& written, const std::string& failed,
                                 const std::string& left) {
    Io io(c, pool);
    Image image(io, volume, false);
    // Two 4 MiB buffers: one is written to Ceph (asynchronously) while the
    // next is read from the upload, so the network and Ceph overlap.
    struct Slot {
        std::vector<char> buf = std::vector<char>(4 << 20);
        rbd_completion_t done = nullptr;
        std::size_t len = 0;
    };
    Slot slots[2];
    std::uint64_t queued = 0;
    written = 0;
    int write_error = 0;
    // Waits for a slot's write; its bytes count as written once done.
    auto finish = [&](Slot& s) {
        if (!s.done) return;
        rbd_aio_wait_for_complete(s.done);
        auto rc = rbd_aio_get_return_value(s.done);
        rbd_aio_release(s.done);
        s.done = nullptr;
        if (rc < 0 && write_error == 0) write_error = static_cast<int>(rc);
        if (rc >= 0 && write_error == 0) written += s.len;
    };
    auto finish_all = [&] {
        finish(slots[0]);
        finish(slots[1]);
    };
    auto state = [&] {
        std::string l = left;
        if (auto p = l.find("{n}"); p != std::string::npos) {
            if (written == 0) return "nothing was written to volume '" + volume + "'.";
            l.replace(p, 3, std::to_string(written));
        }
        return l;
    };
    auto write_failed = [&]() -> Result {
        CephFailure f(write_error, "rbd: write error: " + errno_text(write_error));
        if (f.unreachable()) throw f;
        return refused(failed + ": " + std::string(f.what()) + "; " + state());
    };
    bool end = false;
    for (int cur = 0; !end; cur ^= 1) {
        Slot& s = slots[cur];
        finish(s);
        if (write_error) {
            finish_all();
            return write_failed();
        }
        std::size_t have = 0;
        while (have < s.buf.size()) {
            std::int64_t n = up.read(s.buf.data() + have, s.buf.size() - have);
            if (n < 0) {
                finish_all();
                std::string why = up.error ? up.error() : std::string();
                return refused(failed + ": the upload could not be read" + (why.empty() ? "" : " (" + why + ")") +
                               " after " + std::to_string(queued + have) + " bytes; " + state());
            }
            if (n == 0) {
                end = true;
                break;
            }
            have += static_cast<std::size_t>(n);
            if (queued + have > limit) {
                finish_all();
                return refused(failed + ": the image is larger than volume '" + volume + "' (" + std::to_string(limit) +
                               " bytes); " + state());
            }
        }
        if (have == 0) break;
        s.len = have;
        int rc = rbd_aio_create_completion(nullptr, nullptr, &s.done);
        if (rc == 0) rc = rbd_aio_write(image.get(), queued, have, s.buf.data(), s.done);
        if (rc < 0) {
            if (s.done) rbd_aio_release(s.done);
            s.done = nullptr;
            finish_all();
            write_error = rc;
            return write_failed();
        }
        queued += have;
    }
    finish_all();
    if (write_error) return write_failed();
    int rc = rbd_flush(image.get());
    if (rc < 0) throw CephFailure(rc, "rbd: flush error: " + errno_text(rc));
    return done("");
}

Result Client::upload_volume(const std::string& pool, const std::string& volume, const std::string& format,
                             const std::optional<std::string>& file_size, const Reader& read) {
    return upload_volume(pool, volume, format, file_size, Upload{read, nullptr, nullptr});
}

Result Client::upload_volume(const std::string& pool, const std::string& volume, const std::string& format,
                             const std::optional<std::string>& file_size, const Upload& up) {
    static const std::vector<std::string> formats = {"raw", "vmdk", "qcow2", "qed", "vdi", "vpc"};
    if (std::find(formats.begin(), formats.end(), format) == formats.end())
        return refused("Image type '" + format + "' is not valid.");
    const std::string missing = "Target volume '" + volume + "' does not exist in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    try {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
    } catch (const zk::Error& e) {
        return {500, "ERROR: ZooKeeper: " + std::string(e.what())};
    }
    if (format == "raw") {
        return impl_->with_ceph("ERROR: Failed to write to volume '" + volume + "' in pool '" + pool + "'",
                                [&](Connection& c) -> Result {
            std::uint64_t size = 0;
            {
                Io io(c, pool);
                Image image(io, volume, true);
                rbd_image_info_t info{};
                int rc = rbd_stat(image.get(), &info, sizeof info);
                if (rc < 0) throw CephFailure(rc, "rbd: error getting information: " + errno_text(rc));
                size = info.size;
            }
            // The size given must be the volume's (bytes or the human form);
            // absent is accepted (the reference's client never sends it).
            if (file_size && *file_size != std::to_string(size) && *file_size != human_size(size))
                return refused("Image file size " + *file_size + " does not match volume size " + human_size(size));
            std::optional<std::uint64_t> length;
            if (up.length) length = up.length();
            if (length && *length > size)
                return refused("Image file size " + std::to_string(*length) + " is larger than volume size " +
                               human_size(size) + " (" + std::to_string(size) + " bytes); nothing was written.");
            std::uint64_t written = 0;
            if (auto r = impl_->write_image(c, pool, volume, up, size, written,
                                            "Failed to upload or write image file to volume '" + volume + "'",
                                            "volume '" + volume + "' now holds the first {n} bytes of the upload over "
                                            "its earlier content: upload the image again.");
                !r.ok())
                return r;
            return done("Wrote uploaded file to volume '" + volume + "' in pool '" + pool + "'.");
        });
    }
    if (!file_size) return refused("A file size must be specified");
    std::optional<std::uint64_t> length;
    if (up.length) length = up.length();
    if (auto declared = parse_size(*file_size); declared && length && *length > *declared)
        return refused("Image file size " + std::to_string(*length) + " is larger than the file size given (" +
                       *file_size + "); nothing was written.");
    const std::string tmp = volume + "_tmp";
    Result made = add_volume(pool, tmp, *file_size);
    if (!made.ok()) return made;
    Result r = impl_->with_ceph("Failed to upload or write image file to temporary volume", [&](Connection& c) -> Result {
        std::uint64_t limit = parse_size(*file_size).value_or(0), written = 0;
        if (auto w = impl_->write_image(c, pool, tmp, up, limit, written,
                                        "Failed to upload or write image file to temporary volume",
                                        "the temporary volume '" + tmp + "' was removed and volume '" + volume +
                                            "' was not changed.");
            !w.ok())
            return w;
        // qemu-img reads and writes RBD itself (its rbd driver, this
        // client's configuration and keyring): nothing is mapped.
        auto rbd_uri = [&](const std::string& image) {
            auto esc = [](std::string s) {
                std::string o;
                for (char ch : s) {
                    if (ch == ':' || ch == '\\') o += '\\';
                    o += ch;
                }
                return o;
            };
            std::string u = "rbd:" + esc(pool) + "/" + esc(image) + ":conf=" + esc(impl_->settings.config_file);
            if (!impl_->settings.keyring.empty()) u += ":keyring=" + esc(impl_->settings.keyring);
            return u;
        };
        auto out = run_command({impl_->settings.qemu_img, "convert", "-n", "-f", format, "-O", "raw", rbd_uri(tmp),
                                rbd_uri(volume)},
                               {}, std::chrono::hours(6));
        if (out.exit_status != 0)
            return refused("Failed to convert image format from '" + format + "' to 'raw': " +
                           (out.exit_status == -1 && out.output.empty() ? impl_->settings.qemu_img + " did not run"
                                                                         : out.output));
        return done("Converted and wrote uploaded file to volume '" + volume + "' in pool '" + pool + "'.");
    });
    remove_volume(pool, tmp);
    return r;
}

// ---------------------------------------------------------------- snapshots

Result Client::add_snapshot(const std::string& pool, const std::string& volume, const std::string& snapshot) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    const std::string prefix =
        "ERROR: Failed to create RBD snapshot '" + snapshot + "' of volume '" + volume + "' in pool '" + pool + "'";
    if (!valid_name(snapshot)) return refused(prefix + ": the name is not valid (no '/', '@', blanks or control characters)");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        Io io(c, pool);
        Image image(io, volume, false);
        int rc = rbd_snap_create(image.get(), snapshot.c_str());
        if (rc < 0) {
            CephFailure f(rc, "rbd: failed to create snapshot: " + errno_text(rc));
            if (f.unreachable()) impl_->remember(nullptr, {pool, volume, snapshot});  // it may be made yet
            throw f;
        }
        Written w = {{path("snapshot.name", {pool, volume, snapshot}), ""},
                     {path("snapshot.stats", {pool, volume, snapshot}), "{}"}};
        zk::Status st = zk::Status::connection_loss;
        impl_->before_record();
        try {
            st = impl_->with_snapshot_count(pool, volume, +1, [&](zk::Transaction& tx) {
                tx.create(path("snapshot.name", {pool, volume, snapshot}), "");
                tx.create(path("snapshot.stats", {pool, volume, snapshot}), "{}");
            });
        } catch (const zk::Error&) {
        }
        if (st != zk::Status::ok) {
            impl_->remember(&c, {pool, volume, snapshot});
            rc = rbd_snap_remove(image.get(), snapshot.c_str());
            return {500, "ERROR: Created RBD snapshot '" + snapshot + "' of volume '" + volume +
                             "' in Ceph but could not record it in ZooKeeper; " +
                             (rc < 0 ? "removing it again failed too (" + errno_text(rc) + "): it stays"
                                     : std::string("it was removed from Ceph again")) +
                             "; " + kLater + "."};
        }
        return done("Created RBD snapshot '" + snapshot + "' of volume '" + volume + "' in pool '" + pool + "'.", w);
    });
}

Result Client::rename_snapshot(const std::string& pool, const std::string& volume, const std::string& snapshot,
                               const std::string& new_name) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    const std::string no_snap = "ERROR: No snapshot with name '" + snapshot + "' is present for volume '" + volume +
                                "' in pool '" + pool + "'.";
    if (!valid_name(snapshot)) return refused(no_snap);
    const std::string prefix = "ERROR: Failed to rename RBD snapshot '" + snapshot + "' to '" + new_name +
                               "' for volume '" + volume + "' in pool '" + pool + "'";
    if (!valid_name(new_name)) return refused(prefix + ": the new name is not valid (no '/', '@', blanks or control characters)");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        if (!impl_->exists(path("snapshot.name", {pool, volume, snapshot}))) return refused(no_snap);
        Io io(c, pool);
        Image image(io, volume, false);
        int rc = rbd_snap_rename(image.get(), snapshot.c_str(), new_name.c_str());
        if (rc < 0) throw CephFailure(rc, "rbd: rename error: " + errno_text(rc));
        Written w;
        bool ok = false;
        impl_->before_record();
        try {
            ok = impl_->move({{path("snapshot.name", {pool, volume, snapshot}), path("snapshot.name", {pool, volume, new_name})}},
                             {}, &w);
        } catch (const zk::Error&) {
        }
        if (!ok) {
            impl_->remember(&c, {pool, volume, snapshot});
            impl_->remember(&c, {pool, volume, new_name});
            rc = rbd_snap_rename(image.get(), new_name.c_str(), snapshot.c_str());
            return {500, "ERROR: Renamed RBD snapshot '" + snapshot + "' to '" + new_name +
                             "' in Ceph but could not move its keys in ZooKeeper; " +
                             (rc < 0 ? "renaming it back failed too (" + errno_text(rc) + ")"
                                     : std::string("it was renamed back in Ceph")) +
                             "; " + kLater + "."};
        }
        return done("Renamed RBD snapshot '" + snapshot + "' to '" + new_name + "' for volume '" + volume +
                        "' in pool '" + pool + "'.",
                    w);
    });
}

Result Client::remove_snapshot(const std::string& pool, const std::string& volume, const std::string& snapshot) {
    const std::string missing = "ERROR: No volume with name '" + volume + "' is present in pool '" + pool + "'.";
    if (!valid_name(pool) || !valid_name(volume)) return refused(missing);
    const std::string no_snap =
        "ERROR: No snapshot with name '" + snapshot + "' is present of volume " + volume + " in pool " + pool + ".";
    if (!valid_name(snapshot)) return refused(no_snap);
    const std::string prefix =
        "Failed to remove RBD snapshot '" + snapshot + "' of volume '" + volume + "' in pool '" + pool + "'";
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("volume.name", {pool, volume}))) return refused(missing);
        if (!impl_->exists(path("snapshot.name", {pool, volume, snapshot}))) return refused(no_snap);
        Io io(c, pool);
        Image image(io, volume, false);
        int rc = rbd_snap_remove(image.get(), snapshot.c_str());
        if (rc == -EBUSY) throw CephFailure(rc, "rbd: snapshot '" + snapshot + "' is protected from removal.");
        // ENOENT: gone from Ceph already (a removal ZooKeeper missed).
        if (rc < 0 && rc != -ENOENT) throw CephFailure(rc, "rbd: failed to remove snapshot: " + errno_text(rc));
        std::vector<std::pair<std::string, std::string>> keys;
        Written w;
        zk::Status st = zk::Status::connection_loss;
        impl_->before_record();
        try {
            impl_->subtree(path("snapshot.name", {pool, volume, snapshot}), keys);
            st = impl_->with_snapshot_count(pool, volume, rc == -ENOENT ? 0 : -1, [&](zk::Transaction& tx) {
                for (auto it = keys.rbegin(); it != keys.rend(); ++it) tx.remove(it->first);
            });
        } catch (const zk::Error&) {
        }
        if (st != zk::Status::ok) {
            impl_->remember(&c, {pool, volume, snapshot});
            return {500, "ERROR: Removed RBD snapshot '" + snapshot + "' of volume '" + volume +
                             "' from Ceph but could not remove its keys from ZooKeeper; " + std::string(kLater) +
                             " (or remove the snapshot again)."};
        }
        for (auto it = keys.rbegin(); it != keys.rend(); ++it) w.emplace_back(it->first, std::nullopt);
        return done("Removed RBD snapshot '" + snapshot + "' of volume '" + volume + "' in pool '" + pool + "'.", w);
    });
}

// ---------------------------------------------------------------- OSDs

Result Client::set_osd_state(const std::string& osd, bool in) {
    const std::string missing = "ERROR: No OSD with ID '" + osd + "' is present in the cluster.";
    if (osd.empty() || !std::all_of(osd.begin(), osd.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
        osd.size() > 9)
        return refused(missing);
    const std::string prefix = std::string("ERROR: Failed to ") + (in ? "enable" : "disable") + " OSD " + osd;
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        if (!impl_->exists(path("osd.id", {osd}))) return refused(missing);
        mon(c, {{"prefix", in ? "osd in" : "osd out"}, {"ids", Json::array({osd})}});
        return done("Set OSD " + osd + (in ? " online." : " offline."));
    });
}

Result Client::set_osd_option(const std::string& option, bool set) {
    const std::string prefix = std::string("ERROR: Failed to ") + (set ? "set" : "unset") + " property '" + option + "'";
    if (option.empty() || option.size() > 64 ||
        !std::all_of(option.begin(), option.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-'; }))
        return refused(prefix + ": Error EINVAL: not a Ceph OSD flag name");
    return impl_->with_ceph(prefix, [&](Connection& c) -> Result {
        mon(c, {{"prefix", set ? "osd set" : "osd unset"}, {"key", option}});
        return done(std::string(set ? "Set" : "Unset") + " OSD property '" + option + "'.");
    });
}

}  // namespace pvc::ceph

namespace pvc::ceph {

// ---------------------------------------------------------------- reconciliation

std::optional<int> Client::Impl::bounded(Connection& c, std::function<int(Connection&)> fn) {
    if (abandoned->load() >= 4) return std::nullopt;
    struct State {
        std::mutex m;
        std::condition_variable cv;
        std::optional<int> rc;
        bool left = false;  // given up on: counted in `abandoned` until it ends
    };
    auto st = std::make_shared<State>();
    auto conn = c.shared_from_this();
    std::thread([st, conn, fn = std::move(fn), count = abandoned] {
        int rc = -EIO;
        try {
            rc = fn(*conn);
        } catch (...) {
        }
        std::lock_guard g(st->m);
        st->rc = rc;
        if (st->left) --*count;
        st->cv.notify_all();
    }).detach();
    std::unique_lock lk(st->m);
    if (st->cv.wait_for(lk, settings.timeout + std::chrono::seconds(1), [&] { return st->rc.has_value(); })) return st->rc;
    st->left = true;
    ++*abandoned;
    return std::nullopt;
}

void Client::Impl::remember(Connection* c, const Pending& p) {
    {
        std::lock_guard g(pending_m);
        bool known = false;
        for (auto& q : pending)
            if (same(q, p)) {
                q.value = p.value;
                q.recheck = std::max(q.recheck, p.recheck);
                known = true;
            }
        if (!known) pending.push_back(p);
    }
    if (!c) return;
    // The pool's journal, for another process (the primary's API, the next
    // `pvc`): a pool Ceph lacks has none (the object is in no pool then).
    if (pool_known(*c, p.pool).value_or(0) != 1) return;
    try {
        Io io(*c, p.pool);
        const std::string key = journal_key(p);
        const char* keys[] = {key.c_str()};
        const char* vals[] = {p.value.c_str()};
        const size_t lens[] = {p.value.size()};
        rados_write_op_t op = rados_create_write_op();
        rados_write_op_omap_set(op, keys, vals, lens, 1);
        rados_write_op_operate(op, io.get(), kJournal, nullptr, 0);
        rados_release_write_op(op);
    } catch (const CephFailure&) {
    }
}

void Client::Impl::forget(Connection& c, const Pending& p) {
    {
        std::lock_guard g(pending_m);
        pending.erase(std::remove_if(pending.begin(), pending.end(), [&](const Pending& q) { return same(q, p); }),
                      pending.end());
    }
    if (pool_known(c, p.pool).value_or(0) != 1) return;
    try {
        Io io(c, p.pool);
        const std::string key = journal_key(p);
        const char* keys[] = {key.c_str()};
        rados_write_op_t op = rados_create_write_op();
        rados_write_op_omap_rm_keys(op, keys, 1);
        rados_write_op_operate(op, io.get(), kJournal, nullptr, 0);
        rados_release_write_op(op);
    } catch (const CephFailure&) {
    }
}

bool Client::Impl::settle(Connection& c, const Pending& p) {
    try {
        if (p.volume.empty()) {
            // A pool: recorded when Ceph has it (its PG count asked for, else
            // Ceph's; its tier from its CRUSH rule `<tier>_tier`), its keys
            // removed when Ceph does not.
            auto known = pool_known(c, p.pool);
            if (!known) return false;
            if (*known == 0) {
                for (const auto& k : {path("pool.name", {p.pool}), volumes_of(p.pool), snapshots_of(p.pool)})
                    zk->remove_recursive(k);
                return true;
            }
            std::string pgs = p.value;
            if (pgs.empty()) pgs = zk->get(path("pool.pgs", {p.pool})).value_or("");
            if (pgs.empty()) {
                auto r = mon_command(c, Json{{"prefix", "osd pool get"}, {"pool", p.pool}, {"var", "pg_num"},
                                             {"format", "json"}}.dump());
                if (r.rc < 0) return false;
                auto j = Json::parse(r.out, nullptr, false);
                if (j.is_discarded() || !j.contains("pg_num")) return false;
                pgs = std::to_string(j["pg_num"].get<long long>());
            }
            std::string tier = zk->get(path("pool.tier", {p.pool})).value_or("");
            if (tier.empty()) {
                tier = "default";
                auto r = mon_command(c, Json{{"prefix", "osd pool get"}, {"pool", p.pool}, {"var", "crush_rule"},
                                             {"format", "json"}}.dump());
                auto j = Json::parse(r.out, nullptr, false);
                if (r.rc >= 0 && !j.is_discarded() && j.contains("crush_rule")) {
                    std::string rule = j["crush_rule"].get<std::string>();
                    for (const char* t : {"hdd", "ssd", "nvme"})
                        if (rule == std::string(t) + "_tier") tier = t;
                }
            }
            return zk->write({{path("pool.name", {p.pool}), ""},
                              {path("pool.pgs", {p.pool}), pgs},
                              {path("pool.tier", {p.pool}), tier},
                              {path("pool.stats", {p.pool}), zk->get(path("pool.stats", {p.pool})).value_or("{}")},
                              {volumes_of(p.pool), ""},
                              {snapshots_of(p.pool), ""}});
        }
        // A volume or a snapshot: the volume's keys (its stats from Ceph, with
        // its snapshot count) when Ceph has it, else removed; a snapshot's
        // keys likewise.
        auto known = pool_known(c, p.pool);
        if (!known) return false;
        std::optional<Io> io;
        if (*known == 1) io.emplace(c, p.pool);
        std::optional<std::string> info;
        std::vector<std::string> snaps;
        if (io) {
            rbd_image_t image = nullptr;
            int rc = rbd_open_read_only(io->get(), p.volume.c_str(), &image, nullptr);
            if (rc == 0) {
                snaps = snapshot_names(image);
                rbd_close(image);
                info = rbd_info_json(c, *io, p.volume);
            } else if (rc != -ENOENT) {
                return false;
            }
        }
        if (!info) {
            zk->remove_recursive(path("volume.name", {p.pool, p.volume}));
            zk->remove_recursive(snapshots_of(p.pool, p.volume));
            return true;
        }
        std::vector<zk::KeyValue> kvs = {{path("volume.name", {p.pool, p.volume}), ""},
                                         {path("volume.stats", {p.pool, p.volume}), *info},
                                         {snapshots_of(p.pool, p.volume), ""}};
        if (!p.snapshot.empty()) {
            if (std::find(snaps.begin(), snaps.end(), p.snapshot) == snaps.end()) {
                zk->remove_recursive(path("snapshot.name", {p.pool, p.volume, p.snapshot}));
            } else {
                kvs.emplace_back(path("snapshot.name", {p.pool, p.volume, p.snapshot}), "");
                if (!zk->exists(path("snapshot.stats", {p.pool, p.volume, p.snapshot})))
                    kvs.emplace_back(path("snapshot.stats", {p.pool, p.volume, p.snapshot}), "{}");
            }
        }
        return zk->write(kvs);
    } catch (const CephFailure&) {
        return false;
    } catch (const zk::Error&) {
        return false;
    }
}

std::size_t Client::Impl::reconcile(Connection& c, bool journals) {
    std::vector<Pending> todo;
    {
        std::lock_guard g(pending_m);
        todo = pending;
    }
    // "Ceph lacks it" must not come from an old map (a pool made a moment
    // ago): the latest OSD map first, or nothing is decided.
    auto latest = bounded(c, [](Connection& conn) { return rados_wait_for_latest_osdmap(conn.cluster); });
    if (!latest || *latest < 0) return todo.size() + (journals ? 1 : 0);
    bool read_all = journals;
    if (journals) {
        std::vector<std::string> pools;
        try {
            pools = zk->children(path("base.pool")).value_or(std::vector<std::string>{});
        } catch (const zk::Error&) {
            read_all = false;
        }
        for (const auto& pool : pools) {
            if (!valid_name(pool)) continue;
            auto known = pool_known(c, pool);
            if (!known) read_all = false;
            if (known.value_or(0) != 1) continue;
            try {
                Io io(c, pool);
                rados_read_op_t op = rados_create_read_op();
                rados_omap_iter_t it = nullptr;
                unsigned char more = 0;
                int prval = 0;
                rados_read_op_omap_get_vals2(op, nullptr, nullptr, 1000, &it, &more, &prval);
                int rc = rados_read_op_operate(op, io.get(), kJournal, 0);
                if (rc == 0 && prval == 0 && it) {
                    char *key = nullptr, *val = nullptr;
                    size_t len = 0;
                    while (rados_omap_get_next(it, &key, &val, &len) == 0 && key) {
                        auto e = journal_entry(pool, key, std::string(val ? val : "", len));
                        if (e && std::none_of(todo.begin(), todo.end(), [&](const Pending& q) { return same(q, *e); }))
                            todo.push_back(*e);
                    }
                }
                if (it) rados_omap_get_end(it);
                rados_release_read_op(op);
                if (rc < 0 && rc != -ENOENT && CephFailure(rc, "").unreachable()) read_all = false;
            } catch (const CephFailure& f) {
                if (f.unreachable()) read_all = false;
            }
        }
    }
    std::size_t left = 0;
    for (const auto& p : todo) {
        if (!settle(c, p)) {
            ++left;
            continue;
        }
        bool again = false;
        {
            std::lock_guard g(pending_m);
            for (auto& q : pending)
                if (same(q, p) && q.recheck > 0) {
                    --q.recheck;
                    again = true;
                }
        }
        if (!again) forget(c, p);
    }
    if (read_all) {
        std::lock_guard g(pending_m);
        journals_read = true;
    }
    return left;
}

std::size_t Client::reconcile() {
    try {
        auto c = impl_->connector.get();
        return impl_->reconcile(*c, true);
    } catch (const CephFailure& f) {
        if (f.unreachable()) impl_->connector.drop_all();
    } catch (const std::exception&) {
    }
    std::lock_guard g(impl_->pending_m);
    return impl_->pending.size() + 1;
}

}  // namespace pvc::ceph
