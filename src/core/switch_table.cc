// The switch's tables: FragmentMap (fragments by <job, seq>), the AggregatorTable with its lists
// of free and held aggregators, and the pipeline's RememberedFragments. Follows docs/protocol.md "Switch".
#include <bit>
#include <cassert>

#include "atp/switch.h"

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
// SwitchPipeline::RememberedFragments

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

}  // namespace atp
