// The lease routes both daemons serve (POST /leases, POST /leases/<id>/keepalive, DELETE
// /leases/<id>), and how the other routes read and check a request's lease (control.h).
#include <httplib.h>

#include <charconv>
#include <chrono>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "atp/control/control.h"
#include "atp/io/event_loop.h"

namespace atp::control {

LeaseTable::Id lease_param(const httplib::Request& request) {
  if (!request.has_param("lease")) return 0;
  const std::string text = request.get_param_value("lease");
  LeaseTable::Id id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc() || end != text.data() + text.size() || id == 0) {
    throw ControlError("lease: expected a lease id (POST /leases grants one), got '" + excerpt(text) + "'");
  }
  return id;
}

namespace {

Reply lease_failure(LeaseTable::Outcome outcome, const std::string& lease) {
  if (outcome == LeaseTable::Outcome::kNotOwner) return Reply::error(403, "lease " + lease + " is another tenant's");
  return Reply::error(404, "lease " + lease + " does not exist (it expired or was revoked); grant a new one");
}

}  // namespace

std::optional<Reply> refuse_lease(const Tenancy& tenancy, std::string_view who, LeaseTable::Id lease) {
  const LeaseTable::Outcome outcome = tenancy.check_lease(lease, who);
  if (outcome == LeaseTable::Outcome::kOk) return std::nullopt;
  return lease_failure(outcome, std::to_string(lease));
}

void add_lease_routes(httplib::Server& server, Tenancy& tenancy, OnLoop on_loop,
                      std::function<void(Tenancy::Resource)> remove) {
  using nlohmann::json;
  const auto answer = [](httplib::Response& res, const Reply& reply) {
    res.status = reply.status;
    res.set_content(reply.body + "\n", "application/json");
  };
  // Runs `task` on the loop; a loop that does not answer is a 503.
  const auto run = [on_loop](std::function<Reply()> task) {
    try {
      return on_loop(std::move(task));
    } catch (const std::exception& e) {
      return Reply::error(503, e.what());
    }
  };
  const auto ms = [](Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  // The lease id of a /leases/<id> path; 0 when it is not one.
  const auto path_id = [](const std::string& digits) {
    LeaseTable::Id id = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    return error == std::errc() && end == digits.data() + digits.size() ? id : 0;
  };

  server.Post("/leases", [&server, &tenancy, run, answer, ms](const httplib::Request& req, httplib::Response& res) {
    Duration ttl{};
    try {
      ttl = lease_ttl_from_json(req.body);
    } catch (const ControlError& e) {
      return answer(res, Reply::error(400, e.what()));
    }
    answer(res, run([&tenancy, who = requester(server, req), ttl, ms] {
             const LeaseTable::Id id = tenancy.grant(who, ttl, EventLoop::now());
             if (id == 0) {
               return Reply::error(503, "this daemon holds " + std::to_string(LeaseTable::kMaxLeases) +
                                            " leases, the most it keeps; revoke one first");
             }
             return Reply{201, json{{"lease", id}, {"ttl_ms", ms(tenancy.ttl(id))}}.dump()};
           }));
  });
  server.Post(R"(/leases/(\d+)/keepalive)",
              [&server, &tenancy, run, answer, ms, path_id](const httplib::Request& req, httplib::Response& res) {
                const std::string text = excerpt(req.matches[1].str());
                answer(res, run([&tenancy, who = requester(server, req), id = path_id(req.matches[1].str()), text, ms] {
                         const LeaseTable::Outcome o = tenancy.keep_alive(id, who, EventLoop::now());
                         if (o != LeaseTable::Outcome::kOk) return lease_failure(o, text);
                         return Reply{200, json{{"lease", id}, {"ttl_ms", ms(tenancy.ttl(id))}}.dump()};
                       }));
              });
  server.Delete(R"(/leases/(\d+))", [&server, &tenancy, run, answer, remove, path_id](const httplib::Request& req,
                                                                                      httplib::Response& res) {
    const std::string text = excerpt(req.matches[1].str());
    answer(res, run([&tenancy, who = requester(server, req), id = path_id(req.matches[1].str()), text, remove] {
             std::vector<Tenancy::Resource> held;
             const LeaseTable::Outcome o = tenancy.revoke(id, who, held);
             if (o != LeaseTable::Outcome::kOk) return lease_failure(o, text);
             json removed = json::array();
             for (Tenancy::Resource r : held) {
               remove(r);
               removed.push_back(Tenancy::describe(r));
             }
             return Reply{200, json{{"revoked", id}, {"removed", removed}}.dump()};
           }));
  });
}

}  // namespace atp::control
