// pvc::zk::Session's operations: reads, writes, creates, deletes, multi
// (Transaction) and the ephemerals the session re-creates after an expiry.
//
// Every request uses the asynchronous C API and waits on its own completion
// with a deadline (options.op_timeout), so no call hangs while disconnected.
#include "zk/request.hpp"
#include "zk/session_impl.hpp"

#include <pvc/schema.hpp>
#include <pvc/zk_sync.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <random>
#include <thread>

namespace pvc::zk {

namespace detail {

// ---------------------------------------------------------------- helpers

namespace {

Status status_of(int rc) {
    if (rc == ZOK) return Status::ok;
    if (rc == ZNONODE) return Status::no_node;
    if (rc == ZNODEEXISTS) return Status::node_exists;
    if (rc == ZBADVERSION) return Status::bad_version;
    if (rc == ZNOTEMPTY) return Status::not_empty;
    if (rc == ZCONNECTIONLOSS) return Status::connection_loss;
    if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZSESSIONMOVED) return Status::session_expired;
    if (rc == ZOPERATIONTIMEOUT) return Status::timeout;
    if (rc == ZCLOSING) return Status::closed;
    return Status::other;
}

[[noreturn]] void throw_rc(int rc, const std::string& what, const std::string& path) {
    throw Error(status_of(rc), "ZooKeeper " + what + " " + path + ": " + zerror(rc) + " (" +
                                   to_string(status_of(rc)) + ")");
}

Stat to_stat(const struct ::Stat* s) {
    Stat out;
    if (!s) return out;
    out.version = s->version;
    out.cversion = s->cversion;
    out.mzxid = s->mzxid;
    out.ephemeral_owner = s->ephemeralOwner;
    out.num_children = s->numChildren;
    return out;
}

// What a request adds to its paths and values on the wire, upper bounds:
// the length, header and a multi's closing header; per op its multi header,
// the lengths, version, flags and the one open ACL.
constexpr std::size_t kRequestFraming = 32;
constexpr std::size_t kOpFraming = 64;

std::string size_problem(const std::string& path, std::size_t value_bytes, std::size_t request_bytes) {
    if (value_bytes > max_value_bytes)
        return "the value of " + path + " is " + std::to_string(value_bytes) + " bytes, over the limit of " +
               std::to_string(max_value_bytes) + " bytes for one value";
    if (request_bytes > max_request_bytes)
        return "the request is " + std::to_string(request_bytes) + " bytes, over the limit of " +
               std::to_string(max_request_bytes) + " bytes for one request";
    return "";
}

std::string join(const std::string& parent, const std::string& child) {
    return parent == "/" ? "/" + child : parent + "/" + child;
}

using Holder = std::shared_ptr<OpState>;
Holder take(const void* data) {
    auto* h = static_cast<Holder*>(const_cast<void*>(data));
    Holder st = std::move(*h);
    delete h;
    return st;
}

}  // namespace

void data_done(int rc, const char* value, int len, const struct ::Stat* stat, const void* data) {
    auto st = take(data);
    if (rc == ZOK) {
        st->value = (value && len > 0) ? std::string(value, static_cast<size_t>(len)) : std::string();
        st->has_value = true;
        st->stat = to_stat(stat);
    }
    st->finish(rc);
}

void stat_done(int rc, const struct ::Stat* stat, const void* data) {
    auto st = take(data);
    if (rc == ZOK) st->stat = to_stat(stat);
    st->finish(rc);
}

void strings_done(int rc, const struct String_vector* strings, const void* data) {
    auto st = take(data);
    if (rc == ZOK && strings)
        for (int32_t i = 0; i < strings->count; ++i) st->strings.emplace_back(strings->data[i]);
    st->finish(rc);
}

void string_done(int rc, const char* value, const void* data) {
    auto st = take(data);
    if (rc == ZOK && value) st->created = value;
    st->finish(rc);
}

void void_done(int rc, const void* data) { take(data)->finish(rc); }

std::vector<std::string> without_contenders(std::vector<std::string> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](const std::string& c) { return schema::is_lock_contender(c); }),
            v.end());
    std::sort(v.begin(), v.end());
    return v;
}

// ---------------------------------------------------------------- requests

std::shared_ptr<ZHandle> SessionImpl::acquire_handle(Clock::time_point deadline, int& rc) {
    std::unique_lock l(m_);
    while (!closed_ && !(handle_ && connected_)) {
        auto next = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
        state_cv_.wait_until(l, next);
        if (Clock::now() >= deadline) break;
    }
    if (closed_) { rc = ZCLOSING; return nullptr; }
    if (!(handle_ && connected_)) { rc = ZOPERATIONTIMEOUT; return nullptr; }
    return handle_;
}

int SessionImpl::call(const std::shared_ptr<OpState>& st, const std::function<int(zhandle_t*, const void*)>& submit,
                      bool idempotent, bool while_connected) {
    auto deadline = Clock::now() + opts_.op_timeout;
    for (;;) {
        int rc = ZOK;
        auto h = acquire_handle(while_connected ? Clock::now() : deadline, rc);
        if (!h && while_connected && rc == ZOPERATIONTIMEOUT) return ZCONNECTIONLOSS;
        if (!h) return rc;
        {
            std::lock_guard l(st->m);
            st->done = false;
            st->rc = ZOK;
            st->has_value = false;
            st->strings.clear();
        }
        auto* holder = new Holder(st);
        rc = submit(h->zh, holder);
        if (rc == ZOK) requests_++;
        if (rc != ZOK) {
            if (rc == ZBADARGUMENTS || rc == ZINVALIDSTATE) delete holder;
            // Not sent (the handle just expired): safe to retry on the recovered session.
            if (rc == ZINVALIDSTATE && !closed_ && Clock::now() < deadline) {
                h.reset();
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                continue;
            }
            return rc;
        }
        h.reset();
        std::unique_lock l(st->m);
        while (!st->done && !closed_ && Clock::now() < deadline) {
            st->cv.wait_until(l, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
            if (while_connected && !st->done && !connected()) return ZCONNECTIONLOSS;
        }
        if (!st->done) return closed_ ? ZCLOSING : ZOPERATIONTIMEOUT;
        rc = st->rc;
        l.unlock();
        if (idempotent && (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) && !closed_ &&
            Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        return rc;
    }
}

std::optional<std::string> SessionImpl::get_watched(const std::string& path, Stat* stat, bool watch, int& rc) {
    auto st = std::make_shared<OpState>();
    reads_++;
    rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aget(zh, path.c_str(), watch, data_done, d); }, true);
    if (rc != ZOK) return std::nullopt;
    if (stat) *stat = st->stat;
    return st->value;
}

std::optional<std::string> SessionImpl::get(const std::string& path, Stat* stat) {
    int rc = ZOK;
    auto v = get_watched(path, stat, false, rc);
    if (rc == ZNONODE) return std::nullopt;
    if (rc != ZOK) throw_rc(rc, "get", path);
    return v;
}

std::vector<std::optional<std::string>> SessionImpl::get_many(const std::vector<std::string>& paths,
                                                                std::vector<Stat>* stats) {
    if (stats) stats->clear();
    if (paths.empty()) return {};
    auto deadline = Clock::now() + opts_.op_timeout;
    for (;;) {
        int rc = ZOK;
        auto h = acquire_handle(deadline, rc);
        if (!h) throw_rc(rc, "get", paths.empty() ? std::string() : paths.front());
        // All submitted before any is waited for: libzookeeper sends them in
        // order on the one connection.
        std::vector<std::shared_ptr<OpState>> sent;
        sent.reserve(paths.size());
        int submit_rc = ZOK;
        for (const auto& p : paths) {
            auto st = std::make_shared<OpState>();
            auto* holder = new Holder(st);
            reads_++;
            submit_rc = zoo_aget(h->zh, p.c_str(), 0, data_done, holder);
            if (submit_rc != ZOK) {
                if (submit_rc == ZBADARGUMENTS || submit_rc == ZINVALIDSTATE) delete holder;
                break;
            }
            requests_++;
            sent.push_back(std::move(st));
        }
        h.reset();
        // Every completion is waited for (or the deadline), whatever the first
        // failure: the completions own their states, nothing dangles.
        int fail_rc = ZOK;
        size_t fail_at = 0;
        for (size_t i = 0; i < sent.size(); ++i) {
            auto& st = sent[i];
            std::unique_lock l(st->m);
            while (!st->done && !closed_ && Clock::now() < deadline)
                st->cv.wait_until(l, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
            int r = st->done ? st->rc : (closed_ ? ZCLOSING : ZOPERATIONTIMEOUT);
            if (r != ZOK && r != ZNONODE && fail_rc == ZOK) {
                fail_rc = r;
                fail_at = i;
            }
        }
        if (fail_rc == ZOK && submit_rc != ZOK) {
            fail_rc = submit_rc;
            fail_at = sent.size();
        }
        if (fail_rc != ZOK) {
            // Reads are idempotent: retried on the recovered connection, as get() is.
            if ((fail_rc == ZCONNECTIONLOSS || fail_rc == ZSESSIONEXPIRED || fail_rc == ZINVALIDSTATE) &&
                !closed_ && Clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                continue;
            }
            throw_rc(fail_rc, "get", paths[std::min(fail_at, paths.size() - 1)]);
        }
        std::vector<std::optional<std::string>> out;
        out.reserve(paths.size());
        if (stats) stats->assign(paths.size(), Stat{});
        for (size_t i = 0; i < sent.size(); ++i) {
            std::lock_guard l(sent[i]->m);
            if (sent[i]->rc == ZNONODE) {
                out.emplace_back(std::nullopt);
                continue;
            }
            out.emplace_back(std::move(sent[i]->value));
            if (stats) (*stats)[i] = sent[i]->stat;
        }
        return out;
    }
}

bool SessionImpl::exists(const std::string& path, Stat* stat) {
    auto st = std::make_shared<OpState>();
    reads_++;
    int rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aexists(zh, path.c_str(), 0, stat_done, d); },
                  true);
    if (rc == ZNONODE) return false;
    if (rc != ZOK) throw_rc(rc, "exists", path);
    if (stat) *stat = st->stat;
    return true;
}

std::optional<std::vector<std::string>> SessionImpl::raw_children(const std::string& path) {
    auto st = std::make_shared<OpState>();
    reads_++;
    int rc = call(
        st, [&](zhandle_t* zh, const void* d) { return zoo_aget_children(zh, path.c_str(), 0, strings_done, d); },
        true);
    if (rc == ZNONODE) return std::nullopt;
    if (rc != ZOK) throw_rc(rc, "get_children", path);
    return st->strings;
}

std::optional<std::vector<std::string>> SessionImpl::children(const std::string& path) {
    auto raw = raw_children(path);
    if (!raw) return std::nullopt;
    return without_contenders(std::move(*raw));
}

int SessionImpl::create_node(const std::string& path, const std::string& data, int mode, std::string* created) {
    // Never sent when ZooKeeper would close the connection over it (zk.hpp).
    if (auto why = size_problem(path, data.size(), kRequestFraming + kOpFraming + path.size() + data.size());
        !why.empty()) {
        spdlog::error("ZooKeeper create of {} not sent: {}", path, why);
        throw Error(Status::too_large, "ZooKeeper create " + path + ": " + why);
    }
    auto st = std::make_shared<OpState>();
    int rc = call(
        st,
        [&](zhandle_t* zh, const void* d) {
            return zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
                               mode, string_done, d);
        },
        false);
    if (rc == ZOK && created) *created = st->created;
    return rc;
}

std::string SessionImpl::create(const std::string& path, const std::string& data, bool ephemeral, bool sequential) {
    std::string created;
    int rc = create_node(path, data, (ephemeral ? ZOO_EPHEMERAL : 0) | (sequential ? ZOO_SEQUENCE : 0), &created);
    if (rc != ZOK) throw_rc(rc, "create", path);
    return created;
}

Status SessionImpl::remove(const std::string& path, int32_t version) {
    auto st = std::make_shared<OpState>();
    int rc = call(
        st, [&](zhandle_t* zh, const void* d) { return zoo_adelete(zh, path.c_str(), version, void_done, d); },
        version == -1);
    return status_of(rc);
}

void SessionImpl::ensure_path(const std::string& path) {
    if (path.empty() || path == "/") return;
    if (exists(path, nullptr)) return;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        std::string prefix = path.substr(0, pos);
        auto st = std::make_shared<OpState>();
        int rc = call(
            st,
            [&](zhandle_t* zh, const void* d) {
                return zoo_acreate(zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, string_done, d);
            },
            true);  // a repeated create of the same persistent path is harmless (node_exists)
        if (rc != ZOK && rc != ZNODEEXISTS) throw_rc(rc, "create", prefix);
    }
}

bool SessionImpl::remove_recursive(const std::string& path) {
    auto kids = raw_children(path);
    if (!kids) return false;
    for (int attempt = 0; attempt < 5; ++attempt) {
        for (const auto& k : *kids) remove_recursive(join(path, k));
        Status s = remove(path);
        if (s == Status::ok || s == Status::no_node) return true;
        if (s != Status::not_empty) throw Error(s, std::string("ZooKeeper delete ") + path + ": " + to_string(s));
        kids = raw_children(path);  // someone added a child meanwhile
        if (!kids) return true;
    }
    throw Error(Status::not_empty, "ZooKeeper delete " + path + ": children keep appearing");
}

Status SessionImpl::commit(const Transaction& tx) {
    if (tx.empty()) return Status::ok;
    const auto& ops = tx.ops();
    // Never sent when ZooKeeper would close the connection over it (zk.hpp).
    std::size_t total = tx.request_bytes();
    for (const auto& o : ops) {
        auto why = size_problem(o.path, o.data.size(), total);
        if (why.empty()) continue;
        spdlog::error("ZooKeeper transaction of {} operations not sent: {}", ops.size(), why);
        return Status::too_large;
    }
    auto st = std::make_shared<OpState>();
    int rc = call(
        st,
        [&](zhandle_t* zh, const void* d) {
            size_t n = ops.size();
            st->ops.assign(n, zoo_op_t{});
            st->results.assign(n, zoo_op_result_t{});
            st->bufs.assign(n, {});  // a create's path buffer, allocated for creates only
            st->stats.assign(n, ::Stat{});
            for (size_t i = 0; i < n; ++i) {
                const auto& o = ops[i];
                switch (o.kind) {
                    case Transaction::Op::create:
                        st->bufs[i].resize(1024);
                        zoo_create_op_init(&st->ops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                           &ZOO_OPEN_ACL_UNSAFE, o.ephemeral ? ZOO_EPHEMERAL : 0, st->bufs[i].data(),
                                           static_cast<int>(st->bufs[i].size()));
                        break;
                    case Transaction::Op::set:
                        zoo_set_op_init(&st->ops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                        o.version, &st->stats[i]);
                        break;
                    case Transaction::Op::check: zoo_check_op_init(&st->ops[i], o.path.c_str(), o.version); break;
                    case Transaction::Op::remove: zoo_delete_op_init(&st->ops[i], o.path.c_str(), o.version); break;
                }
            }
            return zoo_amulti(zh, static_cast<int>(n), st->ops.data(), st->results.data(), void_done, d);
        },
        false);
    if (rc != ZOK) {
        // Report the failing op's own error, not the "rolled back" code of its neighbours.
        std::lock_guard l(st->m);
        if (st->done)
            for (const auto& r : st->results)
                if (r.err != ZOK && r.err != ZRUNTIMEINCONSISTENCY) return status_of(r.err);
    }
    return status_of(rc);
}

// A write is blind (its values do not depend on what the keys held), so a
// concurrent writer that slipped in between our reads of the versions and the
// commit (bad_version on a check, node_exists on a create) only means our
// versions are stale: the write is built again from fresh versions and
// committed, and the last writer wins, as with any plain set. Without this a
// lost race was a failed write (an API 500, a failed command) although
// nothing was wrong. Bounded: every failed round is another writer's success.
bool SessionImpl::write(const std::vector<KeyValue>& kvs) {
    constexpr int max_rounds = 100;
    Status s = Status::ok;
    for (int round = 0; round < max_rounds; ++round) {
        Transaction tx(*this);
        try {
            for (const auto& [path, data] : kvs) {
                Stat st;
                if (exists(path, &st)) {
                    tx.set(path, data, -1);
                    tx.check(path, st.version + 1);
                } else {
                    tx.create(path, data);
                }
            }
        } catch (const Error& e) {
            spdlog::error("ZooKeeper write failed: {}", e.what());
            return false;
        }
        s = commit(tx);
        if (s != Status::bad_version && s != Status::node_exists) break;
        // Many writers on one key: spread the next rounds a little.
        if (round >= 2) {
            thread_local std::minstd_rand jitter(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
            std::this_thread::sleep_for(std::chrono::microseconds(jitter() % (200u * static_cast<unsigned>(std::min(round, 20)))));
        }
    }
    if (s != Status::ok) {
        std::string keys;
        for (const auto& kv : kvs) keys += (keys.empty() ? "" : ", ") + kv.first;
        spdlog::error("ZooKeeper write of {} failed: {}", keys, to_string(s));
        return false;
    }
    return true;
}

bool SessionImpl::create_ephemeral(const std::string& path, const std::string& data) {
    int rc = create_node(path, data, ZOO_EPHEMERAL);
    if (rc == ZNODEEXISTS || rc == ZCONNECTIONLOSS) {
        // Ours already (an earlier attempt whose reply was lost)?
        Stat s;
        if (exists(path, &s) && s.ephemeral_owner == session_id()) rc = ZOK;
        else if (rc == ZNODEEXISTS) return false;
    }
    if (rc != ZOK) throw_rc(rc, "create", path);
    std::lock_guard l(reg_m_);
    ephemerals_[path] = data;
    return true;
}

void SessionImpl::remove_ephemeral(const std::string& path) {
    {
        std::lock_guard l(reg_m_);
        if (!ephemerals_.erase(path)) return;
    }
    Stat s;
    if (exists(path, &s) && s.ephemeral_owner == session_id()) remove(path, s.version);
}

void SessionImpl::sync(const std::string& path) {
    auto st = std::make_shared<OpState>();
    // Idempotent: after a lost connection it is sent again on the recovered one.
    int rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_async(zh, path.c_str(), string_done, d); }, true);
    if (rc != ZOK && rc != ZNONODE) throw_rc(rc, "sync", path);
}

}  // namespace detail

void sync(Session& session, const std::string& path) {
    if (auto* impl = dynamic_cast<detail::SessionImpl*>(&session)) impl->sync(path);
}

Transaction& Transaction::create(std::string path, std::string data, bool ephemeral) {
    ops_.push_back(Op{Op::create, std::move(path), std::move(data), -1, ephemeral});
    return *this;
}
Transaction& Transaction::set(std::string path, std::string data, int32_t version) {
    ops_.push_back(Op{Op::set, std::move(path), std::move(data), version, false});
    return *this;
}
Transaction& Transaction::check(std::string path, int32_t version) {
    ops_.push_back(Op{Op::check, std::move(path), {}, version, false});
    return *this;
}
Transaction& Transaction::remove(std::string path, int32_t version) {
    ops_.push_back(Op{Op::remove, std::move(path), {}, version, false});
    return *this;
}
Status Transaction::commit() { return session_.commit(*this); }

std::size_t Transaction::request_bytes() const {
    std::size_t n = detail::kRequestFraming;
    for (const auto& o : ops_) n += detail::kOpFraming + o.path.size() + o.data.size();
    return n;
}

std::size_t write_request_bytes(const std::vector<KeyValue>& kvs) {
    std::size_t n = detail::kRequestFraming;
    for (const auto& [path, data] : kvs) n += 2 * (detail::kOpFraming + path.size()) + data.size();  // set + check
    return n;
}

}  // namespace pvc::zk
