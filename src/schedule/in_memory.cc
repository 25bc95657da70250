// run_schedules_in_memory: every rank's executor over FIFO byte queues, until done or stuck.
#include "atp/schedule/in_memory.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace atp {
namespace {

// The bytes one rank sent another and the other has not taken yet.
struct Queue {
  std::vector<std::byte> bytes;
  std::size_t read = 0;
  std::size_t left() const { return bytes.size() - read; }
};

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

// "rank 2", or "rank 2 on lane 1" where a schedule has several lanes.
std::string rank_name(int rank, int lane, int lanes) {
  return rank_name(rank) + (lanes > 1 ? " on lane " + std::to_string(lane) : "");
}

std::string elements(const ElementRange& range) {
  return "[" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ")";
}

// A rank's streams, one per direction, peer and lane: the indices of the steps that carry bytes, in
// list order. Empty steps carry nothing, so they match nothing.
struct Streams {
  using Key = std::pair<int, int>;                   // peer, lane
  std::map<Key, std::vector<std::size_t>> to, from;  // its send steps, its receive steps
};

Streams streams_of(const Schedule& schedule) {
  Streams streams;
  for (std::size_t i = 0; i < schedule.steps.size(); ++i) {
    const ScheduleStep& step = schedule.steps[i];
    if (!step.range.empty())
      (step.kind == StepKind::kSend ? streams.to : streams.from)[{step.peer, step.lane}].push_back(i);
  }
  return streams;
}

// Throws if a send and the receive that takes its bytes (the k-th step that carries bytes each
// way between two ranks) differ in size or in place. A stream carries bytes, not steps: without
// this check a 3-float send read as a 1-float and a 2-float receive, or floats added into the
// elements next to theirs, would be summed into a wrong result without a word. A missing or extra
// step is left to the run (a deadlock, or bytes no step receives), which names it.
void check_streams_match(const std::vector<Schedule>& schedules) {
  std::vector<Streams> streams;
  for (const Schedule& s : schedules) streams.push_back(streams_of(s));
  for (std::size_t from = 0; from < schedules.size(); ++from)
    for (const auto& [key, sends] : streams[from].to) {
      const auto [to, lane] = key;
      const auto found = streams[static_cast<std::size_t>(to)].from.find({static_cast<int>(from), lane});
      if (found == streams[static_cast<std::size_t>(to)].from.end()) continue;
      const std::vector<std::size_t>& receives = found->second;
      for (std::size_t k = 0; k < std::min(sends.size(), receives.size()); ++k) {
        const ElementRange& out = schedules[from].steps[sends[k]].range;
        const ElementRange& in = schedules[static_cast<std::size_t>(to)].steps[receives[k]].range;
        const std::string sender =
            "in-memory run: step " + std::to_string(sends[k]) + " of " + rank_name(static_cast<int>(from)) + " sends ";
        const std::string receiver = " to " + rank_name(to, lane, schedules[from].lanes) + " but step " +
                                     std::to_string(receives[k]) + " of " + rank_name(to) + ", which receives them, ";
        if (out.size() != in.size())
          throw std::runtime_error(sender + std::to_string(out.size()) + " elements" + receiver + "takes " +
                                   std::to_string(in.size()) +
                                   "; a send and its receive must match range size for range size");
        if (out != in)
          throw std::runtime_error(sender + "elements " + elements(out) + receiver + "takes them into " + elements(in) +
                                   "; a send and its receive must cover the same elements (every rank's buffer has "
                                   "the same layout)");
      }
    }
}

// Throws if one end of a direction has a step (even an empty one) and the other has none: a
// transport may frame each direction that has any step (the TCP one sends the element count first
// where sends_to, and reads it where receives_from), and a frame that nobody reads breaks the next
// call. 2LHA's first padding (an empty send to a rank it met in no chunk, no step back) did that.
void check_directions_match(const std::vector<Schedule>& schedules) {
  const auto n = schedules.size();
  using Key = std::pair<int, int>;                                // peer, lane
  std::vector<std::map<Key, std::size_t>> sends(n), receives(n);  // a step's index
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < schedules[r].steps.size(); ++i) {
      const ScheduleStep& step = schedules[r].steps[i];
      (step.kind == StepKind::kSend ? sends : receives)[r].emplace(Key{step.peer, step.lane}, i);
    }
  }
  const int lanes = n == 0 ? 1 : schedules[0].lanes;
  for (std::size_t from = 0; from < n; ++from) {
    for (std::size_t to = 0; to < n; ++to) {
      for (int lane = 0; lane < lanes; ++lane) {
        const auto out = sends[from].find({static_cast<int>(to), lane});
        const auto in = receives[to].find({static_cast<int>(from), lane});
        if ((out == sends[from].end()) == (in == receives[to].end())) continue;
        const bool sender = out != sends[from].end();
        const std::size_t at = sender ? from : to;
        throw std::runtime_error("in-memory run: step " + std::to_string(sender ? out->second : in->second) + " of " +
                                 rank_name(static_cast<int>(at)) + (sender ? " sends to " : " receives from ") +
                                 rank_name(static_cast<int>(sender ? to : from), lane, lanes) + ", which has no step " +
                                 (sender ? "receiving from " : "sending to ") + rank_name(static_cast<int>(at)) +
                                 "; a transport frames every direction with a step, empty or not, so both ends of a "
                                 "direction need one");
      }
    }
  }
}

}  // namespace

std::vector<std::size_t> run_schedules_in_memory(const std::vector<Schedule>& schedules,
                                                 std::vector<std::vector<float>>& buffers, std::size_t segment_bytes) {
  const int n = static_cast<int>(schedules.size());
  if (buffers.size() != schedules.size())
    throw std::invalid_argument("in-memory run: " + std::to_string(buffers.size()) + " buffers for " +
                                std::to_string(n) + " schedules");
  std::vector<std::unique_ptr<ScheduleExecutor>> ranks;
  for (int r = 0; r < n; ++r) {
    const Schedule& s = schedules[static_cast<std::size_t>(r)];
    if (s.lanes != schedules[0].lanes)
      throw std::invalid_argument("in-memory run: schedule " + std::to_string(r) + " has " + std::to_string(s.lanes) +
                                  " lanes and schedule 0 " + std::to_string(schedules[0].lanes) +
                                  "; every rank's connections to a peer are the same");
    if (s.rank != r || s.size != n)
      throw std::invalid_argument("in-memory run: schedule " + std::to_string(r) + " is rank " +
                                  std::to_string(s.rank) + " of " + std::to_string(s.size) + ", expected rank " +
                                  std::to_string(r) + " of " + std::to_string(n));
    ranks.push_back(std::make_unique<ScheduleExecutor>(s, buffers[static_cast<std::size_t>(r)], segment_bytes));
  }
  check_streams_match(schedules);
  check_directions_match(schedules);
  const int lanes = n == 0 ? 1 : schedules[0].lanes;
  // [(lane * n + from) * n + to]: rank `from`'s channel lane * n + to, rank `to`'s lane * n + from.
  std::vector<Queue> queues(static_cast<std::size_t>(lanes) * static_cast<std::size_t>(n) *
                            static_cast<std::size_t>(n));
  const auto queue = [&](int from, int to, int lane) -> Queue& {
    return queues[(static_cast<std::size_t>(lane) * static_cast<std::size_t>(n) + static_cast<std::size_t>(from)) *
                      static_cast<std::size_t>(n) +
                  static_cast<std::size_t>(to)];
  };
  std::vector<std::size_t> bytes_sent(static_cast<std::size_t>(n), 0);
  std::vector<std::vector<int>> channels;
  for (const Schedule& s : schedules) channels.push_back(schedule_channels(s));

  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      const auto try_send = [&](int channel, std::span<const std::byte> out) {
        Queue& q = queue(r, channel % n, channel / n);
        q.bytes.insert(q.bytes.end(), out.begin(), out.end());
        bytes_sent[static_cast<std::size_t>(r)] += out.size();
        return out.size();
      };
      const auto try_receive = [&](int channel, std::span<std::byte> into) {
        Queue& in = queue(channel % n, r, channel / n);
        const std::size_t k = std::min(in.left(), into.size());
        if (k == 0) return k;  // nothing waits (and an empty queue's data() may be null)
        std::memcpy(into.data(), in.bytes.data() + in.read, k);
        in.read += k;
        return k;
      };
      if (move_bytes(*ranks[static_cast<std::size_t>(r)], channels[static_cast<std::size_t>(r)], try_send, try_receive))
        progress = true;
    }
  }

  std::string stuck;
  for (int r = 0; r < n; ++r) {
    const ScheduleExecutor& rank = *ranks[static_cast<std::size_t>(r)];
    if (rank.done()) continue;
    for (const int c : channels[static_cast<std::size_t>(r)]) {
      const std::string peer = rank_name(c % n, c / n, lanes);
      if (const long step = rank.next_receive_step(c); step >= 0)
        stuck += "; " + rank_name(r) + " waits at step " + std::to_string(step) + " to receive from " + peer;
      if (const long step = rank.next_send_step(c); step >= 0)
        stuck += "; " + rank_name(r) + " waits at step " + std::to_string(step) + " to send to " + peer;
    }
  }
  if (!stuck.empty()) throw std::runtime_error("in-memory run: deadlock" + stuck);
  for (int lane = 0; lane < lanes; ++lane)
    for (int from = 0; from < n; ++from)
      for (int to = 0; to < n; ++to)
        if (const std::size_t left = queue(from, to, lane).left(); left > 0)
          throw std::runtime_error("in-memory run: " + rank_name(from) + " sent " + std::to_string(left) +
                                   " bytes to " + rank_name(to, lane, lanes) + " that no step of " + rank_name(to) +
                                   " receives");
  return bytes_sent;
}

}  // namespace atp
