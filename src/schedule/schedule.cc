// Schedule helpers: hazard dependencies, peers, validation, cost.
#include "atp/schedule/schedule.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace atp {
namespace {

bool writes(StepKind kind) { return kind != StepKind::kSend; }

std::string step_name(const Schedule& schedule, std::size_t index) {
  return "step " + std::to_string(index) + " of rank " + std::to_string(schedule.rank) + "'s schedule";
}

}  // namespace

std::uint32_t schedule_append(Schedule& schedule, StepKind kind, int peer, ElementRange range, int lane) {
  ScheduleStep step{kind, peer, range, lane, {}};
  for (std::size_t i = 0; i < schedule.steps.size(); ++i) {
    const ScheduleStep& earlier = schedule.steps[i];
    if ((writes(kind) || writes(earlier.kind)) && earlier.range.overlaps(range))
      step.after.push_back(static_cast<std::uint32_t>(i));
  }
  schedule.steps.push_back(std::move(step));
  return static_cast<std::uint32_t>(schedule.steps.size() - 1);
}

std::vector<int> schedule_peers(const Schedule& schedule) {
  std::vector<int> peers;
  for (const ScheduleStep& step : schedule.steps) peers.push_back(step.peer);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

std::vector<int> schedule_channels(const Schedule& schedule) {
  std::vector<int> channels;
  for (const ScheduleStep& step : schedule.steps) channels.push_back(channel(schedule, step.peer, step.lane));
  std::sort(channels.begin(), channels.end());
  channels.erase(std::unique(channels.begin(), channels.end()), channels.end());
  return channels;
}

void validate_schedule(const Schedule& schedule) {
  if (schedule.size < 1 || schedule.rank < 0 || schedule.rank >= schedule.size)
    throw std::invalid_argument("schedule: rank " + std::to_string(schedule.rank) + " is not in [0, " +
                                std::to_string(schedule.size) + ")");
  if (schedule.lanes < 1 || schedule.lanes > kMaxLanes)
    throw std::invalid_argument("schedule: " + std::to_string(schedule.lanes) + " lanes is not in [1, " +
                                std::to_string(kMaxLanes) + "]");
  if (schedule.size > std::numeric_limits<int>::max() / schedule.lanes)
    throw std::invalid_argument("schedule: " + std::to_string(schedule.size) + " ranks x " +
                                std::to_string(schedule.lanes) + " lanes are more channels than an int can name");
  for (std::size_t i = 0; i < schedule.steps.size(); ++i) {
    const ScheduleStep& step = schedule.steps[i];
    if (step.peer < 0 || step.peer >= schedule.size || step.peer == schedule.rank)
      throw std::invalid_argument(step_name(schedule, i) + " names peer " + std::to_string(step.peer) +
                                  ", which is not another rank of " + std::to_string(schedule.size));
    if (step.lane < 0 || step.lane >= schedule.lanes)
      throw std::invalid_argument(step_name(schedule, i) + " takes lane " + std::to_string(step.lane) +
                                  " of a schedule with " + std::to_string(schedule.lanes));
    if (step.range.begin > step.range.end || step.range.end > schedule.count)
      throw std::invalid_argument(step_name(schedule, i) + " covers elements [" + std::to_string(step.range.begin) +
                                  ", " + std::to_string(step.range.end) + "), which is not inside the buffer of " +
                                  std::to_string(schedule.count));
    for (const std::uint32_t before : step.after)
      if (before >= i)
        throw std::invalid_argument(step_name(schedule, i) + " waits for step " + std::to_string(before) +
                                    ", which is not an earlier step");
  }
}

}  // namespace atp
