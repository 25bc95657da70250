// The software ATP switch process's wiring: the dataplane (switch_dataplane.cc) on its EventLoop
// thread, the HTTP control plane (switch_control.cc, switch_http.cc) on its own, start and stop.
#include "atp/daemons/switch_daemon.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "atp/control/control.h"
#include "switch_control.h"
#include "switch_dataplane.h"

namespace atp {

struct SwitchDaemon::Impl {
  explicit Impl(SwitchDaemonConfig c)
      : config(checked(std::move(c))),
        http(control::make_server(control::server_access(config.access))),
        dataplane(config),
        control_plane(config, dataplane) {
    detail::add_switch_routes(*http, control_plane, dataplane.control_tasks());
    control_port = control::bind_server(*http, config.control_host, config.control_port);
    if (control_port <= 0) {
      throw std::runtime_error("cannot listen on the control address " + config.control_host + ":" +
                               std::to_string(config.control_port) +
                               " (in use or not a local address); choose another `control:` address");
    }
  }

  // `config`, or SwitchConfigError when it asks for more than the machine or PortId allow (a
  // config built in C++, not parsed: ClusterJob's local switch).
  static SwitchDaemonConfig checked(SwitchDaemonConfig config) {
    control::check_limits(config);
    return config;
  }

  SwitchDaemonConfig config;
  std::unique_ptr<httplib::Server> http;  // control::make_server's
  detail::SwitchDataplane dataplane;      // the dataplane threads: pipelines, ports and their queues
  detail::SwitchControl control_plane;    // jobs, hosts, leases and stats, on dataplane thread 0
  int control_port = 0;
  std::thread http_thread;
  bool started = false;
};

SwitchDaemon::SwitchDaemon(SwitchDaemonConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

SwitchDaemon::~SwitchDaemon() { stop(); }

void SwitchDaemon::start() {
  Impl& d = *impl_;
  if (d.started) return;
  d.started = true;
  d.dataplane.start([&d] { return d.control_plane.next_deadline(); }, [&d](Time now) { d.control_plane.expire(now); });
  d.http_thread = std::thread([&d] { d.http->listen_after_bind(); });
  // httplib's stop() only works once the server runs: wait for it (bounded; it is immediate).
  for (int i = 0; i < 5000 && !d.http->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void SwitchDaemon::stop() {
  Impl& d = *impl_;
  if (!d.started) return;
  d.started = false;
  // The control plane first: its handlers wait on the loop, so the loop must still run.
  d.http->stop();
  if (d.http_thread.joinable()) d.http_thread.join();
  d.dataplane.stop();
}

const SwitchDaemonConfig& SwitchDaemon::config() const { return impl_->config; }

SocketAddress SwitchDaemon::data_endpoint() const { return impl_->dataplane.ports().data_endpoint(); }

std::string SwitchDaemon::control_endpoint() const {
  return impl_->config.control_host + ":" + std::to_string(impl_->control_port);
}

std::string SwitchDaemon::answer_control_request(std::string_view request) {
  return control::answer_request(*impl_->http, request);
}

control::SwitchStats SwitchDaemon::stats() {
  return detail::on_dataplane(impl_->dataplane.control_tasks(), [this] { return impl_->control_plane.stats(); });
}

std::string SwitchDaemon::stats_json() { return control::to_json(stats()); }

std::uint32_t SwitchDaemon::dataplane_threads() const { return static_cast<std::uint32_t>(impl_->dataplane.threads()); }

double SwitchDaemon::dataplane_cpu_seconds() { return impl_->dataplane.cpu_seconds(); }

}  // namespace atp
