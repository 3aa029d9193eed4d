// The network module's own keys of pvcnoded.yaml: the three networks
// (pvc.cluster.networks.<role> and pvc.system.configuration.networking.<role>),
// the bridge device and MTU, SR-IOV, and the coordinators' DNS and metadata
// databases (pvc.coordinator). Read and validated by the module
// (Module::configure), every problem into the daemon's one list with its YAML
// path and line; it gives the reference's networking group of the legacy
// plugins' flat dictionary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/config.hpp"

namespace pvc::network {

struct NetworkRole {                       // pvc.cluster.networks.<role> + networking.<role>
    std::optional<std::string> domain;
    std::optional<std::string> network;       // CIDR, strict
    std::optional<std::string> floating_ip;   // addr/prefix
    std::optional<std::string> gateway;       // upstream only
    std::optional<std::string> device;
    std::optional<int> mtu;
    std::optional<std::string> address;       // as written: "by-id" or addr/prefix
    std::optional<std::string> dev_ip;        // derived: addr/prefix of this node
};

struct DatabaseConfig {
    std::optional<std::string> host;
    std::optional<int> port;
    std::optional<std::string> name;
    std::optional<std::string> user;
    std::optional<std::string> pass;
};

struct SriovDevice {
    std::string phy;
    std::optional<int> mtu;
    int vfcount = 0;
};

struct Settings {
    NetworkRole upstream, cluster, storage;
    std::optional<std::string> bridge_dev;   // pvc.system.configuration.networking.bridge_device
    std::optional<int> bridge_mtu;
    bool enable_sriov = false;
    std::vector<SriovDevice> sriov_devices;
    DatabaseConfig dns_database, metadata_database;  // pvc.coordinator.{dns,metadata}.database

    // Reads and validates (required, and the addresses checked, only with
    // enable_networking: without it the keys are informative); every problem
    // goes to `problems`, nothing is thrown.
    static Settings read(const Config& config, ConfigProblems& problems);
    // The reference's networking group of the flat dictionary.
    void flat_keys(nlohmann::json& j) const;
};

}  // namespace pvc::network
