// ATP's AIMD congestion window (paper §3.7): slow start and congestion avoidance in steps of one
// MTU, halving on ECN, loss or timeout at most once per window of data. The only CC code there is.
#include "atp/congestion.h"

#include <algorithm>

namespace atp {

std::optional<std::string> window_error(const CongestionConfig& config) {
  if (config.initial_window <= config.max_window) return std::nullopt;
  return "the window (" + std::to_string(config.initial_window) + ") must not exceed max_window (" +
         std::to_string(config.max_window) + ")";
}

std::uint32_t initial_window_packets(const CongestionConfig& config, std::uint32_t packet_bytes) {
  return config.initial_window != 0
             ? config.initial_window
             : std::max<std::uint32_t>(1, kInitialWindowBytes / std::max<std::uint32_t>(1, packet_bytes));
}

AimdWindow::AimdWindow(const CongestionConfig& config, std::uint32_t packet_bytes)
    : enabled_(config.enabled),
      min_window_(std::max<std::uint32_t>(1, config.min_window)),
      max_window_(std::max(min_window_, config.max_window)),
      // Paper: 1500 B / 300 B = 5 packets. Rounded down so that a step never exceeds one MTU.
      step_packets_(std::max<std::uint32_t>(1, packet_bytes == 0 ? 1 : config.mtu_bytes / packet_bytes)),
      // Clamped even when disabled: max_window also bounds what the PS must remember per job.
      window_(std::clamp(initial_window_packets(config, packet_bytes), min_window_, max_window_)),
      ssthresh_(std::max<std::uint32_t>(1, config.initial_ssthresh)) {}

std::uint32_t AimdWindow::window() const { return window_; }
std::uint32_t AimdWindow::ssthresh() const { return ssthresh_; }
std::uint32_t AimdWindow::step() const { return step_packets_; }

bool AimdWindow::in_recovery_epoch(Seq seq) {
  if (!in_recovery_) return false;
  if (seq_before(seq, recovery_end_)) return true;
  // The first news about a packet sent after the last reduction ends its epoch. Clearing the
  // flag also keeps a stale recovery_end_ from being compared after the sequence space wraps.
  in_recovery_ = false;
  return false;
}

void AimdWindow::on_ack(Seq seq, bool ecn, Seq next_seq) {
  if (!enabled_) return;
  if (ecn) {
    on_congestion(seq, next_seq);  // a marked ACK never grows the window
    return;
  }
  in_recovery_epoch(seq);  // news about a packet sent after the last reduction ends its epoch
  if (window_ < ssthresh_) {
    window_ = std::min(max_window_, window_ + step_packets_);  // slow start: +1 MTU per ACK
    acks_since_growth_ = 0;
    return;
  }
  // Congestion avoidance: +1 MTU per window of ACKs.
  if (++acks_since_growth_ >= window_) {
    acks_since_growth_ = 0;
    window_ = std::min(max_window_, window_ + step_packets_);
  }
}

void AimdWindow::on_congestion(Seq seq, Seq next_seq) {
  if (!enabled_) return;
  if (!in_recovery_epoch(seq)) decrease(next_seq);
}

void AimdWindow::on_loss(Seq seq, Seq next_seq) {
  if (!enabled_) return;
  if (in_recovery_epoch(seq)) return;
  decrease_for_loss(seq, next_seq);
}

bool AimdWindow::on_timeout(Seq oldest, Seq next_seq) {
  if (!enabled_) return true;
  if (timeout_epoch_ && in_recovery_epoch(oldest)) return false;
  decrease_for_loss(oldest, next_seq);
  timeout_epoch_ = true;
  return true;
}

bool AimdWindow::undo(Seq seq) {
  if (!enabled_ || !undoable_ || seq != cut_for_) return false;
  window_ = std::max(window_, window_before_cut_);
  ssthresh_ = std::max(ssthresh_, ssthresh_before_cut_);
  undoable_ = false;
  in_recovery_ = false;
  timeout_epoch_ = false;
  return true;
}

void AimdWindow::decrease_for_loss(Seq seq, Seq next_seq) {
  const std::uint32_t window = window_;
  const std::uint32_t ssthresh = ssthresh_;
  decrease(next_seq);
  undoable_ = true;
  cut_for_ = seq;
  window_before_cut_ = window;
  ssthresh_before_cut_ = ssthresh;
}

void AimdWindow::decrease(Seq next_seq) {
  undoable_ = false;
  window_ = std::max(min_window_, window_ / 2);
  ssthresh_ = window_;  // paper §3.7: "updates the slow start threshold to the updated window"
  acks_since_growth_ = 0;
  in_recovery_ = true;
  recovery_end_ = next_seq;
  timeout_epoch_ = false;
}

RttEstimator::RttEstimator(Duration initial, Duration min_rto, Duration max_rto, int clip)
    : initial_(initial), min_rto_(min_rto), max_rto_(std::max(min_rto, max_rto)), clip_(clip) {}

void RttEstimator::observe(Duration delay) {
  block_min_ = std::min(block_min_, std::max(delay, Duration::zero()));
  if (++block_samples_ == kMinWindow) {
    last_block_min_ = block_min_;
    block_min_ = Duration::max();
    block_samples_ = 0;
    // A queue's delay is vouched for as long as samples still reach it; once a whole block's
    // largest is below it, the queue has shrunk (or gone) and the floor follows it down.
    if (clip_ > 0) lasting_ = std::min(lasting_, block_max_ / clip_);
    block_max_ = Duration::zero();
  }
}

void RttEstimator::on_sample(Duration rtt) {
  rtt = std::max(rtt, Duration::zero());
  observe(rtt);
  block_max_ = std::max(block_max_, rtt);
  samples_.push_back(rtt);
  if (samples_.size() == kMinWindow) {
    std::nth_element(samples_.begin(), samples_.begin() + kMinWindow / 2, samples_.end());
    median_ = samples_[kMinWindow / 2];
    samples_.clear();
  }
  if (clip_ > 0) rtt = std::min(rtt, clip_ * std::max({lasting_, median_, std::min(block_min_, last_block_min_)}));
  if (!has_sample_) {
    has_sample_ = true;
    srtt_ = rtt;
    rttvar_ = rtt / 2;
    return;
  }
  const Duration error = srtt_ > rtt ? srtt_ - rtt : rtt - srtt_;
  rttvar_ = (3 * rttvar_ + error) / 4;
  srtt_ = (7 * srtt_ + rtt) / 8;
}

void RttEstimator::on_spurious_timeout(Duration rtt) {
  rtt = std::max(rtt, Duration::zero());
  observe(rtt);
  // The delay lasts (a queue that grew, not another worker's stall, which flags its results): the
  // samples behind it are not clipped below it either, until blocks of lower ones replace it.
  if (clip_ > 0) lasting_ = std::max(lasting_, rtt / clip_);
  srtt_ = has_sample_ ? std::max(srtt_, rtt) : rtt;
  rttvar_ = has_sample_ ? std::max(rttvar_, rtt / 2) : rtt / 2;
  has_sample_ = true;
}

Duration RttEstimator::rto() const {
  if (!has_sample_) return std::clamp(initial_, min_rto_, max_rto_);
  return std::clamp(srtt_ + std::max(kMinVariance, 4 * rttvar_), min_rto_, max_rto_);
}

}  // namespace atp
