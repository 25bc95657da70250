// `atp flow`: the background TCP flow's two ends (tcp_flow.h). Plain blocking sockets and poll:
// one connection, nothing to multiplex.
#include "tcp_flow.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "atp/backends/processes.h"
#include "atp/io/event_loop.h"
#include "atp/scenario/scenario.h"

namespace atp::tcp_flow {
namespace {

using nlohmann::json;

int fail(const std::string& what) {
  std::cerr << "atp flow: " << what << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int run_receiver(const SocketAddress& listen, Duration interval) {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server < 0) return fail("cannot create a TCP socket");
  const int yes = 1;
  ::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  const sockaddr_in addr = to_sockaddr(listen);
  if (::bind(server, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(server, 1) != 0) {
    return fail("cannot listen on " + listen.to_string());
  }
  std::cout << json{{"event", "listening"}}.dump() << std::endl;
  const int conn = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(server);
  if (conn < 0) return fail("accept failed");

  std::vector<char> buffer(1 << 20);
  std::vector<std::uint64_t> bytes_per_interval;
  std::uint64_t total = 0;
  Time first = kNever, last{};
  for (;;) {
    const ssize_t n = ::read(conn, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(conn);
      return fail("reading the flow failed");
    }
    if (n == 0) break;  // the sender closed: the flow is over
    const Time now = EventLoop::now();
    if (first == kNever) first = now;
    last = now;
    const auto slot = static_cast<std::size_t>((now - first) / interval);
    if (bytes_per_interval.size() <= slot) bytes_per_interval.resize(slot + 1, 0);
    bytes_per_interval[slot] += static_cast<std::uint64_t>(n);
    total += static_cast<std::uint64_t>(n);
  }
  ::close(conn);
  const double interval_s = static_cast<double>(interval.count()) / 1e9;
  json mbps = json::array();
  for (std::uint64_t b : bytes_per_interval) mbps.push_back(static_cast<double>(b) * 8 / interval_s / 1e6);
  const double seconds = first == kNever ? 0 : static_cast<double>((last - first).count()) / 1e9;
  std::cout << json{{"event", "flow"},          {"bytes", total},
                    {"seconds", seconds},       {"first_ns", first == kNever ? 0 : to_ns(first)},
                    {"interval_s", interval_s}, {"mbps", mbps}}
                   .dump()
            << std::endl;
  return 0;
}

int run_sender(const SocketAddress& to, Duration connect_timeout, const std::string& congestion, bool ecn) {
  {
    std::ofstream sysctl("/proc/sys/net/ipv4/tcp_ecn");
    sysctl << (ecn ? "1" : "2") << std::flush;
    if (!sysctl) return fail("cannot set net.ipv4.tcp_ecn in the sender's namespace");
  }
  const sockaddr_in addr = to_sockaddr(to);
  int fd = -1;
  const Time give_up = EventLoop::now() + connect_timeout;
  for (;;) {  // the receiver listens before the sender starts; retries cover ARP and SYN losses
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail("cannot create a TCP socket");
    if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, congestion.data(), static_cast<socklen_t>(congestion.size())) !=
        0)
      return fail("this kernel has no TCP congestion control '" + congestion + "'");
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) break;
    ::close(fd);
    if (EventLoop::now() >= give_up) return fail("cannot connect to " + to.to_string());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cout << json{{"event", "connected"}}.dump() << std::endl;
  const std::vector<char> chunk(256 * 1024, 'x');
  pollfd fds[2] = {{fd, POLLOUT, 0}, {STDIN_FILENO, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return fail("poll failed");
    }
    if (fds[1].revents) break;  // stdin readable or closed: the parent says stop
    if (fds[0].revents & (POLLERR | POLLHUP)) {
      errno = ECONNRESET;
      return fail("the flow to " + to.to_string() + " broke");
    }
    if (fds[0].revents & POLLOUT) {
      const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return fail("sending to " + to.to_string() + " failed");
    }
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
  return 0;
}

bool parse_report(const std::string& line, FlowReport& report) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object() || j.value("event", "") != "flow") return false;
  try {
    report.bytes = j.at("bytes").get<std::uint64_t>();
    report.seconds = j.at("seconds").get<double>();
    report.first_ns = j.at("first_ns").get<std::int64_t>();
    report.interval_s = j.at("interval_s").get<double>();
    report.mbps = j.at("mbps").get<std::vector<double>>();
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

}  // namespace atp::tcp_flow

namespace atp {

int run_background_flow(const std::string& listen, const std::string& connect, const std::string& congestion,
                        bool ecn) {
  if (listen.empty() == connect.empty()) {
    std::cerr << "atp flow: give exactly one of --listen and --connect\n";
    return 2;
  }
  SocketAddress address;
  try {
    address = SocketAddress::parse(listen.empty() ? connect : listen);
  } catch (const std::invalid_argument& e) {
    std::cerr << "atp flow: " << e.what() << "\n";
    return 2;
  }
  return listen.empty() ? tcp_flow::run_sender(address, std::chrono::seconds(5), congestion, ecn)
                        : tcp_flow::run_receiver(address, std::chrono::milliseconds(100));
}

}  // namespace atp
