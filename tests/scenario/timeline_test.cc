// Tests of the fault timeline every backend applies (atp/scenario/timeline.h): by time, and at one
// time crashes, restarts, link windows and flows, each in file order.
#include "atp/scenario/timeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace atp {
namespace {

using namespace std::chrono_literals;
using Kind = TimedFault::Kind;

TEST(FaultTimeline, AnEmptyScenarioHasNone) { EXPECT_TRUE(fault_timeline(Scenario{}).empty()); }

TEST(FaultTimeline, EventsComeByTimeThenByKindThenInFileOrder) {
  Scenario s;
  s.crashes = {{"h1", std::nullopt, 30us}, {"h2", 2u, std::nullopt}, {"h3", std::nullopt, 10us}};
  s.restarts = {{"tor", 10us, 20us}, {"spine", 5us, 0us}};
  LinkFault window;
  window.a = "h1";
  window.b = "tor";
  window.from = 10us;
  window.until = 40us;
  LinkFault from_start = window;  // from 0: in the links' first settings, not an event
  from_start.from = 0us;
  from_start.until = 40us;  // the same edge as `window`'s: one event
  s.link_faults = {window, from_start};
  BackgroundFlow flow;
  flow.from = "h1";
  flow.to = "h2";
  flow.start = 10us;
  flow.until = 50us;
  BackgroundFlow endless = flow;
  endless.start = 0us;
  endless.until.reset();
  s.background = {flow, endless};

  const std::vector<TimedFault> t = fault_timeline(s);
  const std::vector<std::pair<Kind, Duration>> got = [&] {
    std::vector<std::pair<Kind, Duration>> v;
    for (const TimedFault& f : t) v.emplace_back(f.kind, f.at);
    return v;
  }();
  const std::vector<std::pair<Kind, Duration>> want = {
      {Kind::kFlowStart, 0us},                              // background[1]
      {Kind::kSwitchDown, 5us},    {Kind::kSwitchUp, 5us},  // spine, down for no time
      {Kind::kHostCrash, 10us},                             // h3
      {Kind::kSwitchDown, 10us},                            // tor
      {Kind::kLinkSettings, 10us},                          // window opens
      {Kind::kFlowStart, 10us},                             // background[0]
      {Kind::kHostCrash, 30us},                             // h1
      {Kind::kSwitchUp, 30us},                              // tor is back
      {Kind::kLinkSettings, 40us},                          // both windows close: one event
      {Kind::kFlowStop, 50us},                              // background[0]
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(t[0].index, 1u);
  EXPECT_EQ(t[1].index, 1u) << "restarts[1] (spine)";
  EXPECT_EQ(t[3].index, 2u) << "crashes[2] (h3); crashes[1] has only at_round";
  EXPECT_EQ(t[4].index, 0u);
  EXPECT_EQ(t[7].index, 0u);
}

}  // namespace
}  // namespace atp
