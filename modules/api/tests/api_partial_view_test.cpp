// A request is never answered from a part of the cluster view still loading
// (routes.cpp, Api::handle). A new object's znodes reach the view one watch
// at a time: a network created with two ACLs can be in the view with both
// ACL names listed and only one rule read. Answered then, the ACL list shows
// one ACL, after an earlier answer (read from ZooKeeper) showed two.
//
// Deterministic: a session double whose watches answer at once, except the
// ones the test holds back, so the view stays half-loaded for as long as the
// test wants.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_view.hpp"
#include "metrics.hpp"
#include "pvc/schema.hpp"
#include "pvc/zk.hpp"
#include "routes.hpp"

namespace pvc::api {
namespace {

using namespace std::chrono_literals;
using schema::path;

// A tree served as a zk::Session: a write (add) fires the children watch of
// each parent it changes; a watch whose path is held gives its first answer
// only when released.
class LoadingSession final : public zk::Session {
public:
    explicit LoadingSession(std::map<std::string, std::string> tree) : tree_(std::move(tree)) {}
    void close() override {}
    bool connected() const override { return true; }
    int64_t session_id() const override { return 1; }
    const zk::SessionOptions& options() const override { return options_; }
    std::optional<std::string> get(const std::string& p, zk::Stat* = nullptr) override {
        std::lock_guard g(m_);
        auto it = tree_.find(p);
        if (it == tree_.end()) return std::nullopt;
        return it->second;
    }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& paths,
                                                     std::vector<zk::Stat>* = nullptr) override {
        std::vector<std::optional<std::string>> out;
        for (const auto& p : paths) out.push_back(get(p));
        return out;
    }
    bool exists(const std::string& p, zk::Stat* = nullptr) override { return get(p).has_value(); }
    std::optional<std::vector<std::string>> children(const std::string& p) override {
        std::lock_guard g(m_);
        return children_locked(p);
    }
    std::optional<std::vector<std::string>> raw_children(const std::string& p) override { return children(p); }
    bool write(const std::vector<zk::KeyValue>&) override { return false; }
    std::string create(const std::string& p, const std::string&, bool, bool) override { return p; }
    void ensure_path(const std::string&) override {}
    bool create_ephemeral(const std::string&, const std::string&) override { return false; }
    void remove_ephemeral(const std::string&) override {}
    bool remove_recursive(const std::string&) override { return false; }
    zk::Status commit(const zk::Transaction&) override { return zk::Status::other; }

    struct Handle final : zk::Watch {
        std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
        void cancel() override { *cancelled = true; }
    };
    std::shared_ptr<zk::Watch> watch_data(const std::string& p, zk::DataCallback cb) override {
        auto h = std::make_shared<Handle>();
        auto cancelled = h->cancelled;
        auto call = [this, p, cb, cancelled] {
            if (!*cancelled) cb(get(p), zk::Stat{});
        };
        {
            std::lock_guard g(m_);
            if (held_.count(p)) {
                held_calls_[p] = call;
                return h;
            }
        }
        call();
        return h;
    }
    std::shared_ptr<zk::Watch> watch_children(const std::string& p, zk::ChildrenCallback cb) override {
        auto h = std::make_shared<Handle>();
        auto cancelled = h->cancelled;
        auto call = [this, p, cb, cancelled] {
            if (!*cancelled) cb(children(p));
        };
        {
            std::lock_guard g(m_);
            children_calls_[p] = call;
        }
        call();
        return h;
    }
    std::shared_ptr<zk::Watch> on_session_event(zk::SessionCallback) override { return std::make_shared<Handle>(); }

    // The first answer of the data watch on `p` waits for release(p).
    void hold(const std::string& p) {
        std::lock_guard g(m_);
        held_.insert(p);
    }
    void release(const std::string& p) {
        std::function<void()> call;
        {
            std::lock_guard g(m_);
            held_.erase(p);
            auto it = held_calls_.find(p);
            if (it == held_calls_.end()) return;
            call = std::move(it->second);
            held_calls_.erase(it);
        }
        call();
    }
    // Adds the keys (and their parents), then fires the children watches of
    // the parents that gained a child, as ZooKeeper would after one multi.
    void add(const std::map<std::string, std::string>& kvs) {
        std::set<std::string> changed;
        std::vector<std::function<void()>> calls;
        {
            std::lock_guard g(m_);
            for (const auto& [p, v] : kvs) {
                tree_[p] = v;
                for (std::string c = p; c.rfind('/') != 0;) {
                    std::string parent = c.substr(0, c.rfind('/'));
                    changed.insert(parent);
                    tree_.emplace(parent, "");
                    c = parent;
                }
            }
            for (const auto& p : changed)
                if (auto it = children_calls_.find(p); it != children_calls_.end()) calls.push_back(it->second);
        }
        for (auto& c : calls) c();
    }

private:
    std::optional<std::vector<std::string>> children_locked(const std::string& p) const {
        if (!tree_.count(p)) return std::nullopt;
        std::set<std::string> kids;
        std::string prefix = p + "/";
        for (auto it = tree_.lower_bound(prefix); it != tree_.end() && it->first.rfind(prefix, 0) == 0; ++it)
            kids.insert(it->first.substr(prefix.size()).substr(0, it->first.substr(prefix.size()).find('/')));
        return std::vector<std::string>(kids.begin(), kids.end());
    }

    std::mutex m_;
    std::map<std::string, std::string> tree_;
    std::set<std::string> held_;
    std::map<std::string, std::function<void()>> held_calls_, children_calls_;
    zk::SessionOptions options_;
};

const std::string vni = "1000";

std::map<std::string, std::string> network_tree() {
    std::map<std::string, std::string> t;
    for (const char* root : {"/config", "/nodes", "/domains", "/networks", "/ceph"}) t[root] = "";
    for (auto [k, v] : std::initializer_list<std::pair<const char*, const char*>>{
             {"network.vni", "office"}, {"network.type", "managed"}, {"network.rule", ""},
             {"network.rule.in", ""}, {"network.rule.out", ""}, {"network.reservation", ""},
             {"network.lease", ""}})
        t[path(k, {vni})] = v;
    return t;
}

// Both ACLs of network 1000, as one write creates them.
std::map<std::string, std::string> two_acls() {
    return {{path("rule.description", {vni, "in", "ssh"}), ""},
            {path("rule.order", {vni, "in", "ssh"}), "10"},
            {path("rule.rule", {vni, "in", "ssh"}), "tcp dport 22 accept"},
            {path("rule.description", {vni, "in", "web"}), ""},
            {path("rule.order", {vni, "in", "web"}), "2"},
            {path("rule.rule", {vni, "in", "web"}), "tcp dport 80 accept"}};
}

class ApiPartialView : public ::testing::Test {
protected:
    void SetUp() override {
        session = std::make_shared<LoadingSession>(network_tree());
        view = std::make_unique<ClusterView>(session);
        view->start();
        ASSERT_TRUE(view->wait_ready(30s));
        settings.node = "hv1";
        settings.coordinator = true;
        settings.auth_enabled = false;
        api = std::make_unique<Api>(session, *view, settings, Logger(), figures);
    }
    void TearDown() override {
        api.reset();
        view->stop();
    }
    HttpResponse get(const std::string& target) {
        HttpRequest r;
        r.method = "GET";
        r.target = "/api/v1" + target;
        return api->handle(r, std::stop_token{});
    }
    // Waits (bounded) until the view shows `p` with `value`.
    bool view_shows(const std::string& p, const std::string& value) {
        auto until = std::chrono::steady_clock::now() + 30s;
        while (std::chrono::steady_clock::now() < until) {
            if (view->read().get(p) == value) return true;
            std::this_thread::sleep_for(5ms);
        }
        return false;
    }

    std::shared_ptr<LoadingSession> session;
    std::unique_ptr<ClusterView> view;
    ApiSettings settings;
    DaemonFigures figures;
    std::unique_ptr<Api> api;
};

TEST_F(ApiPartialView, AReadOfAnObjectStillLoadingCountsAsPartial) {
    const std::string held = path("rule.order", {vni, "in", "web"});
    session->hold(held);
    session->add(two_acls());
    ASSERT_TRUE(view_shows(path("rule.order", {vni, "in", "ssh"}), "10"));
    ASSERT_TRUE(view_shows(path("rule.rule", {vni, "in", "web"}), "tcp dport 80 accept"));
    auto before = ClusterView::partial_reads();
    {
        auto r = view->read();
        EXPECT_EQ(r.children(path("network.rule.in", {vni})), (std::vector<std::string>{"ssh", "web"}));
        EXPECT_EQ(r.get(path("rule.order", {vni, "in", "ssh"})), "10");
        EXPECT_FALSE(r.exists(path("network.vni", {"2000"})));  // truly absent: not partial
        EXPECT_FALSE(r.exists(path("rule.order", {vni, "out", "none"})));
        EXPECT_EQ(ClusterView::partial_reads(), before);
        EXPECT_FALSE(r.get(held));  // listed, not loaded yet
        EXPECT_EQ(ClusterView::partial_reads(), before + 1);
    }
    EXPECT_FALSE(view->wait_settled(50ms));
    session->release(held);
    EXPECT_TRUE(view->wait_settled(30s));
    before = ClusterView::partial_reads();
    EXPECT_EQ(view->read().get(held), "2");
    EXPECT_EQ(ClusterView::partial_reads(), before);
}

// The view half-loaded for the whole request: the answer comes from
// ZooKeeper (here the double's tree), with both ACLs; a route answered from
// the half-loaded view listed one.
TEST_F(ApiPartialView, AnAclListIsNeverAnsweredFromANetworkStillLoading) {
    const std::string held = path("rule.order", {vni, "in", "web"});
    session->hold(held);
    session->add(two_acls());
    ASSERT_TRUE(view_shows(path("rule.order", {vni, "in", "ssh"}), "10"));
    ASSERT_TRUE(view_shows(path("rule.rule", {vni, "in", "web"}), "tcp dport 80 accept"));
    auto res = get("/network/" + vni + "/acl");
    ASSERT_EQ(res.status, 200u) << res.body;
    auto acl = nlohmann::json::parse(res.body);
    ASSERT_EQ(acl.size(), 2u) << res.body;
    EXPECT_EQ(acl[0]["description"], "web");  // order 2 before order 10
    EXPECT_EQ(acl[1]["rule"], "tcp dport 22 accept");
    EXPECT_EQ(figures.confirmed_reads.load(), 1u);

    // Loaded: answered from the view, nothing confirmed.
    session->release(held);
    ASSERT_TRUE(view->wait_settled(30s));
    res = get("/network/" + vni + "/acl");
    ASSERT_EQ(res.status, 200u) << res.body;
    EXPECT_EQ(nlohmann::json::parse(res.body).size(), 2u) << res.body;
    EXPECT_EQ(figures.confirmed_reads.load(), 1u);
}

// The held answer arrives while the request waits: answered from the view
// once it has loaded the network, without asking ZooKeeper.
TEST_F(ApiPartialView, AReadWaitsForTheViewToLoadWhatItListed) {
    const std::string held = path("rule.order", {vni, "in", "web"});
    session->hold(held);
    session->add(two_acls());
    ASSERT_TRUE(view_shows(path("rule.rule", {vni, "in", "web"}), "tcp dport 80 accept"));
    std::thread releaser([&] {
        std::this_thread::sleep_for(100ms);  // the request is waiting by then, or not: both answer two ACLs
        session->release(held);
    });
    auto res = get("/network/" + vni + "/acl");
    releaser.join();
    ASSERT_EQ(res.status, 200u) << res.body;
    EXPECT_EQ(nlohmann::json::parse(res.body).size(), 2u) << res.body;
}

}  // namespace
}  // namespace pvc::api
