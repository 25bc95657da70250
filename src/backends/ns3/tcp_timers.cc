// TCP's timers on the ns3 backend (tcp_timers.h).
#include "tcp_timers.h"

#include <ns3/nstime.h>
#include <ns3/uinteger.h>

#include <algorithm>

#include "atp/sim/ns3_network.h"

namespace atp::ns3adapter {
namespace {

// A full segment on the wire: 1448 bytes of payload (ns3_network.cc) + TCP 20 + timestamps 12 +
// IPv4 20 + PPP 2.
constexpr double kSegmentWireBytes = 1502;
constexpr std::uint32_t kSynRetries = 30;  // ConnCount: a connection fails after this many lost SYNs

}  // namespace

TcpTimers tcp_timers(const Scenario& s) {
  double slowest_gbps = 0;  // 0: no link has a rate (unlimited)
  auto consider = [&](double gbps) {
    if (gbps > 0 && (slowest_gbps == 0 || gbps < slowest_gbps)) slowest_gbps = gbps;
  };
  consider(s.link.rate_gbps.value_or(0));
  for (const LinkFault& f : s.link_faults) {
    if (f.overrides.rate_gbps) consider(*f.overrides.rate_gbps);
  }
  TcpTimers t;
  if (slowest_gbps > 0) {
    const auto drain = Duration(static_cast<std::int64_t>(kMinRtoSegments * kSegmentWireBytes * 8 / slowest_gbps));
    t.min_rto = std::max(kMinRtoFloor, drain);
  }
  t.delayed_ack = t.min_rto / 5;
  return t;
}

void use_timers(const ns3::Ptr<ns3::Socket>& socket, const TcpTimers& t) {
  socket->SetAttribute("MinRto", ns3::TimeValue(to_ns3(t.min_rto)));
  socket->SetAttribute("DelAckTimeout", ns3::TimeValue(to_ns3(t.delayed_ack)));
  // A lost SYN is sent again after the minimum RTO, not ns-3's 3 s, and up to kSynRetries times:
  // with finite buffers the connections a large job opens at once lose SYNs (64 probing ranks,
  // 4032 connections through 64-packet queues), and at 3 s the whole run stalled on them.
  socket->SetAttribute("ConnTimeout", ns3::TimeValue(to_ns3(t.min_rto)));
  socket->SetAttribute("ConnCount", ns3::UintegerValue(kSynRetries));
}

}  // namespace atp::ns3adapter
