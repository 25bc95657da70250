// Tests of the schedule layer: every builder's schedules, run in memory, give the exact sum on
// every rank for many sizes and element counts and send what the algorithm costs; the executor
// pipelines within a step and handles partial floats; wrong schedules are caught, not summed.
#include "atp/schedule/schedule.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "atp/schedule/builders.h"
#include "atp/schedule/executor.h"
#include "atp/schedule/in_memory.h"

namespace atp {
namespace {

// Rank `rank`'s input: integers in [-8, 8], different per rank and element, so sums of up to 16
// ranks are exact in float32 in any order and a chunk summed into the wrong place shows.
float input(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13) % 17) - 8);
}

std::vector<std::vector<float>> inputs(int size, std::size_t count) {
  std::vector<std::vector<float>> buffers(static_cast<std::size_t>(size), std::vector<float>(count));
  for (int r = 0; r < size; ++r)
    for (std::size_t i = 0; i < count; ++i) buffers[static_cast<std::size_t>(r)][i] = input(r, i);
  return buffers;
}

// Elements (over all ranks) that differ from the exact sum.
std::size_t wrong_elements(const std::vector<std::vector<float>>& buffers) {
  const int size = static_cast<int>(buffers.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < (buffers.empty() ? 0 : buffers[0].size()); ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += input(r, i);
    for (const auto& b : buffers) wrong += b[i] != sum;
  }
  return wrong;
}

using Builder = std::function<Schedule(int rank, int size, std::size_t count)>;

// Groups of three consecutive ranks (the last one shorter), for the hierarchical builder.
std::vector<std::vector<int>> groups_of_three(int size) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < size; ++r) {
    if (r % 3 == 0) groups.emplace_back();
    groups.back().push_back(r);
  }
  return groups;
}

const std::vector<std::pair<std::string, Builder>> kBuilders = {
    {"ring", ring_allreduce_schedule},
    {"halving_doubling", halving_doubling_allreduce_schedule},
    {"hierarchical",
     [](int rank, int size, std::size_t count) {
       return hierarchical_allreduce_schedule(rank, size, count, groups_of_three(size));
     }},
    // Racks whose members interleave in rank order, of unequal sizes where 3 does not divide size.
    {"hierarchical_interleaved",
     [](int rank, int size, std::size_t count) {
       RankGroups racks(static_cast<std::size_t>(std::min(size, 3)));
       for (int r = 0; r < size; ++r) racks[static_cast<std::size_t>(r % 3)].push_back(r);
       return hierarchical_allreduce_schedule(rank, size, count, racks);
     }},
};

std::vector<Schedule> schedules_of(const Builder& build, int size, std::size_t count) {
  std::vector<Schedule> schedules;
  for (int r = 0; r < size; ++r) schedules.push_back(build(r, size, count));
  return schedules;
}

// builder x ranks x elements.
using SumParams = std::tuple<std::size_t, int, std::size_t>;
class ScheduleSumTest : public ::testing::TestWithParam<SumParams> {};

TEST_P(ScheduleSumTest, EveryRankEndsWithTheExactSum) {
  const auto [builder, size, count_or_less] = GetParam();
  // 0 stands for "fewer elements than ranks": size - 1.
  const std::size_t count = count_or_less == 0 ? static_cast<std::size_t>(size - 1) : count_or_less;
  const auto schedules = schedules_of(kBuilders[builder].second, size, count);
  for (const std::size_t segment : {std::size_t{10}, kDefaultSegmentBytes}) {  // 10: partial floats
    if (segment == 10 && count > 5000) continue;  // byte-sized pieces of a large buffer: slow, nothing new
    auto buffers = inputs(size, count);
    run_schedules_in_memory(schedules, buffers, segment);
    EXPECT_EQ(wrong_elements(buffers), 0u) << count << " elements, segment " << segment;
  }
}

INSTANTIATE_TEST_SUITE_P(BuildersSizesCounts, ScheduleSumTest,
                         ::testing::Combine(::testing::Values(0u, 1u, 2u, 3u),
                                            ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 16),
                                            ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{7},
                                                              std::size_t{1001}, std::size_t{100003})),
                         [](const ::testing::TestParamInfo<SumParams>& p) {
                           const std::size_t count = std::get<2>(p.param);
                           return kBuilders[std::get<0>(p.param)].first + "_" + std::to_string(std::get<1>(p.param)) +
                                  "ranks_" + (count == 0 ? std::string("fewer") : std::to_string(count)) + "elements";
                         });

TEST(ScheduleTest, NoElementsAtAllIsDoneAtOnce) {
  for (const auto& [name, build] : kBuilders)
    for (const int size : {1, 2, 5, 8}) {
      auto buffers = inputs(size, 0);
      const auto sent = run_schedules_in_memory(schedules_of(build, size, 0), buffers);
      for (const std::size_t bytes : sent) EXPECT_EQ(bytes, 0u) << name << ", " << size << " ranks";
    }
}

// The ring sends its 2(n-1) chunks: exactly their bytes, within a float per chunk of 2(n-1)/n.
TEST(ScheduleTest, RingSendsTwoNMinusOneOverNOfTheBuffer) {
  for (const int n : {2, 3, 5, 8, 9, 16})
    for (const std::size_t count : {std::size_t{7}, std::size_t{1001}, std::size_t{100003}}) {
      auto buffers = inputs(n, count);
      const auto sent = run_schedules_in_memory(schedules_of(ring_allreduce_schedule, n, count), buffers);
      for (int r = 0; r < n; ++r) {
        std::size_t chunks = 0;
        for (int t = 0; t < 2 * (n - 1); ++t) {
          const std::size_t c = static_cast<std::size_t>((r - t + 2 * n) % n), nn = static_cast<std::size_t>(n);
          chunks += count * (c + 1) / nn - count * c / nn;
        }
        EXPECT_EQ(sent[static_cast<std::size_t>(r)], chunks * sizeof(float)) << n << " ranks, rank " << r;
        const double ideal = 2.0 * (n - 1) / n * static_cast<double>(count * sizeof(float));
        EXPECT_NEAR(static_cast<double>(sent[static_cast<std::size_t>(r)]), ideal, 2.0 * (n - 1) * sizeof(float));
      }
    }
}

// H-AR with R racks of L members: each rank sends (L-1)/L of the buffer in each of the rack's
// reduce-scatter and allgather, and 2(R-1)/R of its 1/L across racks.
TEST(ScheduleTest, HierarchicalSendsInsideAndAcrossRacksAsHorovodDoes) {
  constexpr std::size_t kCount = 100800;  // divisible by every L * R below
  for (const auto& [racks, members] :
       {std::pair{2, 4}, std::pair{3, 2}, std::pair{4, 3}, std::pair{1, 5}, std::pair{5, 1}}) {
    const int n = racks * members;
    RankGroups groups(static_cast<std::size_t>(racks));
    for (int r = 0; r < n; ++r) groups[static_cast<std::size_t>(r / members)].push_back(r);
    auto buffers = inputs(n, kCount);
    const auto sent = run_schedules_in_memory(
        schedules_of(
            [&](int r, int size, std::size_t c) { return hierarchical_allreduce_schedule(r, size, c, groups); }, n,
            kCount),
        buffers);
    EXPECT_EQ(wrong_elements(buffers), 0u);
    const std::size_t l = static_cast<std::size_t>(members), g = static_cast<std::size_t>(racks);
    const std::size_t floats = 2 * (l - 1) * kCount / l + 2 * (g - 1) * kCount / (l * g);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(sent[static_cast<std::size_t>(r)], floats * sizeof(float))
          << racks << " racks of " << members << ", rank " << r;
  }
}

// Halving-doubling: 2(p-1)/p of the buffer over the largest power of two p, within a float per
// round; a rank paired with an extra one sends the whole buffer once more, the extra one once.
TEST(ScheduleTest, HalvingDoublingSendsTwoPMinusOneOverPOfTheBuffer) {
  constexpr std::size_t kCount = 100003;
  for (const int n : {2, 3, 4, 5, 6, 7, 8, 9, 16}) {
    int p = 1, rounds = 0;
    while (p * 2 <= n) p *= 2, ++rounds;
    const int extra = n - p;
    auto buffers = inputs(n, kCount);
    const auto sent = run_schedules_in_memory(schedules_of(halving_doubling_allreduce_schedule, n, kCount), buffers);
    for (int r = 0; r < n; ++r) {
      const double whole = kCount * sizeof(float);
      const double expected = r < 2 * extra && r % 2 == 0 ? whole
                              : r < 2 * extra             ? whole + 2.0 * (p - 1) / p * whole
                                                          : 2.0 * (p - 1) / p * whole;
      EXPECT_NEAR(static_cast<double>(sent[static_cast<std::size_t>(r)]), expected, 2.0 * rounds * sizeof(float))
          << n << " ranks, rank " << r;
    }
  }
}

// The executor hands out a send's bytes as the receive it depends on adds them, float by float,
// and adds a float that arrives in pieces once it is whole.
TEST(ScheduleExecutorTest, ForwardsWhatHasArrivedAndAddsPartialFloats) {
  Schedule s{0, 2, 4, 1, {}};
  schedule_append(s, StepKind::kReceiveAdd, 1, {0, 4});
  schedule_append(s, StepKind::kSend, 1, {0, 4});
  ASSERT_EQ(s.steps[1].after, std::vector<std::uint32_t>{0});
  std::vector<float> buffer{1, 2, 3, 4};
  ScheduleExecutor ex(s, buffer, 1000);
  EXPECT_TRUE(ex.next_send(1).empty());
  const std::vector<float> incoming{10, 20, 30, 40};
  const auto* bytes = reinterpret_cast<const std::byte*>(incoming.data());
  auto into = ex.next_receive(1);
  ASSERT_EQ(into.size(), 16u);
  std::memcpy(into.data(), bytes, 6);  // one float and a half
  ex.received(1, 6);
  EXPECT_EQ(buffer[0], 11);
  EXPECT_EQ(buffer[1], 2);  // not added before its last bytes are here
  EXPECT_EQ(ex.next_send(1).size(), 4u);
  into = ex.next_receive(1);
  ASSERT_EQ(into.size(), 10u);
  std::memcpy(into.data(), bytes + 6, 10);
  ex.received(1, 10);
  EXPECT_EQ(buffer, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_FALSE(ex.done());
  ex.sent(1, 3);  // a send may end inside a float
  EXPECT_EQ(ex.next_send(1).size(), 13u);
  ex.sent(1, 13);
  EXPECT_TRUE(ex.done());
  EXPECT_TRUE(ex.next_receive(1).empty());
}

// A segment caps every piece, and independent streams (one per peer) move at once.
TEST(ScheduleExecutorTest, PiecesAreAtMostOneSegmentAndStreamsAreIndependent) {
  Schedule s{1, 3, 100, 1, {}};
  schedule_append(s, StepKind::kReceiveAdd, 0, {0, 50});
  schedule_append(s, StepKind::kSend, 2, {0, 100});
  std::vector<float> buffer(100, 1.0f);
  ScheduleExecutor ex(s, buffer, 64);
  EXPECT_TRUE(ex.next_send(2).empty());  // waits for the add into its first half
  EXPECT_EQ(ex.next_receive(0).size(), 64u);
  ex.received(0, 64);
  EXPECT_EQ(ex.next_send(2).size(), 64u);  // the 16 floats added so far, one segment
  ex.received(0, 64);
  ex.received(0, 64);
  EXPECT_EQ(ex.next_receive(0).size(), 8u);  // the step's last 2 floats
  ex.received(0, 8);
  ex.sent(2, 64);
  EXPECT_EQ(ex.next_send(2).size(), 64u);  // the rest is not limited by the add any more
  EXPECT_TRUE(ex.next_send(0).empty());
  EXPECT_TRUE(ex.next_receive(2).empty());
  EXPECT_TRUE(ex.sends_to(2) && ex.receives_from(0) && !ex.sends_to(0) && !ex.receives_from(2));
}

// Lanes: two streams to one peer, each in its own order. The send on lane 1 leaves while the one
// on lane 0 (listed first) waits for its receive; with one lane it would wait behind it. A
// channel names a lane to a peer (lane * size + peer).
TEST(ScheduleExecutorTest, EachLaneToAPeerIsItsOwnStream) {
  Schedule s{0, 2, 8, 2, {}};
  schedule_append(s, StepKind::kReceiveAdd, 1, {0, 4}, 0);  // 0
  schedule_append(s, StepKind::kSend, 1, {0, 4}, 0);        // 1: waits for 0
  schedule_append(s, StepKind::kSend, 1, {4, 8}, 1);        // 2: ready at once
  EXPECT_EQ(schedule_channels(s), (std::vector<int>{1, 3}));
  EXPECT_EQ(channel(s, 1, 1), 3);
  EXPECT_EQ(channel_peer(s, 3), 1);
  EXPECT_EQ(channel_lane(s, 3), 1);
  std::vector<float> buffer(8, 1.0f);
  ScheduleExecutor ex(s, buffer, 1000);
  EXPECT_TRUE(ex.next_send(1).empty());
  EXPECT_EQ(ex.next_send(3).size(), 16u);
  EXPECT_TRUE(ex.next_receive(3).empty());
  EXPECT_TRUE(ex.sends_to(3) && !ex.receives_from(3) && ex.receives_from(1));
  ex.sent(3, 16);
  const std::vector<float> incoming{1, 2, 3, 4};
  std::memcpy(ex.next_receive(1).data(), incoming.data(), 16);
  ex.received(1, 16);
  EXPECT_EQ(ex.next_send(1).size(), 16u);
  ex.sent(1, 16);
  EXPECT_TRUE(ex.done());
  EXPECT_EQ(buffer, (std::vector<float>{2, 3, 4, 5, 1, 1, 1, 1}));
}

// A missing dependency lets the ring forward a chunk before the previous rank's part is added:
// the run completes but the sums are wrong, which the check above would see.
TEST(ScheduleTest, AMissingDependencyGivesAWrongSumThatTheCheckCatches) {
  constexpr int kSize = 3;
  constexpr std::size_t kCount = 30;
  auto schedules = schedules_of(ring_allreduce_schedule, kSize, kCount);
  auto buffers = inputs(kSize, kCount);
  run_schedules_in_memory(schedules, buffers);
  ASSERT_EQ(wrong_elements(buffers), 0u);
  schedules[0].steps[2].after.clear();  // rank 0's second send no longer waits for its first receive
  buffers = inputs(kSize, kCount);
  run_schedules_in_memory(schedules, buffers);
  EXPECT_GT(wrong_elements(buffers), 0u);
}

TEST(ScheduleTest, AStepThatNoOneReceivesIsCaught) {
  auto schedules = schedules_of(ring_allreduce_schedule, 3, 30);
  schedules[1].steps.pop_back();  // rank 1 no longer takes the last chunk rank 0 sends it
  auto buffers = inputs(3, 30);
  try {
    run_schedules_in_memory(schedules, buffers);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 sent 40 bytes to rank 1 that no step of rank 1 receives"),
              std::string::npos)
        << e.what();
  }
}

TEST(ScheduleTest, ADeadlockIsCaught) {
  // Each rank first waits to receive what the other sends only after its own receive.
  std::vector<Schedule> schedules{{0, 2, 4, 1, {}}, {1, 2, 4, 1, {}}};
  for (int r = 0; r < 2; ++r) {
    schedule_append(schedules[static_cast<std::size_t>(r)], StepKind::kReceiveAdd, 1 - r, {0, 4});
    schedule_append(schedules[static_cast<std::size_t>(r)], StepKind::kSend, 1 - r, {0, 4});
  }
  auto buffers = inputs(2, 4);
  try {
    run_schedules_in_memory(schedules, buffers);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock; rank 0 waits at step 0 to receive from rank 1"), std::string::npos)
        << e.what();
  }
}

// What run_schedules_in_memory threw (std::runtime_error), or "" if it ran.
std::string run_error(const std::vector<Schedule>& schedules, std::vector<std::vector<float>>& buffers) {
  try {
    run_schedules_in_memory(schedules, buffers);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// The in-memory runner keeps a queue per lane: bytes sent on one lane are not taken by a receive
// on another, and a stream whose other end is on another lane is named with its lane.
TEST(ScheduleTest, TheInMemoryRunnerKeepsTheLanesApart) {
  std::vector<Schedule> schedules{{0, 2, 4, 2, {}}, {1, 2, 4, 2, {}}};
  schedule_append(schedules[0], StepKind::kSend, 1, {0, 2}, 1);
  schedule_append(schedules[0], StepKind::kSend, 1, {2, 4}, 0);
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {2, 4}, 0);
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {0, 2}, 1);
  std::vector<std::vector<float>> buffers{{1, 2, 3, 4}, {10, 20, 30, 40}};
  EXPECT_EQ(run_error(schedules, buffers), "");
  EXPECT_EQ(buffers[1], (std::vector<float>{11, 22, 33, 44}));
  schedules[1].steps[1].lane = 0;  // both receives on lane 0: lane 1 has a send and no receive
  EXPECT_EQ(run_error(schedules, buffers),
            "in-memory run: step 0 of rank 0 sends to rank 1 on lane 1, which has no step receiving from rank 0; a "
            "transport frames every direction with a step, empty or not, so both ends of a direction need one");
  schedules[1].lanes = 1;
  EXPECT_THROW(run_schedules_in_memory(schedules, buffers), std::invalid_argument);  // the ranks disagree on lanes
}

TEST(ScheduleTest, MismatchedStepSizesAreCaught) {
  auto schedules = schedules_of(ring_allreduce_schedule, 2, 10);
  schedules[0].steps[0].range.end -= 1;  // rank 0 sends one float less than rank 1 receives
  auto buffers = inputs(2, 10);
  const auto before = buffers;
  EXPECT_EQ(run_error(schedules, buffers),
            "in-memory run: step 0 of rank 0 sends 4 elements to rank 1 but step 1 of rank 1, which receives them, "
            "takes 5; a send and its receive must match range size for range size");
  EXPECT_EQ(buffers, before);  // caught before anything moved
}

// Equal byte totals do not make matching steps: 3 + 1 floats sent, 1 + 3 received. Without the
// check the bytes flowed and the sum came out wrong.
TEST(ScheduleTest, StepsThatSplitTheStreamDifferentlyAreCaught) {
  std::vector<Schedule> schedules{{0, 2, 4, 1, {}}, {1, 2, 4, 1, {}}};
  schedule_append(schedules[0], StepKind::kSend, 1, {0, 3});
  schedule_append(schedules[0], StepKind::kSend, 1, {3, 4});
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {0, 1});
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {1, 4});
  auto buffers = inputs(2, 4);
  EXPECT_EQ(run_error(schedules, buffers),
            "in-memory run: step 0 of rank 0 sends 3 elements to rank 1 but step 0 of rank 1, which receives them, "
            "takes 1; a send and its receive must match range size for range size");
}

// The review's case (/tmp/review-schedule/mismatch.cc): the sizes match, 3 then 1 float, but
// rank 1 adds rank 0's elements [0, 3) into its [1, 4), so every sum was off by a neighbour.
TEST(ScheduleTest, AReceiveIntoOtherElementsIsCaught) {
  std::vector<Schedule> schedules{{0, 2, 4, 1, {}}, {1, 2, 4, 1, {}}};
  schedule_append(schedules[0], StepKind::kSend, 1, {0, 3});
  schedule_append(schedules[0], StepKind::kSend, 1, {3, 4});
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {1, 4});
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {0, 1});
  std::vector<std::vector<float>> buffers{{1, 2, 3, 4}, {10, 20, 30, 40}};
  EXPECT_EQ(run_error(schedules, buffers),
            "in-memory run: step 0 of rank 0 sends elements [0, 3) to rank 1 but step 0 of rank 1, which receives "
            "them, takes them into [1, 4); a send and its receive must cover the same elements (every rank's buffer "
            "has the same layout)");
  EXPECT_EQ(buffers[1], (std::vector<float>{10, 20, 30, 40}));
  // The same steps with matching ranges sum as they should.
  schedules[1].steps[0].range = {0, 3};
  schedules[1].steps[1].range = {3, 4};
  EXPECT_EQ(run_error(schedules, buffers), "");
  EXPECT_EQ(buffers[1], (std::vector<float>{11, 22, 33, 44}));
}

// Empty steps carry no bytes, so they match nothing: one side may have them where the other has not.
TEST(ScheduleTest, EmptyStepsNeedNoPartner) {
  std::vector<Schedule> schedules{{0, 2, 4, 1, {}}, {1, 2, 4, 1, {}}};
  schedule_append(schedules[0], StepKind::kSend, 1, {2, 2});
  schedule_append(schedules[0], StepKind::kSend, 1, {0, 4});
  schedule_append(schedules[1], StepKind::kReceiveCopy, 0, {0, 4});
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {4, 4});
  std::vector<std::vector<float>> buffers{{1, 2, 3, 4}, {0, 0, 0, 0}};
  EXPECT_EQ(run_error(schedules, buffers), "");
  EXPECT_EQ(buffers[1], (std::vector<float>{1, 2, 3, 4}));
}

// An empty step matches no step, but a direction with a step at one end needs one at the other: a
// transport frames every direction that has a step (TCP: the element count first), and a frame no
// step reads would be taken for the next call's.
TEST(ScheduleTest, ADirectionWithAStepAtOneEndOnlyIsCaught) {
  std::vector<Schedule> schedules{{0, 2, 4, 1, {}}, {1, 2, 4, 1, {}}};
  schedule_append(schedules[0], StepKind::kSend, 1, {0, 0});
  std::vector<std::vector<float>> buffers{{1, 2, 3, 4}, {0, 0, 0, 0}};
  EXPECT_EQ(run_error(schedules, buffers),
            "in-memory run: step 0 of rank 0 sends to rank 1, which has no step receiving from rank 0; a transport "
            "frames every direction with a step, empty or not, so both ends of a direction need one");
  schedule_append(schedules[1], StepKind::kReceiveAdd, 0, {0, 0});
  EXPECT_EQ(run_error(schedules, buffers), "");
}

TEST(ScheduleTest, MalformedSchedulesAreRefused) {
  Schedule s{0, 2, 10, 1, {}};
  s.steps.push_back({StepKind::kSend, 0, {0, 1}, 0, {}});
  EXPECT_THROW(validate_schedule(s), std::invalid_argument);  // sends to itself
  s.steps[0] = {StepKind::kSend, 1, {5, 11}, 0, {}};
  EXPECT_THROW(validate_schedule(s), std::invalid_argument);  // past the buffer
  s.steps[0] = {StepKind::kSend, 1, {0, 1}, 0, {0}};
  EXPECT_THROW(validate_schedule(s), std::invalid_argument);  // waits for itself
  s.steps[0].after.clear();
  EXPECT_NO_THROW(validate_schedule(s));
  s.steps[0].lane = 1;
  EXPECT_THROW(validate_schedule(s), std::invalid_argument);  // a lane the schedule does not have
  s.lanes = 2;
  EXPECT_NO_THROW(validate_schedule(s));
  s.lanes = 0;
  EXPECT_THROW(validate_schedule(s), std::invalid_argument);
  s.lanes = kMaxLanes + 1;
  EXPECT_THROW(validate_schedule(s), std::invalid_argument);
  s.lanes = 1;
  s.steps[0].lane = 0;
  std::vector<float> short_buffer(9);
  EXPECT_THROW(ScheduleExecutor(s, short_buffer), std::invalid_argument);
}

TEST(ScheduleExecutorTest, RefusesASegmentOfNothingOrOfMoreThanAnyBuffer) {
  const Schedule s = ring_allreduce_schedule(0, 2, 10);
  std::vector<float> buffer(10);
  EXPECT_THROW(ScheduleExecutor(s, buffer, 0), std::invalid_argument);
  EXPECT_THROW(ScheduleExecutor(s, buffer, kMaxSegmentBytes + 1), std::invalid_argument);
  EXPECT_THROW(ScheduleExecutor(s, buffer, SIZE_MAX), std::invalid_argument);  // once wrapped to a 1-float staging area
  EXPECT_NO_THROW(ScheduleExecutor(s, buffer, kMaxSegmentBytes));
}

// The staging area for adds is as large as the largest add, not as the segment: a 1 TiB segment
// over 10 floats once asked for 1 TiB per peer (std::bad_alloc); now it takes 5 floats and a bit,
// and a segment of any size sums exactly, partial floats and all.
TEST(ScheduleExecutorTest, AHugeSegmentCostsNoMoreThanTheLargestAdd) {
  for (const std::size_t segment : {std::size_t{1} << 40, kMaxSegmentBytes})
    for (const auto& [name, build] : kBuilders) {
      auto buffers = inputs(5, 10);
      EXPECT_NO_THROW(run_schedules_in_memory(schedules_of(build, 5, 10), buffers, segment)) << name;
      EXPECT_EQ(wrong_elements(buffers), 0u) << name << ", segment " << segment;
    }
  // The largest add, 3 bytes at a time: a partial float waits in front of every piece.
  auto buffers = inputs(3, 7);
  run_schedules_in_memory(schedules_of(ring_allreduce_schedule, 3, 7), buffers, 3);
  EXPECT_EQ(wrong_elements(buffers), 0u);
}

// move_bytes, the loop every transport runs: per pass all sends (peers in the order given, each
// until the transport takes nothing), then all receives likewise; passes repeat while bytes moved.
// ns-3's traces depend on this order.
TEST(ScheduleExecutorTest, MoveBytesSendsThenReceivesPeerByPeerUntilNothingMoves) {
  Schedule s{1, 3, 4, 1, {}};
  schedule_append(s, StepKind::kReceiveAdd, 0, {0, 4});  // 0
  schedule_append(s, StepKind::kSend, 2, {0, 4});        // 1: waits for 0
  schedule_append(s, StepKind::kSend, 0, {0, 2});        // 2: waits for 0's first half
  std::vector<float> buffer{1, 1, 1, 1};
  ScheduleExecutor ex(s, buffer, 8);
  const std::vector<int> peers{0, 2};
  std::vector<std::string> calls;
  const std::vector<float> incoming{1, 2, 3, 4};
  std::size_t offered = 0;  // bytes of `incoming` handed over
  bool blocked = false;     // the transport to rank 2 takes nothing
  const auto try_send = [&](int peer, std::span<const std::byte> out) -> std::size_t {
    calls.push_back("send " + std::to_string(peer) + " " + std::to_string(out.size()));
    return peer == 2 && blocked ? 0 : out.size();
  };
  const auto try_receive = [&](int peer, std::span<std::byte> into) -> std::size_t {
    const std::size_t k = std::min(into.size(), std::size_t{8} * (offered < 8));  // 8 bytes, once a call
    calls.push_back("receive " + std::to_string(peer) + " " + std::to_string(into.size()) + " -> " + std::to_string(k));
    std::memcpy(into.data(), reinterpret_cast<const std::byte*>(incoming.data()) + offered, k);
    offered += k;
    return k;
  };
  EXPECT_TRUE(move_bytes(ex, peers, try_send, try_receive));
  // Pass 1: nothing to send yet; 8 bytes arrive from rank 0. Pass 2: both sends take what was
  // added; no more bytes come. Pass 3: nothing moves.
  EXPECT_EQ(calls, (std::vector<std::string>{"receive 0 8 -> 8", "receive 0 8 -> 0", "send 0 8", "send 2 8",
                                             "receive 0 8 -> 0", "receive 0 8 -> 0"}));
  EXPECT_EQ(buffer, (std::vector<float>{2, 3, 1, 1}));
  calls.clear();
  blocked = true;
  offered = 0;  // the second half
  const std::vector<float> rest{3, 4, 0, 0};
  const auto try_receive_rest = [&](int, std::span<std::byte> into) -> std::size_t {
    const std::size_t k = std::min(into.size(), std::size_t{8} - offered);
    std::memcpy(into.data(), reinterpret_cast<const std::byte*>(rest.data()) + offered, k);
    offered += k;
    return k;
  };
  EXPECT_TRUE(move_bytes(ex, peers, try_send, try_receive_rest));
  // Pass 1: the send to rank 2 still waits; the rest arrives. Pass 2: the transport takes none of it.
  EXPECT_EQ(calls, (std::vector<std::string>{"send 2 8"}));
  EXPECT_EQ(buffer, (std::vector<float>{2, 3, 4, 5}));
  EXPECT_FALSE(ex.done());
  EXPECT_FALSE(move_bytes(ex, peers, try_send, try_receive_rest));
  blocked = false;
  EXPECT_TRUE(move_bytes(ex, peers, try_send, try_receive_rest));
  EXPECT_TRUE(ex.done());
}

TEST(ScheduleTest, BuildersRefuseImpossibleInput) {
  EXPECT_THROW(ring_allreduce_schedule(3, 3, 10), std::invalid_argument);
  EXPECT_THROW(ring_allreduce_schedule(0, 0, 10), std::invalid_argument);
  EXPECT_THROW(halving_doubling_allreduce_schedule(-1, 4, 10), std::invalid_argument);
  EXPECT_THROW(hierarchical_allreduce_schedule(0, 4, 10, {{0, 1}, {2}}), std::invalid_argument);  // 3 in none
  EXPECT_THROW(hierarchical_allreduce_schedule(0, 4, 10, {{0, 1}, {1, 2, 3}}), std::invalid_argument);
  EXPECT_THROW(hierarchical_allreduce_schedule(0, 2, 10, {{0, 1}, {}}), std::invalid_argument);
  try {
    hierarchical_allreduce_schedule(0, 4, 10, {{0, 1}, {2, 4}, {3}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "hierarchical allreduce schedule: rank 4 of group 1 is not in [0, 4)");
  }
  try {
    hierarchical_allreduce_schedule(0, 4, 10, {{0, 1}, {1, 2, 3}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "hierarchical allreduce schedule: rank 1 is in group 0 and again in group 1; the groups must "
                 "partition the ranks");
  }
  EXPECT_THROW(hierarchical_allreduce_schedule(0, 4, 10, {{-1, 0, 1, 2, 3}}), std::invalid_argument);
  try {
    hierarchical_allreduce_schedule(0, 1, 10, {});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "hierarchical allreduce schedule: no groups; the groups must partition the ranks");
  }
  EXPECT_EQ(schedule_peers(ring_allreduce_schedule(0, 5, 0)), (std::vector<int>{1, 4}));
  EXPECT_EQ(schedule_peers(halving_doubling_allreduce_schedule(1, 6, 0)), (std::vector<int>{0, 3, 4}));
}

}  // namespace
}  // namespace atp
