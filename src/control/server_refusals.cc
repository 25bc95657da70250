// The control server's refusals before a route runs and its sentences for httplib's own errors
// (server_refusals.h).
#include "server_refusals.h"

#include <algorithm>

namespace atp::control::detail {
namespace {

// Where a client looks for the token by default, for the 401's sentence.
std::string token_file_hint() {
  try {
    return default_token_file();
  } catch (const AuthError&) {
    return "$ATP_HOME/token";
  }
}

}  // namespace

std::optional<Refusal> refuse_before_body(const httplib::Request& req) {
  if (req.has_header("Content-Encoding") && req.get_header_value("Content-Encoding") != "identity") {
    // A few compressed bytes could become gigabytes: httplib bounds the bytes read, not those
    // decompressed.
    return Refusal{415, "request bodies must not be compressed (Content-Encoding: " +
                            excerpt(req.get_header_value("Content-Encoding")) + ")"};
  }
  if (req.has_header("Transfer-Encoding")) {  // chunked: httplib reads it with no size limit
    return Refusal{411, "send the request body with a Content-Length header, not Transfer-Encoding: " +
                            excerpt(req.get_header_value("Transfer-Encoding"))};
  }
  if (!req.has_header("Content-Length")) {
    // httplib would read such a body until the client closes the connection.
    if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI") {
      return Refusal{411, excerpt(req.method) + " needs a Content-Length header"};
    }
    return std::nullopt;
  }
  const std::string length = req.get_header_value("Content-Length");
  const bool digits = !length.empty() && length.size() <= 19 &&
                      std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return Refusal{400, "Content-Length: expected a number of bytes, got '" + excerpt(length) + "'"};
  if (std::stoull(length) > kMaxBodyBytes) {
    return Refusal{413, "the request body is " + length + " bytes, more than the " + std::to_string(kMaxBodyBytes) +
                            " bytes a control request may have"};
  }
  // httplib parses such a body as a form, and refuses it above 8192 bytes (curl -d sends this type).
  if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0 &&
      std::stoull(length) > CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) {
    return Refusal{413, "the request body is " + length + " bytes, more than the " +
                            std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                            " bytes a form (Content-Type: application/x-www-form-urlencoded) may have; send it "
                            "with Content-Type: application/json"};
  }
  return std::nullopt;
}

std::string sentence_for(int status, const httplib::Request& req) {
  switch (status) {
    case 400:
      return "malformed HTTP request (a bad request line or header, or a body that did not arrive whole in time)";
    case 404:
      return "no such endpoint: " + excerpt(req.method) + " " + excerpt(req.path);
    case 413:
      return "the request body is too large (at most " + std::to_string(kMaxBodyBytes) + " bytes, " +
             std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) + " as a form)";
    case 414:
      return "the request line is longer than " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) + " bytes";
    case 415:
      return "unsupported Content-Encoding";
    case 416:
      return "Range requests are not supported";
    case 500:
      return "internal error";
    default:
      return "HTTP " + std::to_string(status);
  }
}

std::optional<Refusal> refuse_unauthenticated(const ServerAccess& access, const httplib::Request& req) {
  if (access.metrics_open && req.method == "GET" && req.path == "/metrics") return std::nullopt;
  if (!req.has_header("Authorization")) {
    return Refusal{401,
                   "this control plane needs a token: send 'Authorization: Bearer TOKEN' with the daemon's "
                   "token (its start-up line names the file; clients read ATP_TOKEN, ATP_TOKEN_FILE or " +
                       token_file_hint() + ")"};
  }
  if (!access.authenticator->identify(req.get_header_value("Authorization"))) {
    return Refusal{401, "the Authorization header holds no token this daemon knows"};
  }
  return std::nullopt;
}

std::optional<Refusal> refuse_early(const ServerAccess& access, const httplib::Request& req) {
  if (std::optional<Refusal> r = refuse_unauthenticated(access, req)) return r;
  return refuse_before_body(req);
}

void answer_refusal(const Refusal& refusal, httplib::Response& res) {
  res.status = refusal.status;
  if (refusal.status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"atp\"");
  res.set_content(error_body(refusal.message) + "\n", "application/json");
}

}  // namespace atp::control::detail
