// The software ATP switch process's wiring: the dataplane (switch_dataplane.cc) on its EventLoop
// thread, the HTTP control plane (switch_control.cc, switch_http.cc) on its own, start and stop.
#include "atp/runtime/switch_daemon.h"

#include <httplib.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "atp/runtime/control.h"
#include "atp/runtime/event_loop.h"
#include "atp/runtime/loop_tasks.h"
#include "switch_config.h"
#include "switch_control.h"
#include "switch_dataplane.h"

namespace atp {

struct SwitchDaemon::Impl {
  explicit Impl(SwitchDaemonConfig c)
      : config(checked(std::move(c))),
        http(control::make_server(control::server_access(config.access))),
        dataplane(config),
        control_plane(config, dataplane),
        tasks(loop) {
    dataplane.watch(loop);
    loop.set_timer([this] { return std::min(dataplane.next_deadline(), control_plane.next_deadline()); },
                   [this](Time now) {
                     control_plane.expire(now);
                     dataplane.on_deadline(now);
                   });
    detail::add_switch_routes(*http, control_plane, tasks);
    // Port 0: bind_to_any_port tells the kernel's choice (bind_to_port only says yes or no).
    control_port = config.control_port == 0
                       ? http->bind_to_any_port(config.control_host)
                       : (http->bind_to_port(config.control_host, config.control_port) ? config.control_port : -1);
    if (control_port <= 0) {
      throw std::runtime_error("cannot listen on the control address " + config.control_host + ":" +
                               std::to_string(config.control_port) +
                               " (in use or not a local address); choose another `control:` address");
    }
  }

  // `config`, or SwitchConfigError when it asks for more than the machine or PortId allow (a
  // config built in C++, not parsed: ClusterJob's local switch).
  static SwitchDaemonConfig checked(SwitchDaemonConfig config) {
    detail::check_limits(config);
    return config;
  }

  SwitchDaemonConfig config;
  std::unique_ptr<httplib::Server> http;  // control::make_server's
  detail::SwitchDataplane dataplane;      // the pipeline, the ports and their queues
  detail::SwitchControl control_plane;    // jobs, hosts, leases and stats, on the dataplane thread
  EventLoop loop;                         // the dataplane thread's
  LoopTasks tasks;                        // the control plane's requests, handed to that thread
  int control_port = 0;
  std::thread loop_thread;
  std::thread http_thread;
  bool started = false;
};

SwitchDaemon::SwitchDaemon(SwitchDaemonConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

SwitchDaemon::~SwitchDaemon() { stop(); }

void SwitchDaemon::start() {
  Impl& d = *impl_;
  if (d.started) return;
  d.started = true;
  d.tasks.loop_started();
  d.loop_thread = std::thread([&d] { d.loop.run(); });
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
  d.loop.stop();
  if (d.loop_thread.joinable()) d.loop_thread.join();
  d.tasks.loop_ended();
}

const SwitchDaemonConfig& SwitchDaemon::config() const { return impl_->config; }

UdpEndpoint SwitchDaemon::data_endpoint() const { return impl_->dataplane.ports().data_endpoint(); }

std::string SwitchDaemon::control_endpoint() const {
  return impl_->config.control_host + ":" + std::to_string(impl_->control_port);
}

std::string SwitchDaemon::answer_control_request(std::string_view request) {
  return control::answer_request(*impl_->http, request);
}

std::string SwitchDaemon::stats_json() {
  return detail::on_dataplane(impl_->tasks, [this] { return impl_->control_plane.stats(); }).dump(2);
}

double SwitchDaemon::dataplane_cpu_seconds() const {
  clockid_t clock{};
  if (!impl_->started || ::pthread_getcpuclockid(impl_->loop_thread.native_handle(), &clock) != 0) return 0;
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace atp
