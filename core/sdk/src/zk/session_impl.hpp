// The libzookeeper_mt-backed Session (internal; Lock uses its wait hooks).
// session.cpp: connection, session states, event thread; session_ops.cpp:
// requests and operations; session_watches.cpp: watches, session-event
// subscriptions, one-shot waits.
#pragma once

#include <pvc/zk.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

typedef struct _zhandle zhandle_t;

namespace pvc::zk::detail {

using Clock = std::chrono::steady_clock;
class SessionImpl;

// Context given to zookeeper_init: identifies which handle generation an event belongs to.
struct HandleCtx {
    SessionImpl* impl;
    uint64_t gen;
};

// Owns one zhandle_t; zookeeper_close() when the last user lets go.
struct ZHandle {
    zhandle_t* zh = nullptr;
    std::unique_ptr<HandleCtx> ctx;
    ZHandle() = default;
    ZHandle(const ZHandle&) = delete;
    ZHandle& operator=(const ZHandle&) = delete;
    ~ZHandle();
};

struct OpState;
struct WatchState;
struct SubState;

// A single-fire waiter on a path (lock recipe: wait for the predecessor to change).
struct OneShot {
    std::mutex m;
    std::condition_variable cv;
    bool fired = false;
    void fire() {
        { std::lock_guard l(m); fired = true; }
        cv.notify_all();
    }
};

enum class WaitResult { changed, timeout, closed };

class SessionImpl final : public Session {
public:
    explicit SessionImpl(SessionOptions o);
    ~SessionImpl() override;

    void start_and_wait();  // used by Session::connect

    void close() override;
    bool connected() const override;
    int64_t session_id() const override;
    const SessionOptions& options() const override { return opts_; }

    std::optional<std::string> get(const std::string& path, Stat* stat) override;
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& paths,
                                                     std::vector<Stat>* stats) override;
    bool exists(const std::string& path, Stat* stat) override;
    std::optional<std::vector<std::string>> children(const std::string& path) override;
    std::optional<std::vector<std::string>> raw_children(const std::string& path) override;

    bool write(const std::vector<KeyValue>& kvs) override;
    std::string create(const std::string& path, const std::string& data, bool ephemeral, bool sequential) override;
    void ensure_path(const std::string& path) override;
    bool create_ephemeral(const std::string& path, const std::string& data) override;
    void remove_ephemeral(const std::string& path) override;
    bool remove_recursive(const std::string& path) override;
    Status commit(const Transaction& tx) override;
    // zoo_async (pvc/zk_sync.hpp); throws zk::Error on failure.
    void sync(const std::string& path);

    std::shared_ptr<Watch> watch_data(const std::string& path, DataCallback cb) override;
    std::shared_ptr<Watch> watch_children(const std::string& path, ChildrenCallback cb) override;
    // Registers a prepared watch, fires it once on the event thread, returns its handle.
    std::shared_ptr<Watch> add_watch(std::shared_ptr<WatchState> w);
    std::shared_ptr<Watch> on_session_event(SessionCallback cb) override;
    std::string session_password() const override;
    OpCounts stats() const override { return {requests_.load(), reads_.load()}; }

    // Lock support: waits until `path` changes or vanishes (true at once if absent),
    // a session event happens, the deadline passes or the session closes.
    // `stop` (optional) is polled every 100 ms; true ends the wait (WaitResult::timeout).
    WaitResult wait_for_change(const std::string& path, Clock::time_point deadline,
                               const std::function<bool()>& stop = {});
    // Plain delete (version -1); Status::ok / no_node / ...
    Status remove(const std::string& path, int32_t version = -1);
    // A delete of one of our own ephemerals (a lock contender) that failed
    // with the connection down: done as soon as the same session is
    // connected again, dropped if the session expires (the node is gone then).
    // Without it a contender left over from a failed release would block
    // every later contender for as long as our session lives.
    void remove_when_reconnected(const std::string& path);

    // Called on libzookeeper's thread.
    void zk_event(uint64_t gen, int type, int state, const char* path);

    void cancel_watch(const std::shared_ptr<WatchState>& w);
    void cancel_sub(const std::shared_ptr<SubState>& s);
    bool on_event_thread() const { return std::this_thread::get_id() == event_thread_id_; }

private:
    // idempotent: retried after a lost connection until the operation timeout.
    // while_connected: never waits for a connection, and gives up (connection
    // loss) as soon as the session is disconnected while the request is out.
    int call(const std::shared_ptr<OpState>& st, const std::function<int(zhandle_t*, const void*)>& submit,
             bool idempotent, bool while_connected = false);
    // One create request (never retried: a create is not idempotent); the
    // created path (sequential suffix included) goes to *created.
    int create_node(const std::string& path, const std::string& data, int mode, std::string* created = nullptr);
    std::shared_ptr<ZHandle> acquire_handle(Clock::time_point deadline, int& rc);
    std::shared_ptr<ZHandle> open_handle();  // creates a new generation, returns it (nullptr on failure)
    void post(std::function<void()> fn);
    void run_on_event_thread(std::function<void()> fn);  // inline if already there, else post + wait
    void event_loop();
    void handle_session_state(uint64_t gen, int state);
    void dispatch_node_event(int type, const std::string& path);
    void refresh(const std::shared_ptr<WatchState>& w, bool force);
    void refresh_all(bool force);
    void restore_ephemerals();
    void remove_orphans();
    void emit(SessionEvent e);
    void fire_all_oneshots();
    std::optional<std::string> get_watched(const std::string& path, Stat* stat, bool watch, int& rc);

    SessionOptions opts_;

    mutable std::mutex m_;                 // handle_, gen_, connected_, closed_
    std::condition_variable state_cv_;
    std::shared_ptr<ZHandle> handle_;
    uint64_t gen_ = 0;
    bool connected_ = false;
    std::atomic<bool> closed_{false};
    std::atomic<uint64_t> requests_{0}, reads_{0};  // stats()

    // event thread
    std::mutex q_m_;
    std::condition_variable q_cv_;
    std::deque<std::function<void()>> queue_;
    bool stop_ = false;
    std::thread event_thread_;
    std::thread::id event_thread_id_;
    // event-thread-only state
    bool ever_connected_ = false;
    bool suspended_ = false;
    bool recovering_ = false;
    // A forced re-read (after a session expiry) cut short by another loss of
    // the connection: the next reconnection forces it again.
    bool force_pending_ = false;

    std::mutex reg_m_;  // watches, subs, oneshots, ephemerals
    std::multimap<std::string, std::shared_ptr<WatchState>> watches_;
    std::vector<std::shared_ptr<SubState>> subs_;
    std::multimap<std::string, std::shared_ptr<OneShot>> oneshots_;
    std::map<std::string, std::string> ephemerals_;
    std::vector<std::string> orphans_;  // remove_when_reconnected()
};

}  // namespace pvc::zk::detail
