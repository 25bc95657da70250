// The socket helpers UdpSocket and PacketSocket share: errno wording and kernel buffer sizes.
// (The batch loops are templates in socket_batch.h.)
#include "atp/io/socket_batch.h"

#include <tuple>

namespace atp::detail {

std::string errno_reason(int error) {
  std::string s = std::strerror(error);
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && !(s.size() > 1 && s[1] >= 'A' && s[1] <= 'Z')) s[0] += 'a' - 'A';
  return s;
}

bool set_buffer_sizes(int fd, int recv_bytes, int send_bytes) {
  for (const auto& [force, plain, bytes] :
       {std::tuple{SO_RCVBUFFORCE, SO_RCVBUF, recv_bytes}, std::tuple{SO_SNDBUFFORCE, SO_SNDBUF, send_bytes}}) {
    if (bytes <= 0) continue;
    if (::setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof bytes) != 0 &&
        ::setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof bytes) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace atp::detail
