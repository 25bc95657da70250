// UDP sockets for the real runtimes: setup with clear errors, then batched, non-blocking I/O
// whose failures are counted (a daemon never stops or throws because of the network).
#include "atp/runtime/udp_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <utility>

#include "atp/wire.h"

namespace atp {
namespace {

// sendmmsg/recvmmsg take at most this many messages per call here (UIO_MAXIOV is 1024; 64 keeps
// the headers on the stack and is already past the point where the per-call cost stops mattering).
constexpr std::size_t kMaxBatch = 64;

// strerror, with a lower-case first letter so that it reads as the end of a sentence.
std::string reason(int error) {
  std::string s = std::strerror(error);
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && !(s.size() > 1 && s[1] >= 'A' && s[1] <= 'Z')) s[0] += 'a' - 'A';
  return s;
}

sockaddr_in to_sockaddr(const UdpEndpoint& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(e.ip);
  a.sin_port = htons(e.port);
  return a;
}

UdpEndpoint from_sockaddr(const sockaddr_in& a) { return {ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)}; }

}  // namespace

UdpEndpoint UdpEndpoint::parse(const std::string& text) {
  const auto colon = text.rfind(':');
  const auto bad = [&] {
    return std::invalid_argument("'" + text + "' is not an IPv4 address and UDP port like 127.0.0.1:9000");
  };
  if (colon == std::string::npos || colon + 1 == text.size() || text.size() - colon - 1 > 5) throw bad();
  in_addr addr{};
  if (::inet_pton(AF_INET, text.substr(0, colon).c_str(), &addr) != 1) throw bad();
  unsigned port = 0;
  for (char c : text.substr(colon + 1)) {
    if (c < '0' || c > '9') throw bad();
    port = port * 10 + static_cast<unsigned>(c - '0');
  }
  if (port > 65535) throw bad();
  return {ntohl(addr.s_addr), static_cast<std::uint16_t>(port)};
}

std::string UdpEndpoint::to_string() const { return format_address(ip) + ":" + std::to_string(port); }

UdpRecvBatch::UdpRecvBatch(std::size_t capacity, std::size_t max_bytes)
    : max_bytes_(max_bytes), storage_(capacity * max_bytes), length_(capacity, 0), from_(capacity) {
  if (capacity == 0 || max_bytes == 0) throw std::invalid_argument("UdpRecvBatch: capacity and max_bytes must be > 0");
}

UdpSocket::UdpSocket(const UdpEndpoint& local, const UdpSocketOptions& options) {
  const std::string where = "UDP " + local.to_string();
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw UdpSetupError("cannot open a socket for " + where + ": " + reason(errno), errno);
  const auto fail = [&](const std::string& what) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    return UdpSetupError(what + ": " + reason(error), error);
  };
  const int one = 1;
  if (options.reuse_address && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    throw fail("cannot set SO_REUSEADDR on " + where);
  }
  // Ask for the large buffer; without CAP_NET_ADMIN the *FORCE variant fails with EPERM, and the
  // plain option silently caps at the sysctl maximum: both are acceptable.
  for (const auto& [force, plain, bytes] : {std::tuple{SO_RCVBUFFORCE, SO_RCVBUF, options.recv_buffer_bytes},
                                            std::tuple{SO_SNDBUFFORCE, SO_SNDBUF, options.send_buffer_bytes}}) {
    if (bytes <= 0) continue;
    if (::setsockopt(fd_, SOL_SOCKET, force, &bytes, sizeof bytes) != 0 &&
        ::setsockopt(fd_, SOL_SOCKET, plain, &bytes, sizeof bytes) != 0) {
      throw fail("cannot set the socket buffer size of " + where);
    }
  }
  const sockaddr_in addr = to_sockaddr(local);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) throw fail("cannot bind " + where);
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    throw fail("cannot read the bound address of " + where);
  }
  local_ = from_sockaddr(bound);
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) ::close(fd_);
}

UdpSocket::UdpSocket(UdpSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), local_(other.local_), counters_(other.counters_) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    local_ = other.local_;
    counters_ = other.counters_;
  }
  return *this;
}

int UdpSocket::recv_buffer_bytes() const {
  int v = 0;
  socklen_t len = sizeof v;
  ::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, &len);
  return v;
}

int UdpSocket::send_buffer_bytes() const {
  int v = 0;
  socklen_t len = sizeof v;
  ::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &v, &len);
  return v;
}

void UdpSocket::join_multicast(std::uint32_t group, std::uint32_t interface_ip) {
  ip_mreq request{};
  request.imr_multiaddr.s_addr = htonl(group);
  request.imr_interface.s_addr = htonl(interface_ip);
  if (::setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &request, sizeof request) != 0) {
    const int error = errno;
    throw UdpSetupError("cannot join multicast group " + format_address(group) + " on the interface of " +
                            format_address(interface_ip) + ": " + std::strerror(error),
                        error);
  }
}

std::size_t UdpSocket::recv_batch(UdpRecvBatch& batch) {
  batch.count_ = 0;
  const std::size_t n = std::min(batch.capacity(), kMaxBatch);
  std::array<mmsghdr, kMaxBatch> msgs{};
  std::array<iovec, kMaxBatch> iovs{};
  std::array<sockaddr_in, kMaxBatch> addrs{};
  for (std::size_t i = 0; i < n; ++i) {
    iovs[i].iov_base = batch.storage_.data() + i * batch.max_bytes_;
    iovs[i].iov_len = batch.max_bytes_;
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &addrs[i];
    msgs[i].msg_hdr.msg_namelen = sizeof addrs[i];
  }
  const int got = ::recvmmsg(fd_, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
  if (got < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++counters_.recv_errors;
    return 0;
  }
  // Truncated datagrams are dropped; the others are compacted to the front of the batch. The
  // source slot of a kept datagram is always at or after its destination, so memmove is safe.
  for (std::size_t i = 0; i < static_cast<std::size_t>(got); ++i) {
    if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) {
      ++counters_.truncated;
      continue;
    }
    const std::size_t k = batch.count_++;
    if (k != i) {
      std::memmove(batch.storage_.data() + k * batch.max_bytes_, batch.storage_.data() + i * batch.max_bytes_,
                   msgs[i].msg_len);
    }
    batch.length_[k] = msgs[i].msg_len;
    batch.from_[k] = from_sockaddr(addrs[i]);
    ++counters_.received;
    counters_.received_bytes += msgs[i].msg_len;
  }
  return batch.count_;
}

std::size_t UdpSocket::send_batch(std::span<const UdpOutgoing> datagrams) {
  std::size_t accepted = 0;
  std::size_t next = 0;
  std::array<mmsghdr, kMaxBatch> msgs;
  std::array<iovec, kMaxBatch> iovs;
  std::array<sockaddr_in, kMaxBatch> addrs;
  while (next < datagrams.size()) {
    const std::size_t n = std::min(datagrams.size() - next, kMaxBatch);
    for (std::size_t i = 0; i < n; ++i) {
      const UdpOutgoing& d = datagrams[next + i];
      addrs[i] = to_sockaddr(d.to);
      iovs[i].iov_base = const_cast<std::uint8_t*>(d.bytes.data());  // sendmmsg does not write
      iovs[i].iov_len = d.bytes.size();
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &addrs[i];
      msgs[i].msg_hdr.msg_namelen = sizeof addrs[i];
    }
    const int sent = ::sendmmsg(fd_, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT);
    if (sent > 0) {
      for (int i = 0; i < sent; ++i) counters_.sent_bytes += datagrams[next + static_cast<std::size_t>(i)].bytes.size();
      counters_.sent += static_cast<std::uint64_t>(sent);
      accepted += static_cast<std::size_t>(sent);
      next += static_cast<std::size_t>(sent);
      continue;  // a short count: the next call reports why the next datagram failed
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      counters_.send_would_block += datagrams.size() - next;
      break;
    }
    ++counters_.send_errors;  // e.g. EMSGSIZE, EACCES (broadcast), ENETUNREACH: skip this one
    ++next;
  }
  return accepted;
}

bool UdpSocket::send_to(const UdpEndpoint& to, std::span<const std::uint8_t> bytes) {
  const UdpOutgoing one{to, bytes};
  return send_batch(std::span<const UdpOutgoing>(&one, 1)) == 1;
}

}  // namespace atp
