// One port's egress behaviour for every runtime: serialization at a rate, drop-tail, ECN marking
// and seeded faults, all decided at enqueue so that one seed gives one trace.
#include "atp/io/egress_queue.h"

#include <algorithm>
#include <cmath>

#include "atp/io/ethernet.h"
#include "atp/wire.h"

namespace atp {
namespace {

// A duplicate arrives this long after its original (a link-layer retransmission would be about
// one frame time later; the exact gap only has to be small and deterministic).
constexpr Duration kDuplicateGap = std::chrono::nanoseconds(100);
// Reordered packets are held back at least this long, so reordering happens on zero-delay links too.
constexpr Duration kMinReorderDelay = std::chrono::microseconds(1);

// splitmix64 (Steele et al.): turns (seed, index) into well-spread, independent RNG seeds.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from the top 53 bits: the same on every platform and standard library,
// unlike std::uniform_real_distribution.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Time in picoseconds, so that serialization times (e.g. 26.08 ns for 326 B at 100 Gbit/s) add up
// without rounding drift. (int64 ps covers about 106 days of time since the runtime's epoch.)
std::int64_t to_ps(Time t) { return to_ns(t) * 1000; }
// The first nanosecond at or after `ps`: a packet never leaves before its last bit was sent.
Time ceil_ns(std::int64_t ps) { return time_from_ns(ps / 1000 + (ps % 1000 != 0 ? 1 : 0)); }

}  // namespace

bool EgressQueue::ecn_drops(std::span<const std::uint8_t> packet) const {
  if (framing_ == Framing::kEthernet) return ecn_drops_frame(packet);
  Header h;
  return decode_header(packet, h) != DecodeError::kOk;
}

std::uint32_t switch_port_ecn_threshold(double rate_gbps) {
  if (rate_gbps <= 1) return kSwitchPortEcnThresholdPackets;
  return static_cast<std::uint32_t>(std::lround(kSwitchPortEcnThresholdPackets * std::sqrt(rate_gbps)));
}

EgressQueue::EgressQueue(const EgressConfig& config, std::uint64_t seed, Framing framing)
    : config_(config), framing_(framing), rng_(seed) {}

std::uint64_t EgressQueue::stream_seed(std::uint64_t seed, std::uint64_t index) {
  return splitmix64(seed ^ splitmix64(index));
}

void EgressQueue::drain_sent(Sending& sending, std::int64_t now_ps) {
  while (!sending.done_ps_bytes.empty() && sending.done_ps_bytes.front().first <= now_ps) {
    sending.bytes -= sending.done_ps_bytes.front().second;
    sending.done_ps_bytes.pop_front();
  }
  counters_.depth = sending.done_ps_bytes.size();
}

std::size_t EgressQueue::wire_bytes(std::span<const std::uint8_t> packet) const {
  return packet.size() + (framing_ == Framing::kAtp ? kEncapsulationBytes : 0);
}

std::uint32_t EgressQueue::store(std::span<const std::uint8_t> bytes) {
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  slots_[slot].assign(bytes.begin(), bytes.end());  // reuses the pooled vector's capacity
  return slot;
}

void EgressQueue::hold(Time release, std::uint32_t slot) { heap_.push(Held{to_ns(release), next_order_++, slot}); }

EgressQueue::Admission EgressQueue::admit(std::size_t queued, std::uint64_t queued_bytes,
                                          std::span<const std::uint8_t> packet) {
  const Admission a = admission(
      config_, queued, queued_bytes, wire_bytes(packet),
      config_.ecn_threshold_packets != 0 && queued >= config_.ecn_threshold_packets && ecn_drops(packet), unmarkable_);
  if (refuses(a)) ++counters_.queue_drops;
  return a;
}

EgressQueue::Admission EgressQueue::admission(const EgressConfig& config, std::size_t queued,
                                              std::uint64_t queued_bytes, std::size_t packet_bytes, bool unmarkable,
                                              UnmarkableDrops& drops) {
  if ((config.buffer_packets != 0 && queued >= config.buffer_packets) ||
      (config.buffer_bytes != 0 && queued_bytes + packet_bytes > config.buffer_bytes)) {
    return Admission::kFull;
  }
  // A third of the buffer in bytes: a threshold in packets must not lie past a buffer of large
  // frames (drops, not marks, would then tell TCP and ATP of the queue), and the senders keep
  // sending for a round trip after the first mark: on Rina's fat-tree (Fig. 10, every switch
  // aggregating, 9 KB frames, 100 Gbit/s, K = 200) marks from half the buffer still let one burst
  // overflow it (1 drop, an RTO: 28.9 Gbit/s), from a third none (46.8; a quarter 44.9).
  const bool past_bytes = config.buffer_bytes != 0 && queued_bytes >= config.buffer_bytes / kEcnBufferShare;
  if (config.ecn_threshold_packets == 0 || (queued < config.ecn_threshold_packets && !past_bytes)) {
    drops.below_threshold();
    return Admission::kAccept;
  }
  // Past the threshold, what cannot carry a mark is dropped instead (RFC 3168 §7; some of it:
  // UnmarkableDrops), so that a sender deaf to ECN meets the same queue depth as one that listens,
  // not the whole buffer.
  if (!unmarkable) return Admission::kMark;
  return drops.drop() ? Admission::kUnmarkable : Admission::kAccept;
}

bool EgressQueue::mark(std::vector<std::uint8_t>& packet) {
  if (!(framing_ == Framing::kAtp ? mark_ecn(packet) : mark_ecn_frame(packet))) return false;
  ++counters_.ecn_marked;
  return true;
}

bool EgressQueue::busy_at(Time now) const { return busy_until_ps_ > to_ps(now); }

std::uint64_t EgressQueue::sending_bytes(Time now) {
  drain_sent(sending_, to_ps(now));
  return sending_.bytes;
}

EnqueueResult EgressQueue::enqueue(std::span<const std::uint8_t> packet, Time now) {
  const EgressConfig& cfg = config_;
  EnqueueResult result;
  Time sent = now;  // when the last bit leaves
  bool mark = false;
  if (cfg.rate_gbps > 0) {
    // The link's transmitter: this queue's own, or one shared with other threads' queues.
    std::unique_lock<std::mutex> lock;
    std::int64_t* busy_until_ps = &busy_until_ps_;
    Sending* sending = &sending_;
    if (shared_) {
      lock = std::unique_lock(shared_->mutex_);
      busy_until_ps = &shared_->busy_until_ps_;
      sending = &shared_->sending_;
    }
    const std::int64_t now_ps = to_ps(now);
    drain_sent(*sending, now_ps);
    const Admission admission = admit(sending->done_ps_bytes.size(), sending->bytes, packet);
    if (refuses(admission)) {
      result.status = EnqueueStatus::kQueueFull;
      return result;
    }
    mark = admission == Admission::kMark;
    // bits / (Gbit/s) = ns; x1000 for ps.
    const std::size_t wire = wire_bytes(packet);
    const double bits = 8.0 * static_cast<double>(wire);
    const auto serialization_ps = static_cast<std::int64_t>(std::llround(bits * 1000.0 / cfg.rate_gbps));
    // Another thread's queue may have a later `now` in already: the link is busy until then.
    *busy_until_ps = std::max(*busy_until_ps, now_ps) + serialization_ps;
    sending->done_ps_bytes.emplace_back(*busy_until_ps, static_cast<std::uint32_t>(wire));
    sending->bytes += wire;
    counters_.depth = sending->done_ps_bytes.size();
    sent = ceil_ns(*busy_until_ps);
  }
  ++counters_.packets;
  counters_.bytes += packet.size();

  // Draw only for faults that are switched on, so a fault-free queue costs no RNG work. The order
  // of the draws (loss, duplicate, reorder, reorder factor) is part of the trace: keep it.
  if (cfg.loss > 0 && uniform01(rng_) < cfg.loss) {
    ++counters_.lost;
    result.status = EnqueueStatus::kLost;
    return result;
  }
  const bool duplicate = cfg.duplicate > 0 && uniform01(rng_) < cfg.duplicate;
  Duration extra{0};
  if (cfg.reorder > 0 && uniform01(rng_) < cfg.reorder) {
    const double factor = 1.0 + 2.0 * uniform01(rng_);  // 1-3 delays
    extra = std::max(kMinReorderDelay,
                     Duration(static_cast<std::int64_t>(factor * static_cast<double>(cfg.delay.count()))));
    ++counters_.reordered;
  }

  result.release = sent + cfg.delay + extra;
  const std::uint32_t slot = store(packet);
  // The queue marks its own copy; the sender's bytes (e.g. one copy of a multicast) stay as they were.
  if (mark) this->mark(slots_[slot]);
  hold(result.release, slot);
  if (duplicate) {
    ++counters_.duplicated;
    result.duplicate_release = result.release + kDuplicateGap;
    // A moved vector keeps its buffer, so the span stays valid even if store() grows slots_.
    const std::uint32_t twin = store(slots_[slot]);
    hold(result.duplicate_release, twin);
  }
  return result;
}

Time EgressQueue::next_release() const { return heap_.empty() ? kNever : time_from_ns(heap_.top().release_ns); }

bool EgressQueue::pop_due(Time now, std::vector<std::uint8_t>& packet) {
  if (!sending_.done_ps_bytes.empty()) drain_sent(sending_, to_ps(now));
  if (heap_.empty() || heap_.top().release_ns > to_ns(now)) return false;
  const std::uint32_t slot = heap_.top().slot;
  heap_.pop();
  packet.swap(slots_[slot]);  // the caller's old storage stays in the pool
  free_slots_.push_back(slot);
  return true;
}

}  // namespace atp
