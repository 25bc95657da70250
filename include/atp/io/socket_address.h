// Socket addresses: an IPv4 address and a port, parsed from and written as "a.b.c.d:port".
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace atp {

// An IPv4 address and port (UDP or TCP), both in host byte order: where a socket is bound or
// sends, a daemon's control plane listens, a TCP collective connects.
struct SocketAddress {
  std::uint32_t ip = 0;  // e.g. 0x7F000001 for 127.0.0.1
  std::uint16_t port = 0;

  // "a.b.c.d:port"; throws std::invalid_argument naming the text if it is not one.
  static SocketAddress parse(const std::string& text);
  static SocketAddress loopback(std::uint16_t port) { return {0x7F000001u, port}; }
  std::string to_string() const;
  friend bool operator==(const SocketAddress&, const SocketAddress&) = default;
};

// The socket API's form, and back.
sockaddr_in to_sockaddr(const SocketAddress& e);
SocketAddress from_sockaddr(const sockaddr_in& a);

}  // namespace atp
