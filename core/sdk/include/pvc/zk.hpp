// ZooKeeper: one session wrapper over libzookeeper_mt, kazoo-style watches,
// reference-compatible multi-key transactions and kazoo-compatible locks.
//
// Threading: every blocking call (get, write, lock acquire...) may be made
// from any thread except a watch callback. Watch and session-event callbacks
// run on the session's single event thread, in order; they must be short
// (post work to a strand) and must not call blocking Session methods other
// than the reads they need. The session reconnects by itself: on expiry it
// opens a new session, re-creates its registered ephemerals, re-arms every
// live watch (each fires once with the current value) and emits
// SessionEvent::expired_recovered.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "pvc/export.hpp"

namespace pvc::zk {

using namespace std::chrono_literals;

// Result codes of operations that may fail for ordinary reasons.
// `too_large`: refused by the session itself, nothing sent (below).
enum class Status { ok, no_node, node_exists, bad_version, not_empty, connection_loss, session_expired,
                    timeout, closed, other, too_large };
PVC_SDK_API const char* to_string(Status s);

class PVC_SDK_API Error : public std::runtime_error {
public:
    Error(Status s, const std::string& what) : std::runtime_error(what), status(s) {}
    Status status;
};

struct Stat {
    int32_t version = -1;         // data version
    int32_t cversion = -1;        // children version
    int64_t mzxid = 0;
    int64_t ephemeral_owner = 0;  // session id of the owner, 0 if persistent
    int32_t num_children = 0;
};

enum class SessionEvent {
    connected,          // first connection established
    suspended,          // connection lost, session may still be alive
    reconnected,        // same session resumed after `suspended`
    expired_recovered,  // old session expired; new one open, ephemerals and watches restored
    closed,
};
PVC_SDK_API const char* to_string(SessionEvent e);

struct SessionOptions {
    // "host:port,host:port" (libzookeeper connect string, no chroot).
    std::string hosts;
    std::chrono::milliseconds session_timeout = 10s;
    // How long connect() waits for the first session before throwing.
    std::chrono::milliseconds connect_timeout = 15s;
    // Per-operation bound for blocking calls while disconnected.
    std::chrono::milliseconds op_timeout = 10s;
};

// What a session has sent to ZooKeeper since it was opened, for benchmarks
// and tests that count what a procedure costs. `reads`: get, exists and
// children requests, the re-reads that re-arm watches included.
struct OpCounts {
    uint64_t requests = 0;  // every request, reads and writes
    uint64_t reads = 0;
};

// A (path, data) pair written by Session::write().
using KeyValue = std::pair<std::string, std::string>;

// What one request may carry. ZooKeeper answers a request larger than its
// `jute.maxbuffer` (default 1 MiB - 1 byte, the whole request: paths, values
// and framing) by closing the client's connection: every user of the session
// then waits for the reconnection, a daemon's keepalive included. So the
// session refuses such a request itself, before anything is sent: a create,
// or a transaction (write() included) with a value over max_value_bytes or
// a total over max_request_bytes gets Status::too_large (create() throws
// zk::Error with it) and an error line naming the limit. Callers that take
// input from people (the API, the command line) check first and say which
// value is too large.
inline constexpr std::size_t max_value_bytes = 1024 * 1024 - 8 * 1024;
inline constexpr std::size_t max_request_bytes = 1024 * 1024 - 1024;

class Session;

// Handle of a live watch; destroying (or cancel()) stops further callbacks.
class PVC_SDK_API Watch {
public:
    virtual ~Watch() = default;
    virtual void cancel() = 0;
};

// Data watch callback: latest data (nullopt = znode absent) and its stat.
using DataCallback = std::function<void(const std::optional<std::string>& data, const Stat& stat)>;
// Children watch callback: latest children with lock contenders removed
// (nullopt = znode absent).
using ChildrenCallback = std::function<void(const std::optional<std::vector<std::string>>& children)>;
using SessionCallback = std::function<void(SessionEvent)>;

// One multi-operation, all-or-nothing.
class PVC_SDK_API Transaction {
public:
    explicit Transaction(Session& s) : session_(s) {}
    Transaction& create(std::string path, std::string data, bool ephemeral = false);
    Transaction& set(std::string path, std::string data, int32_t version = -1);
    Transaction& check(std::string path, int32_t version);
    Transaction& remove(std::string path, int32_t version = -1);
    // Commits; returns Status::ok or the first failing op's status.
    Status commit();
    bool empty() const { return ops_.empty(); }
    // The request's size on the wire, an upper bound (compared with max_request_bytes).
    std::size_t request_bytes() const;

    struct Op {
        enum Kind { create, set, check, remove } kind;
        std::string path;
        std::string data;
        int32_t version = -1;
        bool ephemeral = false;
    };
    const std::vector<Op>& ops() const { return ops_; }

private:
    Session& session_;
    std::vector<Op> ops_;
};

class PVC_SDK_API Session : public std::enable_shared_from_this<Session> {
public:
    // Connects, waiting up to options.connect_timeout; throws zk::Error
    // (Status::timeout) naming the hosts if no session could be opened.
    static std::shared_ptr<Session> connect(SessionOptions options);
    virtual ~Session() = default;

    // Closes the session (ephemerals and lock contenders vanish). Idempotent.
    virtual void close() = 0;
    virtual bool connected() const = 0;
    virtual int64_t session_id() const = 0;
    virtual const SessionOptions& options() const = 0;
    // The session password (raw bytes), with session_id() the credentials a
    // second client needs to take over or expire this session (tests).
    virtual std::string session_password() const { return {}; }
    virtual OpCounts stats() const { return {}; }

    // --- reads (nullopt when absent; throw zk::Error on other failures) ---
    virtual std::optional<std::string> get(const std::string& path, Stat* stat = nullptr) = 0;
    // Several gets sent at once: one round trip instead of one per path.
    // ZooKeeper answers a session's requests in order, so a path listed
    // twice is read again after the paths between (a torn-read check). Each
    // result as get() gives it; throws zk::Error if any read fails. `stats`,
    // when given, receives one Stat per path.
    virtual std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& paths,
                                                             std::vector<Stat>* stats = nullptr) = 0;
    virtual bool exists(const std::string& path, Stat* stat = nullptr) = 0;
    // Children names, lock contenders removed, sorted.
    virtual std::optional<std::vector<std::string>> children(const std::string& path) = 0;
    // Children names as ZooKeeper returns them (lock recipes need these).
    virtual std::optional<std::vector<std::string>> raw_children(const std::string& path) = 0;

    // --- writes ---
    // The reference's write: one multi of create (absent) or set+check(v+1)
    // (present) per pair, in order; false (and a logged reason) on failure.
    virtual bool write(const std::vector<KeyValue>& kvs) = 0;
    bool write(const std::string& path, const std::string& data) { return write({{path, data}}); }
    // Plain create; returns the created path (sequential suffix included).
    virtual std::string create(const std::string& path, const std::string& data, bool ephemeral = false,
                               bool sequential = false) = 0;
    // Creates `path` and any missing parents with empty data (existing ones untouched).
    virtual void ensure_path(const std::string& path) = 0;
    // An ephemeral owned by this daemon: re-created after session expiry
    // until remove_ephemeral(). Returns false if it exists already (owned by another session).
    virtual bool create_ephemeral(const std::string& path, const std::string& data) = 0;
    virtual void remove_ephemeral(const std::string& path) = 0;
    // Recursive delete (children first, not atomic). False if it did not exist.
    virtual bool remove_recursive(const std::string& path) = 0;
    virtual Status commit(const Transaction& tx) = 0;

    // --- watches (kazoo DataWatch / ChildrenWatch) ---
    // Called once at once with the current value, then after every change
    // with the latest value; re-armed after each fire and after session recovery.
    virtual std::shared_ptr<Watch> watch_data(const std::string& path, DataCallback cb) = 0;
    virtual std::shared_ptr<Watch> watch_children(const std::string& path, ChildrenCallback cb) = 0;

    // Session state changes; returned handle unsubscribes on destruction.
    virtual std::shared_ptr<Watch> on_session_event(SessionCallback cb) = 0;
};

enum class LockKind { exclusive, write, read };

// kazoo-compatible Lock / WriteLock / ReadLock on key `path`
// (docs/wire-contract.md §4.1). Not re-entrant; released by the destructor.
class PVC_SDK_API Lock {
public:
    Lock(std::shared_ptr<Session> session, std::string path, LockKind kind, std::string identifier = "");
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

    // Blocks until held, or until `timeout` passes (nullopt = forever).
    // Returns false on timeout (our contender is removed) or when the session closes.
    // The wait is kazoo's: a watch on the predecessor's deletion, so a long
    // (or unbounded) wait keeps its place in the queue; the contender is only
    // re-created when a session expiry has removed it.
    bool acquire(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
    // Same, and also gives up (false, contender removed) once `stop` says so
    // (polled at least every 100 ms): an unbounded wait that ends at shutdown.
    using StopCheck = std::function<bool()>;
    bool acquire(std::optional<std::chrono::milliseconds> timeout, const StopCheck& stop);
    bool acquire(std::optional<std::chrono::milliseconds> timeout, std::stop_token stop);
    void release();
    // Steps 1-2 only: our contender joins the queue now and acquire() later
    // waits from that place. Lets a holder queue its next lock before it
    // releases this one (nobody who queues in between can overtake it).
    void enqueue();
    bool held() const { return !node_.empty() && !queued_; }
    // After a failed acquire: true when ZooKeeper errors (connection loss,
    // expiry) kept it from an answer, false when a live holder kept the lock
    // until the timeout. Callers that give up on a timeout retry on this.
    bool interrupted() const { return interrupted_; }
    // Name of our contender znode while held or waiting ("" otherwise).
    const std::string& contender() const { return node_; }

private:
    std::shared_ptr<Session> session_;
    std::string path_;
    LockKind kind_;
    std::string identifier_;
    std::string prefix_;  // "<hex uuid4><marker>"
    std::string node_;
    bool queued_ = false;  // node_ is a contender enqueue() made, not yet acquired
    bool interrupted_ = false;
};

// The size on the wire of Session::write(kvs)'s transaction, an upper bound
// (each key counted as a set and a check, the larger of its two forms).
PVC_SDK_API std::size_t write_request_bytes(const std::vector<KeyValue>& kvs);

// Builds a "host:port,..." connect string from coordinator entries
// ("host" or "host:port"; default port 2181).
PVC_SDK_API std::string connect_string(const std::vector<std::string>& coordinators);

// The reference's value encodings (docs/wire-contract.md §1.2).
PVC_SDK_API std::string py_bool(bool b);                 // "True"/"False"
PVC_SDK_API std::string py_float(double d);              // Python float repr ("0.0", "0.52")
// Lenient boolean: y yes t true on 1 / n no f false off 0 (case-insensitive).
PVC_SDK_API std::optional<bool> lenient_bool(std::string_view s);

}  // namespace pvc::zk
