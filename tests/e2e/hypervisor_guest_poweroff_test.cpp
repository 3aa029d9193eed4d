// A REAL guest that powers itself off: a Debian kernel booted directly by QEMU
// with a busybox initramfs (tools/lab/guest.sh) whose /init prints a marker on
// the serial console and runs `poweroff -f` two seconds later. PVC XML has
// on_poweroff=destroy, so the transient domain disappears; as in the reference,
// a VM in `start` that stops without a client request is started again by
// its node, and ZooKeeper never shows anything but `start`. With libvirt
// lifecycle events the node reacts within a second (keepalive here is 5 s, so
// the keepalive backstop cannot be what reacts).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "lab.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using pvc::trim;
using pvc::e2e::Client;
using pvc::e2e::Lab;
using pvc::e2e::NodeView;
using pvc::e2e::wait_for;
using pvc::e2e::since;
using pvc::e2e::contains_word;
using Clock = std::chrono::steady_clock;

constexpr int keepalive_s = 5;
constexpr int poweroff_delay_s = 2;
constexpr const char* marker_up = "pvc-guest: up";
constexpr const char* marker_poweroff = "pvc-guest: poweroff";

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
    return n;
}

// Direct kernel boot of the Debian kernel with the busybox initramfs; serial
// console on a pty logged to <console_dir>/<name>.log as PVC does; PVC's
// on_poweroff=destroy.
std::string guest_domain_xml(const std::string& type, const std::string& name, const std::string& uuid,
                             const fs::path& console_dir, const std::string& kernel, const std::string& initrd,
                             const std::string& cmdline) {
    std::ostringstream x;
    x << "<domain type='" << type << "'>\n"
      << "  <name>" << name << "</name>\n"
      << "  <uuid>" << uuid << "</uuid>\n"
      << "  <memory unit='MiB'>128</memory>\n"
      << "  <vcpu>1</vcpu>\n"
      << "  <os>\n"
      << "    <type arch='x86_64' machine='pc'>hvm</type>\n"
      << "    <kernel>" << kernel << "</kernel>\n"
      << "    <initrd>" << initrd << "</initrd>\n"
      << "    <cmdline>" << cmdline << "</cmdline>\n"
      << "  </os>\n"
      << "  <features><acpi/></features>\n"
      << "  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>restart</on_crash>\n"
      << "  <devices>\n"
      << "    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
      << "    <serial type='pty'><log file='" << (console_dir / (name + ".log")).string()
      << "' append='on'/><target port='0'/></serial>\n"
      << "    <console type='pty'><target type='serial' port='0'/></console>\n"
      << "    <memballoon model='none'/>\n"
      << "  </devices>\n"
      << "</domain>\n";
    return x.str();
}

class GuestPoweroff : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            lab_ = std::make_unique<Lab>(pvc::e2e::LabOptions{{1}, 3, keepalive_s});
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { lab_.reset(); }

    void SetUp() override {
        ASSERT_TRUE(lab_) << "lab did not come up: " << setup_error_;
        client_ = std::make_unique<Client>(lab_->zk());
        view_ = std::make_unique<NodeView>(lab_->libvirt_uri(1));
        uuid_ = pvc::e2e::random_uuid();
        name_ = "e2e-" + uuid_.substr(0, 8);
    }
    void TearDown() override {
        if (HasFailure() && lab_) {
            std::cerr << lab_->all_daemon_logs();
            std::cerr << "----- consolelog -----\n" << client_->get("domain.console.log", uuid_) << "\n";
        }
        if (client_ && lab_ && lab_->zk()->exists(pvc::schema::path("domain.state", {uuid_}))) {
            lab_->zk()->write(pvc::schema::path("domain.state", {uuid_}), "stop");
            wait_for([&] { return !view_->state(uuid_).has_value() || !view_->running(uuid_); }, 10s);
        }
    }

    // tools/lab/guest.sh ARGS; an empty result means the step failed (message in `error`).
    std::string guest_sh(const std::vector<std::string>& args, std::string& error) {
        const char* src = std::getenv("PVC_SOURCE_DIR");
        fs::path script = fs::path(src && *src ? src : PVC_TEST_SOURCE_DIR) / "tools" / "lab" / "guest.sh";
        std::vector<std::string> argv{script.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        auto r = pvc::e2e::run(argv);
        if (r.status != 0) {
            error = "guest.sh " + args.front() + " failed (" + std::to_string(r.status) + "): " + r.output;
            return "";
        }
        // Only the last line is the answer (diagnostics may precede it).
        std::string out = trim(r.output);
        auto nl = out.rfind('\n');
        if (nl != std::string::npos) {
            std::cout << "[ guest    ] " << out.substr(0, nl) << "\n";
            out = out.substr(nl + 1);
        }
        return out;
    }

    std::string state() { return client_->get("domain.state", uuid_); }
    std::string consolelog() { return client_->get("domain.console.log", uuid_); }

    static std::unique_ptr<Lab> lab_;
    static std::string setup_error_;
    std::unique_ptr<Client> client_;
    std::unique_ptr<NodeView> view_;
    std::string uuid_, name_;
};

std::unique_ptr<Lab> GuestPoweroff::lab_;
std::string GuestPoweroff::setup_error_;

TEST_F(GuestPoweroff, AGuestThatPowersItselfOffIsStartedAgainWithinASecond) {
    // The guest: built now, under the lab dir (QEMU in the node's mount namespace
    // sees the host's filesystem, the lab dir included).
    std::string error;
    fs::path guest_dir = lab_->console_dir().parent_path() / "guest";
    std::string initrd = guest_sh({"initramfs", (guest_dir / "initramfs.cpio.gz").string(),
                                   std::to_string(poweroff_delay_s)}, error);
    ASSERT_FALSE(initrd.empty()) << error;
    std::string kernel = guest_sh({"kernel"}, error);
    ASSERT_FALSE(kernel.empty()) << error;
    std::string cmdline = guest_sh({"cmdline"}, error);
    ASSERT_FALSE(cmdline.empty()) << error;
    auto t_probe = Clock::now();
    std::string type = guest_sh({"accel", initrd}, error);
    ASSERT_TRUE(type == "kvm" || type == "qemu") << "guest.sh accel: '" << type << "' " << error;
    std::cout << "[ figures  ] kernel " << kernel << ", domain type " << type << " (lab: " << lab_->domain_type()
              << ", guest probe " << seconds(Clock::now() - t_probe) << " s)\n";

    client_->define(uuid_, name_, guest_domain_xml(type, name_, uuid_, lab_->console_dir(), kernel, initrd, cmdline),
                    "hv1");
    auto t_start = Clock::now();
    client_->change_state(uuid_, "start");
    ASSERT_TRUE(wait_for([&] { return view_->running(uuid_); }, 20s))
        << "guest not running after state=start; state=" << state()
        << " failedreason=" << client_->get("domain.failed_reason", uuid_);

    // The guest really booted: its /init's marker reached the console log key.
    ASSERT_TRUE(wait_for([&] { return count(consolelog(), marker_up) >= 1; }, 40s))
        << "no '" << marker_up << "' in " << pvc::schema::path("domain.console.log", {uuid_})
        << " (the guest did not boot, or the console log is not published)";
    std::cout << "[ figures  ] state=start -> marker in ZooKeeper: " << seconds(Clock::now() - t_start) << " s\n";
    size_t boots = count(consolelog(), marker_up);

    // The guest powers itself off: poll libvirt every 5 ms for the moment it is gone.
    int before = view_->id(uuid_);
    ASSERT_GE(before, 0) << "guest not running after its marker";
    // libvirt first reports the domain shut down (QEMU told it the guest powered
    // off), then gone once it has reaped QEMU (the transient domain is removed).
    Clock::time_point t_stopping{}, t_gone{};
    std::string seen_states;
    ASSERT_TRUE(wait_for([&] {
        auto st = view_->state(uuid_);
        if (st == VIR_DOMAIN_RUNNING) return false;
        if (t_stopping == Clock::time_point{}) t_stopping = Clock::now();
        if (st.has_value()) return false;
        t_gone = Clock::now();
        return true;
    }, std::chrono::seconds(poweroff_delay_s + 30), 5ms))
        << "the guest did not power itself off (or libvirt kept the domain); state=" << view_->state(uuid_).value_or(-1)
        << " consolelog=" << consolelog();
    std::cout << "[ figures  ] libvirt: guest not running -> domain gone: " << seconds(t_gone - t_stopping) << " s\n";

    // From there, the daemon's reaction: a new QEMU running the same VM.
    bool stayed_start = true;
    bool back = wait_for([&] {
        std::string s = state();
        if (s != "start") {
            stayed_start = false;
            if (seen_states.find(s) == std::string::npos) seen_states += s + " ";
        }
        int id = view_->id(uuid_);
        return id >= 0 && id != before && view_->running(uuid_);
    }, 10s, 5ms);
    double took = seconds(Clock::now() - t_gone);
    ASSERT_TRUE(back) << "guest not started again within 10 s of powering off; state=" << state();
    std::cout << "[ figures  ] guest powered off -> running again (new QEMU): " << took << " s (keepalive "
              << keepalive_s << " s)\n";
    // What is bounded is that the restart follows libvirt's lifecycle event, not
    // the next keepalive (up to keepalive_s later). `took` also holds QEMU's own
    // start (1.2-3 s on a loaded 2-core machine), so the bound is below one
    // interval, not the daemon's few milliseconds (3.6 s seen under heavy load).
    EXPECT_LT(took, keepalive_s - 1.0) << "crash detection with lifecycle events: restarted on the event, not on a keepalive";
    EXPECT_TRUE(stayed_start) << "ZooKeeper must never show anything but start; saw: " << seen_states;
    EXPECT_EQ(state(), "start");
    EXPECT_EQ(client_->get("domain.failed_reason", uuid_), "");

    // It was a real power-off, and the new guest boots again.
    EXPECT_TRUE(wait_for([&] { return count(consolelog(), marker_poweroff) >= 1; }, 5s))
        << "the guest's '" << marker_poweroff << "' line is missing: consolelog=" << consolelog();
    EXPECT_TRUE(wait_for([&] { return count(consolelog(), marker_up) > boots; }, 40s))
        << "the restarted guest did not boot: consolelog=" << consolelog();
    EXPECT_EQ(state(), "start");
}

}  // namespace
