// An HTTP client for a daemon's control plane (`atp switch`, `atp ps`): what the runners, the
// `atp` command and ClusterJob talk to the daemons with. One place for its address, token and
// timeouts.
#pragma once

#include <httplib.h>

#include <string>

#include "atp/runtime/udp_socket.h"

namespace atp::control {

// A client sending `token` (control_auth.h: client_token() for a daemon someone else started)
// with every request. A daemon that does not accept the connection within 2 s, or answer within
// 5 s, is a failed request (httplib::Result without a response), not a hang.
inline httplib::Client client(const UdpEndpoint& control, const std::string& token) {
  const std::string text = control.to_string();
  httplib::Client c(text.substr(0, text.rfind(':')), control.port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  c.set_bearer_token_auth(token);
  return c;
}

}  // namespace atp::control
