// UdpBatchSink: the one place host processes turn the core's packets into UDP datagrams.
#include "atp/runtime/udp_sink.h"

#include "atp/wire.h"

namespace atp {

void UdpBatchSink::send(std::span<const std::uint8_t> packet) {
  UdpEndpoint to;
  if (uplink_) {
    to = *uplink_;
  } else {
    Header h;
    if (decode_header(packet, h) != DecodeError::kOk) return;  // the core only sends valid packets
    to = {h.dst, kUdpPort};
  }
  if (pending_ == pool_.size()) {
    pool_.emplace_back();
    to_.emplace_back();
  }
  pool_[pending_].assign(packet.begin(), packet.end());
  to_[pending_] = to;
  ++pending_;
}

std::pair<std::size_t, std::size_t> UdpBatchSink::flush() {
  if (pending_ == 0) return {0, 0};
  outgoing_.clear();
  for (std::size_t i = 0; i < pending_; ++i) outgoing_.push_back({to_[i], pool_[i]});
  const std::size_t sent = socket_.send_batch(outgoing_);
  pending_ = 0;
  return {sent, outgoing_.size() - sent};
}

}  // namespace atp
