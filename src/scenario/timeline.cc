// The scenario's fault timeline (timeline.h).
#include "atp/scenario/timeline.h"

#include <algorithm>
#include <set>

namespace atp {

std::vector<TimedFault> fault_timeline(const Scenario& s) {
  using Kind = TimedFault::Kind;
  std::vector<TimedFault> events;
  for (std::size_t i = 0; i < s.crashes.size(); ++i) {
    if (s.crashes[i].at_time) events.push_back({Kind::kHostCrash, *s.crashes[i].at_time, i});
  }
  for (std::size_t i = 0; i < s.restarts.size(); ++i) {
    events.push_back({Kind::kSwitchDown, s.restarts[i].at, i});
    events.push_back({Kind::kSwitchUp, s.restarts[i].at + s.restarts[i].down, i});
  }
  std::set<Duration> boundaries;  // a window from 0 is in the links' first settings
  for (const LinkFault& f : s.link_faults) {
    if (f.from > Duration::zero()) boundaries.insert(f.from);
    if (f.until) boundaries.insert(*f.until);
  }
  for (const Duration t : boundaries) events.push_back({Kind::kLinkSettings, t, 0});
  for (std::size_t i = 0; i < s.background.size(); ++i) {
    events.push_back({Kind::kFlowStart, s.background[i].start, i});
    if (s.background[i].until) events.push_back({Kind::kFlowStop, *s.background[i].until, i});
  }
  std::stable_sort(events.begin(), events.end(), [](const TimedFault& a, const TimedFault& b) { return a.at < b.at; });
  return events;
}

}  // namespace atp
