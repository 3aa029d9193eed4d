#include "daemon/node_guard.hpp"

#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <fmt/format.h>

#include "pvc/schema.hpp"

namespace pvc::node_guard {

namespace {

std::string first_line(const char* file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    return line;
}

std::string pid_namespace() {
    char buf[128];
    ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Start time and state of process `pid` from /proc/<pid>/stat (fields 22 and 3);
// nullopt when there is no such process.
struct ProcStat {
    char state = '?';
    unsigned long long start = 0;
};
std::optional<ProcStat> proc_stat(long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string all;
    if (!std::getline(in, all)) return std::nullopt;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    auto close = all.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream rest(all.substr(close + 1));
    ProcStat st;
    std::string field;
    rest >> st.state;  // field 3
    for (int i = 4; i < 22 && rest >> field; ++i) {
    }
    if (!(rest >> st.start)) return std::nullopt;
    return st;
}

}  // namespace

Holder self(const std::string& node) {
    Holder h;
    h.node = node;
    h.pid = static_cast<long>(::getpid());
    if (auto st = proc_stat(h.pid)) h.start = st->start;
    h.boot = first_line("/proc/sys/kernel/random/boot_id");
    h.pidns = pid_namespace();
    return h;
}

std::string encode(const Holder& h, const std::string& fqdn) {
    return fmt::format("pvcnoded node={} pid={} start={} boot={} pidns={} host={}", h.node, h.pid, h.start, h.boot,
                       h.pidns, fqdn);
}

std::optional<Holder> decode(const std::string& data) {
    std::istringstream in(data);
    std::string word;
    if (!(in >> word) || word != "pvcnoded") return std::nullopt;
    Holder h;
    bool pid = false, start = false;
    while (in >> word) {
        auto eq = word.find('=');
        if (eq == std::string::npos) continue;
        std::string k = word.substr(0, eq), v = word.substr(eq + 1);
        try {
            if (k == "node") h.node = v;
            else if (k == "pid") h.pid = std::stol(v), pid = true;
            else if (k == "start") h.start = std::stoull(v), start = true;
            else if (k == "boot") h.boot = v;
            else if (k == "pidns") h.pidns = v;
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    if (!pid || !start || h.pid <= 0 || h.boot.empty() || h.pidns.empty()) return std::nullopt;
    return h;
}

bool gone(const Holder& h, const std::string& node) {
    Holder me = self(node);
    if (h.node != node || h.boot != me.boot || h.pidns != me.pidns || me.boot.empty() || me.pidns.empty())
        return false;
    if (h.pid == me.pid) return false;  // that would be us: never "gone"
    if (::kill(static_cast<pid_t>(h.pid), 0) == 0 || errno == EPERM) {
        // The pid exists: gone only if it is a zombie or a later process reusing the pid.
        auto st = proc_stat(h.pid);
        if (!st) return false;
        return st->state == 'Z' || st->start != h.start;
    }
    return errno == ESRCH;
}

std::vector<std::string> clear_stale(zk::Session& zk, const std::string& root, const std::string& node,
                                     const Logger& log) {
    std::vector<std::string> waiting;
    auto kids = zk.raw_children(root);
    if (!kids) return waiting;
    for (const auto& kid : *kids) {
        if (!schema::is_lock_contender(kid)) continue;
        const std::string path = root + "/" + kid;
        zk::Stat st;
        auto data = zk.get(path, &st);
        if (!data) continue;  // released meanwhile
        std::string why;
        if (st.ephemeral_owner == 0) {
            why = "it is persistent (restored from a backup?), so no session holds it";
        } else if (auto h = decode(*data); h && gone(*h, node)) {
            why = fmt::format("its holder, pvcnoded pid {} of this host and boot, is gone", h->pid);
        } else {
            waiting.push_back(fmt::format("'{}' (ZooKeeper session {:#x})", *data, st.ephemeral_owner));
            continue;
        }
        log.warn("Removing stale node lock contender {}: {}", path, why);
        // Version-checked: a contender is never rewritten, but never delete something we did not judge.
        zk::Transaction tx(zk);
        tx.remove(path, st.version);
        zk::Status s = zk.commit(tx);
        if (s != zk::Status::ok && s != zk::Status::no_node)
            log.warn("Cannot remove stale node lock contender {}: {}", path, zk::to_string(s));
    }
    return waiting;
}

}  // namespace pvc::node_guard
