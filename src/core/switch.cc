// The ATP switch dataplane: per-packet admission, aggregation (Fig. 7), loss handling (Fig. 17),
// deallocation by parameter packets and timeout reclaim (§3.7). Follows docs/protocol.md "Switch".
#include "atp/switch.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <stdexcept>
#include <string>

namespace atp {

// ---------------------------------------------------------------------------------------------
// FragmentMap

FragmentMap::FragmentMap(std::uint32_t capacity)
    : entries_(capacity == 0 ? 0 : std::bit_ceil(std::size_t{capacity} * 2)) {}

std::size_t FragmentMap::home_of(std::uint64_t key) const {
  // Fibonacci hashing: consecutive seqs spread over the whole map.
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & (entries_.size() - 1);
}

std::uint32_t FragmentMap::find(JobId job, Seq seq) const {
  if (entries_.empty()) return kNone;
  const std::uint64_t key = key_of(job, seq);
  for (std::size_t b = home_of(key);; b = (b + 1) & (entries_.size() - 1)) {
    if (entries_[b].key == key) return entries_[b].value;
    if (entries_[b].key == 0) return kNone;
  }
}

void FragmentMap::insert(JobId job, Seq seq, std::uint32_t value) {
  const std::uint64_t key = key_of(job, seq);
  std::size_t b = home_of(key);
  while (entries_[b].key != 0) b = (b + 1) & (entries_.size() - 1);
  entries_[b] = {key, value};
}

void FragmentMap::erase(JobId job, Seq seq) {
  if (entries_.empty()) return;
  const std::size_t mask = entries_.size() - 1;
  const std::uint64_t key = key_of(job, seq);
  std::size_t hole = home_of(key);
  for (; entries_[hole].key != key; hole = (hole + 1) & mask) {
    if (entries_[hole].key == 0) return;
  }
  // Moves back each later entry of the run that may sit in the hole (its home is not between the
  // hole and it), so that every entry stays reachable from its home without a gap.
  for (std::size_t b = (hole + 1) & mask; entries_[b].key != 0; b = (b + 1) & mask) {
    if (((b - home_of(entries_[b].key)) & mask) >= ((b - hole) & mask)) {
      entries_[hole] = entries_[b];
      hole = b;
    }
  }
  entries_[hole] = Entry{};
}

// ---------------------------------------------------------------------------------------------
// AggregatorTable

AggregatorTable::AggregatorTable(std::uint32_t size, std::uint16_t width)
    : width_(width), slots_(size), values_(std::size_t(size) * width), links_(size), index_(size) {
  for (std::uint32_t i = 0; i < size; ++i) append_newest(free_, i);
  if (size != 0) held_by_job_.assign(std::size_t{1} << (8 * sizeof(JobId)), 0);
}

std::uint32_t AggregatorTable::find(JobId job, Seq seq) const { return index_.find(job, seq); }

void AggregatorTable::unlink(List& list, std::uint32_t i) {
  Link& link = links_[i];
  (link.older != kNone ? links_[link.older].newer : list.oldest) = link.newer;
  (link.newer != kNone ? links_[link.newer].older : list.newest) = link.older;
  link = Link{};
}

void AggregatorTable::append_newest(List& list, std::uint32_t i) {
  links_[i] = Link{list.newest, kNone};
  (list.newest != kNone ? links_[list.newest].newer : list.oldest) = i;
  list.newest = i;
}

void AggregatorTable::release(std::uint32_t i) {
  Aggregator& a = slots_[i];
  if (!a.in_use) return;
  if (a.allocated) index_.erase(a.job, a.seq);
  if (--held_by_job_[a.job] == 0) --holding_jobs_;
  unlink(held_, i);
  a = Aggregator{};
  --in_use_;
  append_newest(free_, i);
}

void AggregatorTable::claim(std::uint32_t i, JobId job, Seq seq, std::uint16_t value_count, std::uint16_t round_shape,
                            Time now, bool allocated) {
  release(i);
  unlink(free_, i);
  Aggregator& a = slots_[i];
  a.in_use = true;
  a.job = job;
  a.seq = seq;
  a.value_count = value_count;
  a.round_shape = round_shape;
  a.allocated = allocated;
  a.timestamp = now;
  if (allocated) index_.insert(job, seq, i);
  if (held_by_job_[job]++ == 0) ++holding_jobs_;
  append_newest(held_, i);
  ++in_use_;
}

std::uint32_t AggregatorTable::offer() {
  const std::uint32_t i = free_.oldest;
  if (i != kNone && free_.newest != i) {
    unlink(free_, i);
    append_newest(free_, i);
  }
  return i;
}

void AggregatorTable::touch(std::uint32_t i, Time now) {
  assert(slots_[i].in_use);
  slots_[i].timestamp = now;
  if (held_.newest == i) return;  // the common case while one fragment collects its packets
  unlink(held_, i);
  append_newest(held_, i);
}

// ---------------------------------------------------------------------------------------------
// Counters

SwitchCounters& operator+=(SwitchCounters& sum, const SwitchCounters& c) {
  static_assert(sizeof(SwitchCounters) == 7 * sizeof(std::uint64_t), "sum every SwitchCounters field");
  sum.packets += c.packets;
  sum.malformed += c.malformed;
  sum.unknown_job += c.unknown_job;
  sum.not_admitted += c.not_admitted;
  sum.no_route += c.no_route;
  sum.too_wide += c.too_wide;
  sum.reclaimed += c.reclaimed;
  return sum;
}

SwitchJobCounters& operator+=(SwitchJobCounters& sum, const SwitchJobCounters& c) {
  static_assert(sizeof(SwitchJobCounters) == 11 * sizeof(std::uint64_t), "sum every SwitchJobCounters field");
  sum.aggregations += c.aggregations;
  sum.completions += c.completions;
  sum.collisions += c.collisions;
  sum.resend_flushes += c.resend_flushes;
  sum.duplicates += c.duplicates;
  sum.forwarded += c.forwarded;
  sum.deallocations += c.deallocations;
  sum.reclaimed += c.reclaimed;
  sum.ecn_merged += c.ecn_merged;
  sum.round_shape_mismatches += c.round_shape_mismatches;
  sum.table_marks += c.table_marks;
  return sum;
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: setup

namespace {

bool contains(const std::vector<PortId>& ports, PortId port) {
  return std::find(ports.begin(), ports.end(), port) != ports.end();
}

// Whether aggregator `a` holds the fragment of packet `h`.
bool holds(const Aggregator& a, const Header& h) { return a.in_use && a.job == h.job && a.seq == h.seq; }

}  // namespace

SwitchPipeline::SwitchPipeline(const SwitchConfig& config, TableSlice slice)
    : config_(config),
      slice_(slice),
      table_(config.atp_capable ? config.num_aggregators / slice.count : 0,
             config.atp_capable ? config.aggregator_width : 0),
      flush_packet_(packet_size(table_.width())),
      claimed_by_(table_.size()),
      collided_(table_.size()),
      flushed_(table_.size()) {}

void SwitchPipeline::add_route(Address dst, PortId port) { routes_[dst] = port; }

bool SwitchPipeline::remove_route(Address dst) { return routes_.erase(dst) > 0; }

void SwitchPipeline::add_multicast_group(Address group, std::vector<PortId> ports) {
  multicast_groups_[group] = std::move(ports);
}

bool SwitchPipeline::remove_multicast_group(Address group) { return multicast_groups_.erase(group) > 0; }

void SwitchPipeline::install_job(const SwitchJobEntry& entry) {
  for (const AggregationRole& role : entry.roles) {
    const bool fits =
        role.children.size() <= 32 && std::all_of(role.children.begin(), role.children.end(),
                                                  [](const TreeChild& c) { return c.fan_in >= 1 && c.fan_in <= 32; });
    if (!fits) {
      throw std::invalid_argument("job " + std::to_string(entry.job) + ": an aggregation role has " +
                                  std::to_string(role.children.size()) +
                                  " children; a bitmap holds 32, each child's fan-in 1..32");
    }
  }
  JobState& job = jobs_[entry.job];
  job.admitted_ports = entry.admitted_ports;
  job.roles = entry.roles;
  job.rina_members = entry.rina_members;
  // Created here, not on the packet path, so that processing a packet never allocates.
  job.counters = &job_counters_[entry.job];
}

bool SwitchPipeline::remove_job(JobId job) {
  if (jobs_.erase(job) == 0) return false;
  for (std::uint32_t i = 0; i < table_.size(); ++i) {
    if (table_.at(i).in_use && table_.at(i).job == job) table_.release(i);
  }
  return true;
}

SwitchJobCounters SwitchPipeline::job_counters(JobId job) const {
  const auto it = job_counters_.find(job);
  return it == job_counters_.end() ? SwitchJobCounters{} : it->second;
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: timeouts

bool SwitchPipeline::is_stale(const Aggregator& a, Time now) const {
  if (config_.reclaim_timeout <= Duration::zero()) return false;
  // now - timestamp >= timeout, written so that it cannot overflow for any pair of times.
  return now >= a.timestamp && now - a.timestamp >= config_.reclaim_timeout;
}

void SwitchPipeline::reclaim(std::uint32_t index, PortSink& out) {
  const Aggregator& a = table_.at(index);
  const auto it = job_counters_.find(a.job);
  if (it != job_counters_.end()) ++it->second.reclaimed;
  ++counters_.reclaimed;
  const Claim& claim = claimed_by_[index];
  if (claim.atp && a.counter < claim.header.fan_in) {
    // Children are missing: late (a straggler still computing) or lost (their resends flush what
    // is here, and pass through once it is gone). Either way what the others sent goes on to the
    // PS as a partial sum, which it merges; thrown away, every one of them would have to resend.
    if (a.allocated) flushed_.insert(a.job, a.seq);
    send_held(claim.ingress, claim.header, index, out);  // the header carries the node's node and fan_in
  }
  table_.release(index);  // a complete one (send_held freed a partial one)
}

void SwitchPipeline::reclaim_if_stale(std::uint32_t index, Time now, PortSink& out) {
  if (table_.at(index).in_use && is_stale(table_.at(index), now)) reclaim(index, out);
}

std::uint32_t SwitchPipeline::allocatable(Time now, PortSink& out) {
  if (table_.longest_free() == AggregatorTable::kNone && table_.oldest() != AggregatorTable::kNone) {
    reclaim_if_stale(table_.oldest(), now, out);  // a full table: the oldest aggregator, if stale, is free
  }
  return table_.longest_free();
}

void SwitchPipeline::RememberedFragments::insert(JobId job, Seq seq) {
  if (ring_.empty() || contains(job, seq)) return;
  Remembered& oldest = ring_[next_];
  if (oldest.valid) map_.erase(oldest.job, oldest.seq);
  oldest = {true, job, seq};
  map_.insert(job, seq, next_);
  next_ = (next_ + 1) % static_cast<std::uint32_t>(ring_.size());
}

void SwitchPipeline::RememberedFragments::erase(JobId job, Seq seq) {
  const std::uint32_t place = map_.find(job, seq);
  if (place == FragmentMap::kNone) return;
  ring_[place] = Remembered{};
  map_.erase(job, seq);
}

bool SwitchPipeline::over_share(JobId job) const {
  const std::uint32_t size = table_.size();
  const bool recent = last_collision_.valid && claims_ - last_collision_.since_claim < size;
  const bool nearly_full = size - table_.in_use() < size / kBrakeFreeFraction;
  if (!nearly_full && !(recent && last_collision_.job != job)) return false;
  std::uint64_t sharing = table_.holding_jobs();
  if (recent && table_.held_by(last_collision_.job) == 0) ++sharing;
  return std::uint64_t{table_.held_by(job)} * sharing > size;
}

void SwitchPipeline::on_timeout(Time now, PortSink& out) {
  // The list is oldest first: stop at the first aggregator that is still fresh.
  for (std::uint32_t i = table_.oldest(); i != AggregatorTable::kNone; i = table_.oldest()) {
    if (!is_stale(table_.at(i), now)) break;
    reclaim(i, out);
  }
}

Time SwitchPipeline::next_deadline() const {
  const std::uint32_t oldest = table_.oldest();
  if (oldest == AggregatorTable::kNone || config_.reclaim_timeout <= Duration::zero()) return kNever;
  const Time timestamp = table_.at(oldest).timestamp;
  if (timestamp > kNever - config_.reclaim_timeout) return kNever;
  return timestamp + config_.reclaim_timeout;
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: packets

bool SwitchPipeline::forward(const Header& h, PortId ingress, std::span<const std::uint8_t> packet, PortSink& out) {
  if (is_multicast(h.dst)) {
    const auto group = multicast_groups_.find(h.dst);
    if (group == multicast_groups_.end()) {
      ++counters_.no_route;
      return false;
    }
    for (const PortId port : group->second) {
      if (port != ingress) out.send(port, packet);
    }
    return true;
  }
  const auto route = routes_.find(h.dst);
  if (route == routes_.end()) {
    ++counters_.no_route;
    return false;
  }
  out.send(route->second, packet);
  return true;
}

void SwitchPipeline::process(PortId ingress, std::span<std::uint8_t> packet, Time now, PortSink& out) {
  ++counters_.packets;
  Header h;
  if (decode_header(packet, h) != DecodeError::kOk) {
    ++counters_.malformed;
    return;
  }

  if (!config_.atp_capable) {
    // A plain switch: no admission, no aggregation. Count the job only if the control plane
    // installed it (a lookup, never an insertion: spoofed job ids must not grow the map).
    const auto it = job_counters_.find(h.job);
    if (forward(h, ingress, packet, out) && it != job_counters_.end()) ++it->second.forwarded;
    return;
  }

  const auto job = jobs_.find(h.job);
  if (job == jobs_.end()) {
    ++counters_.unknown_job;
    return;
  }
  if (!contains(job->second.admitted_ports, ingress)) {
    ++counters_.not_admitted;
    return;
  }
  if (h.rina != RinaKind::kNone) {
    process_rina(ingress, h, job->second, packet, now, out);
  } else if (h.is_ack) {
    process_parameter(ingress, h, job->second, packet, now, out);
  } else {
    process_gradient(ingress, h, job->second, packet, now, out);
  }
}

void SwitchPipeline::process_parameter(PortId ingress, const Header& h, const JobState& job,
                                       std::span<const std::uint8_t> packet, Time now, PortSink& out) {
  // Fig. 7 box 8: a parameter packet (first or re-sent, multicast or unicast) frees the
  // aggregator of its fragment; failing that, it reclaims a stale one at its index (§3.7).
  if (table_.size() != 0 && !h.resend_request) {
    if (h.allocate) {
      collided_.erase(h.job, h.seq);
      flushed_.erase(h.job, h.seq);
    }
    const std::uint32_t i = h.allocate ? table_.find(h.job, h.seq) : row_of(h.aggregator_index);
    if (i != AggregatorTable::kNone && holds(table_.at(i), h)) {
      table_.release(i);
      ++job.counters->deallocations;
    } else if (i != AggregatorTable::kNone) {
      reclaim_if_stale(i, now, out);
    }
  }
  if (forward(h, ingress, packet, out)) ++job.counters->forwarded;
}

void SwitchPipeline::absorb_duplicate(Aggregator& a, const Header& h, SwitchJobCounters& counters) {
  a.ecn = a.ecn || h.ecn;
  if (h.ecn) ++counters.ecn_merged;
  ++counters.duplicates;
}

void SwitchPipeline::aggregate(std::uint32_t i, std::uint32_t bit, const Header& h,
                               std::span<const std::uint8_t> packet, SwitchJobCounters& counters, Time now) {
  Aggregator& a = table_.at(i);
  const std::span<std::int32_t> row = table_.values(i).first(h.value_count);
  if (a.counter == 0) {
    load_values(packet, row);  // the first packet of the fragment: its values are the sum so far
    a.scale_exponent = h.scale_exponent;
    a.magnitude = h.magnitude_or_next;
  } else {
    accumulate_values(packet, row);  // sticky_saturating_add (fixed_point.h), value by value
    // Values at another scale cannot be added: saturated (sticky), the sum makes the PS collect
    // the fragment as float32, which is exact whatever the workers' exponents.
    if (h.scale_exponent != a.scale_exponent && !row.empty()) row[0] = kSaturatedMax;
    a.magnitude = std::max(a.magnitude, h.magnitude_or_next);
  }
  a.bitmap |= bit;
  ++a.counter;
  a.ecn = a.ecn || h.ecn;
  table_.touch(i, now);
  ++counters.aggregations;
  if (h.ecn) ++counters.ecn_merged;
}

void SwitchPipeline::write_sum(std::uint32_t i, const AggregationRole* role, Header& h,
                               std::span<std::uint8_t> packet) {
  label_sum(i, role, h);
  write_held(i, h, packet);
}

void SwitchPipeline::label_sum(std::uint32_t i, const AggregationRole* role, Header& h) const {
  if (role != nullptr) {
    h.node = role->node;
    h.fan_in = static_cast<std::uint8_t>(role->children.size());
  } else {
    h.round_fragments = table_.at(i).round_fragments;
  }
}

void SwitchPipeline::write_held(std::uint32_t i, Header& h, std::span<std::uint8_t> packet) {
  const Aggregator& a = table_.at(i);
  store_values(packet, table_.values(i).first(a.value_count));
  h.bitmap = a.bitmap;
  h.ecn = h.ecn || a.ecn;
  h.round_shape = a.round_shape;
  h.scale_exponent = a.scale_exponent;
  h.magnitude_or_next = a.magnitude;
  encode_header(h, packet);
}

void SwitchPipeline::flush_partial(PortId ingress, const Header& h, const AggregationRole* role, std::uint32_t i,
                                   PortSink& out) {
  Header labelled = h;
  label_sum(i, role, labelled);
  send_held(ingress, labelled, i, out);
}

void SwitchPipeline::send_held(PortId ingress, Header flushed, std::uint32_t i, PortSink& out) {
  flushed.resend = true;  // no switch above claims an aggregator for it
  flushed.collision = false;
  flushed.ecn = false;
  const std::span<std::uint8_t> bytes = std::span(flush_packet_).first(packet_size(table_.at(i).value_count));
  flushed.value_count = table_.at(i).value_count;
  write_held(i, flushed, bytes);
  forward(flushed, ingress, bytes, out);
  table_.release(i);
}

void SwitchPipeline::flush_on_resend(PortId ingress, Header& h, const AggregationRole& role,
                                     std::optional<std::uint32_t> bit, SwitchJobCounters& counters, std::uint32_t i,
                                     std::span<std::uint8_t> packet, PortSink& out) {
  ++counters.resend_flushes;
  if (bit && (table_.at(i).bitmap & *bit) != 0) {
    // Boxes 4 and 7: the child is in already, so the node's sum (maybe partial) holds all the
    // packet has and goes on in its place; the aggregator is freed, so later resends pass through.
    write_sum(i, &role, h, packet);
    table_.release(i);
    forward(h, ingress, packet, out);
    return;
  }
  // Anything else, a child's whole sum that is not in yet included (Fig. 17 would add it, box 5):
  // the held sum goes on as a partial of its own, then the packet. A resend's contribution may be
  // at the PS already (its first copy went another way, or the timeout was spurious), and the PS
  // drops a packet that overlaps what it has whole: added, it would take the held sum down with
  // it. Apart, the PS merges what it lacks of each.
  flush_partial(ingress, h, &role, i, out);
  forward(h, ingress, packet, out);
}

void SwitchPipeline::separate_round_shapes(PortId ingress, Header& h, const JobState& job, const AggregationRole* role,
                                           std::uint32_t i, std::span<std::uint8_t> packet, PortSink& out) {
  ++job.counters->round_shape_mismatches;
  if (table_.at(i).counter < (role != nullptr ? role->children.size() : h.fan_in)) {
    // A partial sum: on to the PS now, as a resend flushes it (Fig. 17 boxes 4-7, without
    // adding the packet), so that the PS sees both shapes at once instead of after the workers'
    // timeouts.
    flush_partial(ingress, h, role, i, out);
  }
  // A complete sum already went on; its aggregator waits for the PS's parameter packet. The
  // packet goes on as a resend: no switch above adds it to anything.
  h.resend = true;
  encode_header(h, packet);
  if (forward(h, ingress, packet, out)) ++job.counters->forwarded;
}

void SwitchPipeline::process_gradient(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet,
                                      Time now, PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  const auto role =
      std::find_if(job.roles.begin(), job.roles.end(), [&](const AggregationRole& r) { return r.ps == h.dst; });
  // Float packets (the overflow path) are summed at the PS, never here; packets for another
  // PS are aggregated elsewhere (or nowhere) and only pass through.
  if (h.float_payload || role == job.roles.end() || table_.size() == 0) {
    if (forward(h, ingress, packet, out)) ++counters.forwarded;
    return;
  }
  if (h.value_count > table_.width()) {
    ++counters_.too_wide;
    return;
  }
  // Fig. 7 box 3, on a tree of any depth: the whole sum of one of this node's children is added
  // at that child's bit. Anything else (a partial sum flushed early below, a packet that went
  // past a busy aggregator below) is not added here; the PS merges it.
  std::optional<std::uint32_t> bit;
  const auto child =
      std::find_if(role->children.begin(), role->children.end(), [&](const TreeChild& c) { return c.node == h.node; });
  if (child != role->children.end()) {
    const std::uint32_t whole = whole_bitmap(child->fan_in);
    if (h.fan_in != child->fan_in || h.bitmap == 0 || (h.bitmap & ~whole) != 0) {
      ++counters_.malformed;  // it would corrupt the counter
      return;
    }
    if (h.bitmap == whole) bit = 1u << (child - role->children.begin());
  }

  // The aggregator at the packet's index, or with `allocate` the one found by <job, seq> (none:
  // the one free the longest, claimed below).
  std::uint32_t i = h.allocate ? table_.find(h.job, h.seq) : row_of(h.aggregator_index);
  if (i != AggregatorTable::kNone) reclaim_if_stale(i, now, out);  // a stale aggregator counts as free
  if (h.allocate && (i == AggregatorTable::kNone || !table_.at(i).in_use) && flushed_.contains(h.job, h.seq)) {
    // A reclaim sent what the others gave on to the PS: a late child's packet follows it there,
    // as a resend (so that no switch above claims for it), instead of waiting alone in an
    // aggregator for packets gone ahead.
    h.resend = true;
    encode_header(h, packet);
    if (forward(h, ingress, packet, out)) ++counters.forwarded;
    return;
  }
  // An allocated fragment that collided before goes on colliding, whole at the PS.
  if (h.allocate && (i == AggregatorTable::kNone || !table_.at(i).in_use)) {
    i = collided_.contains(h.job, h.seq) ? AggregatorTable::kNone : allocatable(now, out);
  }
  Aggregator& a = table_.at(i != AggregatorTable::kNone ? i : 0);  // kNone: a full table, never read
  const bool holds_fragment = i != AggregatorTable::kNone && holds(a, h);
  if (holds_fragment && a.value_count != h.value_count) {
    ++counters_.malformed;  // every packet of a job has the same length
    return;
  }
  if (holds_fragment && a.round_shape != h.round_shape) {
    // Fragments of allreduce calls of different sizes share the seq: never add them together
    // (docs/protocol.md "Round shape"). The PS, which gets both, fails the workers' round.
    separate_round_shapes(ingress, h, job, &*role, i, packet, out);
    return;
  }

  if (h.resend) {
    // Fig. 17 box 1: a resend flushes the aggregator of its fragment, and never claims one.
    if (holds_fragment) {
      flush_on_resend(ingress, h, *role, bit, counters, i, packet, out);
    } else if (forward(h, ingress, packet, out)) {
      ++counters.forwarded;
    }
    return;
  }
  if (!bit) {
    if (forward(h, ingress, packet, out)) ++counters.forwarded;
    return;
  }

  // The table brake (over_share): a job over an even share of a contended table (nearly full, or
  // found full by another job's fragment lately) gets no aggregator, which stays for the others;
  // its fragment goes to the PS marked, so that its windows shrink.
  const bool braked = h.allocate && !holds_fragment && i != AggregatorTable::kNone && over_share(h.job);
  if (i != AggregatorTable::kNone && !a.in_use && !braked) {
    table_.claim(i, h.job, h.seq, h.value_count, h.round_shape, now, h.allocate);  // first come, first served
    if (h.allocate) ++claims_;
    Claim& claim = claimed_by_[i];
    claim = {true, h, ingress};
    claim.header.node = role->node;
    claim.header.fan_in = static_cast<std::uint8_t>(role->children.size());
  } else if (!holds_fragment) {
    // Box 1 -> box 2: held by another fragment (with `allocate`: no aggregator free, or the
    // brake). The PS aggregates this packet; resend keeps the switches above from adding it,
    // collision makes the PS move the index: to the aggregator offered here, the one free the
    // longest, or rehashed (an allocated fragment's index stays).
    h.resend = true;
    h.collision = true;
    if (braked) {
      h.ecn = true;
      ++counters.table_marks;
    }
    if (h.allocate) {
      collided_.insert(h.job, h.seq);
      if (!braked) last_collision_ = {true, h.job, claims_};
    }
    const std::uint32_t row = h.allocate ? AggregatorTable::kNone : table_.offer();
    const std::uint64_t offered =
        row == AggregatorTable::kNone ? 0 : std::uint64_t{row} * slice_.count + slice_.index + 1;
    h.offered_aggregator = offered <= 0xFFFF ? static_cast<std::uint16_t>(offered) : 0;
    encode_header(h, packet);
    ++counters.collisions;
    forward(h, ingress, packet, out);
    return;
  }

  if ((a.bitmap & *bit) != 0) {  // box 4 -> box 7: this child is already in
    absorb_duplicate(a, h, counters);
    return;
  }
  aggregate(i, *bit, h, packet, counters, now);   // box 5
  if (a.counter < role->children.size()) return;  // box 6: wait for the other children

  // Complete: the packet carries the node's whole sum on towards the PS (the parent node adds it).
  // The aggregator stays held so that duplicates and resends still find it, until the parameter
  // packet frees it.
  h.ecn = false;
  write_sum(i, &*role, h, packet);
  ++counters.completions;
  forward(h, ingress, packet, out);
}

// ---------------------------------------------------------------------------------------------
// SwitchPipeline: Rina's mode (docs/rina.md)

void SwitchPipeline::to_members(const JobState& job, Header& h, PortId except, std::span<std::uint8_t> packet,
                                PortSink& out) {
  // Addressed to the job's group, which every worker's host takes (one of another's unicast
  // address it would drop, or route back).
  h.dst = multicast_group_address(h.job);
  encode_header(h, packet);
  for (const PortId port : job.rina_members) {
    if (port != except) out.send(port, packet);
  }
}

void SwitchPipeline::process_rina(PortId ingress, Header& h, const JobState& job, std::span<std::uint8_t> packet,
                                  Time now, PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  const auto& members = job.rina_members;
  if (!members.empty() && table_.size() != 0) {
    const auto member = std::find(members.begin(), members.end(), ingress);
    const auto route = routes_.find(h.dst);
    const bool to_rack = route != routes_.end() && contains(members, route->second);
    const bool from_rack = member != members.end();
    switch (h.rina) {
      case RinaKind::kContribution:
      case RinaKind::kFinal:
        if (from_rack) {
          rina_aggregate(ingress, static_cast<std::size_t>(member - members.begin()), h, job, packet, now, out);
          return;
        }
        // The previous member's complete final: every worker of the rack needs it (the first of
        // the allgather's multicasts); a partial one only its receiver, which merges it.
        if (h.rina == RinaKind::kFinal && to_rack && h.fan_in != 0 && std::popcount(h.bitmap) == h.fan_in) {
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      case RinaKind::kGather:
        if (!from_rack && to_rack && !h.resend) {  // a request's answer (resend) is for its asker alone
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      case RinaKind::kPull:
        if (to_rack) {  // a carrier asks its rack for the fragment's values
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      case RinaKind::kAck:
        if (to_rack) {  // every worker of the rack contributed; the fragment's aggregator is done
          const std::uint32_t i = row_of(h.aggregator_index);
          const Aggregator& a = table_.at(i);
          if (holds(a, h)) {
            table_.release(i);
            ++counters.deallocations;
          } else {
            reclaim_if_stale(i, now, out);
          }
          to_members(job, h, ingress, packet, out);
          ++counters.forwarded;
          return;
        }
        break;
      default:
        break;
    }
  }
  if (forward(h, ingress, packet, out)) ++counters.forwarded;
}

void SwitchPipeline::rina_aggregate(PortId ingress, std::size_t member, Header& h, const JobState& job,
                                    std::span<std::uint8_t> packet, Time now, PortSink& out) {
  SwitchJobCounters& counters = *job.counters;
  if (h.value_count > table_.width()) {
    ++counters_.too_wide;
    return;
  }
  // A worker speaks for itself only: its port's bit, the rack's fan-in.
  const std::uint32_t bit = std::uint32_t{1} << member;
  if (h.bitmap != bit || h.fan_in != job.rina_members.size()) {
    ++counters_.malformed;
    return;
  }
  const std::uint32_t i = row_of(h.aggregator_index);
  reclaim_if_stale(i, now, out);
  Aggregator& a = table_.at(i);
  const bool holds_fragment = holds(a, h);
  if (holds_fragment && a.value_count != h.value_count) {
    ++counters_.malformed;
    return;
  }
  if (holds_fragment && (a.round_shape != h.round_shape || a.round_fragments != h.round_fragments)) {
    separate_round_shapes(ingress, h, job, nullptr, i, packet, out);
    return;
  }
  if (h.resend) {
    // A resend is never added to a sum, so that every worker's first copy is in one sum at most
    // and the receiver can take a worker that also came alone out of it (docs/rina.md). One that
    // is in the aggregator of its fragment says that sum waits (for a worker that collided or was
    // lost): the sum goes on as it is, and is freed. Else the resend goes on alone.
    if (holds_fragment && (a.bitmap & bit) != 0) {
      ++counters.resend_flushes;
      rina_send_sum(ingress, h, job, i, packet, out);
      table_.release(i);
    } else if (forward(h, ingress, packet, out)) {
      ++counters.forwarded;
    }
    return;
  }
  if (!a.in_use) {
    table_.claim(i, h.job, h.seq, h.value_count, h.round_shape, now);
    a.round_fragments = h.round_fragments;
    claimed_by_[i].atp = false;
  } else if (!holds_fragment) {
    ++counters.collisions;  // held by another fragment: on alone, for the receiver to merge
    forward(h, ingress, packet, out);
    return;
  }
  if ((a.bitmap & bit) != 0) {
    absorb_duplicate(a, h, counters);
    return;
  }
  aggregate(i, bit, h, packet, counters, now);
  if (a.counter < h.fan_in) return;
  // Complete. The aggregator stays held until the receiver's ack frees it: a resend finds it.
  ++counters.completions;
  rina_send_sum(ingress, h, job, i, packet, out);
}

void SwitchPipeline::rina_send_sum(PortId ingress, Header& h, const JobState& job, std::uint32_t i,
                                   std::span<std::uint8_t> packet, PortSink& out) {
  const Aggregator& a = table_.at(i);
  write_sum(i, nullptr, h, packet);
  forward(h, ingress, packet, out);
  if (h.rina == RinaKind::kFinal && a.counter == job.rina_members.size()) {
    // The completing rack has its final at once (docs/rina.md: no chunk goes round twice): a copy
    // of its own, since the packet in hand went on as it is. From the final's next receiver, not
    // from the worker whose contribution completed it: that worker's kernel drops a packet from
    // its own address arriving from outside (a martian source), so it never got its rack's final.
    const auto route = routes_.find(h.dst);
    Header copy = h;
    copy.src = h.dst;
    const std::span<std::uint8_t> bytes = std::span(flush_packet_).first(packet.size());
    std::copy(packet.begin(), packet.end(), bytes.begin());
    to_members(job, copy, route == routes_.end() ? ingress : route->second, bytes, out);
  }
}

}  // namespace atp
