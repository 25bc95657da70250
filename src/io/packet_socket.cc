// AF_PACKET raw sockets for the switch's interface ports: setup with one clear sentence per
// failure, then batched, non-blocking frame I/O whose failures are only counted.
#include "atp/io/packet_socket.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "atp/io/socket_batch.h"

namespace atp {

FrameBatch::FrameBatch(std::size_t capacity, std::size_t max_bytes)
    : max_bytes_(max_bytes), storage_(capacity * max_bytes), length_(capacity, 0) {
  if (capacity == 0 || max_bytes == 0) throw std::invalid_argument("FrameBatch: capacity and max_bytes must be > 0");
  // recv_batch reads at most kMaxBatch: a larger batch would never be full() however many wait.
  if (capacity > detail::kMaxBatch) {
    throw std::invalid_argument("FrameBatch: capacity must be at most " + std::to_string(detail::kMaxBatch) + ", got " +
                                std::to_string(capacity));
  }
}

PacketSocket::PacketSocket(const std::string& name, const PacketSocketOptions& options) : name_(name) {
  const std::string where = "cannot open interface " + name;
  const auto fail = [&](const std::string& what, int error) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    std::string text = what + ": " + detail::errno_reason(error);
    if (error == EPERM || error == EACCES) text += " (needs root or CAP_NET_RAW)";
    return PacketSetupError(text, error);
  };
  if (name.empty() || name.size() >= IFNAMSIZ) throw fail(where, ENODEV);
  // Protocol 0 first: the socket receives nothing until bind() names the interface and ETH_P_ALL,
  // so no frame of another interface slips in between.
  fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw fail(where, errno);
  ifindex_ = static_cast<int>(::if_nametoindex(name.c_str()));
  if (ifindex_ == 0) throw fail(where, errno);

  ifreq request{};
  std::memcpy(request.ifr_name, name.c_str(), name.size() + 1);
  if (::ioctl(fd_, SIOCGIFHWADDR, &request) != 0) throw fail(where + " (reading its MAC address)", errno);
  std::memcpy(mac_.data(), request.ifr_hwaddr.sa_data, mac_.size());
  if (::ioctl(fd_, SIOCGIFMTU, &request) != 0) throw fail(where + " (reading its MTU)", errno);
  mtu_ = request.ifr_mtu;

  // The switch's own transmissions would otherwise come back as received frames (Linux 4.20+;
  // recv_batch also drops PACKET_OUTGOING frames, for kernels without the option).
  const int one = 1;
  if (::setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0 && errno != ENOPROTOOPT) {
    throw fail(where + " (PACKET_IGNORE_OUTGOING)", errno);
  }
  if (!detail::set_buffer_sizes(fd_, options.recv_buffer_bytes, options.send_buffer_bytes)) {
    throw fail(where + " (setting its socket buffer sizes)", errno);
  }
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_ALL);
  address.sll_ifindex = ifindex_;
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) throw fail(where, errno);
}

PacketSocket::~PacketSocket() {
  if (fd_ >= 0) ::close(fd_);
}

PacketSocket::PacketSocket(PacketSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      name_(std::move(other.name_)),
      ifindex_(other.ifindex_),
      mac_(other.mac_),
      mtu_(other.mtu_),
      counters_(other.counters_),
      kernel_drops_(other.kernel_drops_) {}

PacketSocket& PacketSocket::operator=(PacketSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    name_ = std::move(other.name_);
    ifindex_ = other.ifindex_;
    mac_ = other.mac_;
    mtu_ = other.mtu_;
    counters_ = other.counters_;
    kernel_drops_ = other.kernel_drops_;
  }
  return *this;
}

std::uint64_t PacketSocket::kernel_drops() const {
  tpacket_stats stats{};
  socklen_t len = sizeof stats;
  if (fd_ >= 0 && ::getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &stats, &len) == 0) kernel_drops_ += stats.tp_drops;
  return kernel_drops_;
}

std::size_t PacketSocket::recv_batch(FrameBatch& batch) {
  batch.count_ = 0;
  batch.read_ = 0;
  std::array<sockaddr_ll, detail::kMaxBatch> from{};
  std::size_t outgoing = 0;  // own transmissions seen despite PACKET_IGNORE_OUTGOING (old kernels)
  const detail::RecvOutcome got =
      detail::recv_batch(fd_, batch.storage_.data(), batch.max_bytes_, batch.capacity(), from,
                         [&](std::size_t k, const sockaddr_ll& source, std::size_t bytes, const msghdr&) {
                           if (source.sll_pkttype == PACKET_OUTGOING) {
                             ++outgoing;
                             return;  // slot k is overwritten by the next kept frame
                           }
                           const std::size_t slot = k - outgoing;
                           if (slot != k) {
                             std::memmove(batch.storage_.data() + slot * batch.max_bytes_,
                                          batch.storage_.data() + k * batch.max_bytes_, bytes);
                           }
                           batch.length_[slot] = bytes;
                         });
  if (got.error) ++counters_.recv_errors;
  counters_.truncated += got.truncated;
  batch.count_ = got.kept - outgoing;
  batch.read_ = got.read;
  counters_.received += batch.count_;
  for (std::size_t i = 0; i < batch.count_; ++i) counters_.received_bytes += batch.length_[i];
  return batch.count_;
}

std::size_t PacketSocket::send_batch(std::span<const std::span<const std::uint8_t>> frames) {
  // Bound sockets send on their interface; the frame's own header says where it goes.
  const detail::SendOutcome out =
      detail::send_batch(fd_, frames.size(), [&](std::size_t i, std::size_t, msghdr&, iovec& iov) {
        iov.iov_base = const_cast<std::uint8_t*>(frames[i].data());  // sendmmsg does not write
        iov.iov_len = frames[i].size();
      });
  counters_.sent += out.accepted;
  counters_.sent_bytes += out.accepted_bytes;
  counters_.send_would_block += out.would_block;
  counters_.send_errors += out.errors;
  return out.accepted;
}

bool PacketSocket::send(std::span<const std::uint8_t> frame) {
  const std::span<const std::uint8_t> one[1] = {frame};
  return send_batch(one) == 1;
}

}  // namespace atp
