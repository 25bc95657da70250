// Tests of WorkerEndpoint: packets are fed by hand (built with build_packet), time is advanced
// by hand, and a recording sink captures what the worker sends. Nothing here uses a network.
#include "atp/worker.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "atp/fixed_point.h"

namespace atp {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr JobId kJob = 3;
constexpr Address kSelf = 0x0A000001;  // 10.0.0.1
constexpr Address kPs0 = 0x0A000009;   // 10.0.0.9
constexpr Address kPs1 = 0x0A00000A;   // 10.0.0.10
constexpr Seq kInitialSeq = 1000;
const Time kStart = time_from_ns(5'000'000'000);
// When results come back in tests that need a round trip (loss detection waits for one).
const Time kBack = kStart + std::chrono::microseconds(20);

class RecordingSink final : public PacketSink {
 public:
  void send(std::span<const std::uint8_t> packet) override { packets.emplace_back(packet.begin(), packet.end()); }
  // Returns what was sent since the last call.
  std::vector<Bytes> take() {
    std::vector<Bytes> sent = std::move(packets);
    packets.clear();
    return sent;
  }
  std::vector<Bytes> packets;
};

Header decoded(const Bytes& packet) {
  Header h;
  EXPECT_EQ(decode_header(packet, h), DecodeError::kOk);
  return h;
}

std::vector<std::int32_t> values_of(const Bytes& packet) {
  std::vector<std::int32_t> v(decoded(packet).value_count);
  load_values(packet, v);
  return v;
}

std::vector<Seq> seqs_of(const std::vector<Bytes>& packets) {
  std::vector<Seq> seqs;
  for (const Bytes& p : packets) seqs.push_back(decoded(p).seq);
  return seqs;
}

// A worker: its node in the tree towards PS 0.
PsRoute route0() { return PsRoute{kPs0, 7}; }
// Its node in the other PS's tree (PS shards' trees number their nodes each their own way).
PsRoute route1() { return PsRoute{kPs1, 3}; }

// The scale of the tests' rounds: a power of two, which the first round of every fragment
// position uses as it is (initial_exponent), and the exponent of the results the tests make up,
// which also name it for the next round.
constexpr std::int16_t kExponent = 20;
constexpr double kScale = 1 << kExponent;

// Four values per packet keep the arithmetic readable. CC off: a fixed window of 4 packets.
WorkerConfig base_config() {
  WorkerConfig c;
  c.job = kJob;
  c.self = kSelf;
  c.ps = {route0()};
  c.values_per_packet = 4;
  c.scale = kScale;
  c.aggregators = {0, 1000};
  c.congestion.enabled = false;
  c.congestion.initial_window = 4;
  c.retransmit_timeout = std::chrono::milliseconds(1);
  c.max_retransmit_timeout = std::chrono::milliseconds(4);
  c.progress_timeout = std::chrono::seconds(2);
  c.initial_seq = kInitialSeq;
  return c;
}

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i + 1) - 1.0f;
  return v;
}

// A parameter packet from kPs0 for `seq` as the PS multicasts it.
Header parameter_header(Seq seq) {
  Header h;
  h.is_ack = true;
  h.job = kJob;
  h.seq = seq;
  h.src = kPs0;
  h.dst = multicast_group_address(kJob);
  h.scale_exponent = kExponent;
  h.magnitude_or_next = kExponent;
  return h;
}

// The aggregate the tests pretend the network computed for fragment `seq`: known int32 sums.
std::vector<std::int32_t> sums_for(Seq seq, std::size_t count = 4) {
  std::vector<std::int32_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<std::int32_t>((seq % 1000) * 1000 + i) - 250'000;
  return v;
}

Bytes parameter(Seq seq, std::size_t count = 4) { return build_packet(parameter_header(seq), sums_for(seq, count)); }
Bytes parameter_with(Header h, std::size_t count = 4) { return build_packet(h, sums_for(h.seq, count)); }
// A result some worker's resend went into: the PS sets its resend flag.
Bytes recovered_parameter(Seq seq) {
  Header h = parameter_header(seq);
  h.resend = true;
  return parameter_with(h);
}

std::vector<std::int32_t> quantized(std::span<const float> in, double scale) {
  std::vector<std::int32_t> out(in.size());
  quantize(in, scale, out);
  return out;
}

TEST(Worker, RejectsAConfigWithoutPs) {
  WorkerConfig c = base_config();
  c.ps.clear();
  EXPECT_THROW(WorkerEndpoint{c}, std::invalid_argument);
  c = base_config();
  c.values_per_packet = 0;
  EXPECT_THROW(WorkerEndpoint{c}, std::invalid_argument);
}

// worker_config_error: nullopt for a config that works, else one sentence naming the job and the
// field, which the constructor throws.
TEST(Worker, EachFieldThatCannotWorkIsNamedInOneSentence) {
  EXPECT_EQ(worker_config_error(base_config()), std::nullopt);
  const struct {
    void (*change)(WorkerConfig&);
    const char* says;
  } cases[] = {
      {[](WorkerConfig& c) { c.ps.clear(); }, "has no parameter server"},
      {[](WorkerConfig& c) { c.values_per_packet = 0; }, "values_per_packet"},
      {[](WorkerConfig& c) { c.aggregators.count = 0; }, "must hold at least 1 aggregator"},
      {[](WorkerConfig& c) {
         c.aggregators = {0xFFFFFFF0u, 32};
       },
       "must end at index 2^32 - 1"},
      {[](WorkerConfig& c) { c.scale = -1; }, "scale must be a positive finite number"},
      {[](WorkerConfig& c) { c.progress_timeout = Duration::zero(); }, "must be positive"},
      {[](WorkerConfig& c) { c.max_retransmit_timeout = c.min_retransmit_timeout / 2; }, "must not be below"},
  };
  for (const auto& k : cases) {
    WorkerConfig c = base_config();
    k.change(c);
    const std::optional<std::string> why = worker_config_error(c);
    ASSERT_TRUE(why.has_value()) << k.says;
    EXPECT_EQ(why->rfind("job " + std::to_string(c.job) + ": ", 0), 0u) << *why;
    EXPECT_NE(why->find(k.says), std::string::npos) << *why;
    EXPECT_THROW(WorkerEndpoint{c}, std::invalid_argument) << k.says;
  }
}

TEST(Worker, FirstWindowIsTheInitialWindow) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 3;
  WorkerEndpoint w(c);
  RecordingSink out;
  EXPECT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.next_deadline(), kNever);
  const auto input = ramp(40);  // 10 fragments
  ASSERT_TRUE(w.start(input, kStart, out));
  EXPECT_EQ(w.state(), WorkerState::kRunning);
  EXPECT_EQ(w.window(), 3u);
  EXPECT_EQ(seqs_of(out.packets), (std::vector<Seq>{kInitialSeq, kInitialSeq + 1, kInitialSeq + 2}));
  EXPECT_EQ(w.stats().gradient_packets_sent, 3u);
  EXPECT_EQ(w.next_deadline(), kStart + c.retransmit_timeout);
  EXPECT_FALSE(w.start(input, kStart, out));  // one round at a time
}

TEST(Worker, FragmentsArePaddedNumberedAndIndexed) {
  WorkerConfig c = base_config();
  ASSERT_EQ(c.index_policy, IndexPolicy::kAllocated);
  WorkerEndpoint w(c);
  RecordingSink out;
  const auto input = ramp(10);  // fragments of 4, 4 and 2 (+2 zeros)
  ASSERT_TRUE(w.start(input, kStart, out));
  ASSERT_EQ(out.packets.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const Header h = decoded(out.packets[i]);
    const Seq seq = kInitialSeq + static_cast<Seq>(i);
    EXPECT_FALSE(h.is_ack);
    EXPECT_FALSE(h.resend);
    EXPECT_FALSE(h.float_payload);
    EXPECT_EQ(h.job, kJob);
    EXPECT_EQ(h.seq, seq);
    EXPECT_EQ(h.value_count, 4);
    EXPECT_EQ(out.packets[i].size(), packet_size(4));
    // The default index: the switch allocates (found by <job, seq>); the index is HASH(job, seq).
    EXPECT_TRUE(h.allocate);
    EXPECT_EQ(h.aggregator_index, base_aggregator_index(kJob, seq, c.aggregators, IndexPolicy::kHashed));
    std::vector<float> expected_floats(4, 0.0f);
    for (std::size_t v = 0; v < 4 && i * 4 + v < input.size(); ++v) expected_floats[v] = input[i * 4 + v];
    EXPECT_EQ(values_of(out.packets[i]), quantized(expected_floats, c.scale)) << "fragment " << i;
  }
  EXPECT_EQ(values_of(out.packets[2])[2], 0);
  EXPECT_EQ(values_of(out.packets[2])[3], 0);
}

TEST(Worker, LinearIndexPolicyUsesSeqModuloTableSize) {
  WorkerConfig c = base_config();
  c.index_policy = IndexPolicy::kLinear;
  c.aggregators = {0, 7};
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(16), kStart, out));
  for (const Bytes& p : out.packets) EXPECT_EQ(decoded(p).aggregator_index, decoded(p).seq % 7);
}

TEST(Worker, EachPsGetsItsShardWithItsHeaderTemplate) {
  WorkerConfig c = base_config();
  c.ps = {route0(), route1()};
  c.congestion.initial_window = 8;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(20), kStart, out));  // 5 fragments: 0, 2, 4 -> PS 0; 1, 3 -> PS 1
  // Flow by flow: PS 0's window first, then PS 1's.
  EXPECT_EQ(seqs_of(out.packets),
            (std::vector<Seq>{kInitialSeq, kInitialSeq + 2, kInitialSeq + 4, kInitialSeq + 1, kInitialSeq + 3}));
  for (const Bytes& packet : out.packets) {
    const Header h = decoded(packet);
    const PsRoute r = (h.seq - kInitialSeq) % 2 == 0 ? route0() : route1();
    EXPECT_EQ(h.dst, r.ps);
    EXPECT_EQ(h.src, kSelf);
    EXPECT_EQ(h.node, r.node);
    EXPECT_EQ(h.bitmap, 1u);  // a worker speaks for itself
    EXPECT_EQ(h.fan_in, 1);
  }
  EXPECT_EQ(w.window(0), 8u);
  EXPECT_EQ(w.window(1), 8u);
}

// The PS bounds its memory by the spacing of its shard's sequence numbers: every flow must send
// every P-th sequence number, across round boundaries too, even with rounds whose fragment count
// is not a multiple of P (or is below it, so that a flow has nothing to send in some rounds).
// Shards 1-4 x fragments per round x windows 1-3, each fragment acknowledged as soon as it is sent.
class WorkerShardSpacing : public ::testing::TestWithParam<std::tuple<std::uint32_t, std::uint32_t>> {};

TEST_P(WorkerShardSpacing, EachFlowSendsEveryPthSequenceNumberAcrossRounds) {
  const auto [shards, window] = GetParam();
  WorkerConfig c = base_config();
  c.ps.clear();
  for (std::uint32_t k = 0; k < shards; ++k) c.ps.push_back(PsRoute{kPs0 + k, 1});
  c.congestion.initial_window = window;
  c.congestion.max_window = window;
  WorkerEndpoint w(c);
  RecordingSink out;
  std::vector<std::vector<Seq>> sent(shards);  // per PS: the seqs of first sends, in order
  const std::uint32_t rounds[] = {3, 5, 1, 7, 2, 2, 4, 1, 1, 1, 6};
  for (const std::uint32_t fragments : rounds) {
    ASSERT_TRUE(w.start(ramp(4 * fragments - 1), kStart, out));
    while (!out.packets.empty()) {
      for (const Bytes& packet : out.take()) {
        const Header h = decoded(packet);
        ASSERT_FALSE(h.resend);
        ASSERT_GE(h.dst, kPs0);
        ASSERT_LT(h.dst, kPs0 + shards);
        sent[h.dst - kPs0].push_back(h.seq);
        Header ack = parameter_header(h.seq);
        ack.src = h.dst;
        w.on_packet(parameter_with(ack), kStart, out);
      }
    }
    ASSERT_EQ(w.state(), WorkerState::kIdle) << "a round of " << fragments << " fragments";
  }
  Seq total = 0;
  for (const std::uint32_t fragments : rounds) total += fragments;
  for (std::uint32_t k = 0; k < shards; ++k) {
    ASSERT_FALSE(sent[k].empty()) << "PS " << k;
    EXPECT_EQ(sent[k].front(), kInitialSeq + k) << "PS " << k;
    for (std::size_t x = 1; x < sent[k].size(); ++x) {
      ASSERT_EQ(sent[k][x] - sent[k][x - 1], shards) << "PS " << k << ", its fragment " << x;
    }
    EXPECT_GT(sent[k].back() + shards, kInitialSeq + total - 1) << "PS " << k << " missed the last seqs";
  }
  EXPECT_EQ(w.stats().retransmissions, 0u);
  EXPECT_EQ(w.stats().dropped, 0u);
}

INSTANTIATE_TEST_SUITE_P(ShardsByWindow, WorkerShardSpacing,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u), ::testing::Values(1u, 2u, 3u)));

TEST(Worker, FlowsHaveSeparateWindows) {
  WorkerConfig c = base_config();
  c.ps = {route0(), route1()};
  c.congestion.initial_window = 2;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 10), kStart, out));  // 10 fragments, 5 per PS
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq, kInitialSeq + 2, kInitialSeq + 1, kInitialSeq + 3}));
  w.on_packet(parameter(kInitialSeq + 1), kStart, out);  // PS 1's first fragment: only PS 1's window slides
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 5}));
}

TEST(Worker, InOrderAckSlidesTheWindow) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 6), kStart, out));
  EXPECT_EQ(out.take().size(), 4u);
  w.on_packet(parameter(kInitialSeq), kStart, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 4}));
  w.on_packet(parameter(kInitialSeq + 1), kStart, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 5}));
  EXPECT_EQ(w.stats().parameters_received, 2u);
  EXPECT_EQ(w.stats().retransmissions, 0u);
}

TEST(Worker, ThreeOutOfOrderParametersResendTheExpectedFragmentOnce) {
  WorkerConfig c = base_config();
  c.congestion.initial_window = 8;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 12), kStart, out));
  const auto first = out.take();
  ASSERT_EQ(first.size(), 8u);
  w.on_packet(parameter(kInitialSeq + 1), kBack, out);
  w.on_packet(parameter(kInitialSeq + 2), kBack, out);
  w.on_packet(parameter(kInitialSeq + 2), kBack, out);  // a duplicate does not count
  EXPECT_TRUE(out.packets.empty());
  w.on_packet(parameter(kInitialSeq + 3), kBack, out);
  auto resent = out.take();
  ASSERT_EQ(resent.size(), 1u);
  const Header h = decoded(resent[0]);
  EXPECT_EQ(h.seq, kInitialSeq);
  EXPECT_TRUE(h.resend);
  EXPECT_EQ(h.aggregator_index, decoded(first[0]).aggregator_index);
  EXPECT_EQ(values_of(resent[0]), values_of(first[0]));
  w.on_packet(parameter(kInitialSeq + 4), kBack, out);
  w.on_packet(parameter(kInitialSeq + 5), kBack, out);
  w.on_packet(parameter(kInitialSeq + 6), kBack, out);
  EXPECT_TRUE(out.packets.empty());  // once per fragment
  EXPECT_EQ(w.stats().fast_retransmits, 1u);
  EXPECT_EQ(w.stats().retransmissions, 1u);
  EXPECT_EQ(w.stats().duplicate_parameters, 1u);
  // The resend's result arrives: the window slides past everything received.
  w.on_packet(parameter(kInitialSeq), kBack, out);
  EXPECT_EQ(seqs_of(out.take()),
            (std::vector<Seq>{kInitialSeq + 8, kInitialSeq + 9, kInitialSeq + 10, kInitialSeq + 11}));
}

TEST(Worker, FastRetransmitHalvesTheWindowOnce) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 16;
  c.congestion.initial_ssthresh = 16;  // congestion avoidance: growth is slow enough to see the cut
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 40), kStart, out));
  for (Seq s = 1; s <= 6; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
  EXPECT_EQ(w.window(), 8u);
  EXPECT_EQ(w.stats().fast_retransmits, 1u);
}

TEST(Worker, EcnParameterHalvesTheWindow) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 8;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 20), kStart, out));
  EXPECT_EQ(out.take().size(), 8u);
  Header h = parameter_header(kInitialSeq);
  h.ecn = true;
  w.on_packet(parameter_with(h), kStart, out);
  EXPECT_EQ(w.window(), 4u);
  EXPECT_EQ(w.stats().ecn_parameters, 1u);
  EXPECT_TRUE(out.packets.empty());  // 7 in flight, window 4: nothing new
}

TEST(Worker, RetransmissionTimeoutResendsTheHolesWithBackoff) {
  WorkerConfig c = base_config();
  // The RTO alone: ATP's loss detection would resend these holes first, a round trip after the
  // result that overtook them (Worker.*Overdue*, *OnceMoreBeforeTheRto).
  c.loss_recovery = LossRecovery::kTimeoutOnly;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 4), kStart, out));
  out.take();
  const Duration ms = std::chrono::milliseconds(1);
  w.on_packet(parameter(kInitialSeq + 2), kStart + ms / 4, out);  // out of order: no progress
  EXPECT_EQ(w.next_deadline(), kStart + ms);
  w.on_timeout(kStart + ms / 2, out);  // early: nothing due
  EXPECT_TRUE(out.packets.empty());

  Time now = kStart + ms;
  w.on_timeout(now, out);
  auto resent = out.take();
  // The fragments older than the newest result; not the acknowledged one, and not fragment 3,
  // which may be waiting in a switch aggregator for slower workers.
  EXPECT_EQ(seqs_of(resent), (std::vector<Seq>{kInitialSeq, kInitialSeq + 1}));
  for (const Bytes& p : resent) EXPECT_TRUE(decoded(p).resend);
  // The backed-off RTO plus up to a quarter of it as per-worker jitter.
  auto expect_rto = [&](Duration rto) {
    EXPECT_GE(w.next_deadline(), now + rto);
    EXPECT_LE(w.next_deadline(), now + rto + rto / 4);
  };
  expect_rto(2 * ms);

  now = w.next_deadline();
  w.on_timeout(now, out);
  EXPECT_EQ(out.take().size(), 2u);
  expect_rto(4 * ms);
  now = w.next_deadline();
  w.on_timeout(now, out);
  EXPECT_EQ(out.take().size(), 2u);
  expect_rto(4 * ms);  // capped at max_retransmit_timeout
  EXPECT_EQ(w.stats().timeouts, 3u);
  EXPECT_EQ(w.stats().retransmissions, 6u);
  EXPECT_EQ(w.stats().gradient_packets_sent, 10u);

  now += ms;
  // Progress resets the backoff to the estimate. There is no sample (fragment 2's result was the
  // round's first, which waits for the other workers as much as for the path), so fragment 0's
  // resend stands in: its result came 1 ms after the resend, and the RTO is twice that.
  w.on_packet(parameter(kInitialSeq), now, out);
  EXPECT_EQ(w.next_deadline(), now + 2 * ms);
}

// The RTO follows the measured round trips: on a path whose results take 30 ms (a slow link, a
// deep queue), a fixed 1 ms RTO resent every window before its results could come; the measured
// one waits. A path simulated by hand: every copy sent reaches the PS, and the result of a
// fragment comes 30 ms after its first copy left; the timer fires at its deadline.
TEST(Worker, TheTimeoutFollowsMeasuredRoundTrips) {
  using std::chrono::milliseconds;
  WorkerConfig c = base_config();
  c.retransmit_timeout = milliseconds(10);
  c.min_retransmit_timeout = milliseconds(1);
  c.max_retransmit_timeout = milliseconds(1000);
  WorkerEndpoint w(c);
  RecordingSink out;
  std::map<Seq, Time> result_at;  // seq -> when its result arrives
  auto record_sends = [&](Time now) {
    for (const Bytes& p : out.take()) result_at.try_emplace(decoded(p).seq, now + milliseconds(30));
  };
  auto run_round = [&](std::size_t fragments, Time now) {
    EXPECT_TRUE(w.start(ramp(4 * fragments), now, out));
    record_sends(now);
    while (w.state() == WorkerState::kRunning) {
      Time next_result = kNever;
      Seq seq = 0;
      for (const auto& [s, at] : result_at) {
        if (at < next_result) std::tie(next_result, seq) = std::pair(at, s);
      }
      if (w.next_deadline() < next_result) {
        now = w.next_deadline();
        w.on_timeout(now, out);
      } else {
        now = next_result;
        result_at.erase(seq);
        w.on_packet(parameter(seq), now, out);
      }
      record_sends(now);
    }
    return now;
  };
  Time now = run_round(12, kStart);  // window 4: three windows
  EXPECT_EQ(w.state(), WorkerState::kIdle);
  // The first window waited 30 ms against the initial 10 ms RTO: one timeout; its resend's result
  // stands in for a sample (20 ms after the resend), the RTO becomes 60 ms, and no more fire.
  EXPECT_EQ(w.stats().timeouts, 1u);
  const std::uint64_t resent = w.stats().retransmissions;
  // The next round on the same path: nothing resent, and the armed RTO is the measured one.
  ASSERT_TRUE(w.start(ramp(4), now, out));
  EXPECT_GE(w.next_deadline() - now, milliseconds(31));
  EXPECT_LE(w.next_deadline() - now, milliseconds(1000));
  record_sends(now);
  result_at.erase(kInitialSeq + 12);
  w.on_packet(parameter(kInitialSeq + 12), now + milliseconds(30), out);
  run_round(12, now + milliseconds(30));
  EXPECT_EQ(w.stats().retransmissions, resent) << "no spurious resend once the round trip is known";
}

// A queue grows past the RTO after the first results: the timeout resends a fragment whose
// first copy then makes the result (no resend flag). That round trip is taken whole, so the next
// round's RTO is past it; where the resend was needed (the result carries the flag), it is not.
TEST(Worker, ATimeoutThatTheFirstCopyAnsweredRaisesTheTimeoutPastItsRoundTrip) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  for (const bool spurious : {true, false}) {
    WorkerConfig c = base_config();  // window 4, a 1 ms first RTO
    c.max_retransmit_timeout = milliseconds(1000);
    WorkerEndpoint w(c);
    RecordingSink out;
    Time now = kStart;
    ASSERT_TRUE(w.start(ramp(8 * 4), now, out));
    now += microseconds(500);
    for (Seq s = 0; s < 4; ++s) w.on_packet(parameter(kInitialSeq + s), now, out);  // 4..7 go now
    const Time queued = now + milliseconds(10);
    while (w.next_deadline() < queued) w.on_timeout(w.next_deadline(), out);
    ASSERT_EQ(seqs_of(out.take()).back(), kInitialSeq + 4) << "the timeouts resent fragment 4";
    w.on_packet(spurious ? parameter(kInitialSeq + 4) : recovered_parameter(kInitialSeq + 4), queued, out);
    for (Seq s = 5; s < 8; ++s) w.on_packet(parameter(kInitialSeq + s), queued, out);
    ASSERT_EQ(w.state(), WorkerState::kIdle);
    ASSERT_TRUE(w.start(ramp(4), queued, out));
    if (spurious) {
      EXPECT_GE(w.next_deadline() - queued, milliseconds(10)) << "spurious: past the 10 ms round trip";
    } else {
      EXPECT_LT(w.next_deadline() - queued, milliseconds(10)) << "needed: the clipped estimate";
    }
  }
}

// A round's first result waits for the last worker to start the round: a worker 50 ms ahead of
// the others sees its first window's results 50 ms after sending, however short the round trip.
// Those delays are no round trip samples: the timeout stays the round trip's, so that a fragment
// lost once results flow is resent after a round trip, not after the workers' skew.
TEST(Worker, TheWaitForTheOtherWorkersIsNoRoundTrip) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  WorkerConfig c = base_config();  // a 1 ms first RTO
  c.max_retransmit_timeout = WorkerConfig{}.max_retransmit_timeout;
  c.congestion.initial_window = 8;
  WorkerEndpoint w(c);
  RecordingSink out;
  Time now = kStart;
  for (int round = 0; round < 3; ++round) {
    const Seq first = kInitialSeq + 8 * round;
    ASSERT_TRUE(w.start(ramp(4 * 8), now, out));
    now += milliseconds(50);  // the other workers start: the aggregates of the window come
    for (Seq s = 0; s < 7; ++s) w.on_packet(parameter(first + s), now, out);
    EXPECT_EQ(w.next_deadline() - now, milliseconds(1)) << "round " << round;
    now += microseconds(100);
    w.on_packet(parameter(first + 7), now, out);
    ASSERT_EQ(w.state(), WorkerState::kIdle);
  }
}

TEST(Worker, TimeoutJitterDiffersBetweenWorkers) {
  WorkerConfig a = base_config();
  WorkerConfig b = base_config();
  b.self = a.self + 1;
  WorkerEndpoint wa(a), wb(b);
  RecordingSink out;
  ASSERT_TRUE(wa.start(ramp(16), kStart, out));
  ASSERT_TRUE(wb.start(ramp(16), kStart, out));
  const Time first = kStart + std::chrono::milliseconds(1);
  wa.on_timeout(first, out);
  wb.on_timeout(first, out);
  EXPECT_NE(wa.next_deadline(), wb.next_deadline());  // no lockstep resends
}

TEST(Worker, TimeoutResendBurstIsCappedByTheWindow) {
  WorkerConfig c = base_config();
  c.loss_recovery = LossRecovery::kTimeoutOnly;  // the RTO's burst alone, before any fast resend
  c.congestion.enabled = true;                   // the base config has congestion control off
  c.congestion.initial_window = 8;
  c.congestion.min_window = 1;
  c.congestion.mtu_bytes = 52;  // one packet of 4 values: the additive step is 1 packet
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(8 * 4), kStart, out));
  EXPECT_EQ(out.take().size(), 8u);
  w.on_packet(parameter(kInitialSeq + 7), kStart, out);  // fragments 0..6 are holes
  w.on_timeout(kStart + std::chrono::milliseconds(1), out);
  const auto resent = out.take();
  // The window shrinks first, and the burst resends no more than it allows: the oldest holes,
  // the expected fragment first.
  const std::uint32_t window = w.window();
  ASSERT_LT(window, 7u);
  std::vector<Seq> want;
  for (std::uint32_t j = 0; j < window; ++j) want.push_back(kInitialSeq + j);
  EXPECT_EQ(seqs_of(resent), want);
}

// A result that waits for another worker's loss recovery times out here again and again. The
// first timeout halves the window; the backed-off ones for the same data do not (RFC 5681), or
// a job of many workers at a few percent loss ends with every window at 1 packet and makes one
// fragment of progress per RTO (property case seed326_w47_r2_j2_loss50permille_agg64 stalled so).
TEST(Worker, BackedOffTimeoutsForTheSameDataCutTheWindowOnce) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 16;
  c.congestion.mtu_bytes = 52;  // one packet of 4 values: the additive step is 1 packet
  c.max_retransmit_timeout = std::chrono::milliseconds(100);
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(16 * 4), kStart, out));
  out.take();
  Time now = kStart;
  for (int i = 0; i < 6; ++i) {
    now = w.next_deadline();
    w.on_timeout(now, out);
    EXPECT_EQ(w.window(), 8u) << "timeout " << i;
  }
  EXPECT_EQ(w.stats().timeouts, 6u);
  // Progress (the resend of fragment 0 went into its result), then fragments sent after the cut
  // time out too: that is news, and it halves again.
  w.on_packet(recovered_parameter(kInitialSeq), now, out);
  for (Seq s = 1; s < 16; ++s) w.on_packet(parameter(kInitialSeq + s), now, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  const std::uint32_t grown = w.window();  // congestion avoidance from 8, one packet per window of results
  ASSERT_EQ(grown, 9u);
  ASSERT_TRUE(w.start(ramp(16 * 4), now, out));
  w.on_timeout(w.next_deadline(), out);
  EXPECT_EQ(w.window(), grown / 2);
}

// After a timeout, the holes its burst could not resend go as results come back (RFC 6675's
// recovery), never more than a window ahead of the expected fragment; the same data timing out
// again resends half as many as the timeout before (a window's worth at every backed-off RTO
// filled the 200 Mbit/s testbed's links with resends that flushed the switches' aggregators).
TEST(Worker, AfterATimeoutTheHolesGoAsResultsComeBack) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 16;
  c.congestion.mtu_bytes = 52;  // one packet of 4 values: the additive step is 1 packet
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(16 * 4), kStart, out));
  out.take();
  w.on_packet(parameter(kInitialSeq + 15), kBack, out);  // fragments 0..14 are holes
  EXPECT_TRUE(out.take().empty());
  // Each hole goes once when overdue, then once more two round trips on, and twice more, each
  // after twice the wait of the one before; the window halves once.
  w.on_timeout(w.next_deadline(), out);
  EXPECT_EQ(out.take().size(), 15u);
  for (int probe = 0; probe < 3; ++probe) {
    w.on_timeout(w.next_deadline(), out);
    EXPECT_EQ(out.take().size(), 15u);
  }
  ASSERT_EQ(w.window(), 8u);
  EXPECT_EQ(w.stats().timeouts, 0u);
  // Every one of those lost as well: the RTO halves the window again, and its burst resends the
  // oldest holes, as many as the window allows.
  Time now = w.next_deadline();
  w.on_timeout(now, out);
  ASSERT_EQ(w.window(), 4u);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{1000, 1001, 1002, 1003}));
  // Each result lets out the next hole, up to a window (4) past the expected fragment.
  w.on_packet(recovered_parameter(kInitialSeq + 0), now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 4}));
  w.on_packet(recovered_parameter(kInitialSeq + 1), now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 5}));
  // The same data times out again: the window holds, and the burst is half the last one.
  now = w.next_deadline();
  w.on_timeout(now, out);
  EXPECT_EQ(w.window(), 4u);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{1002, 1003}));
  now = w.next_deadline();
  w.on_timeout(now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{1002}));
  // Results keep the rescue going from where it stopped: hole 6 next.
  w.on_packet(recovered_parameter(kInitialSeq + 2), now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 6}));
  EXPECT_EQ(w.stats().timeouts, 3u);
}

TEST(Worker, RetransmissionTimeoutWithoutResultsResendsTheExpectedFragment) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 4), kStart, out));
  out.take();
  w.on_timeout(kStart + std::chrono::milliseconds(1), out);
  const auto resent = out.take();
  EXPECT_EQ(seqs_of(resent), (std::vector<Seq>{kInitialSeq}));
  EXPECT_TRUE(decoded(resent[0]).resend);
}

// A window of 8 fragments (0..7) in flight, then the first RTO at `now`: it resends fragment 0.
void send_eight_then_time_out(WorkerEndpoint& w, RecordingSink& out, Time now) {
  ASSERT_TRUE(w.start(ramp(4 * 8), kStart, out));
  out.take();
  w.on_timeout(now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq}));
}

WorkerConfig with_window_of_eight() {
  WorkerConfig c = base_config();
  c.congestion.initial_window = 8;
  return c;
}

TEST(Worker, AfterATimeoutEachResultOfAResentFragmentResendsTheNextAtOnce) {
  // A link or switch was down: the whole window is lost. Recovery goes at one RTT per fragment
  // (each resend's result triggers the next) instead of one RTO per fragment.
  WorkerEndpoint w(with_window_of_eight());
  RecordingSink out;
  Time now = kStart + std::chrono::milliseconds(1);
  send_eight_then_time_out(w, out, now);  // all 8 lost
  now += std::chrono::microseconds(10);
  w.on_packet(recovered_parameter(kInitialSeq), now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 1}));
  w.on_packet(recovered_parameter(kInitialSeq + 1), now, out);
  const auto next = out.take();
  EXPECT_EQ(seqs_of(next), (std::vector<Seq>{kInitialSeq + 2}));
  EXPECT_TRUE(decoded(next[0]).resend);
  // A result for a fragment sent once (4) shows the pipe is flowing: recovery ends. When
  // results then arrive in order again (2, 3, 5), none of them resends the next fragment, whose
  // result may well be on its way.
  w.on_packet(parameter(kInitialSeq + 4), now, out);
  for (Seq s : {2, 3, 5}) w.on_packet(parameter(kInitialSeq + s), now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{}));
  EXPECT_EQ(w.stats().timeouts, 1u);
  EXPECT_EQ(w.stats().retransmissions, 3u);
}

// A timeout that fired while nothing was lost (the round trip grew past the RTO): the result for
// the resent fragment comes without the PS's resend flag, so the first copies made it, and the
// results that follow in order resend nothing. Before, each of them resent the next fragment,
// a whole window of resends that flushed the switches' partial sums to the PS.
TEST(Worker, AResultWithoutTheResendFlagEndsTheRecoveryOfASpuriousTimeout) {
  WorkerEndpoint w(with_window_of_eight());
  RecordingSink out;
  Time now = kStart + std::chrono::milliseconds(1);
  send_eight_then_time_out(w, out, now);  // none lost
  now += std::chrono::microseconds(10);
  for (Seq s = 0; s < 8; ++s) w.on_packet(parameter(kInitialSeq + s), now, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{}));
  EXPECT_EQ(w.stats().retransmissions, 1u);
  EXPECT_EQ(w.state(), WorkerState::kIdle);  // the round is complete
}

// base_config with congestion control on, from a window (and ssthresh) of `window` packets.
WorkerConfig with_congestion_control(std::uint32_t window) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = window;
  c.congestion.initial_ssthresh = window;
  return c;
}

// A fast retransmit whose result comes without the PS's resend flag: the first copy made it
// (results overtook it: a collision sent its copies to the PS one by one), so the window cut is
// taken back. With the flag, the resend was needed: the cut stays.
TEST(Worker, AFastRetransmitAnsweredByTheFirstCopyGivesTheWindowBack) {
  for (const bool needed : {false, true}) {
    WorkerEndpoint w(with_congestion_control(16));
    RecordingSink out;
    ASSERT_TRUE(w.start(ramp(32 * 4), kStart, out));
    out.take();
    for (Seq s = 1; s <= 3; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
    EXPECT_EQ(seqs_of(out.take()).front(), kInitialSeq) << "the fast retransmit";
    const std::uint32_t cut = w.window();
    ASSERT_LT(cut, 16u);
    w.on_packet(needed ? recovered_parameter(kInitialSeq) : parameter(kInitialSeq), kStart, out);
    EXPECT_EQ(w.stats().undone_cuts, needed ? 0u : 1u);
    EXPECT_EQ(w.window(), needed ? cut : 16u) << (needed ? "needed" : "spurious");
  }
}

// The host's own queue full (the sink holds what it refused) is a congestion mark on each flow's
// oldest fragment in flight: one cut, and another only for fragments sent after it.
TEST(Worker, TheHostQueueFullCutsTheWindowOncePerRoundTrip) {
  WorkerEndpoint w(with_congestion_control(16));
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(64 * 4), kStart, out));
  out.take();
  w.on_host_queue_full(kStart);
  ASSERT_EQ(w.window(), 8u);
  w.on_host_queue_full(kStart);
  EXPECT_EQ(w.window(), 8u);
  for (Seq s = 0; s < 16; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);  // fragments 16.. now go
  out.take();
  const std::uint32_t grown = w.window();
  w.on_host_queue_full(kStart);  // the oldest in flight (16) was sent after the cut
  EXPECT_EQ(w.window(), grown / 2);
  EXPECT_EQ(w.stats().host_queue_full, 3u);
}

// start_in_place sends what start does and writes each fragment's sum over its own values as it
// arrives, the short last fragment zero-padded on the wire and unpadded in the result.
TEST(Worker, StartInPlaceSendsTheSameAndWritesTheSumsOverTheInput) {
  WorkerConfig c = base_config();
  c.congestion.initial_window = 8;
  const std::vector<float> input = ramp(10);  // fragments of 4, 4 and 2 values
  WorkerEndpoint copying(c), in_place(c);
  RecordingSink copied, direct;
  std::vector<float> values = input;
  ASSERT_TRUE(copying.start(input, kStart, copied));
  ASSERT_TRUE(in_place.start_in_place(values, kStart, direct));
  ASSERT_EQ(direct.packets.size(), 3u);
  EXPECT_EQ(direct.packets, copied.packets);
  EXPECT_EQ(values_of(direct.packets[2]),
            (std::vector<std::int32_t>{quantized(input, c.scale)[8], quantized(input, c.scale)[9], 0, 0}));
  in_place.on_packet(parameter(kInitialSeq + 1), kStart, direct);
  EXPECT_EQ(values[4], dequantize_one(sums_for(kInitialSeq + 1)[0], c.scale));
  EXPECT_EQ(values[0], input[0]) << "fragment 0 has no sum yet: its values are still the input";
  in_place.on_packet(parameter(kInitialSeq), kStart, direct);
  in_place.on_packet(parameter(kInitialSeq + 2), kStart, direct);
  ASSERT_EQ(in_place.state(), WorkerState::kIdle);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(values[i], dequantize_one(sums_for(kInitialSeq + i / 4)[i % 4], c.scale)) << i;
  }
  EXPECT_EQ(in_place.result().data(), values.data());
}

TEST(Worker, EveryHoleWithThreeLaterResultsIsResentAtOnce) {
  WorkerConfig c = base_config();
  c.congestion.initial_window = 10;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 10), kStart, out));  // all 10 fragments in flight; 0, 1 and 5 lost
  out.take();
  for (Seq s : {2, 3, 4}) w.on_packet(parameter(kInitialSeq + s), kBack, out);
  // Three later results for 0 and 1, sent when they were, and a round trip passed: both go in
  // this round trip, not 1 a round trip after 0.
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq, kInitialSeq + 1}));
  w.on_packet(parameter(kInitialSeq + 6), kBack, out);
  w.on_packet(parameter(kInitialSeq + 7), kBack, out);
  EXPECT_TRUE(out.packets.empty()) << "5 has two later results: it gets the reordering window";
  w.on_packet(parameter(kInitialSeq + 8), kBack, out);
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 5}));
  w.on_packet(parameter(kInitialSeq + 9), kBack, out);
  EXPECT_TRUE(out.packets.empty()) << "once per hole";
  EXPECT_EQ(w.stats().fast_retransmits, 3u);
  for (Seq s : {0, 1, 5}) w.on_packet(recovered_parameter(kInitialSeq + s), kBack, out);
  EXPECT_EQ(w.state(), WorkerState::kIdle);
}

// A worker with a window of 4 whose fragments 0-7 were answered in turn, so that its flow has
// round-trip samples (20 us), and whose fragments 8 to fragments - 1 went out then: at `sent`, 8-11.
struct SampledWorker {
  explicit SampledWorker(std::uint32_t fragments = 12) : w(config()) {
    using std::chrono::microseconds;
    EXPECT_TRUE(w.start(ramp(4 * fragments), kStart, out));
    EXPECT_EQ(out.take().size(), 4u);
    sent = kStart + microseconds(20);
    for (Seq s = 0; s < 4; ++s) w.on_packet(parameter(kInitialSeq + s), sent, out);  // no samples: the first results
    sent += microseconds(20);
    for (Seq s = 4; s < 8; ++s) w.on_packet(parameter(kInitialSeq + s), sent, out);
    EXPECT_EQ(seqs_of(out.take()).back(), kInitialSeq + 11);
  }
  static WorkerConfig config() {
    WorkerConfig c = base_config();
    c.congestion.initial_window = 4;
    return c;
  }
  // 9-11 answered 20 us after `sent`, 8 not: three later results and a round trip since its send,
  // so 8 is resent at once. Returns when.
  Time lose_8() {
    const Time back = sent + std::chrono::microseconds(20);
    for (Seq s : {9, 10, 11}) w.on_packet(parameter(kInitialSeq + s), back, out);
    EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 8}));
    EXPECT_EQ(w.stats().fast_retransmits, 1u);
    EXPECT_EQ(w.stats().timeouts, 0u);
    return back;
  }
  WorkerEndpoint w;
  RecordingSink out;
  Time sent;
};

// A hole with fewer than three later results (at the end of a round, where no more follow) waits
// a round trip and the reordering window, a quarter of srtt, past its send; one whose result
// comes within that is late, not lost.
TEST(Worker, AHoleAtTheEndOfARoundGoesAfterTheReorderingWindow) {
  using std::chrono::microseconds;
  SampledWorker lost, late;
  for (SampledWorker* x : {&lost, &late}) {
    for (Seq s : {8, 9, 11}) x->w.on_packet(parameter(kInitialSeq + s), x->sent + microseconds(20), x->out);
    EXPECT_TRUE(x->out.packets.empty()) << "one later result: not overdue yet";
  }
  const Time due = lost.w.next_deadline();
  EXPECT_GE(due, lost.sent + microseconds(24));
  EXPECT_LE(due, lost.sent + microseconds(30));
  lost.w.on_timeout(due, lost.out);
  EXPECT_EQ(seqs_of(lost.out.take()), (std::vector<Seq>{kInitialSeq + 10}));
  EXPECT_EQ(lost.w.stats().timeouts, 0u);

  late.w.on_packet(parameter(kInitialSeq + 10), late.w.next_deadline() - microseconds(1), late.out);  // a slower way
  EXPECT_EQ(late.w.state(), WorkerState::kIdle);
  EXPECT_TRUE(late.out.packets.empty());
  EXPECT_EQ(late.w.stats().fast_retransmits, 0u);
}

// A fast resend that its first copy made needless (the result comes without the PS's resend
// flag) is reordering: from then on every hole gets the reordering window, three later results
// or not.
TEST(Worker, ANeedlessFastResendWidensTheReorderingWindow) {
  using std::chrono::microseconds;
  SampledWorker x(16);
  const Time back = x.lose_8();
  x.w.on_packet(parameter(kInitialSeq + 8), back + microseconds(2), x.out);  // the first copy's result
  const Time sent = back + microseconds(2);
  EXPECT_EQ(x.out.take().size(), 4u);  // 12-15
  for (Seq s : {13, 14, 15}) x.w.on_packet(parameter(kInitialSeq + s), sent + microseconds(20), x.out);
  EXPECT_TRUE(x.out.packets.empty()) << "three later results, but reordering was seen";
  const Time due = x.w.next_deadline();
  EXPECT_GT(due, sent + microseconds(20));
  x.w.on_timeout(due, x.out);
  EXPECT_EQ(seqs_of(x.out.take()), (std::vector<Seq>{kInitialSeq + 12}));
}

TEST(Worker, AFastRetransmitWithoutAResultGoesThreeMoreTimesBeforeTheRto) {
  using std::chrono::microseconds;
  SampledWorker x;
  const Time t = x.lose_8();
  // Nothing new to send, so no later result can say that the resend was lost too: after two
  // round trips and their variation (far below the RTO's 1 ms floor) it goes once more, then
  // twice more, each after twice the wait of the one before.
  Time probe = x.w.next_deadline();
  EXPECT_GE(probe, t + microseconds(40));
  EXPECT_LE(probe, t + microseconds(200));
  Duration wait = probe - t;
  for (std::uint64_t n = 1; n <= 3; ++n) {
    SCOPED_TRACE(n);
    x.w.on_timeout(probe, x.out);
    auto again = x.out.take();
    ASSERT_EQ(seqs_of(again), (std::vector<Seq>{kInitialSeq + 8}));
    EXPECT_TRUE(decoded(again[0]).resend);
    EXPECT_EQ(x.w.stats().fast_retransmits, 1 + n);
    EXPECT_EQ(x.w.stats().timeouts, 0u);
    wait *= 2;
    if (n < 3) {
      EXPECT_EQ(x.w.next_deadline(), probe + wait);
      probe = x.w.next_deadline();
    }
  }
  // Three times: what follows is the RTO's.
  EXPECT_GT(x.w.next_deadline(), probe + wait);
  x.w.on_timeout(x.w.next_deadline(), x.out);
  EXPECT_EQ(x.w.stats().timeouts, 1u);
  EXPECT_EQ(x.w.stats().fast_retransmits, 4u);
  x.w.on_packet(recovered_parameter(kInitialSeq + 8), x.w.next_deadline(), x.out);
  EXPECT_EQ(x.w.state(), WorkerState::kIdle);
}

TEST(Worker, AnAnsweredFastRetransmitIsNotProbed) {
  SampledWorker x;
  const Time t = x.lose_8();
  const Time probe = x.w.next_deadline();
  ASSERT_LT(probe, t + SampledWorker::config().min_retransmit_timeout);
  x.w.on_packet(recovered_parameter(kInitialSeq + 8), t + std::chrono::microseconds(20), x.out);
  EXPECT_EQ(x.w.state(), WorkerState::kIdle);
  x.w.on_timeout(probe, x.out);
  EXPECT_TRUE(x.out.packets.empty());
  EXPECT_EQ(x.w.stats().fast_retransmits, 1u);
}

TEST(Worker, FailsAfterProgressTimeoutWithAClearError) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(8), kStart, out));
  Time now = kStart;
  int timeouts = 0;
  while (w.state() == WorkerState::kRunning && timeouts < 10000) {
    now = w.next_deadline();
    w.on_timeout(now, out);
    ++timeouts;
  }
  ASSERT_EQ(w.state(), WorkerState::kFailed);
  EXPECT_EQ(now, kStart + std::chrono::seconds(2));
  EXPECT_EQ(w.error(),
            "job 3: no parameter packet from PS 10.0.0.9 for 2.0 s; the PS or switch is unreachable, or another worker "
            "of the job stopped");
  EXPECT_EQ(w.next_deadline(), kNever);
  out.take();
  w.on_packet(parameter(kInitialSeq), now, out);  // terminal: nothing revives it
  EXPECT_EQ(w.state(), WorkerState::kFailed);
  EXPECT_FALSE(w.start(ramp(8), now, out));
  EXPECT_TRUE(out.packets.empty());
}

TEST(Worker, ProgressTimeoutRestartsOnEveryNewResult) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 3), kStart, out));
  const Time later = kStart + std::chrono::milliseconds(1500);
  w.on_packet(parameter(kInitialSeq + 1), later, out);
  Time now = later;
  while (w.state() == WorkerState::kRunning) {
    now = w.next_deadline();
    w.on_timeout(now, out);
  }
  EXPECT_EQ(now, later + std::chrono::seconds(2));
}

TEST(Worker, CollisionRemapsLaterFragmentsWithTheSameBaseIndex) {
  WorkerConfig c = base_config();
  c.index_policy = IndexPolicy::kLinear;  // base index = seq % 4, so the bases are easy to see
  c.aggregators = {0, 4};
  c.initial_seq = 0;
  c.congestion.initial_window = 3;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 12), kStart, out));
  out.take();  // seqs 0, 1, 2 at indices 0, 1, 2
  Header h = parameter_header(0);
  h.collision = true;
  h.bitmap = 3;  // the PS's new index for base 0
  w.on_packet(parameter_with(h), kStart, out);
  EXPECT_EQ(w.stats().remaps, 1u);
  auto sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).aggregator_index, 3u);  // seq 3: base 3, not remapped
  w.on_packet(parameter(1), kStart, out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).seq, 4u);
  EXPECT_EQ(decoded(sent[0]).aggregator_index, 3u);  // base 0 -> 3
  w.on_packet(parameter(2), kStart, out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).aggregator_index, 1u);  // seq 5: base 1, unchanged

  // A second collision on the remapped index moves base 0 again.
  h = parameter_header(4);
  h.collision = true;
  h.bitmap = 2;
  w.on_packet(parameter(3), kStart, out);
  w.on_packet(parameter_with(h), kStart, out);
  EXPECT_EQ(w.stats().remaps, 2u);
  sent = out.take();
  ASSERT_EQ(sent.size(), 2u);  // seqs 6 and 7
  w.on_packet(parameter(5), kStart, out);
  w.on_packet(parameter(6), kStart, out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(decoded(sent[0]).seq, 8u);
  EXPECT_EQ(decoded(sent[0]).aggregator_index, 2u);

  // An index outside the table is not an index: ignored.
  h = parameter_header(7);
  h.collision = true;
  h.bitmap = 4;
  w.on_packet(parameter_with(h), kStart, out);
  EXPECT_EQ(w.stats().remaps, 2u);
}

TEST(Worker, ResendsKeepTheIndexTheFragmentWasFirstSentWith) {
  WorkerConfig c = base_config();
  c.loss_recovery = LossRecovery::kTimeoutOnly;  // the holes go at the RTO, both at once
  c.index_policy = IndexPolicy::kLinear;
  c.aggregators = {0, 2};
  c.initial_seq = 0;
  c.congestion.initial_window = 3;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 5), kStart, out));
  out.take();  // seqs 0, 1, 2 at indices 0, 1, 0
  Header h = parameter_header(2);
  h.collision = true;
  h.bitmap = 1;  // base 0 -> 1
  w.on_packet(parameter_with(h), kStart, out);
  w.on_timeout(kStart + std::chrono::milliseconds(1), out);
  auto resent = out.take();
  ASSERT_EQ(resent.size(), 2u);
  EXPECT_EQ(decoded(resent[0]).seq, 0u);
  EXPECT_EQ(decoded(resent[0]).aggregator_index, 0u);  // partial state may sit at the old index
  EXPECT_EQ(decoded(resent[1]).aggregator_index, 1u);
  w.on_packet(parameter(0), kStart, out);
  w.on_packet(parameter(1), kStart, out);
  const auto sent = out.take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(decoded(sent[1]).seq, 4u);
  EXPECT_EQ(decoded(sent[1]).aggregator_index, 1u);  // new fragments with base 0 use the new index
}

// Static sharing: the job's slice [300, 350) of a table. First sends (hashed and linear) and
// remaps learned from the PS stay inside it; a remap to an index outside it is not this job's.
TEST(Worker, StaticShareKeepsFirstAndRemappedIndicesInsideItsRange) {
  const AggregatorRange share{300, 50};
  for (const IndexPolicy policy : {IndexPolicy::kHashed, IndexPolicy::kLinear}) {
    SCOPED_TRACE(policy == IndexPolicy::kHashed ? "hashed" : "linear");
    WorkerConfig c = base_config();
    c.aggregators = share;
    c.index_policy = policy;
    c.initial_seq = 0;
    c.congestion.initial_window = 400;  // every fragment in the first window
    WorkerEndpoint w(c);
    RecordingSink out;
    ASSERT_TRUE(w.start(ramp(4 * 400), kStart, out));
    std::vector<Bytes> sent = out.take();
    ASSERT_EQ(sent.size(), 400u);
    for (const Bytes& p : sent) {
      const Header h = decoded(p);
      EXPECT_TRUE(share.contains(h.aggregator_index)) << "seq " << h.seq << " -> " << h.aggregator_index;
      EXPECT_EQ(h.aggregator_index, base_aggregator_index(kJob, h.seq, share, policy));
      if (policy == IndexPolicy::kLinear) {
        EXPECT_EQ(h.aggregator_index, 300 + h.seq % 50);
      }
    }

    // Collisions on seqs 0, 1 and 2: the remap into the range is learned, those outside it ignored.
    const std::uint32_t base0 = base_aggregator_index(kJob, 0, share, policy);
    const std::uint32_t moved = rehash_aggregator_index(base0, share);
    Header h = parameter_header(0);
    h.collision = true;
    h.bitmap = moved;
    w.on_packet(parameter_with(h), kStart, out);
    EXPECT_EQ(w.stats().remaps, 1u);
    h = parameter_header(1);
    h.collision = true;
    h.bitmap = 299;  // the next job's share
    w.on_packet(parameter_with(h), kStart, out);
    h.seq = 2;
    h.bitmap = 350;
    w.on_packet(parameter_with(h), kStart, out);
    EXPECT_EQ(w.stats().remaps, 1u);

    // The next round reuses the base indices: fragments with seq 0's base move, all stay in the share.
    for (Seq seq = 3; seq < 400; ++seq) w.on_packet(parameter(seq), kStart, out);
    ASSERT_EQ(w.state(), WorkerState::kIdle);
    out.take();
    ASSERT_TRUE(w.start(ramp(4 * 400), kStart, out));
    sent = out.take();
    ASSERT_EQ(sent.size(), 400u);
    std::size_t moved_fragments = 0;
    for (const Bytes& p : sent) {
      const Header g = decoded(p);
      EXPECT_TRUE(share.contains(g.aggregator_index)) << "seq " << g.seq << " -> " << g.aggregator_index;
      if (base_aggregator_index(kJob, g.seq, share, policy) == base0) {
        EXPECT_EQ(g.aggregator_index, moved) << "seq " << g.seq;
        ++moved_fragments;
      }
    }
    EXPECT_GT(moved_fragments, 0u);
  }
}

TEST(Worker, OverflowNoticeResendsTheFragmentAsFloat32) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  const std::vector<float> input = {1.5f, -2.25f, 3e-3f, 7.0f, 0.1f, -0.2f};
  ASSERT_TRUE(w.start(input, kStart, out));
  out.take();
  Header h = parameter_header(kInitialSeq + 1);
  h.overflow = true;
  w.on_packet(build_packet(h, {}), kStart, out);
  auto sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  const Header resend = decoded(sent[0]);
  EXPECT_EQ(resend.seq, kInitialSeq + 1);
  EXPECT_TRUE(resend.resend);
  EXPECT_TRUE(resend.float_payload);
  EXPECT_EQ(resend.value_count, 4);
  EXPECT_EQ(values_of(sent[0]),
            (std::vector<std::int32_t>{std::bit_cast<std::int32_t>(0.1f), std::bit_cast<std::int32_t>(-0.2f), 0, 0}));
  EXPECT_EQ(w.stats().float_resends, 1u);
  EXPECT_EQ(w.stats().retransmissions, 1u);

  w.on_packet(build_packet(h, {}), kStart, out);  // the same notice again: already answered
  EXPECT_TRUE(out.packets.empty());
  EXPECT_EQ(w.stats().duplicate_parameters, 1u);

  // A timeout retransmits the fragment as float32 again (the PS is collecting floats for it).
  w.on_packet(parameter(kInitialSeq), kStart, out);
  const Time now = kStart + std::chrono::milliseconds(1);
  ASSERT_EQ(w.next_deadline(), now);
  w.on_timeout(now, out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).seq, kInitialSeq + 1);
  EXPECT_TRUE(decoded(sent[0]).float_payload);
  EXPECT_TRUE(decoded(sent[0]).resend);

  // The float result: float32 sums, taken bit for bit.
  Header result = parameter_header(kInitialSeq + 1);
  result.float_payload = true;
  const std::vector<std::int32_t> float_sums = {std::bit_cast<std::int32_t>(1e30f), std::bit_cast<std::int32_t>(-0.4f),
                                                std::bit_cast<std::int32_t>(123.0f), 0};
  w.on_packet(build_packet(result, float_sums), now, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.float_fragments(), (std::vector<std::uint32_t>{1}));
  const auto got = w.result();
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[4], 1e30f);
  EXPECT_EQ(got[5], -0.4f);
  const auto int_sums = sums_for(kInitialSeq);
  for (std::size_t v = 0; v < 4; ++v) EXPECT_EQ(got[v], dequantize_one(int_sums[v], kScale));
}

// The PS lacks a fragment from this worker (docs/protocol.md "Resend requests"): it goes again
// at once, unless its latest copy is younger than the RTO (the estimate's, 1 ms here: the
// minimum) or its result is in;
// for a fragment the window has not let out yet, the window's oldest goes again (its result was
// lost). The window stays; the RTO-only baseline ignores requests.
TEST(Worker, AResendRequestResendsTheFragmentOrTheOneTheWindowWaitsFor) {
  using std::chrono::microseconds;
  WorkerConfig c = base_config();
  c.congestion.initial_window = 2;
  c.retransmit_timeout = std::chrono::milliseconds(100);
  c.max_retransmit_timeout = std::chrono::milliseconds(100);
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 8), kStart, out));
  EXPECT_EQ(out.take().size(), 2u);
  w.on_packet(parameter(kInitialSeq), kStart + microseconds(20), out);
  w.on_packet(parameter(kInitialSeq + 1), kStart + microseconds(30), out);
  w.on_packet(parameter(kInitialSeq + 2), kStart + microseconds(40), out);  // a 20 us round trip
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq + 2, kInitialSeq + 3, kInitialSeq + 4}));
  auto request = [](Seq seq) {
    Header h = parameter_header(seq);
    h.dst = kSelf;
    h.resend_request = true;
    return build_packet(h, {});
  };
  w.on_packet(request(kInitialSeq + 3), kStart + microseconds(900), out);  // sent 0.87 ms ago: maybe crossed it
  EXPECT_TRUE(out.take().empty());
  w.on_packet(request(kInitialSeq + 3), kStart + microseconds(1100), out);
  auto sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).seq, kInitialSeq + 3);
  EXPECT_TRUE(decoded(sent[0]).resend);
  w.on_packet(request(kInitialSeq), kStart + microseconds(1100), out);  // its result is in
  EXPECT_TRUE(out.take().empty());
  // Fragment 5 waits behind the window: the oldest without a result (3) goes once more.
  w.on_packet(request(kInitialSeq + 5), kStart + microseconds(2200), out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).seq, kInitialSeq + 3);
  EXPECT_EQ(w.stats().requested_resends, 2u);
  EXPECT_EQ(w.stats().resend_requests_ignored, 2u);
  EXPECT_EQ(w.stats().parameters_received, 3u) << "a request is no parameter";
  w.on_packet(parameter(kInitialSeq + 3), kStart + microseconds(2300), out);
  EXPECT_EQ(seqs_of(out.take()), std::vector<Seq>{kInitialSeq + 5}) << "the window stayed at 2";

  c.loss_recovery = LossRecovery::kTimeoutOnly;
  WorkerEndpoint baseline(c);
  ASSERT_TRUE(baseline.start(ramp(4 * 4), kStart, out));
  out.take();
  baseline.on_packet(request(kInitialSeq), kStart + std::chrono::milliseconds(50), out);
  EXPECT_TRUE(out.take().empty());
  EXPECT_EQ(baseline.stats().resend_requests_ignored, 1u);
}

TEST(Worker, AFragmentWaitingForFloatsIsNotFastRetransmitted) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 4;
  c.congestion.mtu_bytes = static_cast<std::uint32_t>(packet_size(4));  // step: one packet per ACK
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 4), kStart, out));
  out.take();
  Header h = parameter_header(kInitialSeq);
  h.overflow = true;
  w.on_packet(build_packet(h, {}), kStart, out);
  EXPECT_EQ(out.take().size(), 1u);  // the float resend
  // The PS collects floats from every worker meanwhile; later fragments overtake fragment 0.
  for (Seq s = 1; s <= 3; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
  EXPECT_TRUE(out.packets.empty());
  EXPECT_EQ(w.stats().fast_retransmits, 0u);
  EXPECT_EQ(w.window(), 7u);  // no loss signal: slow start went on, +1 per result
}

TEST(Worker, FloatResultWithoutTheOverflowNoticeIsAccepted) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4), kStart, out));
  Header result = parameter_header(kInitialSeq);
  result.float_payload = true;  // this worker missed the notice; the others answered it
  const std::vector<std::int32_t> sums = {std::bit_cast<std::int32_t>(2.5f), std::bit_cast<std::int32_t>(-3.0f),
                                          std::bit_cast<std::int32_t>(1e-9f), std::bit_cast<std::int32_t>(4e20f)};
  w.on_packet(build_packet(result, sums), kStart, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(std::vector<float>(w.result().begin(), w.result().end()), (std::vector<float>{2.5f, -3.0f, 1e-9f, 4e20f}));
  EXPECT_EQ(w.float_fragments(), (std::vector<std::uint32_t>{0}));
}

TEST(Worker, ResultsAreExactInAnyArrivalOrder) {
  WorkerConfig c = base_config();
  c.ps = {route0(), route1()};
  c.values_per_packet = 62;
  c.scale = kScale;
  c.congestion.initial_window = 16;
  WorkerEndpoint w(c);
  RecordingSink out;
  const std::size_t n = 1000;  // 17 fragments, the last one 8 values + 54 zeros
  ASSERT_TRUE(w.start(ramp(n), kStart, out));
  ASSERT_EQ(out.packets.size(), 17u);
  // Fragment i's sums: arbitrary int32 values, some of them large.
  auto sum = [](std::size_t i, std::size_t v) {
    const auto spread = static_cast<std::int64_t>((i * 7919 + v * 104729) % 4'000'000'001ull);
    return static_cast<std::int32_t>(spread - 2'000'000'000);
  };
  for (std::size_t k = 0; k < 17; ++k) {
    const std::size_t i = (k * 7) % 17;  // a fixed shuffle
    std::vector<std::int32_t> values(62);
    for (std::size_t v = 0; v < 62; ++v) values[v] = sum(i, v);
    Header h = parameter_header(kInitialSeq + static_cast<Seq>(i));
    h.src = i % 2 == 0 ? kPs0 : kPs1;
    w.on_packet(build_packet(h, values), kStart, out);
  }
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.stats().rounds_completed, 1u);
  const auto got = w.result();
  ASSERT_EQ(got.size(), n);
  for (std::size_t x = 0; x < n; ++x) ASSERT_EQ(got[x], dequantize_one(sum(x / 62, x % 62), kScale)) << "value " << x;
  EXPECT_TRUE(w.float_fragments().empty());
  EXPECT_EQ(w.next_deadline(), kNever);
}

TEST(Worker, RoundsContinueTheSequenceAndKeepTheWindow) {
  WorkerConfig c = base_config();
  c.congestion.enabled = true;
  c.congestion.initial_window = 2;
  c.congestion.mtu_bytes = static_cast<std::uint32_t>(packet_size(4));  // step: one packet per ACK
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(12), kStart, out));  // 3 fragments
  EXPECT_EQ(out.take().size(), 2u);
  for (Seq s = 0; s < 3; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.window(), 5u);  // slow start: 2 + 3 ACKs
  out.take();

  ASSERT_TRUE(w.start(ramp(4 * 8), kStart, out));  // 8 fragments
  EXPECT_EQ(seqs_of(out.take()),
            (std::vector<Seq>{kInitialSeq + 3, kInitialSeq + 4, kInitialSeq + 5, kInitialSeq + 6, kInitialSeq + 7}));
  w.on_packet(parameter(kInitialSeq + 1), kStart, out);  // a late copy from round 1
  EXPECT_EQ(w.stats().duplicate_parameters, 1u);
  EXPECT_EQ(w.stats().dropped, 0u);
  for (Seq s = 3; s < 11; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.stats().rounds_completed, 2u);
  const auto got = w.result();
  ASSERT_EQ(got.size(), 32u);
  for (std::size_t x = 0; x < 32; ++x) {
    EXPECT_EQ(got[x], dequantize_one(sums_for(kInitialSeq + 3 + static_cast<Seq>(x / 4))[x % 4], c.scale));
  }
}

TEST(Worker, SequenceNumbersWrapAroundTwoToThe32) {
  WorkerConfig c = base_config();
  c.initial_seq = 0xFFFFFFFEu;
  c.congestion.initial_window = 8;
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 5), kStart, out));
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{0xFFFFFFFEu, 0xFFFFFFFFu, 0u, 1u, 2u}));
  // Out of order across the wrap: three results after the expected one trigger its resend.
  w.on_packet(parameter(0xFFFFFFFFu), kStart, out);
  w.on_packet(parameter(0), kStart, out);
  w.on_packet(parameter(1), kStart, out);
  auto resent = out.take();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(decoded(resent[0]).seq, 0xFFFFFFFEu);
  EXPECT_TRUE(decoded(resent[0]).resend);
  w.on_packet(parameter(0xFFFFFFFEu), kStart, out);
  w.on_packet(parameter(2), kStart, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  const auto got = w.result();
  const Seq seqs[] = {0xFFFFFFFEu, 0xFFFFFFFFu, 0u, 1u, 2u};
  for (std::size_t x = 0; x < 20; ++x) EXPECT_EQ(got[x], dequantize_one(sums_for(seqs[x / 4])[x % 4], c.scale));

  // The next round starts at 3; a late result from before the wrap is a duplicate.
  ASSERT_TRUE(w.start(ramp(4), kStart, out));
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{3u}));
  w.on_packet(parameter(0xFFFFFFFFu), kStart, out);
  EXPECT_EQ(w.stats().duplicate_parameters, 1u);
  EXPECT_EQ(w.stats().dropped, 0u);
}

TEST(Worker, GarbageOtherJobsAndGradientPacketsAreCountedAndIgnored) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 8), kStart, out));
  out.take();
  std::uint64_t expected_drops = 0;
  auto expect_dropped = [&](const Bytes& packet) {
    w.on_packet(packet, kStart, out);
    EXPECT_EQ(w.stats().dropped, ++expected_drops);
  };
  expect_dropped(Bytes{});
  expect_dropped(Bytes(10, 0xA7));
  Bytes bad_magic = parameter(kInitialSeq);
  bad_magic[0] ^= 0xFF;
  expect_dropped(bad_magic);
  Bytes truncated = parameter(kInitialSeq);
  truncated.pop_back();
  expect_dropped(truncated);
  Header other_job = parameter_header(kInitialSeq);
  other_job.job = kJob + 1;
  expect_dropped(parameter_with(other_job));
  Header gradient = parameter_header(kInitialSeq);
  gradient.is_ack = false;
  expect_dropped(parameter_with(gradient));
  expect_dropped(parameter(kInitialSeq, 3));     // wrong value count for this job
  expect_dropped(parameter(kInitialSeq + 4));    // in the round, but never sent
  expect_dropped(parameter(kInitialSeq + 100));  // beyond the round
  expect_dropped(parameter(kInitialSeq - 1));    // before the job's first seq
  expect_dropped(parameter(kInitialSeq + 0x80000000u));
  EXPECT_TRUE(out.packets.empty());
  EXPECT_EQ(w.stats().parameters_received, 0u);
  EXPECT_EQ(w.state(), WorkerState::kRunning);
  // The round still completes normally.
  for (Seq s = 0; s < 8; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
  EXPECT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.stats().dropped, expected_drops);
}

TEST(Worker, DuplicateParametersAreIgnored) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 8), kStart, out));
  out.take();
  w.on_packet(parameter(kInitialSeq), kStart, out);
  EXPECT_EQ(out.take().size(), 1u);
  w.on_packet(parameter(kInitialSeq), kStart, out);  // e.g. re-sent for another worker
  EXPECT_TRUE(out.packets.empty());
  EXPECT_EQ(w.stats().duplicate_parameters, 1u);
  EXPECT_EQ(w.stats().parameters_received, 2u);
  // A duplicate with different values must not overwrite the stored result.
  Header h = parameter_header(kInitialSeq);
  w.on_packet(build_packet(h, std::vector<std::int32_t>{9, 9, 9, 9}), kStart, out);
  for (Seq s = 1; s < 8; ++s) w.on_packet(parameter(kInitialSeq + s), kStart, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.result()[0], dequantize_one(sums_for(kInitialSeq)[0], kScale));
  w.on_packet(parameter(kInitialSeq + 7), kStart, out);  // after the round: still a duplicate
  EXPECT_EQ(w.stats().duplicate_parameters, 3u);
  EXPECT_EQ(w.stats().dropped, 0u);
}

// Scale per fragment: each position's next call is at the exponent its last result named, and a
// result that names none (kNoMagnitude, which decoding lets through) leaves it as it was.
TEST(Worker, EachPositionTakesTheExponentItsLastResultNamed) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(8), kStart, out));
  for (const Bytes& p : out.take()) EXPECT_EQ(decoded(p).scale_exponent, kExponent);
  Header first = parameter_header(kInitialSeq);
  first.magnitude_or_next = 7;
  w.on_packet(parameter_with(first), kStart, out);
  Header second = parameter_header(kInitialSeq + 1);
  second.magnitude_or_next = kNoMagnitude;
  w.on_packet(parameter_with(second), kStart, out);
  ASSERT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.result_exponents(), (std::vector<std::int16_t>{kExponent, kExponent}));
  const std::vector<float> input = ramp(8);
  ASSERT_TRUE(w.start(input, kStart, out));
  const std::vector<Bytes> sent = out.take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(decoded(sent[0]).scale_exponent, 7);
  EXPECT_EQ(values_of(sent[0]), quantized(std::span(input).first(4), std::ldexp(1.0, 7)));
  EXPECT_EQ(decoded(sent[1]).scale_exponent, kExponent);
  EXPECT_EQ(decoded(sent[0]).magnitude_or_next, magnitude_of(std::span(input).first(4)));
}

// DDP allreduces its buckets in turn, each of its own size: a position's exponent is kept per size,
// so that the next call of one bucket is at what that bucket's last call named, whatever was
// all-reduced in between.
TEST(Worker, EachSizeKeepsItsOwnExponents) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  Seq seq = kInitialSeq;  // seqs go on from round to round
  const auto run = [&](std::size_t values, std::int16_t next) {
    const std::vector<float> input = ramp(values);
    EXPECT_TRUE(w.start(input, kStart, out));
    std::vector<std::int16_t> sent;
    for (const Bytes& p : out.take()) sent.push_back(decoded(p).scale_exponent);
    for (std::uint64_t k = 0; k < fragment_count(values, 4); ++k) {
      Header h = parameter_header(seq++);
      h.magnitude_or_next = next;
      w.on_packet(parameter_with(h), kStart, out);
    }
    EXPECT_EQ(w.state(), WorkerState::kIdle);
    return sent;
  };
  EXPECT_EQ(run(8, 7), (std::vector<std::int16_t>{kExponent, kExponent}));  // the job's first call
  EXPECT_EQ(run(4, 3), (std::vector<std::int16_t>{7}));                     // a new size: the last call's
  EXPECT_EQ(run(8, 9), (std::vector<std::int16_t>{7, 7}));                  // its own last call's
  EXPECT_EQ(run(4, 3), (std::vector<std::int16_t>{3}));
  EXPECT_EQ(run(8, 9), (std::vector<std::int16_t>{9, 9}));
  // A new size past the last call's positions: the scale's there.
  EXPECT_EQ(run(12, 5), (std::vector<std::int16_t>{9, 9, kExponent}));
}

TEST(Worker, EmptyInputCompletesAtOnce) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start({}, kStart, out));
  EXPECT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_TRUE(out.packets.empty());
  EXPECT_TRUE(w.result().empty());
  EXPECT_EQ(w.stats().rounds_completed, 1u);
  EXPECT_EQ(w.next_deadline(), kNever);
  ASSERT_TRUE(w.start(ramp(4), kStart, out));
  EXPECT_EQ(seqs_of(out.take()), (std::vector<Seq>{kInitialSeq}));  // no seq consumed
}

// A lost tail (no later result reveals it) goes again two round trips after results stop (the
// tail probe, RACK-TLP), not an RTO later; a worker that has no result yet this round (waiting
// for a late peer) sends no probe.
TEST(Worker, ALostTailIsProbedAfterTwoRoundTripsNotAnRto) {
  const WorkerConfig c = base_config();
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 4), kStart, out));  // 4 fragments, all in the first window
  ASSERT_EQ(out.take().size(), 4u);
  EXPECT_EQ(w.next_deadline(), kStart + c.retransmit_timeout);  // no result yet: the RTO only
  const Duration rtt = std::chrono::microseconds(20);
  for (Seq s = 0; s < 3; ++s) w.on_packet(parameter(kInitialSeq + s), kStart + rtt, out);
  EXPECT_TRUE(out.take().empty());
  const Time probe = w.next_deadline();
  EXPECT_EQ(probe, kStart + rtt + 2 * rtt);  // srtt is the one sample
  w.on_timeout(probe, out);
  const std::vector<Bytes> sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(decoded(sent[0]).seq, kInitialSeq + 3);
  EXPECT_TRUE(decoded(sent[0]).resend);
  EXPECT_EQ(w.stats().tail_probes, 1u);
  // Once per silence: the next deadline is the RTO's (its floor, armed by the last result).
  EXPECT_EQ(w.next_deadline(), kStart + rtt + c.min_retransmit_timeout);
  w.on_packet(parameter(kInitialSeq + 3), probe + rtt, out);
  EXPECT_EQ(w.state(), WorkerState::kIdle);
  EXPECT_EQ(w.stats().timeouts, 0u);
}

// ---------------------------------------------------------------------------------------------
// Round shape (docs/protocol.md): the last fragment of a round says how many of its values are
// real; a mismatch notice from the PS fails the round with one sentence.

TEST(Worker, LastFragmentOfTheRoundCarriesItsRealValueCount) {
  WorkerConfig c = base_config();
  c.retransmit_timeout = std::chrono::milliseconds(1);
  WorkerEndpoint w(c);
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(10), kStart, out));  // 4 + 4 + 2 real values
  std::vector<Bytes> sent = out.take();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(decoded(sent[0]).round_shape, 0);
  EXPECT_EQ(decoded(sent[1]).round_shape, 0);
  EXPECT_EQ(decoded(sent[2]).round_shape, 2);
  // Every resend of it carries the same: the tail probe's and the timeout's (both due by then),
  // and the float32 one after an overflow.
  w.on_packet(parameter(kInitialSeq), kStart, out);
  w.on_packet(parameter(kInitialSeq + 1), kStart, out);
  w.on_timeout(kStart + c.retransmit_timeout, out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(w.stats().tail_probes, 1u);
  for (const Bytes& p : sent) {
    EXPECT_TRUE(decoded(p).resend);
    EXPECT_EQ(decoded(p).round_shape, 2);
  }
  Header overflow = parameter_header(kInitialSeq + 2);
  overflow.overflow = true;
  w.on_packet(build_packet(overflow, {}), kStart, out);
  sent = out.take();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(decoded(sent[0]).float_payload);
  EXPECT_EQ(decoded(sent[0]).round_shape, 2);

  // A round of whole fragments: the last one's values are all real. One fragment: it is the last.
  WorkerEndpoint whole(base_config());
  ASSERT_TRUE(whole.start(ramp(8), kStart, out));
  sent = out.take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(decoded(sent[0]).round_shape, 0);
  EXPECT_EQ(decoded(sent[1]).round_shape, 4);
  WorkerEndpoint single(base_config());
  ASSERT_TRUE(single.start(ramp(1), kStart, out));
  EXPECT_EQ(decoded(out.take().at(0)).round_shape, 1);
}

TEST(Worker, RoundShapeMismatchNoticeFailsTheRoundWithOneSentence) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(1000), kStart, out));  // 250 fragments, 4 sent
  out.take();
  Header notice = parameter_header(kInitialSeq + 2);
  notice.round_shape = kRoundShapeMismatch;
  // For a fragment not sent yet, or of no round: not about this worker's round.
  notice.seq = kInitialSeq + 100;
  w.on_packet(build_packet(notice, {}), kStart, out);
  notice.seq = kInitialSeq - 1;
  w.on_packet(build_packet(notice, {}), kStart, out);
  EXPECT_EQ(w.state(), WorkerState::kRunning);
  EXPECT_EQ(w.stats().dropped, 2u);

  notice.seq = kInitialSeq + 2;
  w.on_packet(build_packet(notice, {}), kStart, out);
  EXPECT_EQ(w.state(), WorkerState::kFailed);
  EXPECT_EQ(w.error(),
            "job 3: the workers all-reduce tensors of different sizes (this worker: 1000 values in this call); "
            "every worker must pass the same number of values");
  EXPECT_EQ(w.next_deadline(), kNever);
  EXPECT_TRUE(out.packets.empty());
  w.on_packet(parameter(kInitialSeq), kStart, out);  // terminal: nothing is taken any more
  EXPECT_EQ(w.state(), WorkerState::kFailed);
  EXPECT_TRUE(out.packets.empty());
}

TEST(Worker, RoundShapeMismatchForAFragmentWithAResultIsNotAFailure) {
  WorkerEndpoint w(base_config());
  RecordingSink out;
  ASSERT_TRUE(w.start(ramp(4 * 8), kStart, out));
  w.on_packet(parameter(kInitialSeq), kStart, out);
  Header notice = parameter_header(kInitialSeq);
  notice.round_shape = kRoundShapeMismatch;
  w.on_packet(build_packet(notice, {}), kStart, out);
  EXPECT_EQ(w.state(), WorkerState::kRunning);
  EXPECT_EQ(w.stats().dropped, 1u);
}

}  // namespace
}  // namespace atp
