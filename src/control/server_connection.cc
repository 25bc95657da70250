// The control server's connection streams (server_connection.h): reads and writes under the
// request's deadlines and byte bound, waits on the socket in slices, and the linger after the
// answer.
#include "server_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace atp::control::detail {
namespace {

// How often a connection waiting for its client looks whether it should give up.
constexpr auto kPollSlice = std::chrono::milliseconds(50);
// After the answer, how long the connection waits for the client to close (reading and dropping
// what it still sends) before closing it: a close with unread bytes resets the connection, and
// the reset can overtake the answer (a 413 for a body the client is still sending).
constexpr auto kLingerTime = std::chrono::milliseconds(250);
// And drops at most this much meanwhile: more than a request may have, since a client refused
// for a body of several MiB still has that body in flight (in its socket buffers and ours);
// stopping at kMaxRequestBytes reset the connection under the 413 now and then.
constexpr std::size_t kMaxLingerBytes = std::size_t{16} << 20;

// The address of one end of `sock` (`name`: getpeername or getsockname) as text and port; "" and
// 0 when it has none.
using NameFunction = int (*)(int, sockaddr*, socklen_t*);
void end_address(int sock, NameFunction name, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t length = sizeof a;
  ip.clear();
  port = 0;
  if (name(sock, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

}  // namespace

bool ConnectionStream::open() {
  return run([this] { return transport_.open(); }) > 0;
}

bool ConnectionStream::is_readable() const { return used_ < filled_ || transport_.holds_received() || wait(POLLIN); }

bool ConnectionStream::is_writable() const { return wait(POLLOUT); }

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (used_ == filled_) {
    if (received_ >= kMaxRequestBytes) return -1;
    const std::size_t most = std::min(sizeof buffer_, kMaxRequestBytes - received_);
    const ssize_t n = run([&] { return transport_.receive(buffer_, most); });
    if (n <= 0) return n;  // 0: the client closed; -1: an error, or out of time
    received_ += static_cast<std::size_t>(n);
    used_ = 0;
    filled_ = static_cast<std::size_t>(n);
  }
  const std::size_t n = std::min(size, filled_ - used_);
  std::memcpy(ptr, buffer_ + used_, n);
  used_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!writing_) {
    writing_ = true;
    phase_start_ = Clock::now();
  }
  for (std::size_t sent = 0; sent < size;) {
    const ssize_t n = run([&] { return transport_.send(ptr + sent, size - sent); });
    if (n < 0) return -1;
    sent += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(size);
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  end_address(sock_, ::getpeername, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  end_address(sock_, ::getsockname, ip, port);
}

bool ConnectionStream::out_of_time(Clock::duration in_phase) const {
  return state_.stopping || in_phase >= state_.limits.request_deadline ||
         (in_phase >= state_.limits.slow_request && state_.waiting > 0);
}

bool ConnectionStream::wait(short events) const {
  for (;;) {
    const Clock::duration in_phase = Clock::now() - phase_start_;
    if (out_of_time(in_phase)) return false;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(state_.limits.request_deadline - in_phase);
    pollfd p{sock_, events, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::chrono::milliseconds>(kPollSlice, left).count()));
    if (ready > 0) return true;  // ready, or an error or hang-up that the transport then reports
    if (ready < 0 && errno != EINTR) return false;
  }
}

ssize_t MemoryStream::read(char* ptr, size_t size) {
  if (read_ >= kMaxRequestBytes && read_ < request_.size()) return -1;
  const std::size_t n = std::min({size, request_.size() - read_, kMaxRequestBytes - read_});
  std::memcpy(ptr, request_.data() + read_, n);
  read_ += n;
  return static_cast<ssize_t>(n);
}

void linger(socket_t sock, const ConnectionState& state) {
  ::shutdown(sock, SHUT_WR);
  const auto until = Clock::now() + kLingerTime;
  char sink[4096];
  for (std::size_t dropped = 0; dropped < kMaxLingerBytes && !state.stopping && state.waiting == 0;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    pollfd p{sock, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(std::min(left, kPollSlice).count())) < 0) return;
    if (p.revents == 0) continue;  // nothing yet: look at the time and the waiting ones again
    const ssize_t n = ::recv(sock, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0) return;
    dropped += static_cast<std::size_t>(n);
  }
}

}  // namespace atp::control::detail
