// A scenario's timed faults as one list, in the order every backend applies them: by time, and at
// one time host crashes, then switch restarts, then link-fault windows, then background flows,
// each in file order. The process runners turn each into an action on their daemons and workers,
// the simulated ones into an event of their network; what an event does is theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "atp/scenario/scenario.h"
#include "atp/time.h"

namespace atp {

struct TimedFault {
  enum class Kind : std::uint8_t {
    kHostCrash,     // Scenario::crashes[index], one with an at_time, stops its host
    kSwitchDown,    // Scenario::restarts[index] begins: its switch's process is gone
    kSwitchUp,      // Scenario::restarts[index] ends (at + down): the switch is back, given its jobs
    kLinkSettings,  // a link fault's window opens or closes: every link takes its settings of `at`
    kFlowStart,     // Scenario::background[index] starts
    kFlowStop,      // Scenario::background[index] stops (its until)
  };
  Kind kind = Kind::kHostCrash;
  Duration at{0};         // since the run's start
  std::size_t index = 0;  // into the scenario's list of that kind (0 for kLinkSettings)
};

std::vector<TimedFault> fault_timeline(const Scenario& scenario);

}  // namespace atp
