// The control-plane tokens the C++ tests' daemons run with: the operator's and two tenants'
// (control_auth.h), and the header a raw HTTP request sends them in.
#pragma once

#include <string>

#include "atp/control/control_auth.h"

namespace atp::test {

inline const std::string kOperatorToken = "test-operator-token-0123456789";
inline const std::string kAliceToken = "test-alice-token-0123456789";
inline const std::string kBobToken = "test-bob-token-0123456789";

// The operator's token, tenants "alice" and "bob"; /metrics closed.
inline control::AccessConfig test_access() {
  return {kOperatorToken, {{"alice", kAliceToken}, {"bob", kBobToken}}, false};
}

// "Authorization: Bearer <token>\r\n", for raw requests.
inline std::string bearer(const std::string& token = kOperatorToken) {
  return "Authorization: Bearer " + token + "\r\n";
}

// `request` (raw HTTP) with `token`'s Authorization header after its request line.
inline std::string with_token(std::string request, const std::string& token = kOperatorToken) {
  const std::size_t line_end = request.find("\r\n");
  request.insert(line_end == std::string::npos ? request.size() : line_end + 2, bearer(token));
  return request;
}

}  // namespace atp::test
