// LossClock: a Rina worker's fast loss detection for one kind of its sends, RACK's (RFC 8985)
// clock apart from the worker's packets and timers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>

#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

// A send is lost once a send of its kind that went after it was acknowledged and it is overdue:
// that ack's round trip plus a reordering window past its own send (RACK). One clock per kind of
// send whose acks come back after about the same wait (docs/rina.md "Reliability and congestion
// control"): a worker's first hops, its carried hops (acknowledged only once the pull brought the
// rack's), its pulled ones, and its gathers; across kinds an ack says nothing of an older send.
// Without it a lost packet waited for the RTO, whose floor (1 ms) is tens of round trips at
// 100 Gbit/s, a third of a 4 M-value round (Ns3Backend.RinaResendsALossBeforeItsRto). A clock's
// last sends have no later send to show their loss: the worker's tail probe is for those.
class LossClock {
 public:
  // Each first send of this kind, in the order they go: `key` names it to the worker, `order` is
  // its sequence number in its flow (kinds of one flow share them), `at` is when it went.
  void on_send(std::uint64_t key, Seq order, Time at) { sends_.push_back({key, order, at}); }

  // An ack of a send of this kind that went once (a resent one's ack may answer either copy).
  void on_ack(Seq order, Time at, Time now) {
    if (has_ack_ && seq_before(order, order_)) return;
    has_ack_ = true;
    order_ = order;
    rtt_ = now - at;
  }

  bool has_ack() const { return has_ack_; }
  Duration rtt() const { return rtt_; }  // the latest-sent acknowledged send's round trip

  // Calls lost(key) for each send overdue at `now`, oldest first, and returns when the next one
  // falls due (kNever: none known). The reordering window: `reordering` quarters of the round
  // trip, and at least `min_window`.
  // `pending(key, at)`: whether that send still waits for its ack and was not resent (the rest
  // are forgotten here).
  template <class Pending, class Lost>
  Time detect(Time now, std::uint32_t reordering, Duration min_window, Pending pending, Lost lost) {
    while (!sends_.empty()) {
      const Send s = sends_.front();
      if (!pending(s.key, s.at)) {
        sends_.pop_front();
        continue;
      }
      if (!has_ack_ || !seq_before(s.order, order_)) return kNever;  // nothing later acknowledged: the RTO's
      const Time due = deadline_after(s.at, rtt_ + std::max(rtt_ * reordering / 4, min_window));
      if (due > now) return due;  // later sends went later still
      sends_.pop_front();
      lost(s.key);
    }
    return kNever;
  }

 private:
  struct Send {
    std::uint64_t key;
    Seq order;
    Time at;
  };
  std::deque<Send> sends_;
  bool has_ack_ = false;
  Seq order_ = 0;   // the latest-sent send acknowledged
  Duration rtt_{};  // its round trip
};

}  // namespace atp
