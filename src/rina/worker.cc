// Rina's worker endpoint (include/atp/rina/worker.h), following docs/rina.md: the public class
// over its state machine, and that machine's set-up from a checked config (the rest: worker_impl.h).
#include "atp/rina/worker.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "worker_impl.h"

namespace atp {
namespace {

void throw_if_bad(const RinaConfig& c) {
  if (const std::optional<std::string> bad = rina_config_error(c)) throw std::invalid_argument(*bad);
}

}  // namespace

RinaWorker::Impl::Impl(RinaConfig c)
    : config((throw_if_bad(c), std::move(c))),
      ring(config.members.size()),
      n(static_cast<std::uint32_t>(config.workers.size())),
      v(config.values_per_packet),
      rtt(config.retransmit_timeout, config.min_retransmit_timeout, max_rto(), 0),
      sr(config.congestion, static_cast<std::uint32_t>(packet_size(v))),
      ag(allgather_congestion(config.congestion), static_cast<std::uint32_t>(packet_size(v))) {
  for (std::uint32_t m = 0; m < ring; ++m) {
    for (std::uint32_t p = 0; p < config.members[m].size(); ++p) {
      if (config.members[m][p] == config.rank) {
        member = m;
        position = p;
      }
    }
  }
  self = config.workers[config.rank];
  round_base = config.initial_seq;
  clocks.resize(std::size_t{kKinds} * member_size(next_member()));
  loss_due.assign(clocks.size(), kNever);
  tails.resize(clocks.size());
}

RinaWorker::RinaWorker(RinaConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
RinaWorker::~RinaWorker() = default;
RinaWorker::RinaWorker(RinaWorker&&) noexcept = default;
RinaWorker& RinaWorker::operator=(RinaWorker&&) noexcept = default;

bool RinaWorker::start(std::span<const float> input, Time now, PacketSink& out) {
  if (impl_->state != WorkerState::kIdle) return false;
  impl_->owned.assign(input.begin(), input.end());
  return impl_->start(impl_->owned, now, out);
}
bool RinaWorker::start_in_place(std::span<float> values, Time now, PacketSink& out) {
  return impl_->start(values, now, out);
}
void RinaWorker::on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(packet, now, out);
}
void RinaWorker::on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(header, packet, now, out);
}
void RinaWorker::on_timeout(Time now, PacketSink& out) { impl_->on_timeout(now, out); }
Time RinaWorker::next_deadline() const { return impl_->next_deadline(); }
WorkerState RinaWorker::state() const { return impl_->state; }
const std::string& RinaWorker::error() const { return impl_->error; }
std::span<const float> RinaWorker::result() const { return impl_->tensor; }
const std::vector<std::int16_t>& RinaWorker::result_exponents() const { return impl_->result_exponent; }
std::vector<std::int16_t> RinaWorker::next_exponents(std::uint32_t fragments) const {
  std::vector<std::int16_t> e(fragments, initial_exponent(impl_->config.scale));
  std::copy_n(impl_->exponent_by_position.begin(), std::min<std::size_t>(fragments, impl_->exponent_by_position.size()),
              e.begin());
  return e;
}
Seq RinaWorker::resume_seq() const { return impl_->round_base + 2 * Impl::kPasses * impl_->fragments; }
void RinaWorker::on_host_queue_full(Time now) { impl_->on_host_queue_full(now); }
const RinaStats& RinaWorker::stats() const { return impl_->stats; }
const RinaConfig& RinaWorker::config() const { return impl_->config; }
std::uint32_t RinaWorker::window() const { return impl_->sr.window(); }

}  // namespace atp
