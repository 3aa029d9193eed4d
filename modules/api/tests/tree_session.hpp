// A fixed cluster tree served as a zk::Session whose watches answer once, at
// once: the API's view (cluster_view.hpp) mirrors it without ZooKeeper, for
// unit tests of the objects and the api_objects fuzzer (fuzz/).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pvc/zk.hpp"

namespace pvc::api::test {

using Tree = std::map<std::string, std::string>;

class TreeSession final : public zk::Session {
public:
    explicit TreeSession(Tree t) : tree_(std::move(t)) {}
    void close() override {}
    bool connected() const override { return true; }
    int64_t session_id() const override { return 1; }
    const zk::SessionOptions& options() const override { return options_; }
    std::optional<std::string> get(const std::string& path, zk::Stat* = nullptr) override {
        auto it = tree_.find(path);
        if (it == tree_.end()) return std::nullopt;
        return it->second;
    }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& paths,
                                                     std::vector<zk::Stat>* = nullptr) override {
        std::vector<std::optional<std::string>> out;
        for (const auto& p : paths) out.push_back(get(p));
        return out;
    }
    bool exists(const std::string& path, zk::Stat* = nullptr) override { return tree_.count(path) > 0; }
    std::optional<std::vector<std::string>> children(const std::string& path) override {
        if (!tree_.count(path)) return std::nullopt;
        std::set<std::string> kids;
        std::string prefix = path == "/" ? "/" : path + "/";
        for (auto it = tree_.lower_bound(prefix); it != tree_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
            std::string rest = it->first.substr(prefix.size());
            if (!rest.empty()) kids.insert(rest.substr(0, rest.find('/')));
        }
        return std::vector<std::string>(kids.begin(), kids.end());
    }
    std::optional<std::vector<std::string>> raw_children(const std::string& path) override { return children(path); }
    bool write(const std::vector<zk::KeyValue>&) override { return false; }
    std::string create(const std::string& path, const std::string&, bool, bool) override { return path; }
    void ensure_path(const std::string&) override {}
    bool create_ephemeral(const std::string&, const std::string&) override { return false; }
    void remove_ephemeral(const std::string&) override {}
    bool remove_recursive(const std::string&) override { return false; }
    zk::Status commit(const zk::Transaction&) override { return zk::Status::other; }

    struct NoWatch final : zk::Watch {
        void cancel() override {}
    };
    std::shared_ptr<zk::Watch> watch_data(const std::string& path, zk::DataCallback cb) override {
        cb(get(path), zk::Stat{});
        return std::make_shared<NoWatch>();
    }
    std::shared_ptr<zk::Watch> watch_children(const std::string& path, zk::ChildrenCallback cb) override {
        cb(children(path));
        return std::make_shared<NoWatch>();
    }
    std::shared_ptr<zk::Watch> on_session_event(zk::SessionCallback) override { return std::make_shared<NoWatch>(); }

private:
    Tree tree_;
    zk::SessionOptions options_;
};

// A tree from records "<path>\n<value>\n%%\n" (the value up to a line
// "%%"); the view's roots and every parent are created with empty values.
// Paths that cannot be znode paths are skipped.
inline Tree parse_tree(const std::string& text) {
    Tree t;
    for (const char* root : {"/config", "/nodes", "/domains", "/networks", "/ceph"}) t[root] = "";
    size_t pos = 0;
    while (pos < text.size() && t.size() < 2000) {
        size_t nl = text.find('\n', pos);
        std::string path = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        if (nl == std::string::npos) break;
        pos = nl + 1;
        size_t end = text.find("\n%%\n", pos - 1);
        std::string value = end == std::string::npos ? text.substr(pos) : text.substr(pos, end + 1 - pos);
        if (!value.empty() && value.back() == '\n') value.pop_back();
        pos = end == std::string::npos ? text.size() : end + 4;
        // A znode path: absolute, no empty segment, no trailing slash.
        if (path.size() < 2 || path[0] != '/' || path.back() == '/' || path.find("//") != std::string::npos) continue;
        if (path.find('\0') != std::string::npos) continue;
        t[path] = value;
        for (size_t s = path.rfind('/'); s != 0 && s != std::string::npos; s = path.rfind('/', s - 1))
            t.emplace(path.substr(0, s), "");
    }
    return t;
}

}  // namespace pvc::api::test
