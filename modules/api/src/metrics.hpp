// Prometheus text exposition, built from the cluster view: a
// scrape never walks ZooKeeper. Every metric is a gauge with # HELP and
// # TYPE lines; the reference's names are kept (even where HELP and sample
// names differ), its crashes guarded
// (a division by zero gives 0), and label values escaped so every line
// parses. The daemon's own figures come under pvcnoded_* (/metrics/daemon).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "cluster_view.hpp"
#include "http_server.hpp"
#include "objects.hpp"

namespace pvc::api {

// What the daemon itself measures, filled by the module.
struct DaemonFigures {
    std::atomic<double> zookeeper_latency_s{0};    // a read's round trip, measured each keepalive
    std::atomic<double> keepalive_interval_s{0};   // between the last two keepalive ticks
    std::atomic<uint64_t> failed_tasks{0};
    // Reads of a named object the view did not answer, answered again from ZooKeeper (routes.cpp).
    std::atomic<uint64_t> confirmed_reads{0};
    std::function<uint64_t()> zookeeper_requests;  // requests sent by this daemon's session
    std::atomic<const HttpServer::Counters*> server{nullptr};  // while serving

    void vm_action(const std::string& action, double seconds);
    std::map<std::string, std::pair<uint64_t, double>> vm_actions() const;  // action -> (count, last seconds)

private:
    mutable std::mutex m_;
    std::map<std::string, std::pair<uint64_t, double>> actions_;
};

// A VM's sample lines, one string per VM metric family (VmCache keeps them).
VmCache::Lines vm_metric_lines(const Json& vm);

std::string health_metrics(const Reader& r, VmCache& vms);
std::string resource_metrics(const Reader& r, VmCache& vms);
// `view_size`: ClusterView::size(), taken before `r` (the view's lock is not re-entrant).
std::string daemon_metrics(const Reader& r, const DaemonFigures& f, size_t view_size);

}  // namespace pvc::api
