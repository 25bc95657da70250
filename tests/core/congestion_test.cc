// Tests of AimdWindow (paper §3.7): slow start and congestion avoidance steps, one halving per
// window of data on ECN or loss, halving on timeout, clamping, wrap-around, and the "off" switch.
#include "atp/congestion.h"

#include <gtest/gtest.h>

namespace atp {
namespace {

// 40 B header + 62 values = 288 B: one 1500 B MTU is 5 packets, as in the paper.
constexpr std::uint32_t kPacketBytes = 288;

CongestionConfig config_with(std::uint32_t initial_window, std::uint32_t initial_ssthresh) {
  CongestionConfig c;
  c.initial_window = initial_window;
  c.initial_ssthresh = initial_ssthresh;
  return c;
}

// The one check of a config's windows (a scenario file's and a job plan's): a first window above
// max_window is an error with both numbers; 0 (sized in bytes) and equal windows are not.
TEST(WindowError, NamesBothWindowsWhenTheFirstExceedsTheLargest) {
  CongestionConfig c;
  EXPECT_EQ(window_error(c), std::nullopt);  // initial_window 0: sized in bytes, clamped
  c.initial_window = c.max_window;
  EXPECT_EQ(window_error(c), std::nullopt);
  c.initial_window = c.max_window + 1;
  EXPECT_EQ(window_error(c), "the window (1025) must not exceed max_window (1024)");
}

TEST(AimdWindow, StartsAtInitialWindowWithOneMtuStep) {
  const AimdWindow w(CongestionConfig{}, kPacketBytes);
  EXPECT_EQ(w.window(), 200u);
  EXPECT_EQ(w.ssthresh(), 1024u);
  EXPECT_EQ(w.step(), 5u);
  // Packets larger than the MTU still step by one packet.
  EXPECT_EQ(AimdWindow(CongestionConfig{}, 16420).step(), 1u);
  EXPECT_EQ(AimdWindow(CongestionConfig{}, 1500).step(), 1u);
}

// The default first window is the same bytes whatever the packet size: 200 packets of the
// default 62 values, 13 of 1024 (a queue not yet drained holds bytes, not packets), at least one
// packet, within [min_window, max_window]; a window given in packets is kept.
TEST(AimdWindow, TheDefaultFirstWindowIsTheSameBytesForAnyPacketSize) {
  EXPECT_EQ(AimdWindow(CongestionConfig{}, packet_size(kDefaultValuesPerPacket)).window(), 200u);
  EXPECT_EQ(AimdWindow(CongestionConfig{}, packet_size(1024)).window(), 13u);
  EXPECT_EQ(AimdWindow(CongestionConfig{}, 1u << 20).window(), 1u);
  CongestionConfig capped;
  capped.max_window = 8;
  EXPECT_EQ(AimdWindow(capped, packet_size(kDefaultValuesPerPacket)).window(), 8u);
  CongestionConfig given;
  given.initial_window = 300;
  EXPECT_EQ(AimdWindow(given, packet_size(1024)).window(), 300u);
}

TEST(AimdWindow, SlowStartAddsOneMtuPerAck) {
  AimdWindow w(config_with(10, 100), kPacketBytes);
  w.on_ack(0, false, 10);
  EXPECT_EQ(w.window(), 15u);
  w.on_ack(1, false, 10);
  EXPECT_EQ(w.window(), 20u);
  for (Seq s = 2; s < 18; ++s) w.on_ack(s, false, 20);
  EXPECT_EQ(w.window(), 100u);  // 16 more steps of 5 reach ssthresh
  w.on_ack(18, false, 20);      // at ssthresh: congestion avoidance, one ACK of 100 is not a window
  EXPECT_EQ(w.window(), 100u);
}

TEST(AimdWindow, CongestionAvoidanceAddsOneMtuPerWindow) {
  AimdWindow w(config_with(20, 20), kPacketBytes);  // window == ssthresh: congestion avoidance
  for (Seq s = 0; s < 19; ++s) w.on_ack(s, false, 100);
  EXPECT_EQ(w.window(), 20u);
  w.on_ack(19, false, 100);  // the 20th ACK completes one window
  EXPECT_EQ(w.window(), 25u);
  for (Seq s = 20; s < 44; ++s) w.on_ack(s, false, 100);
  EXPECT_EQ(w.window(), 25u);
  w.on_ack(44, false, 100);  // 25 more ACKs: one more window of the new size
  EXPECT_EQ(w.window(), 30u);
}

TEST(AimdWindow, EcnHalvesOncePerWindowOfData) {
  AimdWindow w(config_with(100, 1000), kPacketBytes);
  w.on_ack(0, true, 100);  // packets 0..99 were in flight
  EXPECT_EQ(w.window(), 50u);
  EXPECT_EQ(w.ssthresh(), 50u);
  for (Seq s = 1; s < 100; ++s) w.on_ack(s, true, 100);  // same news: no further cut, no growth
  EXPECT_EQ(w.window(), 50u);
  w.on_ack(100, true, 150);  // sent after the cut: a new signal
  EXPECT_EQ(w.window(), 25u);
  EXPECT_EQ(w.ssthresh(), 25u);
}

TEST(AimdWindow, UnmarkedAcksAfterACutGrowInCongestionAvoidance) {
  AimdWindow w(config_with(100, 1000), kPacketBytes);
  w.on_ack(0, true, 100);
  ASSERT_EQ(w.window(), 50u);
  for (Seq s = 1; s <= 50; ++s) w.on_ack(s, false, 100);  // ssthresh == window: one window -> +1 MTU
  EXPECT_EQ(w.window(), 55u);
}

TEST(AimdWindow, LossHalvesOncePerEpochAndSharesItWithEcn) {
  AimdWindow w(config_with(100, 1000), kPacketBytes);
  w.on_loss(5, 100);
  EXPECT_EQ(w.window(), 50u);
  w.on_ack(6, true, 100);  // ECN about a packet of the same epoch
  w.on_loss(7, 100);
  EXPECT_EQ(w.window(), 50u);
  w.on_loss(100, 160);
  EXPECT_EQ(w.window(), 25u);
  w.on_ack(120, true, 160);  // in the epoch of the second cut
  EXPECT_EQ(w.window(), 25u);
}

TEST(AimdWindow, TimeoutHalvesEvenInAnEcnEpochAndStartsItsOwn) {
  AimdWindow w(config_with(100, 1000), kPacketBytes);
  w.on_ack(0, true, 100);
  ASSERT_EQ(w.window(), 50u);
  w.on_timeout(0, 100);  // within the ECN epoch, but a timeout is news of its own
  EXPECT_EQ(w.window(), 25u);
  EXPECT_EQ(w.ssthresh(), 25u);
  w.on_ack(50, true, 100);  // before the timeout's epoch end
  EXPECT_EQ(w.window(), 25u);
}

// RFC 5681: the same data timing out again holds ssthresh. In ATP a result often waits for
// another worker's recovery; a cut at every backed-off timeout left windows at 1 packet.
TEST(AimdWindow, TheSameDataTimingOutAgainCutsOnce) {
  AimdWindow w(config_with(200, 1000), kPacketBytes);
  w.on_timeout(0, 200);
  ASSERT_EQ(w.window(), 100u);
  for (int i = 0; i < 5; ++i) w.on_timeout(0, 200);  // backed-off timeouts of packet 0
  EXPECT_EQ(w.window(), 100u);
  EXPECT_EQ(w.ssthresh(), 100u);
  w.on_timeout(150, 200);  // still data sent before the cut
  EXPECT_EQ(w.window(), 100u);
  w.on_timeout(200, 300);  // data sent after the cut timed out too: news
  EXPECT_EQ(w.window(), 50u);
}

TEST(AimdWindow, ALossCutDoesNotHoldATimeoutsCut) {
  AimdWindow w(config_with(200, 1000), kPacketBytes);
  w.on_loss(0, 200);
  ASSERT_EQ(w.window(), 100u);
  w.on_timeout(0, 200);
  EXPECT_EQ(w.window(), 50u);
  w.on_timeout(0, 200);
  EXPECT_EQ(w.window(), 50u);
}

// RFC 4015's response: a loss that was not one (the result came from the first copy) gives the
// window and ssthresh from before its cut back, once; a cut for other news is not taken back.
TEST(AimdWindow, UndoRestoresTheCutOfALossThatWasNotOne) {
  AimdWindow w(config_with(100, 80), kPacketBytes);
  w.on_loss(5, 100);
  ASSERT_EQ(w.window(), 50u);
  EXPECT_FALSE(w.undo(6));  // not the seq the cut was for
  EXPECT_TRUE(w.undo(5));
  EXPECT_EQ(w.window(), 100u);
  EXPECT_EQ(w.ssthresh(), 80u);
  EXPECT_FALSE(w.undo(5));  // once
  w.on_loss(7, 100);        // the epoch ended with the undo: a new loss cuts again
  EXPECT_EQ(w.window(), 50u);
  w.on_timeout(7, 100);  // a timeout's cut for the same seq replaces the loss's
  ASSERT_EQ(w.window(), 25u);
  EXPECT_TRUE(w.undo(7));
  EXPECT_EQ(w.window(), 50u);  // back to before the timeout's cut, not the loss's
}

TEST(AimdWindow, ACutForCongestionIsNotUndone) {
  AimdWindow w(config_with(100, 1000), kPacketBytes);
  w.on_loss(5, 100);
  w.on_ack(100, true, 160);  // an ECN mark of a later epoch cuts again
  ASSERT_EQ(w.window(), 25u);
  EXPECT_FALSE(w.undo(5));
  EXPECT_EQ(w.window(), 25u);
  w.on_congestion(200, 300);  // the host's queue full
  ASSERT_EQ(w.window(), 12u);
  EXPECT_FALSE(w.undo(200));
}

// The host's queue full is news about the oldest packet in flight: one cut per round trip.
TEST(AimdWindow, HostQueueFullCutsOncePerRoundTrip) {
  AimdWindow w(config_with(100, 1000), kPacketBytes);
  w.on_congestion(0, 100);
  ASSERT_EQ(w.window(), 50u);
  w.on_congestion(0, 120);  // the same oldest packet: the queue has not drained yet
  w.on_congestion(99, 150);
  EXPECT_EQ(w.window(), 50u);
  w.on_congestion(100, 150);  // the oldest was sent after the cut: a round trip later
  EXPECT_EQ(w.window(), 25u);
}

TEST(AimdWindow, ClampsToMinAndMax) {
  CongestionConfig c = config_with(200, 1000);
  c.min_window = 4;
  c.max_window = 30;
  AimdWindow w(c, kPacketBytes);
  EXPECT_EQ(w.window(), 30u);  // initial window clamped to max
  for (Seq s = 0; s < 100; ++s) w.on_ack(s, false, 100);
  EXPECT_EQ(w.window(), 30u);
  Seq next = 100;
  for (int i = 0; i < 10; ++i, next += 10) w.on_loss(next, next + 10);
  EXPECT_EQ(w.window(), 4u);
  w.on_timeout(next, next + 10);
  EXPECT_EQ(w.window(), 4u);
}

TEST(AimdWindow, RecoveryEpochSurvivesSequenceWrapAround) {
  AimdWindow w(config_with(64, 1000), kPacketBytes);
  w.on_ack(0xFFFFFFF0u, true, 0x00000010u);  // epoch straddles 2^32
  ASSERT_EQ(w.window(), 32u);
  w.on_ack(0xFFFFFFF8u, true, 0x00000010u);
  w.on_ack(0x00000005u, true, 0x00000010u);
  EXPECT_EQ(w.window(), 32u);
  w.on_ack(0x00000010u, true, 0x00000030u);
  EXPECT_EQ(w.window(), 16u);
}

TEST(AimdWindow, DisabledKeepsTheInitialWindow) {
  CongestionConfig c = config_with(200, 10);
  c.enabled = false;
  AimdWindow w(c, kPacketBytes);
  EXPECT_EQ(w.window(), 200u);
  w.on_ack(0, false, 10);
  w.on_ack(1, true, 10);
  w.on_loss(2, 10);
  w.on_timeout(0, 10);
  EXPECT_EQ(w.window(), 200u);
  // max_window still holds: it also bounds the PS's memory for the job.
  c.max_window = 100;
  EXPECT_EQ(AimdWindow(c, kPacketBytes).window(), 100u);
}

// RFC 6298's estimator with time given by hand.
TEST(RttEstimator, FollowsRfc6298) {
  using std::chrono::milliseconds;
  RttEstimator e(milliseconds(10), milliseconds(1), milliseconds(1000));
  EXPECT_FALSE(e.has_sample());
  EXPECT_EQ(e.rto(), milliseconds(10)) << "the initial RTO before any sample";
  e.on_sample(milliseconds(40));
  EXPECT_EQ(e.srtt(), milliseconds(40));
  EXPECT_EQ(e.rttvar(), milliseconds(20));
  EXPECT_EQ(e.rto(), milliseconds(40 + 4 * 20));
  e.on_sample(milliseconds(48));  // RTTVAR = 3/4 20 + 1/4 8 = 17; SRTT = 7/8 40 + 1/8 48 = 41
  EXPECT_EQ(e.rttvar(), milliseconds(17));
  EXPECT_EQ(e.srtt(), milliseconds(41));
  EXPECT_EQ(e.rto(), milliseconds(41 + 68));
}

TEST(RttEstimator, SteadySamplesConvergeAndTheBoundsHold) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  RttEstimator e(milliseconds(10), microseconds(1), milliseconds(200));
  for (int i = 0; i < 200; ++i) e.on_sample(microseconds(20));  // a simulated fabric's round trip
  EXPECT_EQ(e.srtt(), microseconds(20));
  // RTTVAR decays to 0; the variance term stays at its floor, and the bound holds.
  EXPECT_EQ(e.rto(), microseconds(20) + RttEstimator::kMinVariance);
  RttEstimator slow(milliseconds(10), milliseconds(1), milliseconds(200));
  slow.on_sample(milliseconds(150));  // 150 + 4 x 75 ms: capped
  EXPECT_EQ(slow.rto(), milliseconds(200));
  RttEstimator tiny(milliseconds(10), milliseconds(5), milliseconds(200));
  for (int i = 0; i < 100; ++i) tiny.on_sample(microseconds(1));
  EXPECT_EQ(tiny.rto(), milliseconds(5)) << "never below min_rto";
}

// A passing lag (one worker stalled for a moment, so another's results waited) is clipped to
// twice the recent least round trip; a lasting rise of every sample is followed.
TEST(RttEstimator, PassingOutliersAreClippedLastingRisesFollowed) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  RttEstimator e(milliseconds(10), microseconds(100), milliseconds(1000));
  for (int i = 0; i < 40; ++i) e.on_sample(microseconds(20));
  for (int i = 0; i < 5; ++i) e.on_sample(milliseconds(30));  // another worker's recovery
  EXPECT_LE(e.srtt(), microseconds(40));
  EXPECT_LT(e.rto(), microseconds(200));
  // Every sample now 30 ms (a queue that stands): within two blocks of samples the estimate is there.
  for (int i = 0; i < 2 * RttEstimator::kMinWindow + 40; ++i) e.on_sample(milliseconds(30));
  EXPECT_GT(e.srtt(), milliseconds(25));
  EXPECT_GT(e.rto(), milliseconds(30));
}

// A timeout that its first copy answered (a queue grew past the RTO) is taken whole: a clipped
// sample could not raise the estimate past twice the recent least round trip, so the same queue
// would time every fragment out again.
TEST(RttEstimator, ASpuriousTimeoutsRoundTripIsTakenWhole) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  RttEstimator clipped(milliseconds(10), microseconds(100), milliseconds(1000));
  RttEstimator e(milliseconds(10), microseconds(100), milliseconds(1000));
  for (int i = 0; i < 40; ++i) {
    clipped.on_sample(milliseconds(1));
    e.on_sample(milliseconds(1));
  }
  clipped.on_sample(milliseconds(10));
  EXPECT_LT(clipped.rto(), milliseconds(10)) << "a plain sample is clipped to 2 ms";
  e.on_spurious_timeout(milliseconds(10));
  EXPECT_EQ(e.srtt(), milliseconds(10));
  EXPECT_EQ(e.rttvar(), milliseconds(5));
  EXPECT_EQ(e.rto(), milliseconds(30));
  // Never lowers the estimate; and it is a first sample where there was none.
  e.on_spurious_timeout(milliseconds(2));
  EXPECT_EQ(e.rto(), milliseconds(30));
  RttEstimator fresh(milliseconds(10), microseconds(100), milliseconds(1000));
  fresh.on_spurious_timeout(milliseconds(4));
  EXPECT_TRUE(fresh.has_sample());
  EXPECT_EQ(fresh.rto(), milliseconds(4 + 4 * 2));
}

// The median of the last block of samples is a floor of the clip: a lag that holds up half the
// samples or more (another worker's queue swinging beside a TCP flow) is followed without any
// timeout, while one that holds up fewer (a passing stall) stays clipped to twice the least.
TEST(RttEstimator, ALagInHalfTheSamplesIsFollowedOneInFewerIsClipped) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  RttEstimator swing(milliseconds(10), microseconds(100), milliseconds(1000));
  for (int i = 0; i < 2 * RttEstimator::kMinWindow; ++i)
    swing.on_sample(i % 2 == 0 ? microseconds(300) : milliseconds(7));
  EXPECT_GT(swing.srtt(), milliseconds(3));
  EXPECT_GT(swing.rto(), milliseconds(7));
  RttEstimator stall(milliseconds(10), microseconds(100), milliseconds(1000));
  for (int i = 0; i < 2 * RttEstimator::kMinWindow; ++i)
    stall.on_sample(i % 4 == 0 ? milliseconds(7) : microseconds(300));
  EXPECT_LT(stall.srtt(), microseconds(600));
  EXPECT_LT(stall.rto(), milliseconds(2));
}

// A spurious timeout shows a delay that lasts (an ECN-marked queue's sawtooth beside a TCP flow):
// samples up to it are no longer clipped, so the estimate stays past the queue's peaks instead of
// sinking back to twice the least round trip and timing out at every peak. Once a whole block of
// samples stays below it, the floor follows them down and passing lags are clipped again.
TEST(RttEstimator, ASpuriousTimeoutKeepsSamplesUpToItUnclippedWhileTheyLast) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  RttEstimator e(milliseconds(10), microseconds(100), milliseconds(1000));
  for (int i = 0; i < 40; ++i) e.on_sample(microseconds(300));
  e.on_spurious_timeout(milliseconds(7));
  // The queue swings between empty and 7 ms: the peaks count whole.
  for (int i = 0; i < 3 * RttEstimator::kMinWindow; ++i) e.on_sample(i % 2 == 0 ? microseconds(300) : milliseconds(7));
  EXPECT_GT(e.srtt(), milliseconds(3));
  EXPECT_GT(e.rto(), milliseconds(7)) << "past the peaks: no timeout at each one";
  // The queue is gone: after two blocks of short samples a 7 ms lag is clipped again.
  for (int i = 0; i < 2 * RttEstimator::kMinWindow; ++i) e.on_sample(microseconds(300));
  const Duration before = e.srtt();
  e.on_sample(milliseconds(7));
  EXPECT_LE(e.srtt(), before + (microseconds(600) - before) / 8 + microseconds(1));
}

}  // namespace
}  // namespace atp
