// The `atp ps` daemon: demultiplexes datagrams by job id to one PsEndpoint each and sends what
// they produce to the uplink; an HTTP thread hands control requests to the loop thread.
#include "atp/daemons/ps_daemon.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "atp/control/control.h"
#include "atp/control/stats.h"
#include "atp/io/event_loop.h"
#include "atp/io/log.h"
#include "atp/io/loop_tasks.h"
#include "atp/io/machine.h"
#include "atp/io/udp_sink.h"

namespace atp {

struct PsDaemon::Impl {
  PsDaemonConfig config;
  UdpSocket socket;
  EventLoop loop;
  UdpRecvBatch batch{64};
  UdpBatchSink out{socket, config.uplink};
  std::map<JobId, PsEndpoint> jobs;    // loop thread only (or the caller's while not running)
  control::PsDaemonCounters counters;  // loop thread only
  control::Tenancy tenancy;            // loop thread only: who installed which job, and their leases

  LoopTasks tasks{loop};  // control requests and the C++ API, run on the loop thread

  std::unique_ptr<httplib::Server> http;
  SocketAddress control_bound;
  std::thread loop_thread;
  std::thread http_thread;
  std::atomic<bool> http_returned{false};  // listen_after_bind() came back (an error, or stop())
  bool started = false;
  bool stopped = false;
  std::mutex lifecycle_mutex;

  explicit Impl(const PsDaemonConfig& c) : config(c), socket(c.data, host_socket_options(c.uplink)) {
    socket.report_full_queues();  // a full device queue makes results wait in the sink, not vanish
    if (c.uplink) {
      // Every packet for this PS comes through its uplink: the kernel drops anyone else's
      // datagrams, so another process on the host cannot forge gradients. The sink sends every
      // packet to the uplink, the connected address, so sends are unaffected.
      socket.connect(*c.uplink);
    }
    loop.add_readable(socket.fd(), [this] { on_readable(); });
    loop.set_timer([this] { return next_deadline(); }, [this](Time now) { on_deadline(now); });
  }
  // Runs `f` on the loop thread (LoopTasks::run): the C++ API waits without a timeout, HTTP
  // handlers with kHttpTimeout.
  template <class F>
  auto call(F f, std::optional<std::chrono::milliseconds> timeout = std::nullopt) -> decltype(f()) {
    return tasks.run(std::move(f), timeout, "the PS's loop thread");
  }

  // What HTTP handlers wait for the loop thread: a control request never hangs.
  static constexpr std::chrono::milliseconds kHttpTimeout{5000};

  void on_readable() {
    // At most a few batches per wakeup, so control tasks and timers are not starved by a flood.
    for (int round = 0; round < 8; ++round) {
      const std::size_t n = socket.recv_batch(batch);
      if (n == 0) break;
      const Time now = EventLoop::now();
      for (std::size_t i = 0; i < n; ++i) deliver(batch.bytes(i), batch.from(i), now);
      flush();
      if (!batch.full()) break;
    }
  }

  void deliver(std::span<const std::uint8_t> bytes, const SocketAddress& from, Time now) {
    ++counters.datagrams_received;
    Header h;
    if (decode_header(bytes, h) != DecodeError::kOk) {
      ++counters.malformed;
      return;
    }
    if (!config.uplink && SocketAddress{h.src, kUdpPort} != from) {
      // Addressed by IP, an ATP packet comes from its sender's socket at the ATP port, or from a
      // switch that builds the datagram from the ATP header's src. Another local process cannot
      // send from another host's address (the kernel refuses a source address the host does not
      // have), so it can neither pass the job's check of src against its workers
      // (PsConfig::workers) nor have a forged result relayed to the worker beside this PS.
      ++counters.foreign_source;
      return;
    }
    if (h.is_ack && !config.uplink && h.dst == config.address) {
      // A PS receives no parameter packets: this one is for the worker beside it (see
      // control::PsDaemonCounters::relayed_to_local_worker). The kernel's demux, not protocol logic.
      const UdpOutgoing relay{SocketAddress::loopback(kUdpPort), bytes};
      if (socket.send_batch(std::span<const UdpOutgoing>(&relay, 1)) == 1) ++counters.relayed_to_local_worker;
      return;
    }
    const auto it = jobs.find(h.job);
    if (it == jobs.end()) {
      ++counters.unknown_job;
      return;
    }
    it->second.on_packet(h, bytes, now, out);  // the endpoint counts and drops what it cannot use
  }

  void flush() {
    out.flush(loop, [this](std::size_t sent, std::size_t failed) {
      counters.datagrams_sent += sent;
      counters.send_failures += failed;
    });
  }

  Time next_deadline() const {
    Time earliest = tenancy.next_deadline();
    for (const auto& [id, endpoint] : jobs) earliest = std::min(earliest, endpoint.next_deadline());
    return earliest;
  }

  void on_deadline(Time now) {
    for (const control::Tenancy::Resource r : tenancy.expire(now)) {
      remove_job(static_cast<JobId>(r.id), ": its lease expired");
    }
    for (auto& [id, endpoint] : jobs) {
      if (endpoint.next_deadline() <= now) endpoint.on_timeout(now, out);
    }
    flush();
  }

  void add_job(const PsConfig& job) {
    if (config.address != 0 && job.self != config.address) {
      throw PsJobError("job " + std::to_string(job.job) + " is for PS " + format_address(job.self) +
                       ", but this PS is " + format_address(config.address));
    }
    if (jobs.contains(job.job)) {
      throw PsJobError("job " + std::to_string(job.job) + " is already installed; remove it first");
    }
    if (jobs.size() >= config.max_jobs) {
      throw PsJobError("job " + std::to_string(job.job) + ": this PS already serves " + std::to_string(jobs.size()) +
                       " jobs, the most it takes; remove one first");
    }
    const std::string name = "job " + std::to_string(job.job) + ": ";
    std::optional<PsEndpoint> endpoint;
    try {
      endpoint.emplace(job);
    } catch (const std::logic_error& e) {  // invalid_argument: e.g. over the endpoint's memory budget
      const std::string why = e.what();
      throw PsJobRefused(why.rfind(name, 0) == 0 ? why : name + why);  // its sentence may name the job
    } catch (const std::bad_alloc&) {
      throw PsJobRefused(name + "not enough memory for its PS state");
    }
    // Each job is within its budget; all of them at their bound must fit the machine too, or
    // forged packets could grow them past its memory together.
    std::uint64_t installed_bound = 0;
    for (const auto& [id, installed] : jobs) installed_bound += ps_job_memory_bound(installed.config());
    const std::uint64_t bound = ps_job_memory_bound(job);
    const std::uint64_t memory = physical_memory_bytes();
    if (installed_bound + bound > memory) {
      throw PsJobError(name + "its PS state may grow to " + std::to_string(bound) + " bytes, and the " +
                       std::to_string(jobs.size()) + " installed jobs' to " + std::to_string(installed_bound) +
                       ": more than this machine's " + std::to_string(memory) + " bytes of memory; remove a job first");
    }
    jobs.emplace(job.job, std::move(*endpoint));
  }

  std::string who_am_i() const { return "ps " + socket.local_endpoint().to_string(); }

  // Removes job `job`; `why` ends the log's line "job N removed" (" by alice", ": its lease expired").
  bool remove_job(JobId job, const std::string& why) {
    tenancy.release({control::Tenancy::Kind::kJob, job});
    const bool removed = jobs.erase(job) > 0;
    if (removed) log::info(who_am_i() + ": job " + std::to_string(job) + " removed" + why);
    return removed;
  }

  // POST /jobs by `who`, hanging the job on `lease` (0: none). Throws as add_job.
  control::Reply install_job(const PsConfig& job, const std::string& who, LeaseTable::Id lease) {
    if (auto refused = control::refuse_lease(tenancy, who, lease)) return *refused;
    const control::Tenancy::Resource resource{control::Tenancy::Kind::kJob, job.job};
    // A taken id is 409 whoever holds it (as on the switch): a tenant picking a free id tells it
    // from a refusal.
    if (jobs.contains(job.job) && tenancy.forbids_change(who, resource)) {
      return control::Reply::error(
          409, "job " + std::to_string(job.job) + " is already installed by another tenant; pick another id");
    }
    add_job(job);
    tenancy.claim(resource, who, lease);
    log::info(who_am_i() + ": job " + std::to_string(job.job) + " installed by " + who +
              (lease == 0 ? "" : " (lease " + std::to_string(lease) + ")") + ": " + std::to_string(job.workers.size()) +
              " workers, " + std::to_string(job.values_per_packet) + " values per packet");
    return {201, nlohmann::json{{"installed", job.job}}.dump()};
  }

  void start_http() {
    http = control::make_server(control::server_access(config.access));
    const auto answer = [](httplib::Response& res, const control::Reply& reply) {
      res.status = reply.status;
      res.set_content(reply.body + "\n", "application/json");
    };
    http->Post("/jobs", [this, answer](const httplib::Request& req, httplib::Response& res) {
      try {
        const PsConfig job = control::ps_job_from_json(req.body);
        const LeaseTable::Id lease = control::lease_param(req);
        // By value: the task may outlive the request.
        answer(res,
               call([this, job, lease, who = control::requester(*http, req)] { return install_job(job, who, lease); },
                    kHttpTimeout));
      } catch (const control::ControlError& e) {
        reply_error(res, 400, e.what());
      } catch (const PsJobRefused& e) {
        reply_error(res, 400, e.what());
      } catch (const PsJobError& e) {
        reply_error(res, 409, e.what());
      } catch (const std::runtime_error& e) {  // the loop thread did not answer
        reply_error(res, 503, e.what());
      }
    });
    http->Delete(R"(/jobs/(\d+))", [this, answer](const httplib::Request& req, httplib::Response& res) {
      const std::string digits = req.matches[1].str();
      std::uint64_t id = 0;
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
      try {
        answer(res, call(
                        [this, id, bad = error != std::errc() || id > 0xFFFF, text = control::excerpt(digits),
                         who = control::requester(*http, req)] {
                          const auto job = static_cast<JobId>(id);
                          if (bad || !jobs.contains(job)) {
                            return control::Reply::error(404, "job " + text + " is not installed");
                          }
                          if (auto forbidden = tenancy.forbids_change(who, {control::Tenancy::Kind::kJob, job})) {
                            return control::Reply::error(403, *forbidden);
                          }
                          remove_job(job, " by " + who);
                          return control::Reply{200, nlohmann::json{{"removed", job}}.dump()};
                        },
                        kHttpTimeout));
      } catch (const std::runtime_error& e) {
        reply_error(res, 503, e.what());
      }
    });
    control::add_lease_routes(
        *http, tenancy, [this](std::function<control::Reply()> task) { return call(std::move(task), kHttpTimeout); },
        [this](control::Tenancy::Resource r) { remove_job(static_cast<JobId>(r.id), ": its lease was revoked"); });
    http->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      try {
        res.set_content(control::to_prometheus(snapshot(kHttpTimeout)), "text/plain; version=0.0.4");
      } catch (const std::runtime_error& e) {
        reply_error(res, 503, e.what());
      }
    });
    http->Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
      try {
        res.set_content(control::to_json(snapshot(kHttpTimeout)) + "\n", "application/json");
      } catch (const std::runtime_error& e) {
        reply_error(res, 503, e.what());
      }
    });
    const std::string host = SocketAddress{config.control.ip, 0}.to_string();
    const std::string ip = host.substr(0, host.rfind(':'));
    const int port = control::bind_server(*http, ip, config.control.port);
    if (port <= 0) {
      std::string reason = std::strerror(errno);  // "Address already in use": lower case, as UdpSetupError
      if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
      throw std::runtime_error("cannot bind HTTP " + config.control.to_string() + ": " + reason);
    }
    control_bound = {config.control.ip, static_cast<std::uint16_t>(port)};
  }

  // Runs the HTTP server on its thread and returns once it accepts, so that a stop() right after
  // cannot miss it (httplib's stop() does nothing to a server that is not running yet).
  void start_http_thread() {
    if (!http) return;
    http_thread = std::thread([this] {
      http->listen_after_bind();
      http_returned = true;
    });
    while (!http->is_running() && !http_returned) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

  static void reply_error(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(control::error_body(message) + "\n", "application/json");
  }

  control::PsStats snapshot(std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    return call(
        [this] {
          control::PsStats s;
          s.data = socket.local_endpoint();
          s.uplink = config.uplink;
          s.daemon = counters;
          for (const auto& [id, endpoint] : jobs) {
            s.jobs.emplace(id, endpoint.stats());
            s.job_names.emplace(id, endpoint.config().name);
          }
          return s;
        },
        timeout);
  }
};

PsDaemon::PsDaemon(const PsDaemonConfig& config) : impl_(std::make_unique<Impl>(config)) {
  if (config.serve_control) impl_->start_http();
}

PsDaemon::~PsDaemon() { stop(); }

void PsDaemon::start() {
  std::lock_guard lifecycle(impl_->lifecycle_mutex);
  if (impl_->started) return;
  impl_->started = true;
  impl_->tasks.loop_started();
  impl_->loop_thread = std::thread([impl = impl_.get()] { impl->loop.run(); });
  impl_->start_http_thread();
}

void PsDaemon::stop() {
  std::lock_guard lifecycle(impl_->lifecycle_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  // A server that never listened must still close its bound socket, and httplib only does that
  // in stop() of a running server.
  if (!impl_->started) impl_->start_http_thread();
  // HTTP first: its handlers may be waiting for the loop thread.
  if (impl_->http) impl_->http->stop();
  if (impl_->http_thread.joinable()) impl_->http_thread.join();
  impl_->loop.stop();
  if (impl_->loop_thread.joinable()) impl_->loop_thread.join();
  impl_->tasks.loop_ended();  // requests that raced with stop() still get an answer
}

std::string PsDaemon::answer_control_request(std::string_view request) {
  if (!impl_->http) throw std::logic_error("answer_control_request: this PS serves no control plane (serve_control)");
  return control::answer_request(*impl_->http, request);
}

SocketAddress PsDaemon::data_endpoint() const { return impl_->socket.local_endpoint(); }
SocketAddress PsDaemon::control_endpoint() const { return impl_->control_bound; }

void PsDaemon::add_job(const PsConfig& config) {
  impl_->call([this, &config] { impl_->add_job(config); });
}

bool PsDaemon::remove_job(JobId job) {
  return impl_->call([this, job] { return impl_->remove_job(job, " by the program that runs this PS"); });
}

control::PsStats PsDaemon::stats() const { return impl_->snapshot(); }
std::string PsDaemon::metrics_text() const { return control::to_prometheus(stats()); }
std::string PsDaemon::stats_json() const { return control::to_json(stats()) + "\n"; }

}  // namespace atp
