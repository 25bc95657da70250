// UdpBatchSink: the one place host processes turn the core's packets into UDP datagrams.
#include "atp/io/udp_sink.h"

#include <utility>

#include "atp/wire.h"

namespace atp {

void UdpBatchSink::send(std::span<const std::uint8_t> packet) {
  SocketAddress to;
  if (uplink_) {
    to = *uplink_;
  } else {
    Header h;
    if (decode_header(packet, h) != DecodeError::kOk) return;  // the core only sends valid packets
    to = {h.dst, kUdpPort};
  }
  if (pending_ == kMaxBacklog) {
    ++dropped_;
    return;
  }
  if (pending_ == pool_.size()) {
    pool_.emplace_back();
    to_.emplace_back();
  }
  pool_[pending_].assign(packet.begin(), packet.end());
  to_[pending_] = to;
  ++pending_;
}

std::pair<std::size_t, std::size_t> UdpBatchSink::send_pending() {
  std::size_t refused = std::exchange(dropped_, 0);
  if (pending_ == 0) return {0, refused};
  outgoing_.clear();
  for (std::size_t i = 0; i < pending_; ++i) outgoing_.push_back({to_[i], pool_[i]});
  // send_batch stops at the first "would block"; every datagram before it was sent or skipped
  // for an error of its own.
  const std::uint64_t errors_before = socket_.counters().send_errors;
  const std::size_t accepted = socket_.send_batch(outgoing_);
  const auto errors = static_cast<std::size_t>(socket_.counters().send_errors - errors_before);
  refused += errors;
  // Keep what the full socket refused, in order, at the front (swapping buffers, no copies).
  const std::size_t done = accepted + errors;
  for (std::size_t i = done; i < pending_; ++i) {
    std::swap(pool_[i - done], pool_[i]);
    to_[i - done] = to_[i];
  }
  pending_ -= done;
  return {accepted, refused};
}

void UdpBatchSink::flush(EventLoop& loop, std::function<void(std::size_t, std::size_t)> on_flushed) {
  const std::uint64_t queue_full_before = socket_.counters().send_queue_full;
  const auto [sent, refused] = send_pending();
  if (on_flushed) on_flushed(sent, refused);
  if (pending_ == 0 || waiting_) return;
  waiting_ = true;
  auto again = [this, &loop, on_flushed = std::move(on_flushed)]() mutable {
    waiting_ = false;
    flush(loop, std::move(on_flushed));
  };
  if (socket_.counters().send_queue_full != queue_full_before) {
    // The device's queue is full, not the socket's buffer: the socket stays writable, so
    // EPOLLOUT would fire at once and spin. Retry after a while (every flush() retries too, and
    // results for the packets in that queue call it as the queue drains).
    loop.once_at(EventLoop::now() + kQueueFullRetry, std::move(again));
  } else {
    loop.once_writable(socket_.fd(), std::move(again));
  }
}

}  // namespace atp
