// UDP sockets for the real runtimes: setup with clear errors, then batched, non-blocking I/O
// whose failures are counted (a daemon never stops or throws because of the network).
#include "atp/io/udp_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "atp/io/socket_batch.h"
#include "atp/wire.h"

namespace atp {
namespace {

using detail::errno_reason;

// The most datagrams in one UDP_SEGMENT message (the kernel's UDP_MAX_SEGMENTS is 64 before
// Linux 6.2, 128 after).
constexpr std::size_t kMaxSegments = 64;

// Ancillary data room per received message: one UDP_GRO control message (an int).
constexpr std::size_t kControlBytes = CMSG_SPACE(sizeof(int));

// The segment size of a run received whole (UDP_GRO), or 0 for a single datagram.
std::size_t run_segment_size(const msghdr& m) {
  auto& header = const_cast<msghdr&>(m);  // CMSG_NXTHDR takes non-const pointers; nothing is written
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(c), sizeof size);
      return size > 0 ? static_cast<std::size_t>(size) : 0;
    }
  }
  return 0;
}

}  // namespace

namespace {

// What `read` finds on a UDP socket connected to `to` (nothing is sent): `what` names it for the
// error, thrown when the socket cannot be opened or connected (no route) or `read` returns false.
template <typename Read>
void read_connected(const SocketAddress& to, const std::string& what, Read read) {
  const std::string where = what + " towards " + to.to_string();
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw UdpSetupError("cannot open a socket to read " + where + ": " + errno_reason(errno), errno);
  const sockaddr_in a = to_sockaddr(to);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0 && read(fd);
  const int error = errno;
  ::close(fd);
  if (!ok) throw UdpSetupError("cannot read " + where + ": " + errno_reason(error), error);
}

}  // namespace

std::uint32_t path_mtu(const SocketAddress& to) {
  int mtu = 0;
  read_connected(to, "the path MTU", [&mtu](int fd) {
    socklen_t length = sizeof(mtu);
    return ::getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &length) == 0 && mtu > 0;
  });
  return static_cast<std::uint32_t>(mtu);
}

std::uint32_t source_address_towards(const SocketAddress& to) {
  std::uint32_t ip = 0;
  read_connected(to, "this host's address", [&ip](int fd) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return false;
    ip = ntohl(local.sin_addr.s_addr);
    return true;
  });
  return ip;
}

UdpRecvBatch::UdpRecvBatch(std::size_t capacity, std::size_t max_bytes)
    : capacity_(std::min(capacity, detail::kMaxBatch)),
      max_bytes_(max_bytes),
      storage_(capacity_ * max_bytes),
      control_(capacity_ * kControlBytes) {
  if (capacity == 0 || max_bytes == 0) throw std::invalid_argument("UdpRecvBatch: capacity and max_bytes must be > 0");
  datagrams_.reserve(capacity_);
}

UdpSocket::UdpSocket(const SocketAddress& local, const UdpSocketOptions& options) {
  const std::string where = "UDP " + local.to_string();
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw UdpSetupError("cannot open a socket for " + where + ": " + errno_reason(errno), errno);
  const auto fail = [&](const std::string& what) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    return UdpSetupError(what + ": " + errno_reason(error), error);
  };
  const int one = 1;
  if (options.reuse_address && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    throw fail("cannot set SO_REUSEADDR on " + where);
  }
  if (options.reuse_port && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    throw fail("cannot set SO_REUSEPORT on " + where);
  }
  if (!detail::set_buffer_sizes(fd_, options.recv_buffer_bytes, options.send_buffer_bytes)) {
    throw fail("cannot set the socket buffer size of " + where);
  }
  const sockaddr_in addr = to_sockaddr(local);
  if (options.segmentation_offload) {
    // Kernels without UDP_SEGMENT (before 4.18) or UDP_GRO (before 5.0) refuse the options: then
    // the socket sends and receives datagram by datagram, which is only slower.
    const int zero = 0;
    segment_runs_ = ::setsockopt(fd_, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
    receives_runs_ = ::setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
  }
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
    : fd_(std::exchange(other.fd_, -1)),
      local_(other.local_),
      counters_(other.counters_),
      reports_full_queues_(other.reports_full_queues_),
      segment_runs_(other.segment_runs_),
      receives_runs_(other.receives_runs_) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    local_ = other.local_;
    counters_ = other.counters_;
    reports_full_queues_ = other.reports_full_queues_;
    segment_runs_ = other.segment_runs_;
    receives_runs_ = other.receives_runs_;
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

void UdpSocket::connect(const SocketAddress& peer) {
  const sockaddr_in addr = to_sockaddr(peer);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int error = errno;
    throw UdpSetupError(
        "cannot connect UDP " + local_.to_string() + " to " + peer.to_string() + ": " + errno_reason(error), error);
  }
}

void UdpSocket::report_full_queues() {
  const int one = 1;
  if (::setsockopt(fd_, IPPROTO_IP, IP_RECVERR, &one, sizeof one) != 0) {
    const int error = errno;
    throw UdpSetupError("cannot set IP_RECVERR on UDP " + local_.to_string() + ": " + errno_reason(error), error);
  }
  reports_full_queues_ = true;
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
  batch.datagrams_.clear();
  batch.messages_ = 0;
  std::array<sockaddr_in, detail::kMaxBatch> addrs{};
  std::uint64_t runs = 0;
  const detail::RecvOutcome got = detail::recv_batch(
      fd_, batch.storage_.data(), batch.max_bytes_, batch.capacity(), addrs,
      [&](std::size_t k, const sockaddr_in& from, std::size_t bytes, const msghdr& m) {
        const SocketAddress source = from_sockaddr(from);
        const std::size_t offset = k * batch.max_bytes_;
        // A run received whole: datagrams of `segment` bytes, the last maybe shorter.
        const std::size_t segment = receives_runs_ ? run_segment_size(m) : 0;
        if (segment == 0 || segment >= bytes) {
          batch.datagrams_.push_back({offset, bytes, source});
          return;
        }
        ++runs;
        for (std::size_t at = 0; at < bytes; at += segment) {
          batch.datagrams_.push_back({offset + at, std::min(segment, bytes - at), source});
        }
      },
      batch.control_.data(), kControlBytes);
  batch.messages_ = got.read;
  if (got.error) ++counters_.recv_errors;
  if (reports_full_queues_ && got.kept == 0) {
    // Nothing (more) to read: read off the ICMP errors IP_RECVERR queued, or the error queue
    // keeps the socket in EPOLLERR and the event loop would spin on it.
    std::array<std::uint8_t, 512> bytes;
    for (;;) {
      iovec iov{bytes.data(), bytes.size()};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      if (::recvmsg(fd_, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;
      ++counters_.error_queue;
    }
  }
  counters_.truncated += got.truncated;
  counters_.received += batch.size();
  counters_.received_bytes += got.kept_bytes;
  counters_.received_runs += runs;
  return batch.size();
}

std::size_t UdpSocket::send_batch(std::span<const UdpOutgoing> datagrams) {
  std::array<sockaddr_in, detail::kMaxBatch> addrs;
  std::array<std::array<std::uint8_t, CMSG_SPACE(sizeof(std::uint16_t))>, detail::kMaxBatch> controls;
  const auto fill = [&](std::size_t first, std::size_t slot, msghdr& m, std::span<iovec> iovs) {
    const UdpOutgoing& head = datagrams[first];
    const std::size_t segment = head.bytes.size();
    // A run: the datagrams after `first` to the same address, each of `segment` bytes but the
    // last, which may be shorter (UDP_SEGMENT's rule), all in one IPv4 packet's worth.
    std::size_t n = 1;
    std::size_t total = segment;
    if (segment_runs_ && segment != 0) {
      const std::size_t limit = std::min(iovs.size(), kMaxSegments);
      while (n < limit) {
        const UdpOutgoing& d = datagrams[first + n];
        if (!(d.to == head.to) || d.bytes.empty() || d.bytes.size() > segment ||
            total + d.bytes.size() > kMaxUdpPayload) {
          break;
        }
        total += d.bytes.size();
        ++n;
        if (d.bytes.size() < segment) break;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      // sendmmsg does not write
      iovs[i] = {const_cast<std::uint8_t*>(datagrams[first + i].bytes.data()), datagrams[first + i].bytes.size()};
    }
    addrs[slot] = to_sockaddr(head.to);
    m.msg_name = &addrs[slot];
    m.msg_namelen = sizeof addrs[slot];
    if (n > 1) {
      m.msg_control = controls[slot].data();
      m.msg_controllen = controls[slot].size();
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
      const auto size = static_cast<std::uint16_t>(segment);
      std::memcpy(CMSG_DATA(c), &size, sizeof size);
    }
    return n;
  };
  // A run refused for being a run (a segment above the path's MTU, a device that cannot checksum
  // segments, a kernel without UDP_SEGMENT): datagram by datagram from now on, which any kernel
  // and path take. Other errors (an unreachable address) are the address's, whatever the form.
  const auto split = [&](int error) {
    if (error != EINVAL && error != EIO && error != ENOPROTOOPT && error != EOPNOTSUPP) return false;
    segment_runs_ = false;
    return true;
  };
  const detail::SendOutcome out = detail::send_batch(fd_, datagrams.size(), fill, split);
  counters_.sent += out.accepted;
  counters_.sent_bytes += out.accepted_bytes;
  counters_.sent_runs += out.accepted_runs;
  (out.queue_full ? counters_.send_queue_full : counters_.send_would_block) += out.would_block;
  counters_.send_errors += out.errors;
  return out.accepted;
}

bool UdpSocket::send_to(const SocketAddress& to, std::span<const std::uint8_t> bytes) {
  const UdpOutgoing one{to, bytes};
  return send_batch(std::span<const UdpOutgoing>(&one, 1)) == 1;
}

}  // namespace atp
