// Which switch aggregator a fragment uses (paper §3.5-3.6): hosts compute
// HASH(job, seq) % numAggregators; after a collision the PS rehashes the index.
#pragma once

#include <cstdint>

#include "atp/wire.h"

namespace atp {

enum class IndexPolicy : std::uint8_t {
  kHashed,  // HASH(job, seq) % n: ATP's default
  kLinear,  // seq % n: the baseline of the paper's Fig. 14
};

// The index every worker of `job` derives for `seq` before any remapping. n must be > 0.
std::uint32_t base_aggregator_index(JobId job, Seq seq, std::uint32_t n, IndexPolicy policy);

// The PS's new index after a collision at `index`: HASH(index) % n, different from `index`
// whenever n > 1.
std::uint32_t rehash_aggregator_index(std::uint32_t index, std::uint32_t n);

}  // namespace atp
