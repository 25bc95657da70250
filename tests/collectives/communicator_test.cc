// Tests of atp::Communicator on loopback: 2-3 workers allreduce through one PsDaemon, with a tiny
// in-test hub standing in for the switch (it forwards by the ATP header's dst, no aggregation).
#include "atp/collectives/communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "atp/daemons/ps_daemon.h"
#include "atp/fixed_point.h"
#include "atp/io/event_loop.h"
#include "atp/plan/plan.h"
#include "support/reference_sum.h"

namespace atp {
namespace {

// A plain switch on one UDP socket: every host sends here (its uplink); a packet goes to the host
// named by its dst, or to every member of its multicast group. Why a hub rather than a "reply to
// the sender" mode in the PS daemon: the daemon stays the same adapter it is in production (one
// uplink, the header's dst says where), and the test exercises exactly the real addressing.
class Hub {
 public:
  Hub() : socket_(SocketAddress::loopback(0)) {
    loop_.add_readable(socket_.fd(), [this] { forward(); });
  }
  ~Hub() { stop(); }
  void add_host(Address address, const SocketAddress& at) { hosts_[address] = at; }
  void add_to_group(Address group, Address member) { groups_[group].push_back(member); }
  void start() {
    thread_ = std::thread([this] { loop_.run(); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    loop_.stop();
    thread_.join();
  }
  SocketAddress endpoint() const { return socket_.local_endpoint(); }

 private:
  void forward() {
    const std::size_t n = socket_.recv_batch(batch_);
    for (std::size_t i = 0; i < n; ++i) {
      Header h;
      if (decode_header(batch_.bytes(i), h) != DecodeError::kOk) continue;
      if (is_multicast(h.dst)) {
        for (Address member : groups_[h.dst]) socket_.send_to(hosts_.at(member), batch_.bytes(i));
      } else if (const auto it = hosts_.find(h.dst); it != hosts_.end()) {
        socket_.send_to(it->second, batch_.bytes(i));
      }
    }
  }

  UdpSocket socket_;
  EventLoop loop_;
  UdpRecvBatch batch_{64};
  std::map<Address, SocketAddress> hosts_;  // set before start(), then only read by the loop thread
  std::map<Address, std::vector<Address>> groups_;
  std::thread thread_;
};

// A job of `workers` workers and one PS under a plain switch, running over a Hub.
class Cluster {
 public:
  explicit Cluster(int workers, Duration progress_timeout = std::chrono::seconds(5),
                   Duration retransmit_timeout = std::chrono::milliseconds(1)) {
    SwitchConfig plain;
    plain.atp_capable = false;
    topology_.switches.push_back({"tor", plain});
    JobSpec spec;
    spec.id = 7;
    spec.progress_timeout = progress_timeout;
    spec.retransmit_timeout = retransmit_timeout;
    for (int w = 0; w < workers; ++w) {
      topology_.hosts.push_back({"w" + std::to_string(w), "tor"});
      spec.workers.push_back("w" + std::to_string(w));
    }
    topology_.hosts.push_back({"ps", "tor"});
    spec.ps.push_back("ps");
    network_ = plan_network(topology_);
    plan_ = plan_job(network_, spec);

    PsDaemonConfig ps;
    ps.data = SocketAddress::loopback(0);
    ps.serve_control = false;
    ps.uplink = hub_.endpoint();
    ps_ = std::make_unique<PsDaemon>(ps);
    ps_->add_job(plan_.ps[0]);
    hub_.add_host(plan_.ps[0].self, ps_->data_endpoint());
    for (const WorkerConfig& wc : plan_.workers) {
      auto& c = communicators_.emplace_back(std::make_unique<Communicator>(
          std::make_unique<WorkerEndpoint>(wc), SocketAddress::loopback(0), hub_.endpoint()));
      hub_.add_host(wc.self, c->local_endpoint());
      hub_.add_to_group(multicast_group_address(wc.job), wc.self);
    }
    hub_.start();
    ps_->start();
  }
  Communicator& worker(std::size_t i) { return *communicators_[i]; }
  std::size_t size() const { return communicators_.size(); }
  double scale() const { return plan_.workers[0].scale; }
  // What the job's allreduces must return, call after call.
  ExactModel exact() const { return ExactModel(scale(), plan_.values_per_packet); }

 private:
  Hub hub_;  // first: destroyed last, after the communicators and the PS stopped sending to it
  Topology topology_;
  NetworkPlan network_;
  JobPlan plan_;
  std::unique_ptr<PsDaemon> ps_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
};

// inputs[w][i] uniform in [-1, 1], seeded.
class CommunicatorRounds : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorRounds, BlockingAllreduceIsExactOverSeveralRounds) {
  const int workers = GetParam();
  Cluster cluster(workers);
  ExactModel exact = cluster.exact();
  for (int round = 0; round < 3; ++round) {
    auto buffers = random_inputs(cluster.size(), 1000 + 37 * static_cast<std::size_t>(round), 100 + round);
    const std::vector<float> want = exact.next(buffers);
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(cluster.size());
    for (std::size_t w = 0; w < cluster.size(); ++w) {
      threads.emplace_back([&, w] {
        try {
          cluster.worker(w).allreduce(buffers[w]);
        } catch (...) {
          errors[w] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (std::size_t w = 0; w < cluster.size(); ++w) {
      ASSERT_FALSE(errors[w]) << "worker " << w << " threw";
      expect_exact(buffers[w], want, "round " + std::to_string(round) + " worker " + std::to_string(w));
    }
  }
  EXPECT_EQ(cluster.worker(0).counts().rounds_completed, 3u);
}

TEST_P(CommunicatorRounds, AsyncCallsQueueAndCompleteInOrder) {
  const int workers = GetParam();
  Cluster cluster(workers);
  constexpr int kRounds = 4;
  std::vector<std::vector<std::vector<float>>> buffers;  // [round][worker]
  std::vector<std::vector<float>> want;
  ExactModel exact = cluster.exact();
  for (int r = 0; r < kRounds; ++r) {
    buffers.push_back(random_inputs(cluster.size(), 500, 200 + r));
    want.push_back(exact.next(buffers.back()));
  }
  // Every round is queued on every worker before any completes: rounds must pair up in call order.
  std::vector<std::future<void>> futures;
  for (int r = 0; r < kRounds; ++r)
    for (std::size_t w = 0; w < cluster.size(); ++w)
      futures.push_back(cluster.worker(w).allreduce_async(buffers[r][w]));
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    f.get();
  }
  for (int r = 0; r < kRounds; ++r)
    for (std::size_t w = 0; w < cluster.size(); ++w)
      expect_exact(buffers[r][w], want[r], "round " + std::to_string(r) + " worker " + std::to_string(w));
}

INSTANTIATE_TEST_SUITE_P(Workers, CommunicatorRounds, ::testing::Values(2, 3));

TEST(Communicator, CallsFromSeveralThreadsAreSerialised) {
  // Two threads per worker call allreduce at once with the same content, so whichever call
  // pairs with whichever on the other worker, each result is the exact sum of the first call or
  // of the second (whose exponents the first picked).
  Cluster cluster(2);
  const auto base = random_inputs(2, 700, 9);
  ExactModel exact = cluster.exact();
  const std::vector<float> first = exact.next(base), second = exact.next(base);
  std::vector<std::vector<float>> buffers;
  for (int t = 0; t < 2; ++t)
    for (std::size_t w = 0; w < 2; ++w) buffers.push_back(base[w]);
  std::vector<std::thread> threads;
  for (std::size_t b = 0; b < buffers.size(); ++b)
    threads.emplace_back([&, b] { cluster.worker(b % 2).allreduce(buffers[b]); });
  for (auto& t : threads) t.join();
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    EXPECT_TRUE(buffers[b] == first || buffers[b] == second) << "buffer " << b << " is neither call's exact sum";
  }
}

TEST(Communicator, LargeTensorIsExact) {
  // Thousands of fragments: many windows, socket batches and (on a busy machine) losses to recover.
  Cluster cluster(3);
  auto buffers = random_inputs(3, 300'000, 42);
  const std::vector<float> want = cluster.exact().next(buffers);
  std::vector<std::future<void>> futures;
  for (std::size_t w = 0; w < 3; ++w) futures.push_back(cluster.worker(w).allreduce_async(buffers[w]));
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    f.get();
  }
  for (std::size_t w = 0; w < 3; ++w) expect_exact(buffers[w], want, "worker " + std::to_string(w));
}

TEST(Communicator, EveryPacketLeavesBeforeTheLoopSleeps) {
  // A communicator batches what the endpoint sends during one event and sends it when the event
  // ends. A packet left behind would wait for the next event, which a retransmission timer would
  // provide within milliseconds and so hide; with the first retransmission a minute away, the
  // rounds can only complete if every packet leaves at the end of its own event.
  Cluster cluster(2, std::chrono::seconds(120), std::chrono::seconds(60));
  ExactModel exact = cluster.exact();
  for (int round = 0; round < 2; ++round) {
    auto buffers = random_inputs(2, 5'000, 100 + round);
    const std::vector<float> want = exact.next(buffers);
    std::vector<std::future<void>> futures;
    for (std::size_t w = 0; w < 2; ++w) futures.push_back(cluster.worker(w).allreduce_async(buffers[w]));
    for (auto& f : futures) {
      ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "round " << round;
      f.get();
    }
    for (std::size_t w = 0; w < 2; ++w) expect_exact(buffers[w], want, "worker " + std::to_string(w));
  }
}

TEST(Communicator, EmptyBufferCompletesAtOnce) {
  Cluster cluster(2);
  std::vector<float> empty;
  cluster.worker(0).allreduce(empty);
}

TEST(Communicator, UnreachablePsThrowsWithinTheProgressTimeout) {
  // The uplink is a bound socket nobody reads: packets vanish, as with a dead PS (no ICMP error).
  UdpSocket black_hole(SocketAddress::loopback(0));
  SwitchConfig plain;
  plain.atp_capable = false;
  Topology topology{{{"tor", plain}}, {{"w0", "tor"}, {"w1", "tor"}, {"ps", "tor"}}, {}};
  const NetworkPlan network = plan_network(topology);
  JobSpec spec;
  spec.id = 1;
  spec.workers = {"w0", "w1"};
  spec.ps = {"ps"};
  spec.progress_timeout = std::chrono::milliseconds(300);
  const JobPlan plan = plan_job(network, spec);
  Communicator c(std::make_unique<WorkerEndpoint>(plan.workers[0]), SocketAddress::loopback(0),
                 black_hole.local_endpoint());

  std::vector<float> data(100, 1.0f);
  const auto started = std::chrono::steady_clock::now();
  std::future<void> f = c.allreduce_async(data);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "allreduce hangs";
  const auto elapsed = std::chrono::steady_clock::now() - started;
  try {
    f.get();
    FAIL() << "allreduce with no PS succeeded";
  } catch (const CommunicatorError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("allreduce failed: job 1: no parameter packet from PS"), std::string::npos) << what;
  }
  EXPECT_GE(elapsed, std::chrono::milliseconds(300));
  EXPECT_EQ(data, std::vector<float>(100, 1.0f)) << "a failed round must not touch the buffer";
  // The endpoint stays failed: the next call throws at once, blocking or not.
  EXPECT_THROW(c.allreduce(data), CommunicatorError);
}

// Another process on the host sends well-formed parameter packets (zero values, every seq the
// worker has sent) to the worker's port before the real ones arrive: they must not count. Before
// the worker's socket accepted only its uplink, they made the round's result all zeros.
TEST(Communicator, ParameterPacketsFromAnyoneButTheUplinkAreIgnored) {
  UdpSocket uplink(SocketAddress::loopback(0));  // stands in for the switch; the test answers as the PS
  SwitchConfig plain;
  plain.atp_capable = false;
  Topology topology{{{"tor", plain}}, {{"w0", "tor"}, {"ps", "tor"}}, {}};
  JobSpec spec;
  spec.id = 3;
  spec.workers = {"w0"};
  spec.ps = {"ps"};
  spec.values_per_packet = 8;
  const JobPlan plan = plan_job(plan_network(topology), spec);
  Communicator c(std::make_unique<WorkerEndpoint>(plan.workers[0]), SocketAddress::loopback(0),
                 uplink.local_endpoint());

  std::vector<float> data(32);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = 0.25f * static_cast<float>(i + 1);
  const std::vector<float> input = data;
  std::future<void> done = c.allreduce_async(data);

  // Collect the four gradient packets (the first window holds them all).
  std::vector<std::vector<std::uint8_t>> gradients;
  UdpRecvBatch batch(64);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gradients.size() < 4 && std::chrono::steady_clock::now() < give_up) {
    for (std::size_t i = 0, n = uplink.recv_batch(batch); i < n; ++i) {
      Header h;
      ASSERT_EQ(decode_header(batch.bytes(i), h), DecodeError::kOk);
      if (!h.resend) gradients.emplace_back(batch.bytes(i).begin(), batch.bytes(i).end());
    }
  }
  ASSERT_EQ(gradients.size(), 4u);

  UdpSocket forger(SocketAddress::loopback(0));
  for (const auto& g : gradients) {
    Header h;
    ASSERT_EQ(decode_header(g, h), DecodeError::kOk);
    Header ack;
    ack.is_ack = true;
    ack.job = h.job;
    ack.seq = h.seq;
    ack.src = h.dst;
    ack.dst = multicast_group_address(h.job);
    forger.send_to(c.local_endpoint(), build_packet(ack, std::vector<std::int32_t>(8, 0)));
  }
  // The real results: a one-worker job's sum is its own quantized input.
  for (auto g : gradients) {
    Header h;
    ASSERT_EQ(decode_header(g, h), DecodeError::kOk);
    h.is_ack = true;
    h.round_shape = 0;  // a result carries no round shape (the last gradient does)
    h.src = h.dst;
    h.dst = multicast_group_address(h.job);
    encode_header(h, g);
    uplink.send_to(c.local_endpoint(), g);
  }
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  done.get();
  std::vector<std::int32_t> quantized(input.size());
  quantize(input, plan.workers[0].scale, quantized);
  std::vector<float> expected(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) expected[i] = dequantize_one(quantized[i], plan.workers[0].scale);
  EXPECT_EQ(data, expected);
  EXPECT_EQ(c.foreign_datagrams(), 0u) << "the kernel drops them on a connected socket";
}

TEST(Communicator, DestructorFailsQueuedRoundsAndJoins) {
  std::future<void> f;
  std::vector<float> data(50, 1.0f);
  {
    UdpSocket black_hole(SocketAddress::loopback(0));
    SwitchConfig plain;
    plain.atp_capable = false;
    Topology topology{{{"tor", plain}}, {{"w0", "tor"}, {"ps", "tor"}}, {}};
    const NetworkPlan network = plan_network(topology);
    JobSpec spec;
    spec.id = 1;
    spec.workers = {"w0"};
    spec.ps = {"ps"};
    const JobPlan plan = plan_job(network, spec);
    Communicator c(std::make_unique<WorkerEndpoint>(plan.workers[0]), SocketAddress::loopback(0),
                   black_hole.local_endpoint());
    f = c.allreduce_async(data);
  }
  ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_THROW(f.get(), CommunicatorError);
}

}  // namespace
}  // namespace atp
