// Tests of the daemons' control-plane codec (control.h): switch and PS job plans, port settings,
// and the worker configs rank 0 of a PyTorch job hands the other ranks through the rendezvous
// store; and of the HTTP server both daemons use (limits, error bodies, slow clients).
#include "atp/control/control.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "atp/control/control_client.h"
#include "atp/control/json_fields.h"
#include "atp/control/worker_config_json.h"
#include "support/test_access.h"

// The TLS tests make their certificates with OpenSSL's C API (no openssl command needed).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>

namespace atp::control {
namespace {

// The worker config's codec takes and gives JSON values; as text, the way a message carries them.
WorkerConfig worker_config_from_text(const std::string& text) {
  return worker_config_from(parse_object(text, "worker config"));
}
std::string text_of(const WorkerConfig& c) { return worker_config_json(c).dump(); }

TEST(ControlCodec, RoundTripsAndNamesBadFields) {
  SwitchJobPlan plan;
  plan.entry.job = 7;
  plan.entry.admitted_ports = {0, 2};
  plan.entry.roles = {{0x0A000003u, 1, {{2, 1}, {3, 4}}}};
  plan.multicast_ports = {0, 1};
  plan.routes = {{0x0A010001u, 2}, {0x0A020001u, 0}};
  const SwitchJobPlan back = switch_job_from_json(to_json(plan));
  EXPECT_EQ(back.routes, plan.routes);
  // Without routes: a job whose hosts the switch routes already.
  EXPECT_TRUE(
      switch_job_from_json(R"({"job": 1, "admitted_ports": [], "roles": [], "multicast_ports": []})").routes.empty());
  auto job_error = [](const std::string& routes) {
    try {
      switch_job_from_json(R"({"job": 1, "admitted_ports": [], "roles": [], "multicast_ports": [], "routes": )" +
                           routes + "}");
    } catch (const ControlError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(job_error(R"([{"dst": "10.0.0.1", "port": 1}, {"dst": "10.0.0.1", "port": 2}])"),
            "routes[1].dst: 10.0.0.1 is listed twice");
  EXPECT_EQ(job_error(R"([{"dst": "10.0.0.1", "port": 70000}])"),
            "routes[0].port: must be between 0 and 65535, got 70000");
  EXPECT_EQ(job_error(R"([{"dst": "10.0.0.1"}])"), "routes[0].port: missing");
  EXPECT_EQ(job_error(R"({})"), "routes: expected a list, got {}");
  // A job's name labels metrics and log lines: kept, and one that could not label them refused.
  plan.name = "resnet-50 (run 3)";
  EXPECT_EQ(switch_job_from_json(to_json(plan)).name, plan.name);
  try {
    switch_job_from_json(R"({"name": "a\"b", "job": 1, "admitted_ports": [], "roles": [], "multicast_ports": []})");
    FAIL() << "a name with a quote was taken";
  } catch (const ControlError& e) {
    EXPECT_EQ(std::string(e.what()),
              "name: 'a\"b' is not a job name (at most 255 printable ASCII characters, no quotes or backslashes)");
  }
  EXPECT_EQ(back.entry.job, 7);
  EXPECT_EQ(back.entry.admitted_ports, plan.entry.admitted_ports);
  ASSERT_EQ(back.entry.roles.size(), 1u);
  EXPECT_EQ(back.entry.roles[0].ps, 0x0A000003u);
  EXPECT_EQ(back.entry.roles[0].node, 1);
  ASSERT_EQ(back.entry.roles[0].children.size(), 2u);
  EXPECT_EQ(back.entry.roles[0].children[1].node, 3);
  EXPECT_EQ(back.entry.roles[0].children[1].fan_in, 4);
  auto role_error = [](const std::string& role) {
    try {
      switch_job_from_json(R"({"job": 1, "admitted_ports": [], "multicast_ports": [], "roles": [)" + role + "]}");
    } catch (const ControlError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(role_error(R"({"ps": "10.0.0.3", "node": 0, "children": [{"node": 2, "fan_in": 1}]})"),
            "roles[0].node: 0 is the PS's, a switch's is 1 or more");
  EXPECT_EQ(role_error(R"({"ps": "10.0.0.3", "node": 1, "children": []})").substr(0, 61),
            "roles[0].children: expected a list of 1 to 32 (a bitmap's bit");
  EXPECT_EQ(role_error(R"({"ps": "10.0.0.3", "node": 1, "children": [{"node": 2, "fan_in": 33}]})"),
            "roles[0].children[0].fan_in: must be 1..32, got 33");
  EXPECT_EQ(
      role_error(R"({"ps": "10.0.0.3", "node": 1, "children": [{"node": 2, "fan_in": 1}, {"node": 2, "fan_in": 1}]})"),
      "roles[0].children[1].node: 2 is the PS's, the role's own or listed twice");
  EXPECT_EQ(back.multicast_ports, plan.multicast_ports);

  PsConfig ps;
  ps.job = 3;
  ps.self = 0x0A000005u;
  ps.multicast_group = multicast_group_address(3);
  ps.tree = {0, 0, 1, 1};
  ps.workers = {0x0A000001u, 0x0A000002u};
  ps.values_per_packet = 256;
  ps.aggregators = {40, 100};
  ps.max_window_seqs = 77;
  ps.index_policy = IndexPolicy::kHashedSlots;
  ps.name = "bert";
  const PsConfig ps_back = ps_job_from_json(to_json(ps));
  EXPECT_EQ(ps_back.name, "bert");
  EXPECT_EQ(ps_back.index_policy, IndexPolicy::kHashedSlots);
  EXPECT_EQ(ps_back.job, 3);
  EXPECT_EQ(ps_back.self, ps.self);
  EXPECT_EQ(ps_back.multicast_group, ps.multicast_group);
  EXPECT_EQ(ps_back.tree, ps.tree);
  EXPECT_EQ(ps_back.workers, ps.workers);
  EXPECT_EQ(ps_back.values_per_packet, 256);
  EXPECT_EQ(ps_back.aggregators, (AggregatorRange{40, 100}));
  EXPECT_EQ(ps_back.max_window_seqs, 77u);

  auto error_of = [](const std::string& text) {
    try {
      ps_job_from_json(text);
    } catch (const ControlError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0],
                         "windoww": 3})")
                .find("windoww: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0", "multicast_group": "224.0.0.1", "tree": [0, 0]})").find("self:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"job": 70000, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0]})")
                .find("job: must be between 0 and 65535"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0]})").find("job: missing"),
            std::string::npos);
  // values_per_packet gets the one check's sentence, beyond a uint16's range too.
  for (const char* values : {"0", "4097", "70000"}) {
    EXPECT_NE(error_of(std::string(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1",
                         "tree": [0, 0], "workers": ["10.0.0.2"], "values_per_packet": )") +
                       values + "}")
                  .find(std::string("values_per_packet: must be 1..4096, got ") + values),
              std::string::npos)
        << values;
  }
  // A tree that is not one is refused with the PS's own sentence.
  EXPECT_EQ(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 1],
                         "workers": ["10.0.0.2"]})"),
            "tree[1] is 1; a node's parent must come before it");
  // A PS takes gradients only from the workers it is told of: the list is required.
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0]})")
                .find("workers: missing"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0],
                         "workers": []})")
                .find("workers: must list"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0],
                         "workers": ["10.0.0.2", 7]})")
                .find("workers[1]: expected an address"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"job": 1, "self": "10.0.0.1", "multicast_group": "224.0.0.1", "tree": [0, 0],
                         "workers": ["10.0.0.2"], "index": "random"})")
                .find("index: must be"),
            std::string::npos);

  PortSettings settings;
  settings.egress = EgressConfig{.rate_gbps = 2.5,
                                 .buffer_packets = 64,
                                 .ecn_threshold_packets = 16,
                                 .delay = std::chrono::microseconds(30),
                                 .loss = 0.1,
                                 .duplicate = 0.2,
                                 .reorder = 0.3};
  const PortSettings settings_back = port_settings_from_json(to_json(settings));
  ASSERT_TRUE(settings_back.egress);
  EXPECT_FALSE(settings_back.ingress);
  EXPECT_EQ(settings_back.egress->rate_gbps, 2.5);
  EXPECT_EQ(settings_back.egress->buffer_packets, 64u);
  EXPECT_EQ(settings_back.egress->ecn_threshold_packets, 16u);
  EXPECT_EQ(settings_back.egress->delay, std::chrono::microseconds(30));
  EXPECT_EQ(settings_back.egress->loss, 0.1);
  EXPECT_EQ(settings_back.egress->duplicate, 0.2);
  EXPECT_EQ(settings_back.egress->reorder, 0.3);
}

TEST(HostCodec, RoundTripsAndRefusesPortZero) {
  const SocketAddress peer = SocketAddress::parse("127.0.0.1:40001");
  EXPECT_EQ(host_from_json(host_to_json(peer)), peer);
  EXPECT_THROW(host_from_json(host_to_json(SocketAddress::loopback(0))), ControlError);
}

WorkerConfig sample() {
  WorkerConfig c;
  c.job = 513;
  c.self = 0x0A000009;
  c.ps = {PsRoute{0x0A000001, 4}, PsRoute{0x0A000002, 300}};
  c.values_per_packet = 1024;
  c.scale = 1e6;
  c.aggregators = {100, 400};
  c.index_policy = IndexPolicy::kHashedSlots;
  c.congestion = {false, 64, 2, 512, 300, 9000};
  c.loss_recovery = LossRecovery::kTimeoutOnly;
  c.retransmit_timeout = std::chrono::milliseconds(20);
  c.max_retransmit_timeout = std::chrono::milliseconds(500);
  c.progress_timeout = std::chrono::seconds(30);
  c.initial_seq = 77;
  return c;
}

TEST(WorkerConfigCodec, RoundTripsEveryField) {
  const WorkerConfig c = sample();
  const WorkerConfig back = worker_config_from_text(text_of(c));
  EXPECT_EQ(back.job, c.job);
  EXPECT_EQ(back.self, c.self);
  ASSERT_EQ(back.ps.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.ps[i].ps, c.ps[i].ps);
    EXPECT_EQ(back.ps[i].node, c.ps[i].node);
  }
  EXPECT_EQ(back.values_per_packet, c.values_per_packet);
  EXPECT_EQ(back.scale, c.scale);
  EXPECT_EQ(back.aggregators.first, c.aggregators.first);
  EXPECT_EQ(back.aggregators.count, c.aggregators.count);
  EXPECT_EQ(back.index_policy, c.index_policy);
  EXPECT_TRUE(back.congestion == c.congestion);
  EXPECT_EQ(back.loss_recovery, c.loss_recovery);
  EXPECT_EQ(back.retransmit_timeout, c.retransmit_timeout);
  EXPECT_EQ(back.max_retransmit_timeout, c.max_retransmit_timeout);
  EXPECT_EQ(back.progress_timeout, c.progress_timeout);
  EXPECT_EQ(back.initial_seq, c.initial_seq);
}

// Each bad document is refused with the field it names.
TEST(WorkerConfigCodec, NamesBadFields) {
  const std::string good = text_of(sample());
  auto replaced = [&good](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const struct {
    std::string text, field;
  } cases[] = {
      {"[]", "expected a JSON object"},
      {"{", "not valid JSON"},
      {replaced("\"job\":513", "\"job\":70000"), "job: must be between 0 and 65535"},
      {replaced("\"self\":\"10.0.0.9\"", "\"self\":\"ten\""), "self: expected an address"},
      {replaced("\"index\":\"hashed_slots\"", "\"index\":\"random\""), "index: must be"},
      {replaced("\"loss_recovery\":\"timeout\"", "\"loss_recovery\":\"fast\""), "loss_recovery: must be"},
      {replaced("\"enabled\":false", "\"enabled\":1"), "congestion.enabled: expected true or false"},
      {replaced("\"node\":4", "\"node\":70000"), "ps[0].node: must be between 0 and 65535"},
      {replaced("\"node\":4", "\"node\":0"), "ps[0].node: 0 is the PS's"},
      {replaced("\"initial_seq\":77", "\"initial_seq\":77,\"colour\":1"), "colour: unknown key"},
      {replaced(",\"initial_seq\":77", ""), "initial_seq: missing"},
      {replaced("\"progress_timeout_ns\":30000000000", "\"progress_timeout_ns\":-1"), "progress_timeout_ns: must be"},
  };
  for (const auto& c : cases) {
    try {
      worker_config_from_text(c.text);
      ADD_FAILURE() << "accepted " << c.text;
    } catch (const ControlError& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what() << " for " << c.text;
    }
  }
}

// Every parser of a control message, by name: each must parse its input or throw ControlError.
const std::vector<std::pair<const char*, std::function<void(const std::string&)>>>& parsers() {
  static const std::vector<std::pair<const char*, std::function<void(const std::string&)>>> all = {
      {"switch_job_from_json", [](const std::string& t) { switch_job_from_json(t); }},
      {"ps_job_from_json", [](const std::string& t) { ps_job_from_json(t); }},
      {"port_settings_from_json", [](const std::string& t) { port_settings_from_json(t); }},
      {"host_from_json", [](const std::string& t) { host_from_json(t); }},
      {"worker_config_from", [](const std::string& t) { worker_config_from_text(t); }},
  };
  return all;
}

// What `parse` throws for `text`: ControlError's sentence, or a failure for anything else.
std::string control_error(const std::function<void(const std::string&)>& parse, const std::string& text) {
  try {
    parse(text);
  } catch (const ControlError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ControlError: " << e.what();
    return "";
  }
  return "no error";
}

// A Rina ToR's part of a job: its rack's ports in rank order, at most 32, each once, and never
// beside ATP's roles.
TEST(ControlCodec, RinaMembersRoundTripAndBadOnesAreNamed) {
  SwitchJobPlan plan;
  plan.entry.job = 9;
  plan.entry.admitted_ports = {0, 1, 3};
  plan.entry.rina_members = {3, 0, 1};
  plan.multicast_ports = {0, 1, 3};
  EXPECT_EQ(switch_job_from_json(to_json(plan)).entry.rina_members, plan.entry.rina_members);
  plan.entry.rina_members.clear();
  EXPECT_EQ(to_json(plan).find("rina_members"), std::string::npos) << "an ATP job's part has none";
  const auto error = [](const std::string& extra) {
    return control_error([](const std::string& t) { switch_job_from_json(t); },
                         R"({"job": 1, "admitted_ports": [], "multicast_ports": [], )" + extra + "}");
  };
  EXPECT_EQ(error(R"("roles": [], "rina_members": [1, 2, 1])"), "rina_members: a port is listed twice");
  EXPECT_EQ(
      error(R"("roles": [{"ps": "10.0.0.1", "node": 1, "children": [{"node": 2, "fan_in": 1}]}], "rina_members": [1])"),
      "rina_members: a job is aggregated as ATP's (roles) or as Rina's, not both");
  std::string many;
  for (int p = 0; p < 33; ++p) many += (p ? ", " : "") + std::to_string(p);
  EXPECT_EQ(error(R"("roles": [], "rina_members": [)" + many + "]"),
            "rina_members: at most 32 ports (a rack's bitmap), got 33");
}

// The adversarial pass's reproducer: a value nested 100,000 arrays deep crashed the daemons
// (error messages dumped it recursively). Refused before anything recurses, by every parser.
TEST(ControlCodec, DeepNestingIsRefusedWithOneSentence) {
  for (const char* key : {"job", "peer", "egress", "ps", "self"}) {
    const std::string body =
        std::string("{\"") + key + "\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    for (const auto& [name, parse] : parsers()) {
      EXPECT_NE(control_error(parse, body).find("body nests deeper than 32 levels"), std::string::npos) << name;
    }
  }
  // Objects count as levels too, and a bracket inside a string does not.
  std::string objects;
  for (int i = 0; i < 40; ++i) objects += "{\"a\": ";
  objects += "1" + std::string(40, '}');
  EXPECT_NE(control_error(parsers()[0].second, objects).find("nests deeper"), std::string::npos);
  EXPECT_EQ(control_error(parsers()[3].second, R"({"peer": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})")
                .find("nests deeper"),
            std::string::npos);
  // 32 levels are parsed (and refused for what they are).
  const std::string at_limit = "{\"job\": " + std::string(31, '[') + std::string(31, ']') + "}";
  EXPECT_NE(control_error(parsers()[0].second, at_limit).find("job: expected an integer, got [[[["), std::string::npos);
}

// Numbers JSON allows but a double cannot hold (1e400), bytes that are not UTF-8, empty and
// truncated documents: each a ControlError naming the message, never another exception.
TEST(ControlCodec, EveryJsonFailureIsAControlError) {
  for (const std::string text : {"{\"job\": 1e400}", "{\"job\": -1e400}", "[1e400]", "{\"job\": \"\xff\"}", "\xff", "",
                                 "{", "{\"job\": 1", "null", "{\"job\": 1}}", "{\"\xc3\": 1}"}) {
    for (const auto& [name, parse] : parsers()) {
      const std::string error = control_error(parse, text);
      EXPECT_FALSE(error.empty()) << name << " on " << text;
      EXPECT_NE(error, "no error") << name << " on " << text;
    }
  }
  EXPECT_NE(control_error(parsers()[0].second, "{\"job\": 1e400}").find("switch job: not valid JSON"),
            std::string::npos);
}

// A bad value may be a megabyte: the sentence quotes a bounded excerpt of it.
TEST(ControlCodec, ErrorsQuoteABoundedExcerptOfTheBadValue) {
  const std::string long_string = std::string(1 << 20, 'x');
  std::string long_list = "[";
  for (int i = 0; i < 100000; ++i) long_list += (i ? "," : "") + std::to_string(i);
  long_list += "]";
  const struct {
    std::function<void(const std::string&)> parse;
    std::string text, starts;
  } cases[] = {
      {parsers()[0].second, "{\"job\": \"" + long_string + "\"}", "job: expected an integer, got \"xxxx"},
      {parsers()[0].second, "{\"job\": " + long_list + "}", "job: expected an integer, got [0,1,2,"},
      {parsers()[0].second, "{\"job\": 1, \"admitted_ports\": " + long_list + "}",
       "admitted_ports[65536]: must be between 0 and 65535, got 65536"},
      {parsers()[1].second, "{\"job\": 1, \"self\": \"" + long_string + "\"}", "self: expected an address"},
      {parsers()[3].second, "{\"peer\": \"" + long_string + "\"}", "peer: "},
      {parsers()[3].second, "{\"peer\": " + long_list + "}", "peer: expected an address"},
      {parsers()[2].second, "{\"egress\": " + long_list + "}", "egress: expected an object, got [0,1,"},
      {parsers()[0].second, "{\"job\": 1, \"" + long_string + "\": 1}", "xxxx"},
      {parsers()[0].second, "{\"job\": \"" + long_string + "\xff\"}", "switch job: not valid JSON"},
  };
  for (const auto& c : cases) {
    const std::string error = control_error(c.parse, c.text);
    EXPECT_EQ(error.substr(0, c.starts.size()), c.starts) << error.substr(0, 300);
    EXPECT_LT(error.size(), 400u) << error.substr(0, 300);
  }
}

// ---- the control server ----

using namespace std::chrono_literals;

// control::client as a program that reaches others' daemons makes it: the token given, and the
// CA that ATP_TLS_CA names (control::tls_ca_file(), which throws AuthError for a bad one).
httplib::Client client_for(const SocketAddress& server, const std::string& token) {
  return control::client(server, {token, control::tls_ca_file()});
}

// A control server with `limits` and test::test_access()'s tokens, and routes POST /echo
// (answers its body), GET /throw and GET /whoami (answers the requester's name), on 127.0.0.1,
// listening on its own thread until destroyed. With `access`: its tokens and TLS instead.
class TestServer {
 public:
  explicit TestServer(const ServerLimits& limits = {}, bool metrics_open = false)
      : TestServer(limits, access(metrics_open)) {}
  TestServer(const ServerLimits& limits, ServerAccess access) : server_(make_server(std::move(access), limits)) {
    server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "application/json");
    });
    server_->Get("/whoami", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_content(requester(*server_, req), "text/plain");
    });
    server_->Get("/metrics",
                 [](const httplib::Request&, httplib::Response& res) { res.set_content("m 1\n", "text/plain"); });
    server_->Get("/throw", [](const httplib::Request&, httplib::Response&) { throw std::length_error("vector"); });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::yield();
  }
  ~TestServer() {
    server_->stop();
    thread_.join();
  }
  SocketAddress endpoint() const { return SocketAddress::parse("127.0.0.1:" + std::to_string(port_)); }
  httplib::Server& server() { return *server_; }

 private:
  static ServerAccess access(bool metrics_open) {
    control::AccessConfig config = test::test_access();
    config.metrics_open = metrics_open;
    return server_access(config);
  }

  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// A connection to `server` that sends `bytes` now and nothing more (a slow client that has
// started its request); closed when destroyed.
class SlowClient {
 public:
  SlowClient(const SocketAddress& server, const std::string& bytes) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server.port);
    addr.sin_addr.s_addr = htonl(server.ip);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  ~SlowClient() { ::close(fd_); }
  // Waits at most `bound` for the server to answer or close; what it sent ("" when it closed
  // without answering), or nullopt if it still holds the connection open.
  std::optional<std::string> answer_within(std::chrono::milliseconds bound) {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + bound;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return got;
      got.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_;
};

TEST(ControlServer, AnswersEveryErrorWithOneSentence) {
  TestServer server;
  auto error_of = [&](const std::string& request) {
    const std::string answer = answer_request(server.server(), test::with_token(request));
    const std::size_t body = answer.find("\r\n\r\n");
    const nlohmann::json doc = nlohmann::json::parse(answer.substr(body + 4), nullptr, false);
    return answer.substr(9, 3) + " " + (doc.is_object() ? doc.value("error", "") : "no JSON body: " + answer);
  };
  EXPECT_EQ(error_of("GET /nowhere HTTP/1.1\r\n\r\n"), "404 no such endpoint: GET /nowhere");
  EXPECT_EQ(error_of("GET /throw HTTP/1.1\r\n\r\n"), "500 internal error: vector");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\n\r\n"), "411 POST needs a Content-Length header");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nContent-Length: 2x\r\n\r\n{}"),
            "400 Content-Length: expected a number of bytes, got '2x'");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n"),
            "413 the request body is 1048577 bytes, more than the 1048576 bytes a control request may have");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n").substr(0, 4), "400 ");
  // curl -d's default type: httplib would refuse it above 8 KiB with no word on why.
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: "
                     "8193\r\n\r\n" +
                     std::string(8193, 'a')),
            "413 the request body is 8193 bytes, more than the 8192 bytes a form (Content-Type: "
            "application/x-www-form-urlencoded) may have; send it with Content-Type: application/json");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            "411 send the request body with a Content-Length header, not Transfer-Encoding: chunked");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx"),
            "415 request bodies must not be compressed (Content-Encoding: br)");
  EXPECT_EQ(error_of("POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort").substr(0, 27),
            "400 malformed HTTP request ");
  EXPECT_EQ(error_of("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n").substr(0, 27),
            "400 malformed HTTP request ");
  EXPECT_EQ(error_of("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n"),
            "414 the request line is longer than 8192 bytes");
  // A body of exactly the limit is read.
  const std::string body(kMaxBodyBytes, 'b');
  const std::string answer = answer_request(
      server.server(),
      test::with_token("POST /echo HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200");
  EXPECT_EQ(answer.substr(answer.size() - body.size()), body);
  // Headers without end: cut at the request's byte bound, not read into memory without one.
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\n" + std::string(3 << 20, 'h')).substr(0, 4), "400 ");
}

// Every request needs a known bearer token, loopback included (other local users are other
// tenants), and is refused before its route runs or its body is read.
TEST(ControlServer, RequestsWithoutAKnownTokenAre401) {
  TestServer server;
  auto status_of = [&](const std::string& request) { return answer_request(server.server(), request).substr(9, 3); };
  EXPECT_EQ(status_of("GET /whoami HTTP/1.1\r\n\r\n"), "401");
  EXPECT_EQ(status_of("POST /echo HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"), "401");
  EXPECT_EQ(status_of("GET /metrics HTTP/1.1\r\n\r\n"), "401") << "/metrics is closed unless the operator opens it";
  EXPECT_EQ(status_of("GET /whoami HTTP/1.1\r\nAuthorization: Bearer not-a-token-of-this-daemon\r\n\r\n"), "401");
  EXPECT_EQ(status_of("GET /whoami HTTP/1.1\r\nAuthorization: Basic " + test::kOperatorToken + "\r\n\r\n"), "401");
  // A body too large for anyone: still 401 first (nothing is said to a stranger about the route).
  EXPECT_EQ(status_of("POST /echo HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"), "401");
  const std::string answer = answer_request(server.server(), "GET /whoami HTTP/1.1\r\n\r\n");
  EXPECT_NE(answer.find("WWW-Authenticate: Bearer"), std::string::npos) << answer;
  EXPECT_NE(answer.find("this control plane needs a token"), std::string::npos) << answer;

  // Over a socket too, with the client every atp program uses.
  auto whoami = [&](const std::string& token) {
    auto res = client_for(server.endpoint(), token).Get("/whoami");
    return res ? std::to_string(res->status) + " " + res->body : "no answer";
  };
  EXPECT_EQ(whoami(test::kOperatorToken), "200 operator");
  EXPECT_EQ(whoami(test::kAliceToken), "200 alice");
  EXPECT_EQ(whoami(test::kBobToken), "200 bob");
  EXPECT_EQ(whoami("x" + test::kOperatorToken).substr(0, 4), "401 ");
}

TEST(ControlServer, MetricsAreOpenOnlyWhenTheOperatorSaysSo) {
  TestServer open({}, /*metrics_open=*/true);
  EXPECT_EQ(answer_request(open.server(), "GET /metrics HTTP/1.1\r\n\r\n").substr(9, 3), "200");
  EXPECT_EQ(answer_request(open.server(), "GET /whoami HTTP/1.1\r\n\r\n").substr(9, 3), "401") << "only /metrics";
}

// A request must arrive whole within the deadline: a client that has sent part of its header
// and stops is disconnected (with a 400 sentence), and so is one that sends nothing.
TEST(ControlServer, AClientThatStopsHalfwayIsDisconnectedAtTheDeadline) {
  TestServer server({.workers = 4, .queued_connections = 4, .request_deadline = 500ms, .slow_request = 10s});
  SlowClient half(server.endpoint(), "POST /echo HTTP/1.1\r\nContent-Len");
  SlowClient silent(server.endpoint(), "");
  const auto start = std::chrono::steady_clock::now();
  const std::optional<std::string> answer = half.answer_within(3s);
  ASSERT_TRUE(answer) << "still connected after 3 s";
  EXPECT_NE(answer->find("400 Bad Request"), std::string::npos) << *answer;
  EXPECT_TRUE(silent.answer_within(1s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// More slow clients than threads: while another connection waits for a thread, requests that
// have been arriving for longer than slow_request give theirs up, so the waiting client is
// answered long before the deadline would have freed a thread.
TEST(ControlServer, SlowClientsGiveTheirThreadsUpToWaitingOnes) {
  TestServer server({.workers = 2, .queued_connections = 8, .request_deadline = 10s, .slow_request = 200ms});
  std::vector<std::unique_ptr<SlowClient>> slow;
  for (int i = 0; i < 4; ++i)
    slow.push_back(std::make_unique<SlowClient>(server.endpoint(), "POST /echo HTTP/1.1\r\n"));
  httplib::Client client = client_for(server.endpoint(), test::kOperatorToken);
  const auto start = std::chrono::steady_clock::now();
  auto res = client.Post("/echo", "{}", "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "{}");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// Connections beyond the threads and the queue are answered 503 at once, not left waiting.
TEST(ControlServer, ConnectionsBeyondTheQueueAreRefusedAtOnce) {
  TestServer server({.workers = 1, .queued_connections = 1, .request_deadline = 10s, .slow_request = 10s});
  SlowClient busy(server.endpoint(), "POST /echo HTTP/1.1\r\n");
  // Until the thread takes `busy` up, it may be the one waiting: then `queued` is refused.
  std::this_thread::sleep_for(100ms);
  SlowClient queued(server.endpoint(), "POST /echo HTTP/1.1\r\n");
  SlowClient refused(server.endpoint(), "GET /echo HTTP/1.1\r\n\r\n");
  const std::optional<std::string> answer = refused.answer_within(2s);
  ASSERT_TRUE(answer);
  EXPECT_NE(answer->find("503 Service Unavailable"), std::string::npos) << *answer;
  EXPECT_NE(answer->find("the control plane is busy"), std::string::npos) << *answer;
  EXPECT_FALSE(queued.answer_within(100ms));
}

// stop() does not wait for slow clients' deadlines.
TEST(ControlServer, StopsPromptlyWithSlowClientsConnected) {
  auto server = std::make_unique<TestServer>(ServerLimits{.request_deadline = 60s, .slow_request = 60s});
  std::vector<std::unique_ptr<SlowClient>> slow;
  for (int i = 0; i < 8; ++i)
    slow.push_back(std::make_unique<SlowClient>(server->endpoint(), "POST /echo HTTP/1.1\r\n"));
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(ControlServer, AnswerRequestNeedsAControlServer) {
  httplib::Server plain;
  EXPECT_THROW(answer_request(plain, "GET / HTTP/1.1\r\n\r\n"), std::invalid_argument);
}

// ---- TLS ---------------------------------------------------------------------------------------

// Self-signed certificates for IP 127.0.0.1 (subjectAltName, as `openssl req -x509 ... -addext
// subjectAltName=IP:127.0.0.1` makes) and their keys, PEM files in a fresh temporary folder that
// is removed when destroyed: "server"'s, and "other"'s, a CA the server's certificate is not from.
class TlsFiles {
 public:
  TlsFiles() {
    std::string pattern = (std::filesystem::temp_directory_path() / "atp-tls-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    write_pair("server", 1);
    write_pair("other", 2);
  }
  ~TlsFiles() { std::filesystem::remove_all(dir_); }
  std::string cert(const std::string& name = "server") const { return (dir_ / (name + ".crt")).string(); }
  std::string key(const std::string& name = "server") const { return (dir_ / (name + ".key")).string(); }
  std::string path(const std::string& file) const { return (dir_ / file).string(); }

 private:
  void write_pair(const std::string& name, long serial) const {
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
    ASSERT_TRUE(key && cert);
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
    X509_set_pubkey(cert.get(), key.get());
    X509_NAME* subject = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1,
                               0);
    X509_set_issuer_name(cert.get(), subject);
    X509V3_CTX context;
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, cert.get(), cert.get(), nullptr, nullptr, 0);
    for (const auto& [nid, value] :
         {std::pair{NID_subject_alt_name, "IP:127.0.0.1"}, std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
      X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
      ASSERT_NE(extension, nullptr);
      X509_add_ext(cert.get(), extension, -1);
      X509_EXTENSION_free(extension);
    }
    ASSERT_GT(X509_sign(cert.get(), key.get(), EVP_sha256()), 0);
    std::unique_ptr<BIO, decltype(&BIO_free)> cert_file(BIO_new_file(this->cert(name).c_str(), "w"), BIO_free);
    std::unique_ptr<BIO, decltype(&BIO_free)> key_file(BIO_new_file(this->key(name).c_str(), "w"), BIO_free);
    ASSERT_TRUE(cert_file && key_file);
    ASSERT_EQ(PEM_write_bio_X509(cert_file.get(), cert.get()), 1);
    ASSERT_EQ(PEM_write_bio_PrivateKey(key_file.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
  }

  std::filesystem::path dir_;
};

// Sets (or with nullopt unsets) an environment variable for a scope, and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

ServerAccess tls_access(const std::string& cert, const std::string& key) {
  ServerAccess access = server_access(test::test_access());
  access.tls_cert_file = cert;
  access.tls_key_file = key;
  return access;
}

// What GET /whoami with `token` gets from `server` with control::client: "200 operator", "401 ...",
// or "failed: <httplib's error>".
std::string whoami(const TestServer& server, const std::string& token) {
  auto res = client_for(server.endpoint(), token).Get("/whoami");
  return res ? std::to_string(res->status) + " " + res->body : "failed: " + httplib::to_string(res.error());
}

// With ATP_TLS_CA naming the server's certificate, control::client speaks https: the token is
// checked as over plain HTTP.
TEST(ControlServerTls, AnswersHttpsClientsAndStillNeedsTheToken) {
  const TlsFiles files;
  TestServer server({}, tls_access(files.cert(), files.key()));
  const ScopedEnv ca("ATP_TLS_CA", files.cert());
  EXPECT_EQ(whoami(server, test::kOperatorToken), "200 operator");
  EXPECT_EQ(whoami(server, test::kAliceToken), "200 alice");
  EXPECT_EQ(whoami(server, "x" + test::kOperatorToken).substr(0, 4), "401 ");
  auto res = client_for(server.endpoint(), test::kOperatorToken).Post("/echo", "{\"a\": 1}", "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->body, "{\"a\": 1}");
}

// Nothing is served in clear on a TLS port: a plain HTTP client gets no HTTP answer.
TEST(ControlServerTls, PlainHttpToATlsPortGetsNoAnswer) {
  const TlsFiles files;
  TestServer server({.request_deadline = 1000ms}, tls_access(files.cert(), files.key()));
  const ScopedEnv ca("ATP_TLS_CA", std::nullopt);
  EXPECT_EQ(whoami(server, test::kOperatorToken).substr(0, 7), "failed:");
  SlowClient raw(server.endpoint(), test::with_token("GET /whoami HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::optional<std::string> answer = raw.answer_within(3s);
  ASSERT_TRUE(answer) << "still connected after 3 s";
  EXPECT_EQ(answer->find("HTTP/1.1"), std::string::npos) << *answer;
}

// The handshake is part of the request: a client that connects and never sends its ClientHello
// gives its thread up to a waiting one after slow_request, and is dropped at request_deadline.
TEST(ControlServerTls, AClientThatNeverStartsTheHandshakeBlocksNoOne) {
  const TlsFiles files;
  const ScopedEnv ca("ATP_TLS_CA", files.cert());
  {
    TestServer server({.workers = 1, .queued_connections = 4, .request_deadline = 10s, .slow_request = 200ms},
                      tls_access(files.cert(), files.key()));
    SlowClient silent(server.endpoint(), "");
    std::this_thread::sleep_for(100ms);  // the only thread has taken `silent` up
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(whoami(server, test::kOperatorToken), "200 operator");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  }
  TestServer server({.workers = 4, .queued_connections = 4, .request_deadline = 500ms, .slow_request = 10s},
                    tls_access(files.cert(), files.key()));
  SlowClient silent(server.endpoint(), "");
  SlowClient half(server.endpoint(), std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.answer_within(3s)) << "still connected after 3 s";
  EXPECT_TRUE(half.answer_within(1s)) << "a half ClientHello: still connected";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// A bad certificate or key is refused when the server is made, with one sentence naming the file.
TEST(ControlServerTls, BadCertificateOrKeyFilesAreOneSentenceNamingTheFile) {
  const TlsFiles files;
  auto error_of = [](const std::string& cert, const std::string& key) {
    try {
      make_server(tls_access(cert, key));
    } catch (const AuthError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string mismatch = error_of(files.cert(), files.key("other"));
  EXPECT_NE(mismatch.find("the TLS key file '" + files.key("other") + "' does not hold the private key of the " +
                          "certificate in '" + files.cert() + "'"),
            std::string::npos)
      << mismatch;
  const std::string missing = error_of(files.path("nowhere.crt"), files.key());
  EXPECT_NE(missing.find("cannot read the TLS certificate file '" + files.path("nowhere.crt") + "'"), std::string::npos)
      << missing;
  const std::string not_pem = error_of(files.key(), files.key());
  EXPECT_NE(not_pem.find("the TLS certificate file '" + files.key() + "' holds no PEM certificate"), std::string::npos)
      << not_pem;
  const std::string key_not_pem = error_of(files.cert(), files.cert());
  EXPECT_NE(key_not_pem.find("the TLS key file '" + files.cert() + "' holds no unencrypted PEM private key"),
            std::string::npos)
      << key_not_pem;
  EXPECT_NE(error_of(files.cert(), "").find("only the certificate '" + files.cert() + "' was given"),
            std::string::npos);
  for (const std::string& e : {mismatch, missing, not_pem, key_not_pem}) {
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// A client trusts only ATP_TLS_CA: a server whose certificate another CA signed fails
// verification, and a bad ATP_TLS_CA is an error, not plain HTTP.
TEST(ControlServerTls, ClientsVerifyTheServerAgainstAtpTlsCa) {
  const TlsFiles files;
  TestServer server({}, tls_access(files.cert(), files.key()));
  {
    const ScopedEnv ca("ATP_TLS_CA", files.cert("other"));
    auto res = client_for(server.endpoint(), test::kOperatorToken).Get("/whoami");
    ASSERT_FALSE(res);
    EXPECT_EQ(res.error(), httplib::Error::SSLServerVerification);
  }
  {
    const ScopedEnv ca("ATP_TLS_CA", files.path("nowhere.pem"));
    try {
      client_for(server.endpoint(), test::kOperatorToken);
      ADD_FAILURE() << "a missing ATP_TLS_CA file was taken";
    } catch (const AuthError& e) {
      EXPECT_NE(
          std::string(e.what()).find("ATP_TLS_CA names '" + files.path("nowhere.pem") + "', which cannot be read"),
          std::string::npos)
          << e.what();
    }
  }
  {
    const ScopedEnv ca("ATP_TLS_CA", files.key());
    EXPECT_THROW(client_for(server.endpoint(), test::kOperatorToken), AuthError) << "a key is no certificate";
  }
}

}  // namespace
}  // namespace atp::control
