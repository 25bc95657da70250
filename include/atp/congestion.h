// ATP's congestion control (paper §3.7): AIMD on a window of packets, driven by ECN marks
// carried in parameter packets and by loss. All of it lives in this header and congestion.cc.
#pragma once

#include <cstdint>

#include "atp/wire.h"

namespace atp {

struct CongestionConfig {
  bool enabled = true;                  // false: the window stays at initial_window (Fig. 15 "off")
  std::uint32_t initial_window = 200;   // packets (paper: 200 x 300 B is about one 100G BDP)
  std::uint32_t min_window = 1;         // packets
  std::uint32_t max_window = 1024;      // packets; also bounds PS memory per job
  std::uint32_t initial_ssthresh = 1024;  // packets; slow start below, congestion avoidance above
  std::uint32_t mtu_bytes = 1500;       // the additive step is one MTU worth of packets
};

// The window of one worker flow. Sequence numbers tell reductions apart: after a decrease, the
// window is not decreased again for signals about packets sent before that decrease (one
// reduction per window of data, as in TCP's fast recovery), since all of them carry the same news.
class AimdWindow {
 public:
  // packet_bytes: size of one gradient packet, used to turn "one MTU" into packets (at least 1).
  AimdWindow(const CongestionConfig& config, std::uint32_t packet_bytes);

  std::uint32_t window() const;  // packets the flow may have in flight
  std::uint32_t ssthresh() const;

  // A parameter packet for `seq` arrived; `ecn` is its ECN flag. `next_seq` is the next
  // sequence number the flow will send (the end of the current recovery epoch if it reduces).
  void on_ack(Seq seq, bool ecn, Seq next_seq);
  // Loss of `seq` was detected from three out-of-order parameter packets.
  void on_loss(Seq seq, Seq next_seq);
  // A retransmission timeout fired: the flow has heard nothing for a whole RTO.
  void on_timeout(Seq next_seq);

 private:
  void decrease(Seq seq, Seq next_seq);

  CongestionConfig config_;
  double step_packets_;       // one MTU, in packets
  double window_;             // packets, fractional so that +1 MTU per window accumulates
  double ssthresh_;
  bool in_recovery_ = false;
  Seq recovery_end_ = 0;      // signals about seqs before this belong to the last reduction
};

}  // namespace atp
