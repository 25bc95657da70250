// One fuzz input fed to what parses the daemons' control input: the JSON codecs (control.h), the
// switch's YAML config, and both daemons' HTTP request handling, driven without sockets
// (answer_control_request). Shared by the libFuzzer target and the seeded gtest.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "atp/control/control.h"
#include "atp/control/json_fields.h"
#include "atp/control/worker_config_json.h"
#include "atp/daemons/ps_daemon.h"
#include "atp/daemons/switch_daemon.h"

namespace atp::fuzz {

[[noreturn]] inline void violated(const char* where, std::string_view what) {
  std::fprintf(stderr, "control fuzz: %s: %.*s\n", where, static_cast<int>(std::min<std::size_t>(what.size(), 2000)),
               what.data());
  std::abort();
}

// `parse` must return a value or throw ControlError; a value must come back unchanged through
// to_json and `parse` again.
template <class Parse>
void check_codec(const char* name, const std::string& text, Parse parse) {
  using Value = decltype(parse(text));
  std::optional<Value> value;
  try {
    value = parse(text);
  } catch (const control::ControlError&) {
    return;
  } catch (const std::exception& e) {
    violated(name, std::string("threw something other than ControlError: ") + e.what());
  }
  auto encode = [](const Value& v) {
    if constexpr (std::is_same_v<Value, SocketAddress>) {
      return control::host_to_json(v);
    } else if constexpr (std::is_same_v<Value, WorkerConfig>) {
      return control::worker_config_json(v).dump();
    } else {
      return control::to_json(v);
    }
  };
  const std::string once = encode(*value);
  try {
    if (encode(parse(once)) != once) violated(name, "changed through to_json and back: " + once);
  } catch (const std::exception& e) {
    violated(name, std::string("refused its own to_json (") + e.what() + "): " + once);
  }
}

inline void parse_messages(const std::string& text) {
  check_codec("switch_job_from_json", text, control::switch_job_from_json);
  check_codec("ps_job_from_json", text, control::ps_job_from_json);
  check_codec("port_settings_from_json", text, control::port_settings_from_json);
  check_codec("host_from_json", text, control::host_from_json);
  check_codec("worker_config_from", text, [](const std::string& t) {
    return control::worker_config_from(control::parse_object(t, "worker config"));
  });
}

inline void parse_switch_config_text(const std::string& text) {
  try {
    parse_switch_config(text, "fuzz.yaml");
  } catch (const SwitchConfigError&) {
  } catch (const std::exception& e) {
    violated("parse_switch_config", std::string("threw something other than SwitchConfigError: ") + e.what());
  }
}

// `answer` (to `request`) must be an HTTP/1.1 answer, and one with an error status must carry
// {"error": "a sentence"}. Only an empty request (a client that closed at once) has no answer.
inline void check_answer(const char* daemon, std::string_view request, std::string_view answer) {
  if (answer.empty() != request.empty()) violated(daemon, answer.empty() ? "no answer" : "an answer to nothing");
  if (answer.empty()) return;
  // "Expect: 100-continue" is answered with an interim 100 first.
  constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  if (answer.substr(0, kContinue.size()) == kContinue) answer.remove_prefix(kContinue.size());
  if (answer.size() < 12 || answer.substr(0, 9) != "HTTP/1.1 ") violated(daemon, answer);
  const int status = std::atoi(std::string(answer.substr(9, 3)).c_str());
  if (status < 200 || status > 599) violated(daemon, answer);
  const std::size_t body_at = answer.find("\r\n\r\n");
  if (body_at == std::string_view::npos) violated(daemon, answer);
  // HEAD: headers only. The method is the request line's first word, which the server (httplib)
  // reads past leading whitespace.
  const std::size_t method_at = request.find_first_not_of(" \t\r\n");
  if (status < 400 || (method_at != std::string_view::npos && request.substr(method_at, 5) == "HEAD ")) return;
  const nlohmann::json body = nlohmann::json::parse(answer.substr(body_at + 4), nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_string() ||
      body["error"].get<std::string>().empty()) {
    violated(daemon, std::string("an error without a sentence: ") + std::string(answer));
  }
}

// The daemons' operator token and a tenant's, for requests that get past authentication.
inline constexpr std::string_view kOperatorToken = "fuzz-operator-token-0123456789";
inline constexpr std::string_view kTenantToken = "fuzz-tenant-token-0123456789";

// A switch (4 UDP ports, 16 aggregators of 8 values) and a PS, not started: a request runs on
// the fuzzer's thread. Both know the operator and tenant "t". Rebuilt every kRequestsPerDaemons
// requests, so that what earlier inputs installed (ports, jobs, leases) stays small.
class Daemons {
 public:
  static constexpr int kRequestsPerDaemons = 512;

  std::string to_switch(std::string_view request) {
    renew();
    std::string answer = switch_->answer_control_request(request);
    check_answer("switch", request, answer);
    return answer;
  }
  std::string to_ps(std::string_view request) {
    renew();
    std::string answer = ps_->answer_control_request(request);
    check_answer("ps", request, answer);
    // A job may hold a 16 MiB window ring from the start: a few at a time.
    const control::PsStats stats = ps_->stats();
    if (stats.jobs.size() > 4) {
      for (const auto& [job, counters] : stats.jobs) ps_->remove_job(job);
    }
    return answer;
  }

 private:
  void renew() {
    if (switch_ && ++requests_ < kRequestsPerDaemons) return;
    requests_ = 0;
    switch_.reset();
    ps_.reset();
    SwitchDaemonConfig s;
    s.name = "fuzz";
    s.pipeline.num_aggregators = 16;
    s.pipeline.aggregator_width = 8;
    for (std::uint16_t p = 1; p <= 4; ++p) s.ports.push_back({SocketAddress::loopback(p), {}, {}, {}, {}});
    s.routes = {{0x0A000001, 0}, {0x0A000002, 1}, {0x0A000003, 2}};
    const control::AccessConfig access{std::string(kOperatorToken), {{"t", std::string(kTenantToken)}}, false};
    s.access = access;
    switch_ = std::make_unique<SwitchDaemon>(s);
    PsDaemonConfig c;
    c.data = SocketAddress::loopback(0);
    c.control = SocketAddress::loopback(0);
    c.uplink = SocketAddress::loopback(9);
    c.access = access;
    ps_ = std::make_unique<PsDaemon>(c);
  }

  std::unique_ptr<SwitchDaemon> switch_;
  std::unique_ptr<PsDaemon> ps_;
  int requests_ = 0;
};

// The routes that take a body, for inputs that are only a body (the fuzzer then does not have to
// find HTTP's framing first).
struct BodyRoute {
  bool to_switch;
  const char* method;
  const char* path;
};
inline constexpr BodyRoute kBodyRoutes[] = {
    {true, "POST", "/jobs"},
    {true, "POST", "/hosts"},
    {true, "PUT", "/ports/0"},
    {true, "PUT", "/ports/3"},
    {true, "DELETE", "/jobs/1"},
    {true, "DELETE", "/hosts/1"},
    {true, "GET", "/stats"},
    {false, "POST", "/jobs"},
    {false, "DELETE", "/jobs/1"},
    {false, "GET", "/metrics"},
    {true, "POST", "/leases"},
    {false, "POST", "/leases"},
    {true, "POST", "/leases/1/keepalive"},
    {true, "DELETE", "/leases/1"},
    {false, "DELETE", "/leases/1"},
    {true, "POST", "/jobs?lease=1"},
    {true, "POST", "/hosts?lease=1"},
    {false, "POST", "/jobs?lease=1"},
};

// "Authorization: ...\r\n" for the operator (0), tenant t (1) or nobody (2).
inline std::string authorization(unsigned who) {
  if (who == 2) return "";
  return "Authorization: Bearer " + std::string(who == 0 ? kOperatorToken : kTenantToken) + "\r\n";
}

// The first byte picks what the rest is: JSON for every codec, a switch config, a raw HTTP
// request to the switch or the PS (as it is, or with the operator's or the tenant's token added
// after its first line), or a body for one of kBodyRoutes (second byte: the route and who sends it).
inline void feed(Daemons& daemons, std::span<const std::uint8_t> data) {
  if (data.empty()) return;
  const std::uint8_t mode = data[0] % 6;
  std::string rest(reinterpret_cast<const char*>(data.data()) + 1, data.size() - 1);
  switch (mode) {
    case 0:
      parse_messages(rest);
      return;
    case 1:
      parse_switch_config_text(rest);
      return;
    case 2:
      daemons.to_switch(rest);
      return;
    case 3:
      daemons.to_ps(rest);
      return;
    case 5: {
      if (rest.empty()) return;
      const auto choice = static_cast<std::uint8_t>(rest[0]);
      std::string request = rest.substr(1);
      const std::size_t line_end = request.find("\r\n");
      request.insert(line_end == std::string::npos ? request.size() : line_end + 2, authorization((choice >> 1) & 1));
      (choice & 1) != 0 ? daemons.to_ps(request) : daemons.to_switch(request);
      return;
    }
    default: {
      if (rest.empty()) return;
      const auto choice = static_cast<std::uint8_t>(rest[0]);
      const BodyRoute& route = kBodyRoutes[choice % std::size(kBodyRoutes)];
      const std::string body = rest.substr(1);
      const std::string request = std::string(route.method) + " " + route.path + " HTTP/1.1\r\nHost: fuzz\r\n" +
                                  authorization(choice / std::size(kBodyRoutes) % 3) +
                                  "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                                  "\r\n\r\n" + body;
      route.to_switch ? daemons.to_switch(request) : daemons.to_ps(request);
      // The same body through the codecs directly, for the fuzzer's coverage of both.
      parse_messages(body);
    }
  }
}

}  // namespace atp::fuzz
