// run_schedules_in_memory: every rank's executor over FIFO byte queues, until done or stuck.
#include "atp/schedule/in_memory.h"

#include <cstring>
#include <memory>
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
    if (s.rank != r || s.size != n)
      throw std::invalid_argument("in-memory run: schedule " + std::to_string(r) + " is rank " +
                                  std::to_string(s.rank) + " of " + std::to_string(s.size) + ", expected rank " +
                                  std::to_string(r) + " of " + std::to_string(n));
    ranks.push_back(std::make_unique<ScheduleExecutor>(s, buffers[static_cast<std::size_t>(r)], segment_bytes));
  }
  std::vector<Queue> queues(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));  // [from * n + to]
  const auto queue = [&](int from, int to) -> Queue& {
    return queues[static_cast<std::size_t>(from) * static_cast<std::size_t>(n) + static_cast<std::size_t>(to)];
  };
  std::vector<std::size_t> bytes_sent(static_cast<std::size_t>(n), 0);

  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      ScheduleExecutor& rank = *ranks[static_cast<std::size_t>(r)];
      for (int peer = 0; peer < n; ++peer) {
        if (const auto out = rank.next_send(peer); !out.empty()) {
          Queue& q = queue(r, peer);
          q.bytes.insert(q.bytes.end(), out.begin(), out.end());
          rank.sent(peer, out.size());
          bytes_sent[static_cast<std::size_t>(r)] += out.size();
          progress = true;
        }
        Queue& in = queue(peer, r);
        if (in.left() == 0) continue;
        if (const auto into = rank.next_receive(peer); !into.empty()) {
          const std::size_t k = std::min(in.left(), into.size());
          std::memcpy(into.data(), in.bytes.data() + in.read, k);
          in.read += k;
          rank.received(peer, k);
          progress = true;
        }
      }
    }
  }

  std::string stuck;
  for (int r = 0; r < n; ++r) {
    const ScheduleExecutor& rank = *ranks[static_cast<std::size_t>(r)];
    if (rank.done()) continue;
    for (int peer = 0; peer < n; ++peer) {
      if (const long step = rank.next_receive_step(peer); step >= 0)
        stuck += "; " + rank_name(r) + " waits at step " + std::to_string(step) + " to receive from " + rank_name(peer);
      if (const long step = rank.next_send_step(peer); step >= 0)
        stuck += "; " + rank_name(r) + " waits at step " + std::to_string(step) + " to send to " + rank_name(peer);
    }
  }
  if (!stuck.empty()) throw std::runtime_error("in-memory run: deadlock" + stuck);
  for (int from = 0; from < n; ++from)
    for (int to = 0; to < n; ++to)
      if (const std::size_t left = queue(from, to).left(); left > 0)
        throw std::runtime_error("in-memory run: " + rank_name(from) + " sent " + std::to_string(left) + " bytes to " +
                                 rank_name(to) + " that no step of " + rank_name(to) + " receives");
  return bytes_sent;
}

}  // namespace atp
