// Unit tests of the simulated runner's round drivers (src/backends/simulated/rounds.h, rounds.cc):
// a worker's rounds one after another, each checked exactly, and a job's round times. A scripted
// network and fake endpoints (support/simulated_fakes.h) stand in for the in-process network and
// a protocol's: a driver's rounds are seen one call at a time, without planning a whole scenario.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../src/backends/simulated/rounds.h"
#include "atp/fixed_point.h"
#include "atp/scenario/inputs.h"
#include "support/simulated_fakes.h"

namespace atp::simulated {
namespace {

using namespace std::chrono_literals;
using atp::test::at;
using atp::test::FakeEndpoint;
using atp::test::packet_of;
using atp::test::ScriptedNetwork;

// Job 1 of two workers, on hosts h0 and h1 (nodes 10, 11) with fake endpoints: 2 rounds of 10
// values, 4 per fragment, 1 ms of compute between them. A JobRuntime built by hand, as the runner
// builds one (add_endpoints), without a plan: a driver reads only the job, seed, fragment width
// and network.
class RoundDriverTest : public ::testing::Test {
 protected:
  static constexpr JobId kJob = 1;
  static constexpr std::uint64_t kSeed = 5;
  static constexpr std::uint16_t kWidth = 4;

  RoundDriverTest() {
    job.spec.id = kJob;
    job.spec.workers = {"h0", "h1"};
    job.elements = 10;
    job.rounds = 2;
    job.magnitude = 2;
    job.compute_time = 1ms;
    jobs.push_back(std::make_unique<JobRuntime>());
    rt().job = &job;
    rt().network = &network;
    rt().seed = kSeed;
    rt().values_per_packet = kWidth;
    for (std::size_t w = 0; w < 2; ++w) {
      rt().drivers.push_back(std::make_unique<RoundDriver>(rt(), w, *hosts[w], static_cast<NodeId>(10 + w)));
      auto endpoint = std::make_unique<FakeEndpoint>();
      endpoints[w] = endpoint.get();
      hosts[w]->workers.emplace(kJob, HostNode::LocalWorker{std::move(endpoint), rt().drivers.back().get()});
    }
  }
  JobRuntime& rt() { return *jobs[0]; }
  RoundDriver& driver(std::size_t w) { return *rt().drivers[w]; }
  // Worker w's input in `round`: its own seeded stream.
  std::vector<float> input(std::size_t w, std::uint32_t round) const {
    std::vector<float> v(job.elements);
    scenario_inputs::generate_input(scenario_inputs::input_seed(kSeed, kJob, w, round), job.magnitude, v);
    return v;
  }
  // The sums of `round` as an ATP job's PS sends them: int sums at each fragment's exponent.
  std::vector<float> exact(std::uint32_t round) const {
    scenario_inputs::RoundReference ref;
    scenario_inputs::make_reference(kSeed, kJob, 2, round, job.elements, job.magnitude, job.spec.scale, kWidth, ref);
    std::vector<float> sums(job.elements);
    for (std::size_t i = 0; i < sums.size(); ++i)
      sums[i] = dequantize_one(ref.int_sum[i], std::ldexp(1.0, ref.exponents[i / kWidth]));
    return sums;
  }
  // Worker w's round ends at `now` with `result`: a packet to its host completes it.
  void finish(std::size_t w, std::vector<float> result, Time now) {
    endpoints[w]->result_values = std::move(result);
    std::vector<std::uint8_t> packet = packet_of(kJob, true);
    hosts[w]->on_packet(0, packet, now, network.sent);
  }

  ScenarioJob job;
  ScriptedNetwork network;
  Activity activity;
  std::unique_ptr<HostNode> hosts[2] = {std::make_unique<HostNode>("h0", activity),
                                        std::make_unique<HostNode>("h1", activity)};
  std::vector<std::unique_ptr<JobRuntime>> jobs;
  FakeEndpoint* endpoints[2] = {};
};

// A scheduled start begins the round at its time with the worker's own seeded input, and wakes
// its host (the network re-reads the endpoint's deadline). Exact results complete the round; the
// next starts the compute time after the worker's end; a round's reference goes once every worker
// has checked against it; after the last round nothing is scheduled and no job runs.
TEST_F(RoundDriverTest, RunsItsRoundsOneAfterAnotherOnItsSeededInputs) {
  driver(0).schedule_start(at(1ms));
  driver(1).schedule_start(at(1ms));
  network.run_until(at(1ms) - 1ns);
  EXPECT_TRUE(endpoints[0]->starts.empty());
  network.run_until(at(1ms));
  EXPECT_EQ(endpoints[1]->starts, std::vector<std::vector<float>>{input(1, 0)});
  EXPECT_NE(input(1, 0), input(0, 0));
  EXPECT_TRUE(driver(1).running);
  EXPECT_EQ(network.woken, (std::vector<NodeId>{10, 11}));
  finish(0, exact(0), at(2ms));
  EXPECT_EQ(driver(0).rounds_completed, 1u);
  EXPECT_FALSE(driver(0).running);
  EXPECT_EQ(rt().references.size(), 1u) << "worker 1 has yet to check round 0";
  finish(1, exact(0), at(3ms));
  EXPECT_TRUE(rt().references.empty());
  network.run_until(at(3ms) - 1ns);
  EXPECT_EQ(endpoints[0]->starts.size(), 1u);
  network.run_until(at(4ms));
  ASSERT_EQ(endpoints[0]->starts.size(), 2u);
  EXPECT_EQ(endpoints[0]->starts[1], input(0, 1));
  ASSERT_EQ(endpoints[1]->starts.size(), 2u);
  EXPECT_TRUE(any_job_running(jobs));
  finish(0, exact(1), at(5ms));
  finish(1, exact(1), at(6ms));
  for (std::size_t w = 0; w < 2; ++w) {
    EXPECT_EQ(driver(w).rounds_completed, 2u);
    EXPECT_EQ(driver(w).error, "");
    EXPECT_FALSE(driver(w).mismatch);
  }
  EXPECT_TRUE(network.events.empty());
  EXPECT_FALSE(any_job_running(jobs));
}

// One wrong value is a mismatch whose sentence names the worker and the round; the round still
// counts as completed (the run goes on, and reports it), and the other worker is not affected.
TEST_F(RoundDriverTest, AWrongValueIsAMismatchNamingTheWorkerAndRound) {
  driver(0).start_round(at(0ms));
  driver(1).start_round(at(0ms));
  std::vector<float> wrong = exact(0);
  wrong[6] += 1;
  finish(0, wrong, at(1ms));
  finish(1, exact(0), at(1ms));
  EXPECT_TRUE(driver(0).mismatch);
  EXPECT_EQ(driver(0).wrong_values, 1u);
  EXPECT_EQ(driver(0).error.rfind("worker 'h0' round 0: value 6 ", 0), 0u) << driver(0).error;
  EXPECT_EQ(driver(0).rounds_completed, 1u);
  EXPECT_FALSE(driver(1).mismatch) << driver(1).error;
}

// A failed endpoint stops its driver for good with the endpoint's sentence; so does an endpoint
// that will not start; a second reason does not replace the first.
TEST_F(RoundDriverTest, AFailedOrBusyEndpointStopsItsDriverWithOneSentence) {
  driver(0).start_round(at(0ms));
  endpoints[0]->error_text = "no progress for 1 s";
  finish(0, {}, at(1ms));
  EXPECT_TRUE(driver(0).stopped);
  EXPECT_FALSE(driver(0).running);
  EXPECT_EQ(driver(0).error, "worker 'h0' failed in round 0: no progress for 1 s");
  EXPECT_EQ(driver(0).rounds_completed, 0u);
  EXPECT_TRUE(network.events.empty());
  endpoints[1]->busy = true;
  driver(1).start_round(at(2ms));
  EXPECT_TRUE(driver(1).stopped);
  EXPECT_EQ(driver(1).error, "worker 'h1' could not start round 0 (still busy)");
  driver(1).fail("a later reason");
  EXPECT_EQ(driver(1).error, "worker 'h1' could not start round 0 (still busy)");
  EXPECT_FALSE(any_job_running(jobs));
}

// A restart (a Rina job re-formed) begins the given round at once, and the start the driver had
// scheduled before is void.
TEST_F(RoundDriverTest, ARestartVoidsTheStartScheduledBefore) {
  driver(0).start_round(at(0ms));
  finish(0, exact(0), at(1ms));  // round 1 scheduled at 2 ms
  driver(0).restart(0, at(1500us));
  ASSERT_EQ(endpoints[0]->starts.size(), 2u);
  EXPECT_EQ(endpoints[0]->starts[1], input(0, 0));
  EXPECT_EQ(driver(0).rounds_completed, 0u);
  network.run_until(at(10ms));
  EXPECT_EQ(endpoints[0]->starts.size(), 2u);
}

// A job re-formed gives its workers new endpoints: a worker's counts over the run are still those
// of every endpoint it had (the report and the series add them; the series' goodput went below
// zero when they restarted from the new endpoint's).
TEST_F(RoundDriverTest, ReplacedEndpointsCountsStayTheWorkers) {
  endpoints[0]->counts_value.retransmissions = 3;
  endpoints[0]->counts_value.result_values = 40;
  auto next = std::make_unique<FakeEndpoint>();
  next->counts_value.retransmissions = 2;
  FakeEndpoint* fresh = next.get();
  driver(0).replace_endpoint(std::move(next));
  EXPECT_EQ(&driver(0).endpoint(), fresh);
  EXPECT_EQ(driver(0).counts().retransmissions, 5u);
  EXPECT_EQ(driver(0).counts().result_values, 40u);
  EXPECT_EQ(driver(1).counts().retransmissions, 0u);
}

// A host set to crash at a round crashes when its worker would start it: the driver stops, the
// round does not start, and the crash's hooks run; the other worker still runs.
TEST_F(RoundDriverTest, ACrashRoundCrashesTheHostInsteadOfStartingIt) {
  hosts[0]->crash_round = 1;
  bool hook_ran = false;
  hosts[0]->on_crash.push_back([&hook_ran](Time) { hook_ran = true; });
  driver(0).start_round(at(0ms));
  driver(1).start_round(at(0ms));
  finish(0, exact(0), at(1ms));
  network.run_until(at(2ms));
  EXPECT_TRUE(hosts[0]->crashed);
  EXPECT_EQ(hosts[0]->crash_time, at(2ms));
  EXPECT_TRUE(driver(0).stopped);
  EXPECT_EQ(endpoints[0]->starts.size(), 1u);
  EXPECT_TRUE(hook_ran);
  EXPECT_TRUE(any_job_running(jobs)) << "worker 1 has rounds left";
}

// A float fragment index past the round's fragments is a mismatch in one sentence, not a read
// out of bounds.
TEST_F(RoundDriverTest, AFloatFragmentBeyondTheRoundIsAMismatch) {
  driver(0).start_round(at(0ms));
  endpoints[0]->floats = {99};
  finish(0, exact(0), at(1ms));
  EXPECT_TRUE(driver(0).mismatch);
  EXPECT_EQ(driver(0).error, "worker 'h0' round 0: float fragment index 99 is out of range");
}

// A protocol whose workers pick the exponents (Rina's): the round's reference is made at the first
// finisher's exponents, and a worker that finishes with others has not got the same sums.
TEST_F(RoundDriverTest, WorkersThatPickExponentsMustAgreeWithTheFirstToFinish) {
  scenario_inputs::RoundReference atp_ref;
  scenario_inputs::make_reference(kSeed, kJob, 2, 0, job.elements, job.magnitude, job.spec.scale, kWidth, atp_ref);
  const std::vector<std::int16_t> picked = atp_ref.exponents;
  scenario_inputs::RoundReference ref;
  scenario_inputs::make_reference_at(kSeed, kJob, 2, 0, job.elements, job.magnitude, kWidth, picked, ref);
  std::vector<float> sums(job.elements);
  for (std::size_t i = 0; i < sums.size(); ++i) {
    sums[i] = dequantize_one(ref.int_sum[i], std::ldexp(1.0, picked[i / kWidth]));
  }
  for (std::size_t w = 0; w < 2; ++w) {
    endpoints[w]->picks = true;
    driver(w).start_round(at(0ms));
  }
  endpoints[0]->exponents = picked;
  finish(0, sums, at(1ms));
  EXPECT_FALSE(driver(0).mismatch) << driver(0).error;
  endpoints[1]->exponents = picked;
  endpoints[1]->exponents[1] += 1;
  finish(1, sums, at(2ms));
  EXPECT_TRUE(driver(1).mismatch);
  EXPECT_EQ(driver(1).error,
            "worker 'h1' round 0: its fragments' exponents differ from the first worker's to finish the round");
}

// A job's time runs from its first start (or the end of its warm-up rounds) to its last
// completion; a round ends when its last worker ends it; warm-up rounds are at most those done.
TEST(RoundTimes, TimeTheJobFromItsFirstStartOrItsWarmUpToItsLastEnd) {
  RoundTimes times;
  times.started(at(2ms));
  times.started(at(1ms));
  times.completed(0, at(5ms));
  times.completed(0, at(4ms));
  times.completed(1, at(9ms));
  JobResult r;
  r.completed_rounds = 2;
  times.report(r, 0);
  EXPECT_DOUBLE_EQ(r.seconds, 0.008);
  EXPECT_EQ(r.warmup_rounds, 0u);
  EXPECT_EQ(r.round_end_seconds, (std::vector<double>{0.005, 0.009}));
  times.report(r, 1);
  EXPECT_DOUBLE_EQ(r.seconds, 0.004);
  EXPECT_EQ(r.warmup_rounds, 1u);
  EXPECT_EQ(r.round_end_seconds.size(), 2u) << "reported again, not appended";
  times.report(r, 5);
  EXPECT_EQ(r.warmup_rounds, 2u);
  EXPECT_DOUBLE_EQ(r.seconds, 0.0);
}

}  // namespace
}  // namespace atp::simulated
