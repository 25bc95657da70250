// RinaWindow: the window of one of a Rina worker's two flows (reduce-scatter, allgather), the
// worker's congestion control apart from its packets and timers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "atp/congestion.h"
#include "atp/wire.h"

namespace atp {

// A flow's window (docs/rina.md "Reliability and congestion control"): ATP's AIMD (AimdWindow's
// slow start, growth, and halving on a timeout or a full host queue), except that an ECN mark
// cuts it by alpha/2, alpha the share of marked acks (a moving average over windows of acks, as
// DCTCP's), not by half. Where racks aggregate, a rack's uplink is the ring's bottleneck, and its
// switch marked from 20 packets when this was measured (now a depth sized for the rate), acks
// counted, well below the path's bandwidth-delay product (about 36 data packets at 100 Gbit/s):
// halving there left the uplink idle a fifth of the time (measured, a k=4 fat-tree, 8 aggregating
// racks: 60-90% busy, 43.8 Gbit/s against 49.4 with no rack aggregating; cut by alpha/2, 90-98%).
class RinaWindow {
 public:
  RinaWindow(const CongestionConfig& config, std::uint32_t packet_bytes)
      : enabled_(config.enabled),
        min_(std::max<std::uint32_t>(1, config.min_window)),
        max_(std::max(min_, config.max_window)),
        step_(AimdWindow(config, packet_bytes).step()),
        window_(AimdWindow(config, packet_bytes).window()),
        ssthresh_(std::max<std::uint32_t>(1, config.initial_ssthresh)) {}

  std::uint32_t window() const { return window_; }

  // `limited`: the window held sends back (its flow had a window in flight). Only then does it
  // grow: one that grew while the flow sent less (a round's tail, measured to 57 packets from 15)
  // let the next round's first windows, all sent at once, overflow the rack's uplink.
  void on_ack(Seq seq, bool ecn, Seq next_seq, bool limited) {
    if (!enabled_) return;
    ++acks_;
    if (ecn) ++marked_;
    if (acks_ >= window_) {  // alpha <- (1 - g) alpha + g F, F this window's share of marks
      alpha_ = alpha_ - (alpha_ >> kGainShift) + (marked_ << (kAlphaShift - kGainShift)) / acks_;
      acks_ = marked_ = 0;
    }
    if (ecn) {
      if (!in_recovery_epoch(seq)) {
        decrease(window_ - static_cast<std::uint32_t>((std::uint64_t{window_} * alpha_) >> (kAlphaShift + 1)),
                 next_seq);
      }
      return;
    }
    in_recovery_epoch(seq);
    if (!limited) return;
    if (window_ < ssthresh_) {  // slow start: one step per ack
      window_ = std::min(max_, window_ + step_);
      growth_acks_ = 0;
    } else if (++growth_acks_ >= window_) {  // congestion avoidance: one step per window of acks
      growth_acks_ = 0;
      window_ = std::min(max_, window_ + step_);
    }
  }
  // The host's queue is full: halves, once per window of data.
  void on_congestion(Seq seq, Seq next_seq) {
    if (enabled_ && !in_recovery_epoch(seq)) decrease(window_ / 2, next_seq);
  }
  // Halves, except for the same data timing out again after a timeout's cut (as AimdWindow).
  void on_timeout(Seq oldest, Seq next_seq) {
    if (!enabled_ || (timeout_epoch_ && in_recovery_epoch(oldest))) return;
    decrease(window_ / 2, next_seq);
    timeout_epoch_ = true;
  }

 private:
  static constexpr std::uint32_t kAlphaShift = 10;  // alpha in 1/1024ths
  static constexpr std::uint32_t kGainShift = 4;    // g = 1/16, DCTCP's

  bool in_recovery_epoch(Seq seq) {
    if (!in_recovery_) return false;
    if (seq_before(seq, recovery_end_)) return true;
    in_recovery_ = false;  // news about a packet sent after the last cut ends its epoch
    return false;
  }
  void decrease(std::uint32_t window, Seq next_seq) {
    window_ = std::clamp(window, min_, max_);
    ssthresh_ = window_;
    growth_acks_ = 0;
    in_recovery_ = true;
    recovery_end_ = next_seq;
    timeout_epoch_ = false;
  }

  bool enabled_;
  std::uint32_t min_, max_, step_, window_, ssthresh_;
  std::uint32_t growth_acks_ = 0;
  std::uint32_t acks_ = 0, marked_ = 0;      // this window of acks
  std::uint32_t alpha_ = 1u << kAlphaShift;  // 1 until measured: the first mark halves
  bool in_recovery_ = false;
  bool timeout_epoch_ = false;
  Seq recovery_end_ = 0;
};

}  // namespace atp
