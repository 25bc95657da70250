// Background TCP traffic of the netns backend (`atp flow`, hidden): a sender that writes as fast
// as TCP lets it, and a receiver that reports its goodput over time. Scenario key `background:`.
//
// Protocol (one JSON object per stdout line, as the worker processes):
//   receiver: {"event":"listening"} once bound; after the sender closed the connection:
//             {"event":"flow","bytes":B,"seconds":S,"first_ns":F,"interval_s":I,"mbps":[...]}
//             and exits 0 (F: its first byte's arrival on CLOCK_MONOTONIC, which every namespace
//             shares, the samples' origin).
//   sender:   {"event":"connected"} once connected; writes until its stdin closes, then exits 0.
// Both exit 1 with one sentence on stderr when the connection cannot be made or breaks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atp/io/socket_address.h"
#include "atp/time.h"

namespace atp::tcp_flow {

// The TCP port background flows use (every netns host has its own address, so one port does).
inline constexpr std::uint16_t kPort = 9701;

int run_receiver(const SocketAddress& listen, Duration interval);
// `congestion`: the socket's TCP_CONGESTION; `ecn`: net.ipv4.tcp_ecn of the sender's namespace
// (Linux sets ECN per namespace, not per socket), 1 to ask for it, 2 (Linux's default) not to.
int run_sender(const SocketAddress& to, Duration connect_timeout, const std::string& congestion, bool ecn);

struct FlowReport {
  std::uint64_t bytes = 0;
  double seconds = 0;         // first to last byte
  std::int64_t first_ns = 0;  // the first byte's arrival, CLOCK_MONOTONIC (EventLoop::now): mbps[0] begins there
  double interval_s = 0;      // width of one mbps sample
  std::vector<double> mbps;
};
// Parses the receiver's "flow" line; false if `line` is not one.
bool parse_report(const std::string& line, FlowReport& report);

}  // namespace atp::tcp_flow
