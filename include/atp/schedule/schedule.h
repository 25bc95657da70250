// A collective as data: each rank's part of it is a list of steps over element ranges of its
// buffer (send a range to a peer; receive a range from a peer and add it in, or copy it in), with
// the dependencies between them explicit. No I/O here: builders (builders.h) make schedules, one
// executor (executor.h) runs them over any transport (TCP processes, ns-3 sockets, memory).
//
// Why steps over ranges with per-element dependencies: that is the smallest form that carries the
// ring, Rabenseifner's halving-doubling, two-level hierarchical allreduce, Rina's ring of racks
// and PLink's 2LHA DAG alike, and it lets an executor pipeline without knowing the algorithm: a
// step may touch element e as soon as every step it depends on has finished e, so a send streams
// the part of its range that the receive before it has already added, piece by piece (the ring's
// forwarding of each chunk as it arrives), and steps that do not depend on each other run at once
// (a ring step sends and receives at the same time).
//
// Streams: between an ordered pair of ranks the bytes form one FIFO stream. A rank's sends to a
// peer, in list order, must match that peer's receives from it, in its list order, range for range:
// the same elements (every rank's buffer has the same layout, and the sum is element by element),
// so the same size; steps with an empty range carry nothing and match nothing. A transport sees
// bytes only and cannot tell; the in-memory runner (in_memory.h) checks every pair and says which
// two steps differ. And a direction has steps at both ends or at neither, empty ones included: a
// transport may frame each direction that has any step (the TCP transport sends the element count
// first), and a frame that the other end has no step to read breaks the next call.
//
// Lanes: a schedule may spread its bytes with a peer over several connections (`lanes`, PLink's
// several connections per pair, so that one chunk waiting for its sum does not hold back the next,
// and a network that caps each flow gives a pair more than one flow's share). Each step names its
// lane; every rule above is per lane: a stream is an ordered pair of ranks and a lane. Executors
// and transports name a lane to a peer by one int, its channel (channel() below), which is the
// peer's rank when there is one lane, as in every algorithm but PLink's.
// The element type is float32, the type of atp::Allreduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace atp {

// Elements [begin, end) of a rank's buffer.
struct ElementRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool overlaps(const ElementRange& o) const { return begin < o.end && o.begin < end && !empty() && !o.empty(); }
  bool empty() const { return end <= begin; }
  friend bool operator==(const ElementRange&, const ElementRange&) = default;
};

enum class StepKind : std::uint8_t {
  kSend,         // sends the range's elements to `peer`
  kReceiveAdd,   // receives the range's elements from `peer` and adds them into the buffer
  kReceiveCopy,  // receives the range's elements from `peer` and writes them into the buffer
};

struct ScheduleStep {
  StepKind kind = StepKind::kSend;
  int peer = 0;  // the other rank
  ElementRange range;
  int lane = 0;  // the connection to `peer` that carries it, in [0, lanes)
  // Indices of earlier steps of the same schedule (each < this step's index) that must have
  // finished element e before this step may touch e; elements outside a listed step's range do not
  // wait for it. schedule_append() fills this with exactly the data hazards.
  std::vector<std::uint32_t> after;
};

// One rank's part of a collective over a buffer of `count` elements.
struct Schedule {
  int rank = 0;
  int size = 1;
  std::size_t count = 0;  // elements of the buffer
  int lanes = 1;          // connections per pair of ranks, in [1, kMaxLanes]
  std::vector<ScheduleStep> steps;
};

// The most lanes a schedule may have: enough for any network's per-flow cap (PLink used 4), few
// enough that lanes x ranks stays far inside an int and a rank's sockets inside its descriptors.
inline constexpr int kMaxLanes = 16;

// A lane to a peer as one int, lane * size + peer: what executors and transports index streams by.
inline int channel(const Schedule& schedule, int peer, int lane) { return lane * schedule.size + peer; }
inline int channel_peer(const Schedule& schedule, int channel) { return channel % schedule.size; }
inline int channel_lane(const Schedule& schedule, int channel) { return channel / schedule.size; }

// Appends a step with `after` set to every earlier step whose range overlaps this one's where one
// of the two writes the buffer (a receive): read after write, write after read, write after write.
// Returns the new step's index.
std::uint32_t schedule_append(Schedule& schedule, StepKind kind, int peer, ElementRange range, int lane = 0);

// The ranks `schedule` sends to or receives from, ascending (its steps' peers; for the builders
// of builders.h they do not depend on the element count, so a transport can connect before it).
std::vector<int> schedule_peers(const Schedule& schedule);
// The channels of its steps (a peer and a lane each), ascending: with one lane, schedule_peers.
std::vector<int> schedule_channels(const Schedule& schedule);

// Throws std::invalid_argument with one sentence naming the step if the schedule is malformed:
// rank or size out of range, lanes outside [1, kMaxLanes], a peer that is this rank or not in
// [0, size), a lane outside [0, lanes), a range outside [0, count), a dependency that is not an
// earlier step.
void validate_schedule(const Schedule& schedule);

}  // namespace atp
