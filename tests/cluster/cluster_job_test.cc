// Tests of the rendezvous layer under the PyTorch backend: ClusterJob's ranks (threads here)
// meeting through an in-memory store to run exact ATP allreduces on a local cluster, on running
// daemons shared by two jobs, across racks, and failing with one sentence when they cannot.
#include "atp/cluster/cluster_job.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "atp/cluster/daemon_processes.h"
#include "atp/control/control_auth.h"
#include "atp/control/daemon_clients.h"
#include "atp/control/stats.h"
#include "atp/fixed_point.h"
#include "support/memory_store.h"
#include "support/racked_daemons.h"
#include "support/reference_sum.h"
#include "support/run_ranks.h"

namespace atp {
namespace {

using namespace std::chrono_literals;

using test::MemoryStore;
using test::run_ranks;

std::string message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "";
}

// Every rank allreduces seeded inputs `rounds` times; each result must be the exact reference.
// Rank r joins with options_of(r); `before_close` runs on rank 0's job after its rounds.
void expect_exact_rounds(Store& store, int size, const std::function<ClusterJobOptions(int)>& options_of,
                         std::uint64_t seed, std::vector<JobId>* jobs = nullptr,
                         const std::function<void(ClusterJob&)>& before_close = {}) {
  const double scale = options_of(0).scale;
  const int rounds = 3;
  std::vector<std::vector<std::vector<float>>> inputs;
  for (int round = 0; round < rounds; ++round) {
    inputs.push_back(random_inputs(static_cast<std::size_t>(size), 5000 + 17 * static_cast<std::size_t>(round),
                                   seed + static_cast<std::uint64_t>(round)));
  }
  if (jobs) jobs->assign(static_cast<std::size_t>(size), 0);
  const auto errors = run_ranks(size, [&](int rank) {
    auto job = ClusterJob::join(store, rank, size, options_of(rank));
    if (jobs) (*jobs)[static_cast<std::size_t>(rank)] = job->job();
    ExactModel exact(scale, job->communicator().values_per_packet());  // each rank its own copy
    for (int round = 0; round < rounds; ++round) {
      std::vector<float> data = inputs[static_cast<std::size_t>(round)][static_cast<std::size_t>(rank)];
      job->communicator().allreduce(data);
      expect_exact(data, exact.next(inputs[static_cast<std::size_t>(round)]),
                   "rank " + std::to_string(rank) + " round " + std::to_string(round));
    }
    if (rank == 0 && before_close) before_close(*job);
    job->close();
  });
  for (const auto& e : errors) EXPECT_FALSE(e) << message(e);
}
void expect_exact_rounds(Store& store, int size, const ClusterJobOptions& options, std::uint64_t seed,
                         std::vector<JobId>* jobs = nullptr) {
  expect_exact_rounds(
      store, size, [&options](int) { return options; }, seed, jobs);
}

// A job on a local cluster (rank 0 starts it from this build's atp), 10 s timeout.
ClusterJobOptions local_cluster() {
  ClusterJobOptions options;
  options.local = true;
  options.atp_binary = ATP_BINARY;
  options.timeout = 10s;
  return options;
}

TEST(ClusterJob, LocalClusterOnRankZeroIsExact) {
  for (int size : {1, 2, 4}) {
    MemoryStore store;
    const ClusterJobOptions options = local_cluster();
    expect_exact_rounds(store, size, options, 40 + static_cast<std::uint64_t>(size));
    EXPECT_EQ(store.size(), 0u) << "size " << size << ": the rendezvous keys are erased";
  }
}

// ATP_TOPOLOGY's side of ClusterJob: rank 0 starts a topology's racks on this machine and hangs
// each rank under its host's switch. Ranks 0 and 2 under tor0, 1 and 3 under tor1, the PS under
// core: every switch aggregates.
TEST(ClusterJob, ALocalNetworkOfTwoRacksIsExact) {
  ClusterJobOptions options = local_cluster();
  Topology topology = test::RackedDaemons::topology(2048);
  topology.hosts = {{"h0", "tor0"}, {"h1", "tor1"}, {"h2", "tor0"}, {"h3", "tor1"}, {"p", "core"}};
  options.local_network = {topology, {"h0", "h1", "h2", "h3"}, "p"};
  MemoryStore store;
  std::map<std::string, std::uint64_t> aggregations;
  expect_exact_rounds(
      store, 4, [&](int) { return options; }, 71, nullptr,
      [&](ClusterJob& job) { aggregations = job.switch_aggregations(); });
  ASSERT_EQ(aggregations.size(), 3u);
  for (const auto& [name, n] : aggregations) EXPECT_GT(n, 0u) << name << " summed nothing";
  EXPECT_EQ(store.size(), 0u);
}

// Rina (ClusterJobOptions::protocol "rina", ATP_ALGORITHM=rina) on the same local network: each
// rack one member of the ring; every rank's sums are the exact integer sums of every rank's values
// at the exponents its worker reports, and close() waits for every rank.
TEST(ClusterJob, RinaOnALocalNetworkOfTwoRacksIsExact) {
  ClusterJobOptions options = local_cluster();
  options.protocol = "rina";
  Topology topology = test::RackedDaemons::topology(2048);
  topology.hosts = {{"h0", "tor0"}, {"h1", "tor1"}, {"h2", "tor0"}, {"h3", "tor1"}, {"p", "core"}};
  options.local_network = {topology, {"h0", "h1", "h2", "h3"}, "p"};
  MemoryStore store;
  const int size = 4;
  const auto inputs = random_inputs(size, 20000, 5);
  std::map<std::string, std::uint64_t> aggregations;
  const auto errors = run_ranks(size, [&](int rank) {
    auto job = ClusterJob::join(store, rank, size, options);
    for (int round = 0; round < 2; ++round) {
      std::vector<float> data = inputs[static_cast<std::size_t>(rank)];
      job->communicator().allreduce(data);
      const std::vector<std::int16_t> exponents = job->communicator().result_exponents();
      const std::size_t v = job->communicator().values_per_packet();
      ASSERT_EQ(exponents.size(), (data.size() + v - 1) / v);
      for (std::size_t i = 0; i < data.size(); ++i) {
        const double scale = std::ldexp(1.0, exponents[i / v]);
        std::int64_t sum = 0;
        for (const auto& in : inputs) sum += quantize_one(in[i], scale);
        ASSERT_EQ(data[i], dequantize_one(sum, scale)) << "rank " << rank << " round " << round << " value " << i;
      }
    }
    if (rank == 0) aggregations = job->switch_aggregations();
    job->close();
  });
  for (const auto& e : errors) EXPECT_FALSE(e) << message(e);
  EXPECT_GT(aggregations["tor0"], 0u);
  EXPECT_GT(aggregations["tor1"], 0u);
  EXPECT_EQ(aggregations["core"], 0u) << "the core joins no rack";
  EXPECT_EQ(store.size(), 0u) << "the rendezvous keys are erased";
}

// A local network that cannot hold the job is one sentence on every rank, before anything starts.
TEST(ClusterJob, ALocalNetworkThatDoesNotFitIsRefused) {
  ClusterJobOptions options = local_cluster();
  Topology topology = test::RackedDaemons::topology(64);
  topology.hosts = {{"h0", "tor0"}, {"p", "core"}};
  const std::vector<std::pair<ClusterJobOptions::LocalNetwork, std::string>> cases = {
      {{topology, {"h0"}, "p"}, "the local network names the hosts of 1 ranks, the job has 2"},
      {{topology, {"h0", "h9"}, "p"}, "the local network has no host 'h9'"},
      {{topology, {"h0", "p"}, "q"}, "the local network has no host 'q'"},
  };
  for (const auto& [network, sentence] : cases) {
    options.local_network = network;
    MemoryStore store;
    const auto errors = run_ranks(2, [&](int rank) { ClusterJob::join(store, rank, 2, options); });
    for (const auto& e : errors) EXPECT_EQ(message(e), sentence);
  }
  options.local = false;
  options.local_network = {topology, {"h0", "p"}, "p"};
  MemoryStore store;
  try {
    ClusterJob::join(store, 0, 1, options);
    FAIL() << "a local network without a local cluster was taken";
  } catch (const ClusterJobError& e) {
    EXPECT_STREQ(e.what(), "a local network is started by rank 0 of a local cluster: set local too");
  }
}

// A running switch (`aggregators` of 1024 values) and PS, `atp switch` and `atp ps` processes
// that take the token clients find (ATP_HOME), and the options of a job on them (10 s timeout).
struct RunningDaemons {
  explicit RunningDaemons(std::uint32_t aggregators) : daemons(ATP_BINARY, aggregators, control::client_token()) {
    options.switch_control = daemons.switch_control("local");
    options.ps_control = daemons.ps_control();
    options.timeout = 10s;
  }
  // GET /stats of each.
  control::SwitchStats switch_stats() const {
    return control::SwitchClient("the switch", daemons.switch_control("local"), daemons.access()).stats();
  }
  control::PsStats ps_stats() const {
    return control::PsClient("the PS", daemons.ps_control(), daemons.access()).stats();
  }
  std::size_t ps_jobs() const { return ps_stats().jobs.size(); }
  bool switch_has_jobs() const {
    const control::SwitchStats stats = switch_stats();
    return std::any_of(stats.jobs.begin(), stats.jobs.end(),
                       [](const control::SwitchJobStats& j) { return j.installed; });
  }

  LocalDaemons daemons;
  ClusterJobOptions options;
};

// A running switch and PS (as `atp switch` and `atp ps` would be), two jobs at once: distinct job
// ids, both exact, and nothing left installed once both closed.
TEST(ClusterJob, TwoJobsShareRunningDaemonsAndLeaveNothingBehind) {
  RunningDaemons cluster(2048);
  const ClusterJobOptions& options = cluster.options;

  MemoryStore store_a, store_b;
  std::vector<JobId> jobs_a, jobs_b;
  std::thread a([&] { expect_exact_rounds(store_a, 3, options, 7, &jobs_a); });
  std::thread b([&] { expect_exact_rounds(store_b, 2, options, 8, &jobs_b); });
  a.join();
  b.join();
  ASSERT_EQ(jobs_a.size(), 3u);
  EXPECT_EQ(jobs_a[0], jobs_a[2]);
  EXPECT_NE(jobs_a[0], jobs_b[0]);
  EXPECT_EQ(cluster.ps_jobs(), 0u) << "the PS still has jobs installed";
  EXPECT_FALSE(cluster.switch_has_jobs()) << control::to_json(cluster.switch_stats());
}

// Ranks in two racks: ranks 0 and 1 under tor0, 2 and 3 under tor1, the PS under core, which no
// rank hangs under (ClusterJobOptions::switches). Rank 0 finds the links; each ToR sums its rack,
// core the two racks' sums; every round is exact, no switch drops a packet for want of a route or
// an admission, and nothing is left installed after.
TEST(ClusterJob, RanksInTwoRacksAreExact) {
  const test::RackedDaemons racks(ATP_BINARY, control::client_token(), 2048);
  auto options_of = [&racks](int rank) {
    ClusterJobOptions o;
    o.switch_control = racks.switch_control(rank < 2 ? "tor0" : "tor1");
    o.ps_control = racks.ps_control();
    o.switches = {racks.switch_control("core")};
    o.timeout = 10s;
    return o;
  };
  MemoryStore store;
  std::map<std::string, control::SwitchStats> during;
  expect_exact_rounds(store, 4, options_of, 61, nullptr, [&](ClusterJob&) {
    for (const char* name : {"tor0", "tor1", "core"}) during[name] = racks.switch_client(name).stats();
  });
  for (const char* name : {"tor0", "tor1", "core"}) {
    const control::SwitchStats& s = during.at(name);
    ASSERT_EQ(s.jobs.size(), 1u) << name;
    EXPECT_GT(s.jobs[0].counters.aggregations, 0u) << name << " summed nothing";
    EXPECT_EQ(s.pipeline.no_route, 0u) << name;
    EXPECT_EQ(s.pipeline.not_admitted, 0u) << name;
    const control::SwitchStats after = racks.switch_client(name).stats();
    EXPECT_TRUE(std::none_of(after.jobs.begin(), after.jobs.end(), [](const auto& j) { return j.installed; })) << name;
  }
  EXPECT_TRUE(racks.ps_client().stats().jobs.empty());
  EXPECT_EQ(store.size(), 0u);
}

// What a job of several racks can get wrong is one sentence on every rank: the PS's switch left
// out, or ranks naming different PSes.
TEST(ClusterJob, ARackedJobWithoutThePsSwitchOrWithTwoPsesIsRefused) {
  const test::RackedDaemons racks(ATP_BINARY, control::client_token(), 64);
  auto refusals = [](const std::function<ClusterJobOptions(int)>& options_of) {
    MemoryStore store;
    const auto errors = run_ranks(2, [&](int rank) { ClusterJob::join(store, rank, 2, options_of(rank)); });
    std::vector<std::string> messages;
    for (const auto& e : errors) messages.push_back(e ? message(e) : "no error");
    return messages;
  };
  const std::vector<std::string> no_core = refusals([&racks](int rank) {
    ClusterJobOptions o;
    o.switch_control = racks.switch_control(rank == 0 ? "tor0" : "tor1");
    o.ps_control = racks.ps_control();
    o.timeout = 5s;
    return o;
  });
  for (const std::string& m : no_core) {
    EXPECT_EQ(
        m.rfind("rank 0 could not set up the ATP job: the PS at " + racks.ps_control().to_string() + " sends to ", 0),
        0u)
        << m;
    EXPECT_NE(
        m.find("which is the data address of none of the job's switches ('tor0' at " +
               racks.switch_control("tor0").to_string() + ", 'tor1' at " + racks.switch_control("tor1").to_string() +
               "): name the PS's switch too (ClusterJobOptions::switches, ATP_SWITCHES)"),
        std::string::npos)
        << m;
  }
  const std::vector<std::string> two_pses = refusals([&racks](int rank) {
    ClusterJobOptions o;
    o.switch_control = racks.switch_control("tor0");
    o.ps_control = rank == 0 ? racks.ps_control() : racks.switch_control("core");
    o.timeout = 5s;
    return o;
  });
  for (const std::string& m : two_pses) {
    EXPECT_EQ(m, "rank 0 could not set up the ATP job: rank 1 names the PS at " +
                     racks.switch_control("core").to_string() + ", rank 0 the PS at " + racks.ps_control().to_string() +
                     ": every rank names the same PS");
  }
}

TEST(ClusterJob, FailuresAreOneSentenceOnEveryRank) {
  ClusterJobOptions none;
  MemoryStore store;
  try {
    ClusterJob::join(store, 0, 1, none);
    ADD_FAILURE() << "joined without a cluster";
  } catch (const ClusterJobError& e) {
    EXPECT_NE(std::string(e.what()).find("no ATP cluster given"), std::string::npos) << e.what();
  }

  // Nobody listens at the switch's control address: rank 0 says so, and so do the others.
  ClusterJobOptions unreachable;
  unreachable.switch_control = SocketAddress::loopback(1);
  unreachable.ps_control = SocketAddress::loopback(1);
  unreachable.timeout = 5s;
  MemoryStore store2;
  const auto errors = run_ranks(3, [&](int rank) { ClusterJob::join(store2, rank, 3, unreachable); });
  for (const auto& e : errors) {
    ASSERT_TRUE(e);
    EXPECT_NE(message(e).find("rank 0 could not set up the ATP job: the switch at 127.0.0.1:1 did not answer GET "
                              "http://127.0.0.1:1/stats"),
              std::string::npos)
        << message(e);
  }

  // A rank that never joins: rank 0 gives up after the timeout (once, not once more while its
  // half-made job waited for the others to close it) and tells the others why.
  ClusterJobOptions local = local_cluster();
  local.timeout = 1s;
  MemoryStore store3;
  const auto started = std::chrono::steady_clock::now();
  const auto missing = run_ranks(2, [&](int rank) { ClusterJob::join(store3, rank, 3, local); });
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1600ms);
  for (const auto& e : missing) {
    ASSERT_TRUE(e);
    EXPECT_NE(message(e).find("endpoint/2"), std::string::npos) << message(e);
  }
}

// A rank that dies mid-job (its ClusterJob destroyed without a round): the others' allreduce
// fails within the timeout instead of hanging.
TEST(ClusterJob, ADeadRankFailsTheOthersWithinTheTimeout) {
  MemoryStore store;
  ClusterJobOptions options = local_cluster();
  options.timeout = 1s;
  std::promise<void> joined;
  std::shared_future<void> all_joined = joined.get_future().share();
  std::atomic<int> count{0};
  std::vector<std::chrono::steady_clock::duration> waited(3);
  const auto errors = run_ranks(3, [&](int rank) {
    auto job = ClusterJob::join(store, rank, 3, options);
    if (++count == 3) joined.set_value();
    all_joined.wait();
    if (rank == 2) return;  // dies: never contributes
    std::vector<float> data(10000, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      job->communicator().allreduce(data);
    } catch (...) {
      waited[static_cast<std::size_t>(rank)] = std::chrono::steady_clock::now() - start;
      throw;
    }
  });
  EXPECT_FALSE(errors[2]);
  for (int r : {0, 1}) {
    ASSERT_TRUE(errors[static_cast<std::size_t>(r)]) << "rank " << r << " completed a round without rank 2";
    EXPECT_NE(message(errors[static_cast<std::size_t>(r)]).find("allreduce failed"), std::string::npos)
        << message(errors[static_cast<std::size_t>(r)]);
    EXPECT_LT(waited[static_cast<std::size_t>(r)], 3s);
  }
}

// Rank 0 dies (a process that exits without closing its job): what it installed on the shared
// daemons hangs on leases it no longer keeps alive, so within their time to live the switch and
// the PS hold nothing of it.
TEST(ClusterJob, ADeadRankZeroLeavesNothingInstalled) {
  RunningDaemons cluster(256);
  ClusterJobOptions& options = cluster.options;
  options.lease_ttl = 1s;

  // The child joins as the only rank, runs a round and exits without close(): as a killed process.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      MemoryStore store;
      auto job = ClusterJob::join(store, 0, 1, options);
      std::vector<float> data(3000, 1.0f);
      job->communicator().allreduce(data);
      ::_exit(data[0] == 1.0f ? 0 : 2);  // here, with the job open: no destructor runs
    } catch (...) {
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's job failed: " << status;
  EXPECT_EQ(cluster.ps_jobs(), 1u) << "the dead rank's job is still installed right after it died";
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while ((cluster.ps_jobs() > 0 || cluster.switch_has_jobs()) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(cluster.ps_jobs(), 0u) << "the PS still has the dead rank's job";
  const control::SwitchStats stats = cluster.switch_stats();
  EXPECT_FALSE(cluster.switch_has_jobs()) << control::to_json(stats);
  // The rank's port is detached (no peer); the PS's, shared by every job, stays.
  ASSERT_EQ(stats.ports.size(), 2u);
  EXPECT_FALSE(stats.ports[1].peer.has_value()) << control::to_json(stats);
}

}  // namespace
}  // namespace atp
