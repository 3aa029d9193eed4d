// Daemon: what ties the lifecycle together: construction, the helpers every
// part uses, and run() (signals, start-up, the exit status). The parts are
// daemon_startup.cpp, daemon_keepalive.cpp, daemon_coordinator.cpp and
// daemon_shutdown.cpp.
#include "daemon/daemon.hpp"

#include <csignal>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/signal_set.hpp>

#include "daemon/module_host.hpp"
#include "daemon/sd_notify.hpp"
#include "health/health_host.hpp"
#include "pvc/schema.hpp"

namespace pvc {

Daemon::Daemon(Config cfg, std::shared_ptr<LogSink> sink)
    : cfg_(std::move(cfg)), sink_(std::move(sink)), log_(sink_, "") {
    executor_.set_logger(log_);
    deliver_core_events(events_, executor_, core_strand_);
}

Daemon::~Daemon() {
    if (shutdown_thread_.joinable()) shutdown_thread_.join();
    {
        std::lock_guard g(ka_m_);
        ka_stop_ = true;
    }
    ka_cv_.notify_all();
    if (keepalive_thread_.joinable()) keepalive_thread_.join();
}

std::string Daemon::node_path(const char* key) const { return schema::path(key, {cfg_.host.hostname}); }

bool Daemon::write_own(const char* key, const std::string& value) {
    try {
        return zk_->write(node_path(key), value);
    } catch (const std::exception& e) {
        log_.error("Failed to write {}: {}", node_path(key), e.what());
        return false;
    }
}

void Daemon::notify(const char* state) { sd::notify(state); }

// ---------------------------------------------------------------- run

int Daemon::run() {
    auto& io = executor_.io();
    auto guard = boost::asio::make_work_guard(io);
    boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGQUIT);
    std::function<void(const boost::system::error_code&, int)> on_signal;
    on_signal = [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        log_.system("Received signal {}", sig);
        request_shutdown();
        signals.async_wait(on_signal);
    };
    signals.async_wait(on_signal);
    boost::asio::signal_set hup(io, SIGHUP);
    std::function<void(const boost::system::error_code&, int)> on_hup;
    on_hup = [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        reopen_log_file(sink_);
        hup.async_wait(on_hup);
    };
    hup.async_wait(on_hup);

    std::thread loop([this] { executor_.run_io(); });
    try {
        start();
        bool pending;
        {
            std::lock_guard g(lifecycle_m_);
            started_ = true;
            pending = shutdown_pending_;
        }
        if (pending) request_shutdown();
    } catch (const Startup& e) {
        log_.error("{}", e.what());
        exit_status_ = e.status;
    } catch (const std::exception& e) {
        log_.error("Start-up failed: {}", e.what());
        exit_status_ = exit_failure;
    }
    if (exit_status_ != exit_ok) {
        // Leave the cluster as consistent as we can: a registered node goes to stop.
        if (!shutting_down_.exchange(true)) {
            if (zk_ && holds_node_guard()) shutdown();
            io.stop();
        }
    }
    guard.reset();
    loop.join();
    if (shutdown_thread_.joinable()) shutdown_thread_.join();
    signals.cancel();
    hup.cancel();
    executor_.stop_pool();
    return exit_status_;
}

}  // namespace pvc
