// TCP's timers on the ns3 backend: the minimum RTO and the delayed-ACK timeout for a scenario's
// links, set on every socket of its host collectives and background flows (tcp_apps.h).
#pragma once

#include <ns3/ptr.h>
#include <ns3/socket.h>

#include "atp/scenario/scenario.h"
#include "atp/time.h"

namespace atp::ns3adapter {

// The retransmission timeout's floor: a data-centre 1 ms (ns-3's default of 1 s would silence a
// flow for the rest of a millisecond-scale run after one timeout), but never less than the time
// this many full segments take on the slowest link (below).
inline constexpr Duration kMinRtoFloor = std::chrono::milliseconds(1);
inline constexpr double kMinRtoSegments = 100;

// TCP's two timers for a scenario's links, set on every socket (use_timers). They must agree:
// - A receiver acknowledges every second segment, or a lone one after the delayed-ACK timeout
//   (ns-3's default: 200 ms). With a 1 ms RTO the sender's timer fires long before that on the
//   odd last segment of a burst, as at the end of every ring round: a spurious timeout. ns-3
//   then sets the window to one segment and resends from the first unacknowledged byte, what
//   the receiver already has; on a ring every link also carries the next flow's ACKs, those
//   duplicates hold them back past the next 1 ms timeout, and so on, one segment per timeout (a
//   1 MiB ring of 4 workers on 200 Mbit/s links took 7.7 s per round, not 65 ms). So the
//   delayed ACK waits a fifth of the minimum RTO, Linux's ratio (40 ms against 200 ms).
// - Before a flow's first data is acknowledged, its RTO comes from the handshake's round trip,
//   whose small packets take almost no time to send: on slow links the first window alone (10
//   segments, 1.2 ms at 100 Mbit/s) outlasts 1 ms and sets off the same spiral. So the minimum
//   RTO is at least the time kMinRtoSegments full segments take on the slowest link of the run
//   (faults included): 1 ms from about 1.2 Gbit/s up, 6 ms at 200 Mbit/s, 12 ms at 100 Mbit/s.
struct TcpTimers {
  Duration min_rto{kMinRtoFloor};          // ns-3's TcpSocketBase::MinRto
  Duration delayed_ack{kMinRtoFloor / 5};  // ns-3's TcpSocket::DelAckTimeout
};

TcpTimers tcp_timers(const Scenario& s);

// Sets `t` on `socket`, with the SYN retries a large job's connections need.
void use_timers(const ns3::Ptr<ns3::Socket>& socket, const TcpTimers& t);

}  // namespace atp::ns3adapter
