// The egress behaviour of one port or link direction, shared by every runtime: a FIFO with an
// optional rate limit, drop-tail buffer, ECN marking and seeded loss, duplication and reordering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "atp/time.h"

namespace atp {

// What a queue holds, which decides how a packet's wire size is counted and how it is ECN-marked.
enum class Framing : std::uint8_t {
  // Bare ATP packets (the in-process network, the loopback UDP backend): the wire adds
  // kEncapsulationBytes of Ethernet/IPv4/UDP headers; marking sets the ATP header's ECN flag.
  kAtp,
  // Whole Ethernet frames (interface ports): the bytes are the wire size; marking sets the ATP
  // flag of an ATP frame, or CE in the IPv4 header of an ECN-capable one (mark_ecn_frame).
  kEthernet,
};

struct EgressConfig {
  // Gbit/s; a packet takes wire bytes * 8 / rate_gbps ns to send (wire bytes: see Framing).
  // 0: infinitely fast, no queue builds up (buffer and ECN threshold do not apply).
  double rate_gbps = 0;
  // The queue holds the packets accepted but not yet fully sent (including the one being sent).
  // Both limits compare against its length when a packet is enqueued.
  std::uint32_t buffer_packets = 0;  // drop-tail limit; 0: unlimited
  // Drop-tail limit in wire bytes (see Framing), as a switch counts its buffer (in cells): a
  // packet is refused when the queue's bytes and its own would exceed it; 0: unlimited. Both
  // limits apply where both are set.
  std::uint32_t buffer_bytes = 0;
  // Mark packets (see Framing) when the queue holds this many, or a third of buffer_bytes
  // (kEcnBufferShare), and drop some of those that cannot carry a mark (not-ECT IPv4, RFC 3168 §7;
  // never ARP; UnmarkableDrops says which); 0: off.
  std::uint32_t ecn_threshold_packets = 0;
  // Added to every packet once it is sent: the propagation delay of a simulated link, or an
  // injected extra delay on a real port.
  Duration delay{0};
  double loss = 0;       // probability a packet is lost (after it was sent: it used the link)
  double duplicate = 0;  // probability a packet is released twice (the copy 100 ns later)
  double reorder = 0;    // probability a packet is held back by 1-3 extra delays (at least 1 us)
};

// A switch port's queue where nothing sets it (a scenario's `link:`, an `atp switch` port): ECN
// marks from a depth sized for the port's rate (switch_port_ecn_threshold) and, from there, drops
// of what cannot carry a mark, so that ATP, ECN-capable TCP and any other TCP answer one signal
// at one depth and share the link (docs/protocol.md, "Sharing a link"); room for 1 MB, for
// bursts. A switch counts its buffer in bytes (cells), so a burst of small packets gets the room a
// burst of large ones does: 1 MB is 110 jumbo frames (the old default of 100 packets gave jumbo
// frames about that), 660 Ethernet frames, 3,100 of the paper's 62-value packets; a few times a
// port's even share of a data-centre switch's shared buffer (Tofino 22 MB for 64 ports, Trident 3
// 32 MB for 32), as the buffer's dynamic threshold lets one congested port take. A host's NIC
// queue keeps EgressConfig's own defaults: no limit (its sender waits), no marks.
inline constexpr std::uint32_t kSwitchPortBufferBytes = 1'000'000;
// DCTCP's K: 20 packets at 1 Gbit/s, 65 at 10 Gbit/s (DCTCP §4.1), so 20 x sqrt(Gbit/s) packets
// from 1 Gbit/s up (63 at 10, 200 at 100) and 20 below: a round trip's worth grows with the rate,
// and a threshold of 20 at 100 Gbit/s held classic-ECN TCP to a fifth of its link on ns-3
// (docs/protocol.md). A queue also marks once it holds a third of its buffer in bytes (admission),
// so that a threshold in packets never lies past a buffer of large frames. Sized once, for the
// rate a port is configured with; a later change of rate leaves it.
inline constexpr std::uint32_t kSwitchPortEcnThresholdPackets = 20;  // at 1 Gbit/s and below
inline constexpr std::uint32_t kEcnBufferShare = 3;                  // marks from buffer_bytes / 3
std::uint32_t switch_port_ecn_threshold(double rate_gbps);
inline EgressConfig switch_port_egress(double rate_gbps = 0) {
  EgressConfig c;
  c.rate_gbps = rate_gbps;
  c.buffer_bytes = kSwitchPortBufferBytes;
  c.ecn_threshold_packets = switch_port_ecn_threshold(rate_gbps);
  return c;
}

// Which of the packets that cannot carry a mark a port drops past its ECN threshold (RFC 3168 §7
// asks for a drop where a mark would go): the first, then one in every kUnmarkableDropEvery, the
// count starting afresh whenever the queue is below the threshold. A mark costs its sender nothing
// but the cut it answers, once per round trip; a TCP deaf to ECN answers one loss per round trip
// with the same cut, but every further loss is a segment to resend, and where a resend or a
// window's tail is lost too, a retransmission timeout (200 ms at least in Linux, tens of round
// trips here). Dropping all of them turned each spell past the threshold into such a burst
// (docs/protocol.md, "Sharing a link": TCP stalled for 0.2-0.6 s beside ATP a few times a
// minute); one in two still gives a sender that fills the queue a loss in every round trip.
inline constexpr std::uint32_t kUnmarkableDropEvery = 2;
class UnmarkableDrops {
 public:
  // The queue holds fewer packets than the threshold.
  void below_threshold() { past_threshold_ = 0; }
  // A packet that cannot carry a mark meets the queue past the threshold: whether to drop it.
  bool drop() { return past_threshold_++ % kUnmarkableDropEvery == 0; }

 private:
  std::uint32_t past_threshold_ = 0;  // unmarkable packets past the threshold since it was last below
};

struct EgressCounters {
  std::uint64_t packets = 0;  // packets sent (after queue drops, before loss)
  std::uint64_t bytes = 0;    // their bytes as enqueued (encapsulation not counted)
  std::uint64_t lost = 0;
  std::uint64_t queue_drops =
      0;  // refused by the drop-tail limit, or not ECN-capable past the threshold (UnmarkableDrops)
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t ecn_marked = 0;
  std::uint64_t depth = 0;  // packets in the queue (not yet fully sent) at the last enqueue or release
};

enum class EnqueueStatus : std::uint8_t {
  kQueued,     // will be released at `release` (and its duplicate at `duplicate_release`)
  kQueueFull,  // refused (drop-tail, or past the ECN threshold unmarkable): never sent, counted in queue_drops
  kLost,       // sent (it used the rate), then lost: counted in packets and lost
};

struct EnqueueResult {
  EnqueueStatus status = EnqueueStatus::kQueued;
  Time release = kNever;            // when the packet is released; kNever unless kQueued
  Time duplicate_release = kNever;  // when its duplicate is released; kNever: no duplicate
  bool accepted() const { return status != EnqueueStatus::kQueueFull; }
};

// The packets a transmitter has accepted and not yet fully sent: their finish times (ps) and, in
// all, their wire bytes, which the buffer limits count.
struct Sending {
  std::deque<std::pair<std::int64_t, std::uint32_t>> done_ps_bytes;
  std::uint64_t bytes = 0;
};

// The transmitter of one link that several queues feed, each on its own thread: a switch port
// served by several dataplane threads, each with its own queue for it (SwitchDaemon). The queues
// then share one rate, and their buffer and ECN threshold count the packets of all of them, as
// the port's one queue would. Created empty; EgressQueue::share_transmitter hands it to each.
class SharedTransmitter {
 private:
  friend class EgressQueue;
  std::mutex mutex_;
  std::int64_t busy_until_ps_ = 0;  // under mutex_
  Sending sending_;                 // under mutex_
};

// No I/O and no clock: the runtime passes `now` in, asks next_release() when to come back and
// hands released packets to the wire (or to the next node). One seed gives one trace: every
// fate is drawn at enqueue from the queue's own mt19937_64, in a fixed order.
class EgressQueue {
 public:
  // `framing` is fixed for the queue's life (a port's kind), unlike the settings in config().
  explicit EgressQueue(const EgressConfig& config = {}, std::uint64_t seed = 0, Framing framing = Framing::kAtp);

  // The seed of queue number `index` of a runtime seeded with `seed`: independent streams, so
  // that adding a queue or a fault elsewhere leaves every other queue's trace unchanged.
  static std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t index);

  // May be changed between calls; applies to packets enqueued afterwards.
  EgressConfig& config() { return config_; }
  const EgressConfig& config() const { return config_; }
  const EgressCounters& counters() const { return counters_; }
  Framing framing() const { return framing_; }

  // From now on the queue's rate, buffer and ECN threshold apply to `transmitter`, which other
  // queues (on other threads) may share: one link's. Each queue keeps its own packets, faults and
  // counters (whose depth is then the link's, as of the queue's last enqueue). Call it before
  // the first enqueue.
  void share_transmitter(std::shared_ptr<SharedTransmitter> transmitter) { shared_ = std::move(transmitter); }

  // Takes a copy of `packet` at `now` (never earlier than a previous call's `now`). The queue
  // marks its own copy for ECN; the caller's bytes are left as they were.
  EnqueueResult enqueue(std::span<const std::uint8_t> packet, Time now);

  // The buffer and ECN rule that enqueue applies, for a caller that holds packets in front of
  // the queue (a fair queue at a host's NIC) and counts `queued` packets itself. A refusal (kFull:
  // the buffer; kUnmarkable: past the ECN threshold, no mark possible, UnmarkableDrops' turn) is
  // counted in queue_drops; a kMark packet is to be marked with mark() before it is held (an
  // unmarkable one that is not dropped passes unmarked).
  enum class Admission : std::uint8_t { kAccept, kMark, kFull, kUnmarkable };
  // `queued`: packets, `queued_bytes`: their wire bytes (wire_bytes).
  Admission admit(std::size_t queued, std::uint64_t queued_bytes, std::span<const std::uint8_t> packet);
  // The rule itself, for any queue under `config` that holds `queued` packets of `queued_bytes`
  // wire bytes and is offered one of `packet_bytes`; `unmarkable`: the packet cannot carry a mark
  // (ecn_drops), and `drops` takes its turn. Counts nothing. admit's, and the ns-3 adapter's for the
  // devices whose packets it admits.
  static Admission admission(const EgressConfig& config, std::size_t queued, std::uint64_t queued_bytes,
                             std::size_t packet_bytes, bool unmarkable, UnmarkableDrops& drops);
  // The bytes a packet takes on the wire and in the buffer (see Framing).
  std::size_t wire_bytes(std::span<const std::uint8_t> packet) const;
  static bool refuses(Admission a) { return a == Admission::kFull || a == Admission::kUnmarkable; }
  // Sets the packet's ECN mark (see Framing) and counts it; false if it cannot carry one.
  bool mark(std::vector<std::uint8_t>& packet);

  // With the queue's own transmitter (no share_transmitter): whether it is still sending at
  // `now`, and the nanosecond in which it finishes what it has accepted, rounded down, so that a
  // packet enqueued then starts right after the last one, to the picosecond.
  bool busy_at(Time now) const;
  // The wire bytes of the packets it is still sending at `now` (its own transmitter's).
  std::uint64_t sending_bytes(Time now);
  Time transmitter_free_at() const { return time_from_ns(busy_until_ps_ / 1000); }

  // When the earliest held packet is due; kNever when none is held.
  Time next_release() const;
  // Packets (and duplicates) held until their release time, including ones already sent.
  std::size_t held() const { return heap_.size(); }

  // Whether a packet enqueued now would come out at once, unchanged and after nothing else: no
  // rate, delay or fault, and nothing held. The caller may then send the packet itself instead of
  // the queue's copy, and tells the queue with passed(), which counts it as sent.
  bool passes_through() const {
    const EgressConfig& c = config_;
    return c.rate_gbps <= 0 && c.delay == Duration::zero() && c.loss <= 0 && c.duplicate <= 0 && c.reorder <= 0 &&
           heap_.empty();
  }
  void passed(std::size_t bytes) {
    ++counters_.packets;
    counters_.bytes += bytes;
  }

  // If a packet is due at `now`, swaps its bytes into `packet` and returns true. Due packets come
  // out in order of release time, then enqueue order. `packet`'s old storage is reused for a
  // later enqueue, so passing the same vector every time allocates nothing.
  bool pop_due(Time now, std::vector<std::uint8_t>& packet);

  // Hands every packet due at `now` (at most `max_packets`) to deliver(std::span<std::uint8_t>).
  // The span is the queue's copy: deliver may modify it. deliver may enqueue here again.
  // Returns the number of packets handed over.
  template <class Deliver>
  std::size_t release(Time now, Deliver&& deliver, std::size_t max_packets = std::numeric_limits<std::size_t>::max()) {
    std::size_t n = 0;
    while (n < max_packets && pop_due(now, scratch_)) {
      std::vector<std::uint8_t> packet = std::move(scratch_);  // deliver may re-enter release()
      deliver(std::span<std::uint8_t>(packet));
      scratch_ = std::move(packet);
      ++n;
    }
    return n;
  }

 private:
  struct Held {
    std::int64_t release_ns;
    std::uint64_t order;  // enqueue order: equal release times keep FIFO order
    std::uint32_t slot;   // index into slots_
  };
  struct LaterFirst {
    bool operator()(const Held& a, const Held& b) const {
      return a.release_ns != b.release_ns ? a.release_ns > b.release_ns : a.order > b.order;
    }
  };

  // Whether a packet past the ECN threshold is dropped rather than marked (see Framing): one that
  // cannot carry a mark (ecn_drops_frame; with kAtp framing, what is no ATP packet).
  bool ecn_drops(std::span<const std::uint8_t> packet) const;
  std::uint32_t store(std::span<const std::uint8_t> bytes);
  void hold(Time release, std::uint32_t slot);
  // Drops the packets finished by `now_ps` from `sending` and sets the depth.
  void drain_sent(Sending& sending, std::int64_t now_ps);

  EgressConfig config_;
  Framing framing_;
  EgressCounters counters_;
  std::mt19937_64 rng_;
  std::int64_t busy_until_ps_ = 0;             // when the transmitter finishes the last accepted packet (ps)
  Sending sending_;                            // accepted packets not yet fully sent
  std::shared_ptr<SharedTransmitter> shared_;  // set: the two above are unused, the link's are
  std::priority_queue<Held, std::vector<Held>, LaterFirst> heap_;
  std::uint64_t next_order_ = 0;
  std::vector<std::vector<std::uint8_t>> slots_;  // packet bytes of held packets, pooled
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::uint8_t> scratch_;  // release()'s reusable buffer
  UnmarkableDrops unmarkable_;
};

}  // namespace atp
