// The flat configuration dictionary legacy Python plugins see, as the daemon
// builds it: the core's keys (tests/unit/config_test.cpp) and those of every
// real module the configuration loads (build/modules, through the module
// host), each reading its own keys. With the same functions it is the
// reference's dictionary, key for key; a module that is not loaded gives
// nothing.
#include <fstream>
#include <iterator>
#include <set>

#include <gtest/gtest.h>

#include "config_reader.hpp"
#include "daemon/module_host.hpp"
#include "pvc/test/daemon_process.hpp"

namespace {

std::string sample_text() {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return pos == std::string::npos ? text : text.replace(pos, from.size(), to);
}

std::set<std::string> keys_of(const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& [k, v] : j.items()) out.insert(k);
    return out;
}

// The daemon's way: the core's keys, then every loaded module's.
nlohmann::json flat_with_modules(const std::string& text) {
    pvc::Config c = pvc::parse_config(text, "t", pvc::host_identity("pvchv1.example.com"));
    pvc::ModuleHost modules(std::filesystem::path(pvc::test::build_dir()) / "modules",
                            pvc::Logger(pvc::make_log_sink(nullptr), ""));
    modules.load(c);
    pvc::ConfigProblems problems;
    c.module_keys = modules.configure_all(c, problems);
    for (const auto& p : problems.list()) ADD_FAILURE() << p.to_string("t");
    return pvc::flat_config(c);
}

// The reference's dictionary (as the reference daemon builds it), group by group.
const std::set<std::string> kGeneralKeys = {
    "node", "node_hostname", "node_fqdn", "node_domain", "node_id", "coordinators", "debug", "daemon_mode",
    "enable_hypervisor", "enable_networking", "enable_storage", "enable_api",
    "plugin_directory", "dynamic_directory", "log_directory", "console_log_directory",
    "dnsmasq_dynamic_directory", "pdns_dynamic_directory", "nft_dynamic_directory",
    "dnsmasq_log_directory", "pdns_log_directory", "nft_log_directory",
    "file_logging", "stdout_logging", "zookeeper_logging", "log_colours", "log_dates", "log_keepalives",
    "log_keepalive_cluster_details", "log_keepalive_plugin_details", "console_log_lines", "node_log_lines",
    "vm_shutdown_timeout", "keepalive_interval", "monitoring_interval", "fence_intervals", "suicide_intervals",
    "successful_fence", "failed_fence", "ipmi_hostname", "ipmi_username", "ipmi_password",
    "migration_target_selector", "static_data", "pvcnoded_version"};
// General keys of the reference that are the hypervisor module's: absent on
// a node without it (no bundled plugin reads them).
const std::set<std::string> kHypervisorKeys = {"migration_target_selector", "console_log_directory",
                                               "console_log_lines"};
const std::set<std::string> kNetworkingKeys = {
    "cluster_domain", "cluster_network", "cluster_floating_ip", "cluster_dev", "cluster_mtu", "cluster_dev_ip",
    "storage_domain", "storage_network", "storage_floating_ip", "storage_dev", "storage_mtu", "storage_dev_ip",
    "upstream_domain", "upstream_network", "upstream_floating_ip", "upstream_gateway", "upstream_dev",
    "upstream_mtu", "upstream_dev_ip", "bridge_dev", "bridge_mtu", "enable_sriov", "sriov_device",
    "pdns_postgresql_host", "pdns_postgresql_port", "pdns_postgresql_dbname", "pdns_postgresql_user",
    "pdns_postgresql_password", "metadata_postgresql_host", "metadata_postgresql_port",
    "metadata_postgresql_dbname", "metadata_postgresql_user", "metadata_postgresql_password"};
const std::set<std::string> kStorageKeys = {"ceph_config_file", "ceph_admin_keyring"};

// A key of a disabled function is absent (a legacy plugin reading it fails
// its run, as on a reference node), never None; and of our own keys only
// ipmitool_args (the fencing module's, for the bundled ipmi plugin).
TEST(FlatDictionary, KeysAreTheReferencesForTheNodesFunctions) {
    for (bool networking : {false, true}) {
        for (bool storage : {false, true}) {
            for (bool hypervisor : {false, true}) {
                std::string text = sample_text();
                if (!networking) text = replace(text, "enable_networking: True", "enable_networking: False");
                if (!storage) text = replace(text, "enable_storage: True", "enable_storage: False");
                if (!hypervisor) text = replace(text, "enable_hypervisor: True", "enable_hypervisor: False");
                auto j = flat_with_modules(text);
                std::set<std::string> expected = kGeneralKeys;
                expected.insert("ipmitool_args");
                if (!hypervisor)
                    for (const auto& k : kHypervisorKeys) expected.erase(k);
                if (networking) expected.insert(kNetworkingKeys.begin(), kNetworkingKeys.end());
                if (storage) expected.insert(kStorageKeys.begin(), kStorageKeys.end());
                EXPECT_EQ(keys_of(j), expected)
                    << "networking " << networking << ", storage " << storage << ", hypervisor " << hypervisor;
            }
        }
    }
}

// The values and types the reference gives, from the modules as from the core.
TEST(FlatDictionary, ReferenceValuesFromEveryModule) {
    auto j = flat_with_modules(sample_text());
    EXPECT_EQ(j["node"], "pvchv1");
    EXPECT_EQ(j["keepalive_interval"], 5);
    EXPECT_EQ(j["fence_intervals"], 6);
    EXPECT_EQ(j["successful_fence"], "migrate");
    EXPECT_EQ(j["ipmi_hostname"], "pvchv1-lom.example.com");
    EXPECT_EQ(j["ipmi_username"], "admin");
    EXPECT_EQ(j["ipmi_password"], "Passw0rd");
    EXPECT_EQ(j["migration_target_selector"], "mem");
    EXPECT_EQ(j["console_log_directory"], "/var/log/libvirt");
    EXPECT_EQ(j["console_log_lines"], 1000);
    EXPECT_EQ(j["cluster_dev_ip"], "10.255.0.1/24");
    EXPECT_EQ(j["bridge_dev"], "ens4");
    EXPECT_EQ(j["pdns_postgresql_port"], 5432);
    EXPECT_EQ(j["sriov_device"], nlohmann::json::parse(R"([{"phy":"ens1f1","mtu":9000,"vfcount":8}])"));
    EXPECT_EQ(j["ceph_config_file"], "/etc/ceph/ceph.conf");
    EXPECT_EQ(j["ceph_admin_keyring"], "/etc/ceph/ceph.client.admin.keyring");
}

}  // namespace
