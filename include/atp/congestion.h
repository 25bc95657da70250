// ATP's congestion control (paper §3.7): AIMD on a window of packets, driven by ECN marks
// carried in parameter packets and by loss. All of it lives in this header and congestion.cc.
#pragma once

#include <cstdint>

#include "atp/wire.h"

namespace atp {

struct CongestionConfig {
  bool enabled = true;                    // false: the window stays at initial_window (Fig. 15 "off"),
                                          // clamped to [min_window, max_window] like always
  std::uint32_t initial_window = 200;     // packets (paper: 200 x 300 B is about one 100G BDP)
  std::uint32_t min_window = 1;           // packets
  std::uint32_t max_window = 1024;        // packets; also bounds PS memory per job
  std::uint32_t initial_ssthresh = 1024;  // packets; slow start below, congestion avoidance above
  std::uint32_t mtu_bytes = 1500;         // the additive step is one MTU worth of packets
};

// The window of one worker flow. Sequence numbers tell reductions apart: after a decrease, the
// window is not decreased again for signals about packets sent before that decrease (one
// reduction per window of data, as in TCP's fast recovery), since all of them carry the same news.
//
// Growth: below ssthresh (slow start) +step packets per parameter packet; at or above it
// (congestion avoidance) +step packets once a whole window of parameter packets has been
// counted, where step = one MTU in packets. Decrease (ECN, loss, timeout): halve, and
// ssthresh = the new window. The window always stays within [min_window, max_window].
class AimdWindow {
 public:
  // packet_bytes: size of one gradient packet, used to turn "one MTU" into packets
  // (mtu_bytes / packet_bytes rounded down, at least 1: 1500 B / 284 B -> 5 packets).
  AimdWindow(const CongestionConfig& config, std::uint32_t packet_bytes);

  std::uint32_t window() const;    // packets the flow may have in flight
  std::uint32_t ssthresh() const;  // packets
  std::uint32_t step() const;      // the additive step: one MTU, in packets

  // A parameter packet for `seq` arrived; `ecn` is its ECN flag. `next_seq` is the next
  // sequence number the flow will send (the end of the current recovery epoch if it reduces):
  // every seq from next_seq on is sent after this call.
  void on_ack(Seq seq, bool ecn, Seq next_seq);
  // Loss of `seq` was detected from three out-of-order parameter packets.
  void on_loss(Seq seq, Seq next_seq);
  // A retransmission timeout fired: the flow has heard nothing for a whole RTO. Always halves
  // (a timeout is news beyond any earlier reduction: nothing at all got through) and starts a
  // new recovery epoch.
  void on_timeout(Seq next_seq);

 private:
  // True if a congestion signal about `seq` belongs to the reduction already made. News about a
  // packet sent after that reduction ends the epoch (hence not const).
  bool in_recovery_epoch(Seq seq);
  void decrease(Seq next_seq);

  bool enabled_;
  std::uint32_t min_window_;    // packets, at least 1
  std::uint32_t max_window_;    // packets, at least min_window_
  std::uint32_t step_packets_;  // one MTU, in packets (at least 1)
  std::uint32_t window_;        // packets
  std::uint32_t ssthresh_;      // packets
  // Congestion avoidance: parameter packets counted since the window last grew. The window
  // grows by one step each time this reaches the window (the fraction step/window per ACK,
  // accumulated exactly in integers).
  std::uint32_t acks_since_growth_ = 0;
  bool in_recovery_ = false;
  Seq recovery_end_ = 0;  // signals about seqs before this belong to the last reduction
};

}  // namespace atp
