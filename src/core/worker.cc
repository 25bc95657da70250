// The ATP worker endpoint: fragments and quantizes a tensor, starts each round and sends one
// sliding-window flow per PS shard; results are worker_results.cc's, loss recovery worker_recovery.cc's.
#include "atp/worker.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "atp/fixed_point.h"
#include "atp/values_per_packet.h"
#include "worker_impl.h"

namespace atp {

WorkerEndpoint::Impl::Impl(WorkerConfig c) : config(std::move(c)) {
  if (const std::optional<std::string> bad = worker_config_error(config)) throw std::invalid_argument(*bad);
  const auto packet_bytes = static_cast<std::uint32_t>(packet_size(config.values_per_packet));
  flows.reserve(config.ps.size());
  for (std::size_t k = 0; k < config.ps.size(); ++k) {
    flows.push_back(
        Flow{AimdWindow(config.congestion, packet_bytes),
             RttEstimator(config.retransmit_timeout, config.min_retransmit_timeout, max_retransmit_timeout(config))});
  }
  packet.resize(packet_bytes);
  round_base = config.initial_seq;
}

// Builds fragment i in the reusable buffer and sends it.
void WorkerEndpoint::Impl::send_fragment(std::uint32_t i, bool resend, PacketSink& out) {
  Fragment& frag = fragments[i];
  const Seq seq = seq_of_fragment(i);
  const std::size_t first = std::size_t{i} * config.values_per_packet;
  const std::span<const float> in =
      input.subspan(first, std::min<std::size_t>(config.values_per_packet, input.size() - first));
  if (!resend) {
    frag.aggregator_index = aggregator_index_for(seq);
    frag.exponent = i < next_exponents->size() ? (*next_exponents)[i] : first_exponent;
    frag.magnitude = magnitude_of(in);
  }
  if (resend) frag.flags |= kResent;
  frag.sent = clock;
  if (!resend) frag.first_sent = clock;
  const PsRoute& route = config.ps[flow_of(i)];
  Header h;
  h.resend = resend;
  h.float_payload = (frag.flags & kFloatMode) != 0;
  h.allocate = config.index_policy == IndexPolicy::kAllocated;
  h.job = config.job;
  h.value_count = config.values_per_packet;
  h.seq = seq;
  h.node = route.node;
  h.bitmap = 1;
  h.fan_in = 1;
  h.round_shape = i + 1 == round_fragments ? last_fragment_values() : 0;  // same on every (re)send
  h.aggregator_index = frag.aggregator_index;
  h.src = config.self;
  h.dst = route.ps;
  h.scale_exponent = h.float_payload ? 0 : frag.exponent;
  h.magnitude_or_next = frag.magnitude;
  encode_header(h, packet);
  if (h.float_payload) {
    store_floats(packet, in);
  } else {
    store_quantized(packet, in, std::ldexp(1.0, frag.exponent));
  }
  // The round's last fragment is zero-padded to the packet's width.
  std::fill(packet.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + 4 * in.size()), packet.end(), 0);
  out.send(packet);
  ++stats.gradient_packets_sent;
  if (resend) ++stats.retransmissions;
}

// Sends new fragments of flow k while the window has room.
void WorkerEndpoint::Impl::send_new(std::uint32_t k, Time now, PacketSink& out) {
  Flow& f = flows[k];
  const std::uint32_t window = f.cc.window();
  while (f.next_to_send < f.fragment_count && f.next_to_send - f.expected < window) {
    send_fragment(fragment_of(k, f.next_to_send), /*resend=*/false, out);
    ++f.next_to_send;
  }
  if (f.rto_deadline == kNever && f.expected < f.next_to_send) f.rto_deadline = deadline_after(now, f.rto);
}

bool WorkerEndpoint::Impl::start(std::span<const float> in, std::span<float> sums, Time now, PacketSink& out) {
  if (state != WorkerState::kIdle || sums.size() != in.size()) return false;
  clock = now;
  const std::uint64_t count = fragment_count(in.size(), config.values_per_packet);
  if (count > kMaxRoundFragments) return false;
  // Sequence numbers continue from the previous round.
  round_base += round_fragments;
  seqs_before_round += round_fragments;
  round_fragments = static_cast<std::uint32_t>(count);
  fragments_received = 0;
  input = in;
  result = sums;
  use_exponent_history(in.size());
  fragments.assign(count, Fragment{});
  float_fragments.clear();
  result_exponents.assign(count, 0);
  if (count == 0) {
    ++stats.rounds_completed;
    return true;
  }
  state = WorkerState::kRunning;
  for (std::uint32_t k = 0; k < num_flows(); ++k) {
    Flow& f = flows[k];
    const std::uint32_t first = first_fragment(k);
    f.fragment_count = round_fragments > first ? (round_fragments - first + num_flows() - 1) / num_flows() : 0;
    f.expected = 0;
    f.next_to_send = 0;
    f.received_end = 0;
    f.loss_scan = 0;
    f.newest = {};
    f.rack_sent = kNever;
    f.loss_deadline = kNever;
    if (!f.needless_resend && f.reordering > 0) --f.reordering;
    f.needless_resend = false;
    f.resent_holes.clear();
    f.hole_deadline = kNever;
    f.tail_deadline = kNever;
    f.recover = 0;
    f.rescue_next = 0;
    f.rescue_end = 0;
    f.rto = f.rtt.rto();
    f.rto_deadline = kNever;
    f.samples_from = kNever;
    f.progress_deadline = f.fragment_count > 0 ? deadline_after(now, config.progress_timeout) : kNever;
    send_new(k, now, out);
  }
  return true;
}

// Points next_exponents at the history of rounds of `values` values. A size without one starts
// from the last round's exponents (DDP rebuilds its buckets after the first step: the new ones'
// magnitudes are nearer the last round's than the job's scale), in the slot of the least
// recently used size once there are kExponentHistories.
void WorkerEndpoint::Impl::use_exponent_history(std::size_t values) {
  ++rounds_started;
  auto it = std::find_if(exponent_histories.begin(), exponent_histories.end(),
                         [&](const ExponentHistory& h) { return h.values == values; });
  if (it == exponent_histories.end()) {
    std::vector<std::int16_t> last = next_exponents != nullptr ? *next_exponents : std::vector<std::int16_t>();
    if (exponent_histories.size() < kExponentHistories) {
      it = exponent_histories.emplace(exponent_histories.end());
    } else {
      it = std::min_element(
          exponent_histories.begin(), exponent_histories.end(),
          [](const ExponentHistory& a, const ExponentHistory& b) { return a.last_used < b.last_used; });
    }
    *it = ExponentHistory{values, 0, std::move(last)};
  }
  it->last_used = rounds_started;
  next_exponents = &it->next;
}

void WorkerEndpoint::Impl::fail(std::string why) {
  state = WorkerState::kFailed;
  error = std::move(why);
  for (Flow& f : flows) {
    f.rto_deadline = kNever;
    f.progress_deadline = kNever;
  }
}

Time WorkerEndpoint::Impl::next_deadline() const {
  if (state != WorkerState::kRunning) return kNever;
  Time t = kNever;
  for (const Flow& f : flows)
    t = std::min({t, f.rto_deadline, f.progress_deadline, f.hole_deadline, f.loss_deadline, f.tail_deadline});
  return t;
}

WorkerEndpoint::WorkerEndpoint(WorkerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
WorkerEndpoint::~WorkerEndpoint() = default;
WorkerEndpoint::WorkerEndpoint(WorkerEndpoint&&) noexcept = default;
WorkerEndpoint& WorkerEndpoint::operator=(WorkerEndpoint&&) noexcept = default;

bool WorkerEndpoint::start(std::span<const float> input, Time now, PacketSink& out) {
  if (impl_->state != WorkerState::kIdle) return false;
  impl_->owned_input.assign(input.begin(), input.end());
  impl_->owned_result.resize(input.size());
  return impl_->start(impl_->owned_input, impl_->owned_result, now, out);
}
bool WorkerEndpoint::start_in_place(std::span<float> values, Time now, PacketSink& out) {
  return impl_->start(values, values, now, out);
}
void WorkerEndpoint::on_packet(std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(packet, now, out);
}
void WorkerEndpoint::on_packet(const Header& header, std::span<const std::uint8_t> packet, Time now, PacketSink& out) {
  impl_->on_packet(header, packet, now, out);
}
void WorkerEndpoint::on_timeout(Time now, PacketSink& out) { impl_->on_timeout(now, out); }
void WorkerEndpoint::on_host_queue_full(Time now) { impl_->on_host_queue_full(now); }
Time WorkerEndpoint::next_deadline() const { return impl_->next_deadline(); }
WorkerState WorkerEndpoint::state() const { return impl_->state; }
const std::string& WorkerEndpoint::error() const { return impl_->error; }
std::span<const float> WorkerEndpoint::result() const { return impl_->result; }
const std::vector<std::uint32_t>& WorkerEndpoint::float_fragments() const { return impl_->float_fragments; }
const std::vector<std::int16_t>& WorkerEndpoint::result_exponents() const { return impl_->result_exponents; }
const WorkerStats& WorkerEndpoint::stats() const { return impl_->stats; }
Seq WorkerEndpoint::resume_seq() const { return impl_->round_base + 2 * impl_->round_fragments; }  // same-size rounds
std::uint32_t WorkerEndpoint::window(std::size_t ps_index) const {
  return ps_index < impl_->flows.size() ? impl_->flows[ps_index].cc.window() : 0;
}
const WorkerConfig& WorkerEndpoint::config() const { return impl_->config; }

}  // namespace atp
