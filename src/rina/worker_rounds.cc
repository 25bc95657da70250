// RinaWorker's rounds (worker_impl.h): a round's start, its passes (the first, and a redo of the
// fragments whose exponent did not fit), the finals that end them, and the results.
#include <algorithm>
#include <cmath>

#include "worker_impl.h"

namespace atp {
namespace {

constexpr std::uint64_t kMaxRoundFragments = std::uint64_t{1} << 30;

}  // namespace

// `in` is read until the round ends and then holds the sums: no pass over the tensor here, so
// that `now` is still when the round starts (a copy of a 228 MB tensor on a busy host took
// longer than the progress timeout before the first packet left).
bool RinaWorker::Impl::start(std::span<float> in, Time now, PacketSink& out) {
  if (state != WorkerState::kIdle) return false;
  const std::uint64_t count = fragment_count(in.size(), v);
  if (count > kMaxRoundFragments) return false;
  clock = now;
  max_rtt_before = max_rtt_now;
  max_rtt_now = Duration::zero();
  if (!needless_resend) reordering = std::max(reordering - 1, 1u);
  needless_resend = false;
  tensor = in;
  fragments = static_cast<std::uint32_t>(count);
  last_count = fragments == 0 ? 0 : static_cast<std::uint16_t>(in.size() - std::size_t{fragments - 1} * v);
  if (exponent_by_position.size() < fragments) {
    exponent_by_position.resize(fragments, initial_exponent(config.scale));
  }
  exponent.assign(exponent_by_position.begin(), exponent_by_position.begin() + fragments);
  result_exponent.assign(fragments, 0);
  chunk_of.resize(fragments);
  for (std::uint32_t c = 0; c < ring; ++c) {
    const auto begin = static_cast<std::uint32_t>(std::uint64_t{fragments} * c / ring);
    const auto end = static_cast<std::uint32_t>(std::uint64_t{fragments} * (c + 1) / ring);
    for (std::uint32_t f = begin; f < end; ++f) chunk_of[f] = c;
  }
  state = WorkerState::kRunning;
  std::vector<std::uint32_t> all(fragments);
  for (std::uint32_t f = 0; f < fragments; ++f) all[f] = f;
  start_pass(0, all, now, out);
  return true;
}

void RinaWorker::Impl::start_pass(std::uint32_t p, const std::vector<std::uint32_t>& set, Time now, PacketSink& out) {
  pass = p;
  pass_base = round_base + p * fragments;
  missing = static_cast<std::uint32_t>(set.size());
  request_batches = 0;
  unanswered.clear();
  ask_now = others_came = false;
  in_pass.assign(fragments, false);
  contributed.assign(fragments, false);
  merges.clear();
  ready_plain.clear();
  ready_carrier.clear();
  ready_gather.clear();
  progress(now);
  if (missing == 0) return end_pass(now, out);
  for (const std::uint32_t f : set) {
    in_pass[f] = true;
    if (ring == 1 && !abstracted(member)) continue;  // a job of one worker: nothing to send
    // A first hop needs nothing; a later one waits for the last hop's sum: its carrier sends
    // when that is in, the rest of its rack when the carrier pulls them.
    if (hop(f) == 0) ready_plain.insert(order(f));
  }
  if (ring == 1 && !abstracted(member)) {  // its own values are the sum
    for (const std::uint32_t f : set) {
      std::vector<std::int32_t> values(v, 0);
      const std::span<const float> mine = values_of(f);
      quantize(mine, std::ldexp(1.0, exponent[f]), values);
      record_final(f, std::move(values), exponent[f], magnitude_of(mine), now, out);
      if (state != WorkerState::kRunning || pass != p) return;
    }
    return;
  }
  replay_early(now, out);
  pump(now, out);
}

// Every final of the pass is in: redo the fragments whose exponent did not fit (every worker
// sees the same finals, so all agree on which), or finish the round.
void RinaWorker::Impl::end_pass(Time now, PacketSink& out) {
  // The finals this worker still owes the next member go now, whatever the window: its last one
  // came with the pass's end, and a worker that is done sends nothing more unasked (measured:
  // the next member waited two RTOs and asked, a 2 ms stall at the end of a 0.75 ms round).
  while (!ready_gather.empty()) {
    send_gather(ready_gather.front(), now, out);
    ready_gather.pop_front();
  }
  // Every final of the pass is in, so each contribution this worker sent to it before the last
  // hop was summed: one whose ack was lost needs no resend (its RTO would come in the next round,
  // halve the window and hold a place in it until then). A last hop's carries the final to the
  // member that started the fragment, which may still wait for it.
  for (auto it = sr_out.begin(); it != sr_out.end();) {
    const std::int64_t f = static_cast<std::int32_t>(it->first - pass_base);
    const bool summed = f >= 0 && f < fragments && hop(static_cast<std::uint32_t>(f)) + 1 < ring;
    it = summed ? forget(Flow::kReduceScatter, it) : std::next(it);
  }
  std::vector<std::uint32_t> redo;
  for (std::uint32_t f = 0; f < fragments; ++f) {
    if (!in_pass[f]) continue;
    const Final& fin = finals.at(seq_of(f));
    const std::int16_t better = next_exponent(fin.magnitude, n, fin.exponent);
    if (any_saturated(fin.values)) {
      if (better >= fin.exponent) {
        return fail("job " + std::to_string(config.job) + ": fragment " + std::to_string(f) +
                    " holds an Inf or NaN, which Rina does not carry (ATP's float32 path does); "
                    "use algorithm atp for such tensors");
      }
    } else if (resolved(fin.magnitude, fin.exponent, n)) {
      continue;
    }
    redo.push_back(f);
    exponent[f] = better;
  }
  if (!redo.empty()) {
    if (pass + 1 >= kPasses) {
      return fail("job " + std::to_string(config.job) + ": fragment " + std::to_string(redo.front()) +
                  " still does not fit its exponent after a redo");
    }
    stats.redone_fragments += redo.size();
    return start_pass(pass + 1, redo, now, out);
  }
  // Done: the results, and each position's exponent for the next round.
  for (std::uint32_t f = 0; f < fragments; ++f) {
    const Final& fin = finals.at(latest_seq(f));
    const double scale = std::ldexp(1.0, fin.exponent);
    const std::size_t first = std::size_t{f} * v;
    const std::size_t count = std::min<std::size_t>(v, tensor.size() - first);
    for (std::size_t i = 0; i < count; ++i) tensor[first + i] = dequantize_one(fin.values[i], scale);
    result_exponent[f] = fin.exponent;
    exponent_by_position[f] = next_exponent(fin.magnitude, n, fin.exponent);
  }
  // Finals and acks of this round stay to answer late asks and resends; the round before goes.
  const Seq next_base = round_base + kPasses * fragments;
  std::erase_if(finals, [&](const auto& e) { return seq_before(e.first, previous_round_base); });
  std::erase_if(acks_sent, [&](const auto& e) { return seq_before(e.first, previous_round_base); });
  previous_round_base = round_base;
  round_base = next_base;
  pass_base = next_base;
  merges.clear();
  ++stats.rounds_completed;
  state = WorkerState::kIdle;
}

// The seq of f's final in the last pass that had it.
Seq RinaWorker::Impl::latest_seq(std::uint32_t f) const {
  for (std::uint32_t p = pass + 1; p-- > 0;) {
    const Seq s = round_base + p * fragments + f;
    if (finals.contains(s)) return s;
  }
  return round_base + f;
}

void RinaWorker::Impl::record_final(std::uint32_t f, std::vector<std::int32_t> values, std::int16_t e,
                                    std::int16_t magnitude, Time now, PacketSink& out) {
  const Seq s = seq_of(f);
  if (finals.contains(s)) {
    ++stats.duplicates;
    return;
  }
  stats.final_values += values.size();
  finals.emplace(s, Final{std::move(values), e, magnitude, fragments, shape(f)});
  progress(now);
  if (unanswered.erase(f) == 0) {
    others_came = true;
  } else if (unanswered.empty()) {
    ask_now = !others_came;
  }
  if (forwards(f)) ready_gather.push_back(f);
  if (--missing == 0) return end_pass(now, out);
  pump(now, out);
}

}  // namespace atp
