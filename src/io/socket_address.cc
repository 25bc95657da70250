// Socket addresses: parsing, printing, and the socket API's sockaddr_in.
#include "atp/io/socket_address.h"

#include <arpa/inet.h>

#include <stdexcept>

#include "atp/wire.h"

namespace atp {

SocketAddress SocketAddress::parse(const std::string& text) {
  const auto colon = text.rfind(':');
  const auto bad = [&] {
    return std::invalid_argument("'" + text + "' is not an IPv4 address and port like 127.0.0.1:9000");
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

sockaddr_in to_sockaddr(const SocketAddress& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(e.ip);
  a.sin_port = htons(e.port);
  return a;
}

SocketAddress from_sockaddr(const sockaddr_in& a) { return {ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)}; }

std::string SocketAddress::to_string() const { return format_address(ip) + ":" + std::to_string(port); }

}  // namespace atp
