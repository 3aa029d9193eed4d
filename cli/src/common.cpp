#include "common.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "pvc/client.hpp"

namespace pvc::cli {
namespace {

std::shared_ptr<zk::Session>& session_slot() {
    static std::shared_ptr<zk::Session> s;
    return s;
}

// Coordinators of a pvcnoded.yaml (pvc.cluster.coordinators), as written.
std::vector<std::string> coordinators_of(const std::string& file) {
    if (!std::filesystem::exists(file)) throw Failure("configuration file '" + file + "' does not exist", exit_usage);
    YAML::Node root;
    try {
        root = YAML::LoadFile(file);
    } catch (const YAML::Exception& e) {
        throw Failure("cannot read configuration file '" + file + "': " + e.what(), exit_usage);
    }
    YAML::Node list = root["pvc"]["cluster"]["coordinators"];
    if (!list || !list.IsSequence() || list.size() == 0)
        throw Failure("configuration file '" + file + "' has no pvc.cluster.coordinators list", exit_usage);
    std::vector<std::string> out;
    for (const auto& item : list) out.push_back(item.as<std::string>());
    return out;
}

}  // namespace

GlobalOptions& globals() {
    static GlobalOptions g;
    return g;
}

std::string resolve_hosts(const GlobalOptions& g) {
    if (!g.zookeeper.empty()) return zk::connect_string(split(g.zookeeper, ','));
    if (!g.config_file.empty()) return zk::connect_string(coordinators_of(g.config_file));
    if (const char* env = std::getenv("PVC_ZOOKEEPER"); env && *env) return zk::connect_string(split(env, ','));
    const char* default_config = "/etc/pvc/pvcnoded.yaml";
    if (std::filesystem::exists(default_config)) return zk::connect_string(coordinators_of(default_config));
    throw Failure("no cluster given: use --zookeeper HOST[:PORT],..., set PVC_ZOOKEEPER, or --config pvcnoded.yaml",
                  exit_usage);
}

std::shared_ptr<zk::Session> session() {
    auto& s = session_slot();
    if (s) return s;
    const auto& g = globals();
    zk::SessionOptions opts;
    opts.hosts = resolve_hosts(g);
    auto timeout = std::chrono::milliseconds(static_cast<long>(g.connect_timeout * 1000));
    opts.connect_timeout = timeout;
    opts.op_timeout = timeout;
    try {
        s = zk::Session::connect(opts);
    } catch (const zk::Error& e) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", g.connect_timeout);
        throw Failure("cannot reach the cluster's ZooKeeper at " + opts.hosts + " within " + secs + " s");
    }
    return s;
}

void close_session() {
    auto& s = session_slot();
    if (s) s->close();
    s.reset();
}

bool use_color() {
    if (globals().no_color) return false;
    if (const char* nc = std::getenv("NO_COLOR"); nc && *nc) return false;
    return ::isatty(STDOUT_FILENO) == 1;
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

std::optional<std::string> read_opt(const std::string& path) { return session()->get(path); }

std::string read(const std::string& path) { return read_opt(path).value_or(""); }

std::vector<std::string> children(const std::string& path) {
    auto c = session()->children(path);
    return c ? *c : std::vector<std::string>{};
}


std::optional<long> to_long(const std::string& s) {
    long v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<double> to_double(const std::string& s) {
    if (s.empty()) return std::nullopt;
    try {
        size_t used = 0;
        double v = std::stod(s, &used);
        if (used != s.size()) return std::nullopt;
        return v;
    } catch (...) {
        return std::nullopt;
    }
}

void pause(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

void confirm(bool yes, const std::string& action, const std::string& question, const std::string& declined) {
    if (yes) return;
    if (isatty(STDIN_FILENO) != 1)
        throw Failure("refusing to " + action + " without --yes when not interactive", exit_usage);
    std::cout << (question.empty() ? action + "?" : question) << " [y/N] " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") throw Failure(declined);
}

std::string new_uuid() { return client::new_uuid(); }

}  // namespace pvc::cli
