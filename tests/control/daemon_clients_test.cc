// The daemons' typed control clients (daemon_clients.h) against a fake daemon on loopback: each call
// sends its method, path and body with the client's token, reads good answers into its structs, and
// turns every failure into one sentence naming the daemon.
#include "atp/control/daemon_clients.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/test_access.h"

// Not covered: the `netns` constructor argument (requests sent from a network namespace need
// root and namespaces: the netns integration tests run it), and control_client.h's 5 s read
// timeout, which a unit test cannot wait for; a daemon that closes the connection without an
// answer takes the same way (no response: status 0) at once.
namespace atp::control {
namespace {

// A daemon's control plane that answers every request with `answer` and keeps what it was sent.
// Plain HTTP with no access check of its own: the test reads the token the client sent.
class FakeDaemon {
 public:
  struct Request {
    std::string method, target, body, authorization, content_type;
  };
  struct Answer {
    int status = 200;
    std::string body = "{}";
  };

  FakeDaemon() {
    const auto handle = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      requests_.push_back({req.method, req.target, req.body, req.get_header_value("Authorization"),
                           req.get_header_value("Content-Type")});
      res.status = answer_.status;
      res.set_content(answer_.body, "application/json");
    };
    server_.Get(".*", handle);
    server_.Post(".*", handle);
    server_.Put(".*", handle);
    server_.Delete(".*", handle);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~FakeDaemon() {
    server_.stop();
    thread_.join();
  }
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;

  SocketAddress control() const { return SocketAddress::parse("127.0.0.1:" + std::to_string(port_)); }
  void answer(int status, std::string body) {
    std::lock_guard lock(mutex_);
    answer_ = {status, std::move(body)};
  }
  std::vector<Request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // The one request sent since the last call (a failure if there was not exactly one).
  Request only_request() {
    std::lock_guard lock(mutex_);
    EXPECT_EQ(requests_.size(), 1u);
    Request r = requests_.empty() ? Request{} : requests_.back();
    requests_.clear();
    return r;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  Answer answer_;
  std::vector<Request> requests_;
};

// The message and status of the DaemonError `f` throws; {"", -1} if it throws none.
template <class F>
std::pair<std::string, int> refusal(F&& f) {
  try {
    f();
  } catch (const DaemonError& e) {
    return {e.what(), e.status()};
  }
  return {"", -1};
}

// Debian's bundle of CAs (package ca-certificates): a CA file that reads.
const char* const kSystemCa = "/etc/ssl/certs/ca-certificates.crt";

class DaemonClientsTest : public ::testing::Test {
 protected:
  ClientAccess access{test::kOperatorToken, ""};
  FakeDaemon daemon;
  SwitchClient tor{"switch 'tor0'", daemon.control(), access};
  PsClient ps{"the PS at " + daemon.control().to_string(), daemon.control(), access};
  const std::string bearer = "Bearer " + test::kOperatorToken;
};

// A lease's time to live goes as whole milliseconds; the answer's lease id comes back.
TEST_F(DaemonClientsTest, GrantLeaseSendsItsTtlAndReadsTheLease) {
  daemon.answer(201, R"({"lease": 7, "ttl_ms": 1500})");
  EXPECT_EQ(tor.grant_lease(std::chrono::microseconds(1'500'900)), 7u);
  const FakeDaemon::Request r = daemon.only_request();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/leases");
  EXPECT_EQ(nlohmann::json::parse(r.body), (nlohmann::json{{"ttl_ms", 1500}}));
  EXPECT_EQ(r.authorization, bearer);
  EXPECT_EQ(r.content_type, "application/json");
}

// The calls that only say what to do to what: their method and path.
TEST_F(DaemonClientsTest, EachCallSendsItsMethodAndPath) {
  tor.keep_alive(7);
  tor.revoke(8);
  ps.remove_job(3);
  tor.detach_host(4);
  PortSettings settings;
  settings.egress = EgressConfig{};
  settings.egress->rate_gbps = 10;
  tor.set_port(2, settings);
  const std::vector<FakeDaemon::Request> sent = daemon.requests();
  ASSERT_EQ(sent.size(), 5u);
  const std::vector<std::pair<std::string, std::string>> expected = {{"POST", "/leases/7/keepalive"},
                                                                     {"DELETE", "/leases/8"},
                                                                     {"DELETE", "/jobs/3"},
                                                                     {"DELETE", "/hosts/4"},
                                                                     {"PUT", "/ports/2"}};
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(std::make_pair(sent[i].method, sent[i].target), expected[i]) << i;
    EXPECT_EQ(sent[i].authorization, bearer) << i;
  }
  EXPECT_EQ(sent[4].body, to_json(settings));
  EXPECT_EQ(port_settings_from_json(sent[4].body).egress->rate_gbps, 10);
}

// POST /jobs carries the daemon's part of the plan, on the lease in the query (none: no query);
// 409 says the id is taken, which the caller may retry with another; 403 is a refusal.
TEST_F(DaemonClientsTest, InstallJobPostsThePlanOnItsLeaseAndTellsATakenId) {
  SwitchJobPlan plan;
  plan.name = "j3";
  plan.entry.job = 3;
  plan.multicast_ports = {0, 1};
  daemon.answer(201, "{}");
  EXPECT_EQ(tor.install_job(plan, 9), Install::kInstalled);
  FakeDaemon::Request r = daemon.only_request();
  EXPECT_EQ(r.method + " " + r.target, "POST /jobs?lease=9");
  EXPECT_EQ(r.body, to_json(plan));
  EXPECT_EQ(switch_job_from_json(r.body).multicast_ports, plan.multicast_ports);

  PsConfig config;
  config.job = 3;
  EXPECT_EQ(ps.install_job(config), Install::kInstalled);
  r = daemon.only_request();
  EXPECT_EQ(r.target, "/jobs");
  EXPECT_EQ(r.body, to_json(config));

  daemon.answer(409, R"({"error": "job 3 is installed"})");
  EXPECT_EQ(tor.install_job(plan), Install::kIdTaken);
  daemon.answer(403, R"({"error": "port 1 is tenant bob's"})");
  EXPECT_EQ(refusal([&] { tor.install_job(plan, 9); }),
            std::make_pair(std::string("switch 'tor0' refused to install job 3: port 1 is tenant bob's"), 403));
}

// POST /hosts sends the peer on the lease, or shared (then on no lease); the answer is read into
// the host's overlay address and port and the switch's description.
TEST_F(DaemonClientsTest, AttachHostSendsThePeerAndReadsTheAttachment) {
  daemon.answer(201, R"({"address": "10.0.0.5", "port": 4, "switch": {"name": "tor0", "atp_capable": true,
                         "aggregators": 256, "aggregator_width": 64}})");
  const SocketAddress peer = SocketAddress::parse("127.0.0.1:40000");
  const SwitchClient::Attachment a = tor.attach_host(peer, 5);
  EXPECT_EQ(a.host.address, parse_address("10.0.0.5"));
  EXPECT_EQ(a.host.port, 4);
  EXPECT_EQ(a.tor.name, "tor0");
  EXPECT_TRUE(a.tor.config.atp_capable);
  EXPECT_EQ(a.tor.config.num_aggregators, 256u);
  EXPECT_EQ(a.tor.config.aggregator_width, 64);
  const FakeDaemon::Request r = daemon.only_request();
  EXPECT_EQ(r.method + " " + r.target, "POST /hosts?lease=5");
  EXPECT_EQ(r.body, host_to_json(peer));

  tor.attach_host(peer, 5, true);
  EXPECT_EQ(daemon.only_request().target, "/hosts?shared=1");
}

// An attachment that lacks a key or has one of the wrong type is one DaemonError quoting the
// answer, not a half-filled Attachment.
TEST_F(DaemonClientsTest, AnAttachmentMissingAKeyIsOneSentence) {
  const SocketAddress peer = SocketAddress::parse("127.0.0.1:40000");
  daemon.answer(201, R"({"address": "10.0.0.5", "switch": {}})");
  auto [what, status] = refusal([&] { tor.attach_host(peer); });
  EXPECT_EQ(what.rfind(R"(switch 'tor0' answered POST /hosts with {"address":"10.0.0.5","switch":{}}: )", 0), 0u)
      << what;
  EXPECT_TRUE(what.ends_with(": port: missing")) << what;
  EXPECT_EQ(status, 0);
  daemon.answer(201, R"({"address": "10.0.0.5", "port": "four", "switch": {}})");
  std::tie(what, status) = refusal([&] { tor.attach_host(peer); });
  EXPECT_EQ(what.rfind("switch 'tor0' answered POST /hosts with ", 0), 0u) << what;
  EXPECT_TRUE(what.ends_with(R"(: port: expected an integer, got "four")")) << what;
  daemon.answer(201, R"({"address": "ten", "port": 4, "switch": {}})");
  std::tie(what, status) = refusal([&] { tor.attach_host(peer); });
  EXPECT_EQ(what.rfind("switch 'tor0' answered POST /hosts with ", 0), 0u) << what;
  EXPECT_NE(what.find(": address: "), std::string::npos) << what;
  daemon.answer(201, R"({"address": "10.0.0.5", "port": 4, "switch": {"name": "tor0", "atp_capable": 1}})");
  std::tie(what, status) = refusal([&] { tor.attach_host(peer); });
  EXPECT_TRUE(what.ends_with(": switch.atp_capable: expected true or false, got 1")) << what;
}

// GET /stats is read with the stats codecs; the data address is its "data". A switch on interface
// ports has none, which is a sentence, not an empty address.
TEST_F(DaemonClientsTest, StatsAndDataAddressReadTheStatsDocument) {
  SwitchStats sw;
  sw.name = "tor0";
  sw.data = SocketAddress::parse("127.0.0.1:9000");
  sw.pipeline.packets = 12;
  daemon.answer(200, to_json(sw));
  EXPECT_EQ(tor.stats().pipeline.packets, 12u);
  EXPECT_EQ(tor.data_address().to_string(), "127.0.0.1:9000");
  const std::vector<FakeDaemon::Request> sent = daemon.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].method + " " + sent[0].target, "GET /stats");

  sw.data.reset();
  sw.interfaces = {"eth0"};
  daemon.answer(200, to_json(sw));
  EXPECT_EQ(refusal([&] { tor.data_address(); }),
            std::make_pair(std::string("switch 'tor0' has interface ports: hosts are attached to it by cable, not "
                                       "at a UDP data address"),
                           0));

  PsStats p;
  p.data = SocketAddress::parse("127.0.0.1:9100");
  daemon.answer(200, to_json(p));
  EXPECT_EQ(ps.data_address().to_string(), "127.0.0.1:9100");
}

// A stats document this build cannot read is of another build of atp: a ControlError (as
// daemon_clients.h says) that names the daemon; an error status is a DaemonError as any.
TEST_F(DaemonClientsTest, AStatsDocumentThatDoesNotReadNamesTheDaemon) {
  daemon.answer(200, R"({"name": "tor0"})");
  std::string what;
  try {
    tor.stats();
  } catch (const ControlError& e) {
    what = e.what();
  }
  EXPECT_EQ(what.rfind("switch 'tor0' answered GET /stats with a document this atp cannot read (", 0), 0u) << what;
  EXPECT_NE(what.find("): is it an atp daemon of another build?"), std::string::npos) << what;
  daemon.answer(503, R"({"error": "the dataplane did not answer"})");
  EXPECT_EQ(refusal([&] { ps.stats(); }),
            std::make_pair("the PS at " + daemon.control().to_string() +
                               " refused to report its stats: the dataplane did not answer",
                           503));
}

// A non-2xx answer is "<who> refused to <what>: " and the daemon's own sentence; a body that is
// not a JSON object with a string "error" is quoted, short, after its HTTP status.
TEST_F(DaemonClientsTest, AnErrorStatusIsOneSentenceWithTheDaemonsOwn) {
  daemon.answer(403, R"({"error": "lease 7 is tenant bob's"})");
  EXPECT_EQ(refusal([&] { tor.revoke(7); }),
            std::make_pair(std::string("switch 'tor0' refused to revoke lease 7: lease 7 is tenant bob's"), 403));
  daemon.answer(500, "internal trouble");
  EXPECT_EQ(refusal([&] { tor.keep_alive(7); }),
            std::make_pair(std::string("switch 'tor0' refused to keep lease 7 alive: HTTP 500 internal trouble"), 500));
  daemon.answer(404, R"({"error": 5})");
  EXPECT_EQ(refusal([&] { tor.detach_host(4); }).first,
            R"(switch 'tor0' refused to detach port 4: HTTP 404 {"error": 5})");
  daemon.answer(400, std::string(10'000, 'x'));
  const auto [what, status] = refusal([&] { tor.remove_job(3); });
  EXPECT_EQ(what.rfind("switch 'tor0' refused to remove job 3: HTTP 400 xxx", 0), 0u);
  EXPECT_LT(what.size(), 150u) << "a long body is quoted short";
  EXPECT_EQ(status, 400);
}

// A 2xx answer whose body is not JSON, or a lease grant that names no lease (or one that is not
// an unsigned integer), is one DaemonError quoting it, never a lease id made up.
TEST_F(DaemonClientsTest, AGoodStatusWithABadBodyIsOneSentence) {
  daemon.answer(200, "ok");
  EXPECT_EQ(refusal([&] { tor.keep_alive(7); }),
            std::make_pair(std::string("switch 'tor0' answered POST /leases/7/keepalive with no JSON: ok"), 0));
  // Lease 0 is "no lease" to every caller: a grant of it is none.
  for (const std::string body :
       {R"({"ttl_ms": 1000})", R"({"lease": -1})", R"({"lease": "7"})", R"([7])", R"({"lease": 0})"}) {
    daemon.answer(201, body);
    const auto [what, status] = refusal([&] { tor.grant_lease(std::chrono::seconds(1)); });
    EXPECT_EQ(what.rfind("switch 'tor0' answered POST /leases with ", 0), 0u) << body;
    EXPECT_NE(what.find(", which names no lease"), std::string::npos) << what;
    EXPECT_EQ(status, 0);
  }
}

// A port bound but not listening: nothing answers there, and no other process can take it while
// the socket is open.
class ClosedPort {
 public:
  ClosedPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~ClosedPort() { ::close(fd_); }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  SocketAddress address() const { return SocketAddress::parse("127.0.0.1:" + std::to_string(port_)); }

 private:
  int fd_;
  int port_ = 0;
};

// Nothing listening: one sentence with the daemon, the request's method and URL (https when the
// client trusts a CA) and httplib's reason, status 0.
TEST(DaemonClients, NothingListeningIsOneSentenceNamingTheUrl) {
  const ClosedPort closed;
  const std::string at = closed.address().to_string();
  const SwitchClient tor("switch 'tor0'", closed.address(), {test::kOperatorToken, ""});
  EXPECT_EQ(
      refusal([&] { tor.grant_lease(std::chrono::seconds(1)); }),
      std::make_pair(
          "switch 'tor0' did not answer POST http://" + at + "/leases (Connection): is the daemon running there?", 0));
  EXPECT_EQ(
      refusal([&] { tor.install_job(SwitchJobPlan{}, 2); }).first,
      "switch 'tor0' did not answer POST http://" + at + "/jobs?lease=2 (Connection): is the daemon running there?");
  const SwitchClient tls("switch 'tor0'", closed.address(), {test::kOperatorToken, "/nonexistent/ca.pem"});
  const auto [what, status] = refusal([&] { tls.stats(); });
  EXPECT_EQ(what,
            "switch 'tor0' did not answer GET https://" + at + "/stats (Connection): is the daemon running there?");
  EXPECT_EQ(status, 0);
}

// A daemon that answers, reached over TLS with a CA that cannot be read: the sentence points at
// this side's TLS settings, not at the daemon's absence.
TEST_F(DaemonClientsTest, ATlsFailureSaysWhatToLookAt) {
  const std::string at = daemon.control().to_string();
  const SwitchClient no_ca("switch 'tor0'", daemon.control(), {test::kOperatorToken, "/nonexistent/ca.pem"});
  EXPECT_EQ(refusal([&] { no_ca.stats(); }).first,
            "switch 'tor0' did not answer GET https://" + at + "/stats (SSLLoadingCerts): can the CA file be read?");
}

// Any CA that reads (the system's bundle) against a daemon that speaks plain HTTP: no handshake,
// which the sentence says.
TEST_F(DaemonClientsTest, ADaemonWithoutTlsIsToldFromOneThatIsGone) {
  if (::access(kSystemCa, R_OK) != 0) GTEST_SKIP() << "skipped: no " << kSystemCa << " (package ca-certificates)";
  const SwitchClient plain("switch 'tor0'", daemon.control(), {test::kOperatorToken, kSystemCa});
  EXPECT_EQ(refusal([&] { plain.stats(); }).first,
            "switch 'tor0' did not answer GET https://" + daemon.control().to_string() +
                "/stats (SSLConnection): does the daemon serve TLS, with a certificate that the CA signed?");
}

// A daemon that takes the connection and closes it without an answer (a process dying, a
// daemon of something else): no answer, the same sentence, at once.
TEST(DaemonClients, AConnectionClosedWithoutAnAnswerIsNoAnswer) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread closer([listener] {
    const int c = ::accept(listener, nullptr, nullptr);
    char request[256];
    if (c >= 0 && ::recv(c, request, sizeof request, 0) >= 0) ::close(c);
  });
  const std::string at = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const PsClient ps("the PS at " + at, SocketAddress::parse(at), {test::kOperatorToken, ""});
  const auto [what, status] = refusal([&] { ps.remove_job(1); });
  closer.join();
  ::close(listener);
  EXPECT_EQ(what.rfind("the PS at " + at + " did not answer DELETE http://" + at + "/jobs/1 (", 0), 0u) << what;
  EXPECT_NE(what.find("): is the daemon running there?"), std::string::npos) << what;
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace atp::control
