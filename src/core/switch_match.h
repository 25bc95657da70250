// What the switch pipeline's source files share (switch.cc, switch_table.cc, switch_gradient.cc,
// switch_rina.cc): matching a port list and an aggregator's fragment. Internal to src/core/.
#pragma once

#include <algorithm>
#include <vector>

#include "atp/switch.h"

namespace atp::switch_detail {

inline bool contains(const std::vector<PortId>& ports, PortId port) {
  return std::find(ports.begin(), ports.end(), port) != ports.end();
}

// Whether aggregator `a` holds the fragment of packet `h`.
inline bool holds(const Aggregator& a, const Header& h) { return a.in_use && a.job == h.job && a.seq == h.seq; }

}  // namespace atp::switch_detail
