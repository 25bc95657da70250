// Tests of the allreduce baselines (the TCP ring and halving-doubling, Gloo's ring and halving-doubling)
// on 127.0.0.1, one thread per rank in one process: exact sums, and peers that never join or die.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#if ATP_WITH_GLOO
#include "atp/baselines/gloo_allreduce.h"
#endif
#include "atp/baselines/halving_doubling_allreduce.h"
#include "atp/baselines/ring_allreduce.h"
#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/schedule/builders.h"
#include "support/memory_store.h"
#include "support/run_ranks.h"

namespace atp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Gloo's writes to a rank that died raise SIGPIPE (gloo_allreduce.h): ignored in this process, as
// `atp worker` does, so that the test sees Gloo's error instead of being killed by it.
const bool kSigpipeIgnored = ::signal(SIGPIPE, SIG_IGN) != SIG_ERR;

enum class Kind { kRing, kHalvingDoubling, kGlooRing, kGlooHalvingDoubling };

bool is_gloo(Kind kind) { return kind == Kind::kGlooRing || kind == Kind::kGlooHalvingDoubling; }

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::kRing:
      return "ring";
    case Kind::kHalvingDoubling:
      return "hd";
    case Kind::kGlooRing:
      return "gloo_ring";
    case Kind::kGlooHalvingDoubling:
      return "gloo_hd";
  }
  return "?";
}

// `n` distinct free TCP ports on 127.0.0.1: all bound to port 0 at once (so the kernel hands out
// different ones), then released for the ring to bind again (it sets SO_REUSEADDR).
std::vector<std::string> free_loopback_addresses(int n) {
  std::vector<int> fds;
  std::vector<std::string> addresses;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot bind a TCP socket to 127.0.0.1:0");
    fds.push_back(fd);
    addresses.push_back("127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  }
  for (int fd : fds) ::close(fd);
  return addresses;
}

// The baselines of this build: Gloo's two where it has Gloo (ATP_WITH_GLOO).
const std::vector<Kind> kKinds =
    ATP_WITH_GLOO ? std::vector<Kind>{Kind::kRing, Kind::kHalvingDoubling, Kind::kGlooRing, Kind::kGlooHalvingDoubling}
                  : std::vector<Kind>{Kind::kRing, Kind::kHalvingDoubling};

// One job's rendezvous: loopback ports for the TCP schedules, a fresh FileStore directory for Gloo.
class Job {
 public:
  Job(Kind kind, int size, Duration timeout) : kind_(kind), size_(size), timeout_(timeout) {
    if (!is_gloo(kind)) {
      addresses_ = free_loopback_addresses(size);
    } else {
      std::string pattern = (std::filesystem::path(::testing::TempDir()) / "atp-gloo-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a store directory");
      store_dir_ = pattern;
    }
  }
  ~Job() {
    std::error_code ignored;
    if (!store_dir_.empty()) std::filesystem::remove_all(store_dir_, ignored);
  }

  std::unique_ptr<Allreduce> join(int rank) const {
    if (kind_ == Kind::kRing) return std::make_unique<RingAllreduce>(rank, size_, addresses_, timeout_);
    if (kind_ == Kind::kHalvingDoubling)
      return std::make_unique<HalvingDoublingAllreduce>(rank, size_, addresses_, timeout_);
#if ATP_WITH_GLOO
    GlooAllreduceConfig config;
    config.rank = rank;
    config.size = size_;
    config.local_ip = "127.0.0.1";
    config.store_dir = store_dir_;
    config.run_prefix = "test";
    config.algorithm = kind_ == Kind::kGlooRing ? GlooAlgorithm::kRing : GlooAlgorithm::kHalvingDoubling;
    config.timeout = timeout_;
    return std::make_unique<GlooAllreduce>(config);
#else
    throw std::logic_error("this build has no Gloo (ATP_WITH_GLOO=OFF)");
#endif
  }

 private:
  Kind kind_;
  int size_;
  Duration timeout_;
  std::vector<std::string> addresses_;
  std::string store_dir_;
};

using test::run_ranks;

std::string describe(const std::exception_ptr& error) {
  if (!error) return "no exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

// What CollectiveError said, or "" if `error` is not one (or nothing was thrown).
std::string collective_error(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveError& e) {
    return e.what();
  } catch (...) {
  }
  return "";
}

// Rank `rank`'s input in call `call`: integers in [-8, 8], different per rank, element and call
// (a chunk summed into the wrong place or a stale result changes the sum). Sums of up to 8 ranks
// stay below 2^24, so float addition is exact in any order and results compare with ==.
float small_integer(int rank, std::size_t i, int call) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13 + call * 5) % 17) - 8);
}

// ranks x elements x algorithm.
using SumParams = std::tuple<int, std::size_t, Kind>;

class BaselineSumTest : public ::testing::TestWithParam<SumParams> {};

// Two calls in a row on the same connections, each compared element by element with the integer
// sum computed here; every rank must end with the same, exact result.
TEST_P(BaselineSumTest, SumsSmallIntegersExactly) {
  const auto [size, count, kind] = GetParam();
  constexpr int kCalls = 2;
  const Job job(kind, size, 20s);
  std::vector<std::vector<std::vector<float>>> results(static_cast<std::size_t>(size));  // [rank][call]
  const auto errors = run_ranks(size, [&](int rank) {
    const auto allreduce = job.join(rank);
    for (int call = 0; call < kCalls; ++call) {
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = small_integer(rank, i, call);
      allreduce->allreduce(data);
      results[static_cast<std::size_t>(rank)].push_back(std::move(data));
    }
    allreduce->close();
  });
  for (int rank = 0; rank < size; ++rank)
    ASSERT_FALSE(errors[rank]) << "rank " << rank << ": " << describe(errors[rank]);

  for (int call = 0; call < kCalls; ++call) {
    for (int rank = 0; rank < size; ++rank) {
      const std::vector<float>& got = results[static_cast<std::size_t>(rank)][static_cast<std::size_t>(call)];
      std::size_t wrong = 0, first_wrong = count;
      for (std::size_t i = 0; i < count; ++i) {
        std::int64_t expected = 0;
        for (int r = 0; r < size; ++r) expected += static_cast<std::int64_t>(small_integer(r, i, call));
        if (got[i] != static_cast<float>(expected)) {
          if (wrong++ == 0) first_wrong = i;
        }
      }
      EXPECT_EQ(wrong, 0u) << "call " << call << ", rank " << rank << ": " << wrong << " of " << count
                           << " elements wrong, the first at index " << first_wrong;
    }
  }
}

// Gloo's ring over 127.0.0.1 (MTU 65536) can wait about 42 ms for writability per step
// (PLATFORM-NOTES); the sizes stay at about 4 MiB so the whole file runs in seconds.
INSTANTIATE_TEST_SUITE_P(RanksSizesAlgorithms, BaselineSumTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(std::size_t{1}, std::size_t{7}, std::size_t{1000},
                                                              std::size_t{(1 << 20) + 3}),
                                            ::testing::ValuesIn(kKinds)),
                         [](const ::testing::TestParamInfo<SumParams>& p) {
                           return kind_name(std::get<2>(p.param)) + "_" + std::to_string(std::get<0>(p.param)) +
                                  "ranks_" + std::to_string(std::get<1>(p.param)) + "floats";
                         });

// Halving-doubling's extra pre- and post-step when the size is no power of two.
INSTANTIATE_TEST_SUITE_P(HalvingDoublingNonPowersOfTwo, BaselineSumTest,
                         ::testing::Combine(::testing::Values(5, 6, 7),
                                            ::testing::Values(std::size_t{3}, std::size_t{(1 << 18) + 5}),
                                            ::testing::Values(Kind::kHalvingDoubling)),
                         [](const ::testing::TestParamInfo<SumParams>& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "floats";
                         });

class BaselineTest : public ::testing::TestWithParam<Kind> {};

// Random floats: the float sum differs from the exact one by rounding only. Each of the n-1
// additions of an element rounds by at most FLT_EPSILON/2 of a partial sum, and every partial sum
// is at most sum|x|, so |float sum - exact| <= (n-1) * FLT_EPSILON/2 * sum|x|; the test allows
// twice that. A misplaced or missing chunk is off by about |x| itself, far above the bound.
TEST_P(BaselineTest, RandomFloatsWithinRoundingOfTheExactSum) {
  constexpr int kSize = 4;
  constexpr std::size_t kCount = 100003;  // not a multiple of 4: chunks of different sizes
  const Job job(GetParam(), kSize, 20s);
  std::vector<std::vector<float>> inputs(kSize), results(kSize);
  for (int rank = 0; rank < kSize; ++rank) {
    std::mt19937 random(1234 + static_cast<unsigned>(rank));
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (std::size_t i = 0; i < kCount; ++i) inputs[rank].push_back(value(random));
  }
  const auto errors = run_ranks(kSize, [&](int rank) {
    const auto allreduce = job.join(rank);
    results[rank] = inputs[rank];
    allreduce->allreduce(results[rank]);
    allreduce->close();
  });
  for (int rank = 0; rank < kSize; ++rank)
    ASSERT_FALSE(errors[rank]) << "rank " << rank << ": " << describe(errors[rank]);

  std::size_t outside = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < kSize; ++r) {
      exact += inputs[r][i];
      magnitude += std::fabs(inputs[r][i]);
    }
    const double bound = (kSize - 1) * static_cast<double>(FLT_EPSILON) * magnitude;
    if (std::fabs(results[0][i] - exact) > bound) ++outside;
  }
  EXPECT_EQ(outside, 0u) << "elements further from the exact sum than rounding allows";
  // Each chunk is summed once and then copied around, so every rank holds the same bits.
  for (int rank = 1; rank < kSize; ++rank) EXPECT_EQ(results[rank], results[0]) << "rank " << rank;
}

// A rank that never starts: the others must give up with CollectiveError about the timeout
// (Gloo's FileStore counts its wait in whole seconds: up to 1 s more) instead of hanging.
TEST_P(BaselineTest, RankThatNeverJoinsFailsTheOthersWithinTheTimeout) {
  constexpr int kSize = 3;
  constexpr Duration kTimeout = 2s;
  const Job job(GetParam(), kSize, kTimeout);
  const auto start = Clock::now();
  const auto errors = run_ranks(kSize - 1, [&](int rank) {  // rank 2 never joins
    const auto allreduce = job.join(rank);
    std::vector<float> data(1000, 1.0f);
    allreduce->allreduce(data);
  });
  const auto elapsed = Clock::now() - start;
  for (int rank = 0; rank < kSize - 1; ++rank) {
    const std::string message = collective_error(errors[rank]);
    EXPECT_NE(message, "") << "rank " << rank << ": " << describe(errors[rank]);
    // The ring names the missing neighbour; Gloo says a rank did not join.
    if (GetParam() == Kind::kRing && rank == 0) {
      EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
    }
    if (is_gloo(GetParam())) {
      EXPECT_NE(message.find("did not join"), std::string::npos) << message;
    }
  }
  EXPECT_LT(elapsed, kTimeout + 3s);  // 1 s of FileStore rounding, 2 s for a loaded machine
}

// A rank that joins and then dies (its object is destroyed without close(), its connections
// close): the others' next allreduce throws CollectiveError, well before the timeout. 4 ranks:
// with 3, Gloo's halving-doubling waits out its timeout before it reports "Connection closed by
// peer" (its non-power-of-two path; measured, see docs/baselines.md), which the ring does not.
TEST_P(BaselineTest, RankThatDiesFailsTheOthersQuickly) {
  constexpr int kSize = 4;
  constexpr Duration kTimeout = 5s;
  const Job job(GetParam(), kSize, kTimeout);
  std::latch joined(kSize), died(1);
  Clock::time_point start;
  const auto errors = run_ranks(kSize, [&](int rank) {
    auto allreduce = job.join(rank);
    joined.arrive_and_wait();
    if (rank == kSize - 1) {
      allreduce.reset();
      start = Clock::now();
      died.count_down();
      return;
    }
    died.wait();
    std::vector<float> data(100000, 1.0f);
    allreduce->allreduce(data);
  });
  const auto elapsed = Clock::now() - start;
  EXPECT_FALSE(errors[kSize - 1]) << describe(errors[kSize - 1]);
  for (int rank = 0; rank < kSize - 1; ++rank)
    EXPECT_NE(collective_error(errors[rank]), "") << "rank " << rank << ": " << describe(errors[rank]);
  EXPECT_LT(elapsed, kTimeout) << "the survivors only noticed by their timeout";
}

// A rank that joins but never calls allreduce (stuck, not dead): the others' allreduce throws
// CollectiveError once nothing moved for the timeout, and not much earlier.
TEST_P(BaselineTest, StuckRankTimesOut) {
  constexpr int kSize = 2;
  constexpr Duration kTimeout = 1s;
  const Job job(GetParam(), kSize, kTimeout);
  std::latch joined(kSize), gave_up(1);
  Duration waited{};
  const auto errors = run_ranks(kSize, [&](int rank) {
    const auto allreduce = job.join(rank);
    joined.arrive_and_wait();
    if (rank == 1) {
      gave_up.wait();  // stays alive, connections open, until rank 0 has given up
      return;
    }
    std::vector<float> data(1000, 1.0f);
    const auto start = Clock::now();
    try {
      allreduce->allreduce(data);
    } catch (...) {
      waited = Clock::now() - start;
      gave_up.count_down();
      throw;
    }
    gave_up.count_down();
  });
  EXPECT_NE(collective_error(errors[0]), "") << describe(errors[0]);
  EXPECT_GE(waited, kTimeout * 9 / 10);
  EXPECT_LT(waited, kTimeout + 2s);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BaselineTest, ::testing::ValuesIn(kKinds),
                         [](const ::testing::TestParamInfo<Kind>& p) { return kind_name(p.param); });

// Ranks that disagree on the buffer size get one clear sentence, not a corrupted sum.
TEST(RingAllreduceTest, DifferentSizesOnDifferentRanksFail) {
  const auto addresses = free_loopback_addresses(2);
  const auto errors = run_ranks(2, [&](int rank) {
    RingAllreduce ring(rank, 2, addresses, 5s);
    std::vector<float> data(rank == 0 ? 10 : 11, 1.0f);
    ring.allreduce(data);
  });
  for (int rank = 0; rank < 2; ++rank) {
    const std::string message = collective_error(errors[rank]);
    EXPECT_NE(message.find("every rank must pass the same size"), std::string::npos)
        << "rank " << rank << ": " << describe(errors[rank]);
  }
}

// Groups of three consecutive ranks (the last one shorter), for the hierarchical schedule.
Schedule hierarchical_in_threes(int rank, int size, std::size_t count) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < size; ++r) {
    if (r % 3 == 0) groups.emplace_back();
    groups.back().push_back(r);
  }
  return hierarchical_allreduce_schedule(rank, size, count, groups);
}

// A ring over three connections per pair (lanes, schedule.h), round robin: step t of the ring on
// lane t mod 3, so each ring step's chunk has a stream (and a TCP connection) of its own.
Schedule ring_on_three_lanes(int rank, int size, std::size_t count) {
  Schedule s = ring_allreduce_schedule(rank, size, count);
  s.lanes = 3;
  for (std::size_t i = 0; i < s.steps.size(); ++i) s.steps[i].lane = static_cast<int>(i / 2 % 3);
  return s;
}

// algorithm x ranks: the schedules with more than two streams per rank (halving-doubling's
// partners, hierarchical's rings inside and across racks) as well as the ring's.
using TinyParams = std::tuple<std::string, int>;
class TinySegmentsTest : public ::testing::TestWithParam<TinyParams> {};

// Tiny pieces and small kernel buffers: many send()/recv() calls per chunk, sends that would
// block, and pieces forwarded before their chunk is complete; the sum must stay exact.
TEST_P(TinySegmentsTest, TinySegmentsAndSmallSocketBuffersStillSumExactly) {
  const auto [name, size] = GetParam();
  const ScheduleBuilder build = name == "ring"               ? ScheduleBuilder(ring_allreduce_schedule)
                                : name == "ring_lanes"       ? ScheduleBuilder(ring_on_three_lanes)
                                : name == "halving_doubling" ? ScheduleBuilder(halving_doubling_allreduce_schedule)
                                                             : ScheduleBuilder(hierarchical_in_threes);
  constexpr std::size_t kCount = 100001;
  const auto addresses = free_loopback_addresses(size);
  TcpAllreduceOptions options;
  options.segment_bytes = 12;  // 3 floats per call
  options.socket_buffer_bytes = 4096;
  std::vector<std::vector<float>> results(static_cast<std::size_t>(size));
  const auto errors = run_ranks(size, [&](int rank) {
    TcpScheduleAllreduce allreduce(name, build, rank, size, addresses, 20s, options);
    std::vector<float>& data = results[static_cast<std::size_t>(rank)];
    data.resize(kCount);
    for (std::size_t i = 0; i < kCount; ++i) data[i] = small_integer(rank, i, 0);
    allreduce.allreduce(data);
  });
  for (int rank = 0; rank < size; ++rank)
    ASSERT_FALSE(errors[rank]) << "rank " << rank << ": " << describe(errors[rank]);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += small_integer(r, i, 0);
    for (const auto& result : results) wrong += result[i] != sum;
  }
  EXPECT_EQ(wrong, 0u);
}

// 3 ranks: the ring; 5 and 6: halving-doubling's extra pre- and post-steps, with 4 taking part;
// 4 and 7: hierarchical, racks of 3 and 1 (4) and of 3, 3 and 1 (7), unequal racks; the ring on
// three lanes, each a connection of its own.
INSTANTIATE_TEST_SUITE_P(Algorithms, TinySegmentsTest,
                         ::testing::Values(TinyParams{"ring", 3}, TinyParams{"ring_lanes", 4},
                                           TinyParams{"halving_doubling", 4}, TinyParams{"halving_doubling", 5},
                                           TinyParams{"halving_doubling", 6}, TinyParams{"hierarchical", 4},
                                           TinyParams{"hierarchical", 7}),
                         [](const ::testing::TestParamInfo<TinyParams>& p) {
                           return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
                         });

// After a failure the object stays failed: the next call throws the same error at once.
TEST(RingAllreduceTest, StaysFailedAfterAnError) {
  const auto addresses = free_loopback_addresses(2);
  std::string first, second;
  const auto errors = run_ranks(2, [&](int rank) {
    auto ring = std::make_unique<RingAllreduce>(rank, 2, addresses, 5s);
    if (rank == 1) return;  // dies: its connections close when `ring` goes
    std::vector<float> data(10, 1.0f);
    try {
      ring->allreduce(data);
    } catch (const CollectiveError& e) {
      first = e.what();
    }
    try {
      ring->allreduce(data);
    } catch (const CollectiveError& e) {
      second = e.what();
    }
  });
  EXPECT_NE(first, "");
  EXPECT_EQ(second, first);
}

// An exception from inside the run that is not a transport error (here the builder's; the
// executor's std::logic_error takes the same path) fails the object as a transport error does:
// CollectiveError, connections closed so the peer fails at once, and the same error next time.
TEST(TcpScheduleAllreduceTest, StaysFailedAfterAnErrorFromInsideTheRun) {
  const auto addresses = free_loopback_addresses(2);
  const ScheduleBuilder build = [](int rank, int size, std::size_t count) {
    if (rank == 0 && count == 13) throw std::logic_error("no schedule for 13 elements");
    return ring_allreduce_schedule(rank, size, count);
  };
  std::string first, second;
  const auto start = Clock::now();
  const auto errors = run_ranks(2, [&](int rank) {
    TcpScheduleAllreduce allreduce("odd", build, rank, 2, addresses, 10s);
    std::vector<float> data(13, 1.0f);
    if (rank == 1) {
      allreduce.allreduce(data);  // fails when rank 0 closes its connection
      return;
    }
    try {
      allreduce.allreduce(data);
    } catch (const CollectiveError& e) {
      first = e.what();
    }
    try {
      allreduce.allreduce(data);
    } catch (const CollectiveError& e) {
      second = e.what();
    }
  });
  EXPECT_EQ(first, "odd allreduce on rank 0 of 2: no schedule for 13 elements");
  EXPECT_EQ(second, first);
  // "closed the connection", or "Connection reset by peer" where rank 0 closed with bytes unread.
  EXPECT_NE(collective_error(errors[1]), "") << describe(errors[1]);
  EXPECT_LT(Clock::now() - start, 5s) << "rank 1 only noticed by its timeout";
}

// A builder whose peers grow with the element count: the connections are made to the peers of
// its schedule without elements (none here), so a call with elements would have nowhere to send
// and, before this check, left every buffer as it was (each rank's own values, no error). Now it
// fails loudly, naming the peer.
TEST(TcpScheduleAllreduceTest, ASchedulePeerWithoutAConnectionFailsInsteadOfSummingNothing) {
  const auto addresses = free_loopback_addresses(2);
  const ScheduleBuilder build = [](int rank, int size, std::size_t count) {
    return count == 0 ? Schedule{.rank = rank, .size = size, .count = 0, .lanes = 1, .steps = {}}
                      : ring_allreduce_schedule(rank, size, count);
  };
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    TcpScheduleAllreduce allreduce("growing", build, rank, 2, addresses, 10s);
    std::vector<float> data(8, 1.0f);
    try {
      allreduce.allreduce(data);
    } catch (const CollectiveError& e) {
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  EXPECT_EQ(errors[0].rfind("growing allreduce on rank 0 of 2: the schedule for 8 elements exchanges with rank 1 (", 0),
            0u)
      << errors[0];
  EXPECT_NE(errors[1].find("which the schedule without elements did not name"), std::string::npos) << errors[1];
}

// A connection to a rank's port that never says hello (a port scan, a health check) is dropped
// after about a second, and the real peers' hellos are read meanwhile: setup is not held up until
// the timeout.
TEST(TcpScheduleAllreduceTest, ASilentStrayConnectionDoesNotHoldUpTheSetup) {
  constexpr Duration kTimeout = 10s;
  const auto addresses = free_loopback_addresses(2);
  const int stray = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(stray, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(addresses[1].substr(addresses[1].rfind(':') + 1))));
  std::latch stray_connected(1);
  std::vector<Duration> setup(2);
  const auto start = Clock::now();
  const auto errors = run_ranks(3, [&](int who) {
    if (who == 2) {  // the stray: connects to rank 1 once it listens, first in its queue, then says nothing
      while (::connect(stray, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
        if (Clock::now() - start > kTimeout) throw std::runtime_error("rank 1 never listened");
        std::this_thread::sleep_for(5ms);
      }
      stray_connected.count_down();
      return;
    }
    if (who == 0) stray_connected.wait();
    RingAllreduce ring(who, 2, addresses, kTimeout);
    setup[static_cast<std::size_t>(who)] = Clock::now() - start;
    std::vector<float> data(1000, 1.0f);
    ring.allreduce(data);
    if (data != std::vector<float>(1000, 2.0f)) throw std::runtime_error("wrong sum");
  });
  ::close(stray);
  for (int who = 0; who < 3; ++who) ASSERT_FALSE(errors[who]) << who << ": " << describe(errors[who]);
  EXPECT_LT(setup[1], 3s) << "rank 1 waited for the stray's hello";
}

// Accepting can fail for good (out of file descriptors: the connection stays queued and the
// listener ready at once); that is one clear CollectiveError, not a loop past the deadline.
TEST(TcpScheduleAllreduceTest, AnAcceptThatFailsIsAnErrorNotASpin) {
  constexpr Duration kTimeout = 3s;
  const auto addresses = free_loopback_addresses(2);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(addresses[1].substr(addresses[1].rfind(':') + 1))));
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  // Every descriptor but one taken (under a low limit, so that this is quick): rank 1's listener
  // gets the last one, and its accept() fails with EMFILE.
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old_limit), 0);
  rlimit low = old_limit;
  low.rlim_cur = std::min<rlim_t>(old_limit.rlim_cur, 256);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  if (filler.empty()) {  // more than 256 open already: restore the limit before giving up
    ::setrlimit(RLIMIT_NOFILE, &old_limit);
    ::close(client);
    FAIL() << "no descriptor left to free for the listener";
  }
  ::close(filler.back());
  filler.pop_back();
  std::string message;
  std::atomic<bool> returned = false;
  std::thread rank1([&] {
    try {
      RingAllreduce ring(1, 2, addresses, kTimeout);
    } catch (const CollectiveError& e) {
      message = e.what();
    }
    returned = true;
  });
  // Rank 1 listens soon; a refused connect() may be retried on the same socket on Linux.
  const auto start = Clock::now();
  while (::connect(client, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && Clock::now() - start < kTimeout)
    std::this_thread::sleep_for(5ms);
  while (!returned && Clock::now() - start < kTimeout + 2s) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(returned) << "rank 1 was still accepting 2 s past its deadline";
  for (const int fd : filler) ::close(fd);  // lets a spinning accept() through, so that the join ends
  rank1.join();
  ::close(client);
  ::setrlimit(RLIMIT_NOFILE, &old_limit);
  EXPECT_EQ(message, "ring allreduce on rank 1 of 2: cannot accept a connection on " + addresses[1] + ": " +
                         std::generic_category().message(EMFILE));
}

// Ranks with no port known ahead (a PyTorch group's) meet through a store: each listens where
// the kernel says, and the hierarchical schedule's sums are exact on every rank.
TEST(TcpScheduleAllreduceTest, RanksWithoutKnownPortsMeetThroughAStore) {
  constexpr int kSize = 5;
  constexpr std::size_t kCount = 1001;
  test::MemoryStore store;
  std::vector<std::vector<float>> results(kSize);
  const auto errors = run_ranks(kSize, [&](int rank) {
    const auto allreduce =
        TcpScheduleAllreduce::join("hierarchical", hierarchical_in_threes, store, rank, kSize, 0x7F000001, 20s);
    std::vector<float> data(kCount);
    for (std::size_t i = 0; i < kCount; ++i) data[i] = small_integer(rank, i, 0);
    allreduce->allreduce(data);
    results[static_cast<std::size_t>(rank)] = std::move(data);
  });
  for (int rank = 0; rank < kSize; ++rank)
    ASSERT_FALSE(errors[rank]) << "rank " << rank << ": " << describe(errors[rank]);
  for (int rank = 0; rank < kSize; ++rank) {
    for (std::size_t i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int r = 0; r < kSize; ++r) expected += small_integer(r, i, 0);
      ASSERT_EQ(results[static_cast<std::size_t>(rank)][i], expected) << "rank " << rank << ", element " << i;
    }
  }
  // A rank that never says where it listens: the others fail naming the key, within the timeout.
  test::MemoryStore alone;
  EXPECT_THROW(TcpScheduleAllreduce::join("ring", ring_allreduce_schedule, alone, 0, 2, 0x7F000001, 100ms),
               CollectiveError);
}

TEST(RingAllreduceTest, RejectsBadArguments) {
  EXPECT_THROW(RingAllreduce(2, 2, {"127.0.0.1:1", "127.0.0.1:2"}, 1s), std::invalid_argument);
  EXPECT_THROW(RingAllreduce(0, 2, {"127.0.0.1:1"}, 1s), std::invalid_argument);
  EXPECT_THROW(RingAllreduce(0, 1, {"localhost:1"}, 1s), std::invalid_argument);
  EXPECT_EQ(RingAllreduce(0, 1, {"127.0.0.1:1"}, 1s).algorithm(), "ring");
  EXPECT_THROW(HalvingDoublingAllreduce(0, 3, {"127.0.0.1:1", "127.0.0.1:2"}, 1s), std::invalid_argument);
  EXPECT_EQ(HalvingDoublingAllreduce(0, 1, {"127.0.0.1:1"}, 1s).algorithm(), "halving_doubling");
  RingAllreduceOptions huge;
  huge.segment_bytes = SIZE_MAX;
  EXPECT_THROW(RingAllreduce(0, 1, {"127.0.0.1:1"}, 1s, huge), std::invalid_argument);
}

#if ATP_WITH_GLOO
TEST(GlooAllreduceTest, ParsesAlgorithmNames) {
  EXPECT_EQ(parse_gloo_algorithm("ring"), GlooAlgorithm::kRing);
  EXPECT_EQ(parse_gloo_algorithm("halving_doubling"), GlooAlgorithm::kHalvingDoubling);
  EXPECT_THROW(parse_gloo_algorithm("bcube"), std::invalid_argument);
}
#endif

}  // namespace
}  // namespace atp
