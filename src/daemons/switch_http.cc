// The switch daemon's HTTP control plane: its routes (switch_daemon.h) parse each request on the
// HTTP thread and have SwitchControl answer it on the dataplane thread; GET /metrics' Prometheus text.
#include <httplib.h>

#include <charconv>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include "switch_control.h"

namespace atp::detail {
namespace {

using control::Reply;
using nlohmann::json;

// Counters that are levels, not running totals (Prometheus gauges).
bool is_gauge(std::string_view key) {
  return key == "aggregators" || key == "aggregators_in_use" || key == "queue_depth" || key == "ingress_queue_depth" ||
         key == "installed" || key == "mac_addresses" || key == "neighbors";
}

// Prometheus text exposition of stats_json()'s document: one metric family per counter,
// labelled by switch, and by job or port for the per-job and per-port ones.
std::string to_prometheus(const json& stats) {
  std::ostringstream out;
  const std::string name = stats["name"].get<std::string>();
  auto emit_family = [&](const std::string& metric, std::string_view key) {
    out << "# TYPE " << metric << (is_gauge(key) ? " gauge\n" : " counter\n");
  };
  for (const auto& item : stats["switch"].items()) {
    const std::string metric = "atp_switch_" + item.key() + (is_gauge(item.key()) ? "" : "_total");
    emit_family(metric, item.key());
    out << metric << "{switch=\"" << name << "\"} " << item.value().dump() << "\n";
  }
  auto emit_group = [&](const char* group, const char* label, const char* prefix) {
    const json& rows = stats[group];
    if (rows.empty()) return;
    for (const auto& item : rows[0].items()) {
      if (item.key() == label || !item.value().is_number()) continue;
      const std::string metric = std::string(prefix) + item.key() + (is_gauge(item.key()) ? "" : "_total");
      emit_family(metric, item.key());
      for (const json& row : rows) {
        out << metric << "{switch=\"" << name << "\"," << label << "=\"" << row[label].dump() << "\"} "
            << row[item.key()].dump() << "\n";
      }
    }
  };
  emit_group("jobs", "job", "atp_switch_job_");
  emit_group("ports", "port", "atp_switch_port_");
  return out.str();
}

// The number a route matched with (\d+); nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> parse_index(const std::string& digits) {
  std::uint64_t v = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

}  // namespace

// Every check that reads the ports (their number changes with POST /hosts) runs on the
// dataplane thread, inside the task; the HTTP thread only parses.
void add_switch_routes(httplib::Server& http, SwitchControl& control_plane, LoopTasks& tasks) {
  auto fail = [](httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(control::error_body(message) + "\n", "application/json");
  };
  // Runs `task` (returning a Reply) on the dataplane thread and answers with its Reply.
  auto answer = [&tasks, fail](httplib::Response& res, auto task) {
    Reply reply;
    try {
      reply = on_dataplane(tasks, std::move(task));
    } catch (const std::exception& e) {
      return fail(res, 503, e.what());
    }
    res.status = reply.status;
    res.set_content(reply.body + "\n", "application/json");
  };
  http.Post("/jobs", [&http, &control_plane, fail, answer](const httplib::Request& req, httplib::Response& res) {
    SwitchJobPlan plan;
    LeaseTable::Id lease = 0;
    try {
      plan = control::switch_job_from_json(req.body);
      lease = control::lease_param(req);
    } catch (const control::ControlError& e) {
      return fail(res, 400, e.what());
    }
    // By value: a task that outlives a timed-out request must not point into its stack.
    answer(res, [&control_plane, plan, lease, who = control::requester(http, req)] {
      return control_plane.install_job(plan, who, lease);
    });
  });
  http.Delete(R"(/jobs/(\d+))", [&http, &control_plane, answer](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&control_plane, id = parse_index(req.matches[1].str()), text = control::excerpt(req.matches[1].str()),
                 who = control::requester(http, req)] { return control_plane.uninstall_job(id, text, who); });
  });
  http.Put(R"(/ports/(\d+))", [&http, &control_plane, answer](const httplib::Request& req, httplib::Response& res) {
    const std::optional<std::uint64_t> port = parse_index(req.matches[1].str());
    // Parsed here, reported after the port check (a missing port is the first thing to say).
    std::optional<control::PortSettings> settings;
    std::string bad_body;
    try {
      settings = control::port_settings_from_json(req.body);
    } catch (const control::ControlError& e) {
      bad_body = e.what();
    }
    answer(res, [&control_plane, port, text = control::excerpt(req.matches[1].str()), settings, bad_body,
                 who = control::requester(http, req)] {  // by value
      return control_plane.set_port(port, text, settings, bad_body, who);
    });
  });
  http.Post("/hosts", [&http, &control_plane, fail, answer](const httplib::Request& req, httplib::Response& res) {
    SocketAddress peer;
    LeaseTable::Id lease = 0;
    try {
      peer = control::host_from_json(req.body);
      lease = control::lease_param(req);
    } catch (const control::ControlError& e) {
      // A switch on interfaces refuses any body: say that, not what is wrong with the body.
      return fail(res, 400, control_plane.supports_hosts() ? e.what() : kInterfacePortsHaveNoHosts);
    }
    answer(res, [&control_plane, peer, lease, who = control::requester(http, req)] {
      return control_plane.attach_host(peer, who, lease);
    });
  });
  http.Delete(R"(/hosts/(\d+))", [&http, &control_plane, answer](const httplib::Request& req, httplib::Response& res) {
    answer(res,
           [&control_plane, port = parse_index(req.matches[1].str()), text = control::excerpt(req.matches[1].str()),
            who = control::requester(http, req)] { return control_plane.detach_host(port, text, who); });
  });
  control::add_lease_routes(
      http, control_plane.tenancy(),
      [&tasks](std::function<Reply()> task) { return on_dataplane(tasks, std::move(task)); },
      [&control_plane](control::Tenancy::Resource r) { control_plane.remove(r); });
  http.Get("/stats", [&control_plane, &tasks, fail](const httplib::Request&, httplib::Response& res) {
    try {
      res.set_content(on_dataplane(tasks, [&control_plane] { return control_plane.stats(); }).dump(2) + "\n",
                      "application/json");
    } catch (const std::exception& e) {
      fail(res, 503, e.what());
    }
  });
  http.Get("/metrics", [&control_plane, &tasks, fail](const httplib::Request&, httplib::Response& res) {
    try {
      res.set_content(to_prometheus(on_dataplane(tasks, [&control_plane] { return control_plane.stats(); })),
                      "text/plain; version=0.0.4");
    } catch (const std::exception& e) {
      fail(res, 503, e.what());
    }
  });
}

}  // namespace atp::detail
