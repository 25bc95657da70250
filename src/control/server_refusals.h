// What the control server refuses before a route runs, and the one JSON sentence of every error
// it answers by itself: a missing or unknown token, a body it will not read (compressed, chunked,
// without a length, too large), and httplib's own errors (400, 404, 413, 414, ...). Private to
// the control layer.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>

#include "atp/control/control.h"

namespace atp::control::detail {

// Why a request is refused before its body is read: its HTTP status and the error sentence.
struct Refusal {
  int status;
  std::string message;
};

// The refusal of a request whose body the server will not read (Content-Encoding other than
// identity, Transfer-Encoding, a POST/PUT/PATCH without Content-Length, a length that is not a
// number or over kMaxBodyBytes, a form over httplib's form limit); nullopt when it may be read.
std::optional<Refusal> refuse_before_body(const httplib::Request& req);

// The 401 a request without a known token gets; nullopt when `access` lets it in.
std::optional<Refusal> refuse_unauthenticated(const ServerAccess& access, const httplib::Request& req);

// The first refusal of a request before its body is read: a missing token, then a bad body.
std::optional<Refusal> refuse_early(const ServerAccess& access, const httplib::Request& req);

// Writes `refusal` into `res`: its status, the JSON sentence and, for a 401, the Bearer challenge.
void answer_refusal(const Refusal& refusal, httplib::Response& res);

// The sentence for an error httplib answers by itself (its response has no body).
std::string sentence_for(int status, const httplib::Request& req);

}  // namespace atp::control::detail
