// The switch daemon's HTTP control plane: its routes (switch_daemon.h) parse each request on the
// HTTP thread and have SwitchControl answer it on the dataplane thread.
#include <httplib.h>

#include <charconv>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <system_error>

#include "atp/control/stats.h"
#include "switch_control.h"

namespace atp::detail {
namespace {

using control::Reply;

// The number a route matched with (\d+); nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> parse_index(const std::string& digits) {
  std::uint64_t v = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

// Answers `res` with `status` and `message` as the error sentence.
void fail(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(control::error_body(message) + "\n", "application/json");
}

// Runs `task` (returning a Reply) on the dataplane thread and answers with its Reply; a dataplane
// that does not answer is a 503.
template <typename Task>
void answer(LoopTasks& tasks, httplib::Response& res, Task task) {
  Reply reply;
  try {
    reply = on_dataplane(tasks, std::move(task));
  } catch (const std::exception& e) {
    return fail(res, 503, e.what());
  }
  res.status = reply.status;
  res.set_content(reply.body + "\n", "application/json");
}

// POST /hosts' ?shared=1|0 (false when absent); throws ControlError for another value.
bool shared_param(const httplib::Request& req) {
  if (!req.has_param("shared")) return false;
  const std::string value = req.get_param_value("shared");
  if (value != "1" && value != "0") {
    throw control::ControlError("shared: expected 1 or 0, got '" + control::excerpt(value) + "'");
  }
  return value == "1";
}

// The tasks below capture what they need by value: a task that outlives a timed-out request must
// not point into its stack.

// POST /jobs and DELETE /jobs/<id>.
void add_job_routes(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks) {
  http.Post("/jobs", [&http, &control_plane, &tasks](const httplib::Request& req, httplib::Response& res) {
    SwitchJobPlan plan;
    LeaseTable::Id lease = 0;
    try {
      plan = control::switch_job_from_json(req.body);
      lease = control::lease_param(req);
    } catch (const control::ControlError& e) {
      return fail(res, 400, e.what());
    }
    answer(tasks, res, [&control_plane, plan, lease, who = control::requester(http, req)] {
      return control_plane.install_job(plan, who, lease);
    });
  });
  http.Delete(R"(/jobs/(\d+))", [&http, &control_plane, &tasks](const httplib::Request& req, httplib::Response& res) {
    answer(tasks, res,
           [&control_plane, id = parse_index(req.matches[1].str()), text = control::excerpt(req.matches[1].str()),
            who = control::requester(http, req)] { return control_plane.uninstall_job(id, text, who); });
  });
}

// PUT /ports/<port>.
void add_port_route(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks) {
  http.Put(R"(/ports/(\d+))", [&http, &control_plane, &tasks](const httplib::Request& req, httplib::Response& res) {
    const std::optional<std::uint64_t> port = parse_index(req.matches[1].str());
    // Parsed here, reported after the port check (a missing port is the first thing to say).
    std::optional<control::PortSettings> settings;
    std::string bad_body;
    try {
      settings = control::port_settings_from_json(req.body);
    } catch (const control::ControlError& e) {
      bad_body = e.what();
    }
    answer(
        tasks, res,
        [&control_plane, port, text = control::excerpt(req.matches[1].str()), settings, bad_body,
         who = control::requester(http, req)] { return control_plane.set_port(port, text, settings, bad_body, who); });
  });
}

// POST /hosts and DELETE /hosts/<port>.
void add_host_routes(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks) {
  http.Post("/hosts", [&http, &control_plane, &tasks](const httplib::Request& req, httplib::Response& res) {
    SocketAddress peer;
    LeaseTable::Id lease = 0;
    bool shared = false;
    try {
      peer = control::host_from_json(req.body);
      lease = control::lease_param(req);
      shared = shared_param(req);
    } catch (const control::ControlError& e) {
      return fail(res, 400, e.what());
    }
    answer(tasks, res, [&control_plane, peer, lease, shared, who = control::requester(http, req)] {
      return control_plane.attach_host(peer, who, lease, shared);
    });
  });
  http.Delete(R"(/hosts/(\d+))", [&http, &control_plane, &tasks](const httplib::Request& req, httplib::Response& res) {
    answer(tasks, res,
           [&control_plane, port = parse_index(req.matches[1].str()), text = control::excerpt(req.matches[1].str()),
            who = control::requester(http, req)] { return control_plane.detach_host(port, text, who); });
  });
}

// GET /stats (JSON) and GET /metrics (Prometheus text): the same counters.
void add_stats_routes(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks) {
  http.Get("/stats", [&control_plane, &tasks](const httplib::Request&, httplib::Response& res) {
    try {
      res.set_content(control::to_json(on_dataplane(tasks, [&control_plane] { return control_plane.stats(); })) + "\n",
                      "application/json");
    } catch (const std::exception& e) {
      fail(res, 503, e.what());
    }
  });
  http.Get("/metrics", [&control_plane, &tasks](const httplib::Request&, httplib::Response& res) {
    try {
      res.set_content(control::to_prometheus(on_dataplane(tasks, [&control_plane] { return control_plane.stats(); })),
                      "text/plain; version=0.0.4");
    } catch (const std::exception& e) {
      fail(res, 503, e.what());
    }
  });
}

}  // namespace

// Every check that reads the ports (their number changes with POST /hosts) runs on the
// dataplane thread, inside the task; the HTTP thread only parses.
void add_switch_routes(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks) {
  add_job_routes(http, control_plane, tasks);
  add_port_route(http, control_plane, tasks);
  add_host_routes(http, control_plane, tasks);
  control::add_lease_routes(
      http, control_plane.tenancy(),
      [&tasks](std::function<Reply()> task) { return on_dataplane(tasks, std::move(task)); },
      [&control_plane](control::Tenancy::Resource r) { control_plane.remove(r, "its lease was revoked"); });
  add_stats_routes(http, control_plane, tasks);
}

}  // namespace atp::detail
