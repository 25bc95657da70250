// ATP's congestion control (paper §3.7): AIMD on a window of packets, driven by ECN marks
// carried in parameter packets and by loss; and the retransmission timeout, from measured round
// trips. All of it lives in this header and congestion.cc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

// The default first window in bytes: the paper's 200 packets of 62 values (about one 100G BDP),
// 13 packets of 1024 values.
inline constexpr auto kInitialWindowBytes = static_cast<std::uint32_t>(200 * packet_size(kDefaultValuesPerPacket));

struct CongestionConfig {
  bool enabled = true;  // false: the window stays at initial_window (Fig. 15 "off"),
                        // clamped to [min_window, max_window] like always
  // Packets; 0 (the default): kInitialWindowBytes worth of the flow's packets. A first window is
  // sized in bytes because what it must fit is bytes: a queue nothing has drained yet drops the
  // rest, such as the kernel's queue for a neighbour not yet resolved (unres_qlen_bytes, 212 KB of
  // buffers), which keeps the newest and costs all of a larger window but its tail. Slow start
  // finds the path's capacity from there within a few round trips.
  std::uint32_t initial_window = 0;
  std::uint32_t min_window = 1;           // packets
  std::uint32_t max_window = 1024;        // packets; also bounds PS memory per job
  std::uint32_t initial_ssthresh = 1024;  // packets; slow start below, congestion avoidance above
  std::uint32_t mtu_bytes = 1500;         // the additive step is one MTU worth of packets

  bool operator==(const CongestionConfig&) const = default;
};

// The first window in packets of `packet_bytes` (before AimdWindow clamps it): initial_window, or
// where that is 0, kInitialWindowBytes worth of them (at least 1).
std::uint32_t initial_window_packets(const CongestionConfig& config, std::uint32_t packet_bytes);

// The one check of a CongestionConfig's windows, which a scenario file and a job plan both make:
// what is wrong ("the window (2000) must not exceed max_window (1024)"), or nullopt. An
// initial_window of 0 (sized in bytes) is always right.
std::optional<std::string> window_error(const CongestionConfig& config);

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
  // A congestion mark about `seq` that is no loss: an ECN mark (on_ack calls it), or the host's
  // own queue full while `seq` was the oldest packet in flight. Halves unless the last reduction
  // already answered it (`seq` was sent before it).
  void on_congestion(Seq seq, Seq next_seq);
  // Loss of `seq` was detected: a hole overdue after later parameter packets (worker_recovery.cc).
  void on_loss(Seq seq, Seq next_seq);
  // A retransmission timeout fired for the flow's oldest unacknowledged packet `oldest`: the flow
  // has heard nothing for a whole RTO. Halves and starts a new recovery epoch (a timeout is news
  // beyond an ECN or loss reduction: nothing at all got through), except when the last reduction
  // was a timeout and `oldest` was sent before it: the same data timing out again, which says no
  // more than the first timeout did (RFC 5681 holds ssthresh then). In ATP that is the common case
  // of a result that waits for another worker's loss recovery, which backed-off timeouts must not
  // turn into a window of 1 packet. Returns false for such a repeated timeout (true when
  // congestion control is off: every timeout is then treated alike).
  bool on_timeout(Seq oldest, Seq next_seq);
  // The loss that on_loss or on_timeout answered for `seq` was not one: the result for `seq` came
  // from its first copy (a result that took longer than the RTO, or that later ones overtook).
  // Restores the window and ssthresh from before that cut (RFC 4015's response, as Linux's undo),
  // unless another cut came since. Returns true if it did.
  bool undo(Seq seq);

 private:
  // True if a congestion signal about `seq` belongs to the reduction already made. News about a
  // packet sent after that reduction ends the epoch (hence not const).
  bool in_recovery_epoch(Seq seq);
  void decrease(Seq next_seq);
  void decrease_for_loss(Seq seq, Seq next_seq);  // decrease(), undoable for `seq`

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
  bool timeout_epoch_ = false;  // the last reduction was a timeout's
  Seq recovery_end_ = 0;        // signals about seqs before this belong to the last reduction
  // The last cut answered a loss of cut_for_ (undo() may take it back): the window and ssthresh
  // from before it.
  bool undoable_ = false;
  Seq cut_for_ = 0;
  std::uint32_t window_before_cut_ = 0;
  std::uint32_t ssthresh_before_cut_ = 0;
};

// A flow's retransmission timeout from the round trips it measures, as TCP's (RFC 6298):
//   first sample R:  SRTT = R, RTTVAR = R / 2;
//   then:            RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|,  SRTT = 7/8 SRTT + 1/8 R;
//   RTO = SRTT + max(min_variance, 4 RTTVAR), within [min_rto, max_rto].
// A worker's round trip is from sending a fragment to receiving its aggregate, which waits for the
// slowest worker of the job. A lag that lasts (a worker always ahead of another) is path delay to
// this worker, and its samples carry it. A passing one (another worker stalled for a moment, by
// its own loss recovery) is not: fed to SRTT and RTTVAR it would stretch this worker's timeouts,
// which then stall the others in turn. So each sample is first clipped to kClip times the larger
// of the least recent delay (the last kMinWindow to 2 kMinWindow) and the median of the last
// block of kMinWindow samples: a passing lag holds up fewer than half of a block's samples, a
// lasting one at least half. A queue that swings (ECN's sawtooth beside a TCP flow: from empty to
// the threshold, many times the least round trip) is lasting delay, at this worker's port or at
// another's whose lag every aggregate waits for: the median keeps its peaks, and a spurious
// timeout lifts the clip to its round trip until whole blocks of samples stay below it. Samples
// come only from fragments sent once (Karn's rule: a result for a resent fragment may answer
// either copy). Before the first sample the RTO is `initial`. `clip` 0 keeps samples whole (plain
// RFC 6298): Rina's acks wait for the ring's previous hop and for queues that last, which the
// clip would hide from the RTO.
class RttEstimator {
 public:
  RttEstimator(Duration initial, Duration min_rto, Duration max_rto, int clip = kClip);

  void on_sample(Duration rtt);
  // A result's delay that is no sample (a resent fragment's, one that waited for another worker's
  // resend), timed from the fragment's first send: never less than the round trip, so it counts
  // towards the recent minimum the samples are clipped against.
  void observe(Duration delay);
  // The round trip of a packet that a timeout resent although its first copy made it (RFC 4015's
  // spurious timeout, as TCP's timestamps show it): the estimate was below it. Taken whole, not
  // clipped: SRTT and RTTVAR rise to at least `rtt` and `rtt` / 2 (RFC 4015 3.2), so the next RTO
  // is past it; and samples up to `rtt` are not clipped, a bound that follows each block's largest
  // sample down. Later samples bring the estimate back down if the rise passes.
  void on_spurious_timeout(Duration rtt);
  // Before the first sample: the RTO is at least `rto` from now on (a stand-in's evidence that the
  // initial one is shorter than the round trip).
  void raise_initial(Duration rto) { initial_ = std::max(initial_, rto); }
  Duration rto() const;
  bool has_sample() const { return has_sample_; }
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }

  // The least 4 RTTVAR counts for (RFC 6298's clock granularity G), so that a run of equal
  // samples (RTTVAR near 0) does not put the RTO right at the mean. Small: a simulated fabric's
  // round trips are microseconds; min_rto is what keeps a real host's scheduling noise out.
  static constexpr Duration kMinVariance = std::chrono::microseconds(10);
  static constexpr int kClip = 2;
  static constexpr int kMinWindow = 256;

 private:
  Duration initial_, min_rto_, max_rto_;
  int clip_;
  bool has_sample_ = false;
  // The least sample of the current block of kMinWindow samples and of the block before it.
  Duration block_min_ = Duration::max();
  Duration last_block_min_ = Duration::max();
  int block_samples_ = 0;
  Duration srtt_{};
  Duration rttvar_{};
  // Clipping: the largest sample of the current block (before clipping), and the least delay that
  // a spurious timeout showed to last (a queue: clip_ x lasting_ is never clipped), see
  // on_spurious_timeout.
  Duration block_max_{};
  Duration lasting_{};
  std::vector<Duration> samples_;  // the current block's samples (before clipping), for its median
  Duration median_{};              // the median of the last whole block of kMinWindow samples
};

}  // namespace atp
