// Tests of the host NIC's fair queue (deficit round robin by flow).
#include "atp/io/fair_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace atp {
namespace {

// Pops everything, in the order the transmitter would send it.
std::vector<int> drain(FairQueue<int>& q) {
  std::vector<int> out;
  while (!q.empty()) out.push_back(q.pop());
  return out;
}

TEST(FairQueue, OneFlowIsFifo) {
  FairQueue<int> q;
  for (int i = 0; i < 10; ++i) q.push(7, i, 330);
  EXPECT_EQ(q.size(), 10u);
  EXPECT_EQ(drain(q), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(FairQueue, ALateFlowWaitsForOneQuantumNotForTheBacklog) {
  // Flow 1 has 20 packets of 330 bytes waiting; flow 2's one packet, pushed after them, goes
  // once flow 1 has used its quantum (1,514 bytes: 4 packets).
  FairQueue<int> q;
  for (int i = 0; i < 20; ++i) q.push(1, i, 330);
  q.push(2, 100, 330);
  const std::vector<int> order = drain(q);
  ASSERT_EQ(order.size(), 21u);
  EXPECT_EQ(order[4], 100);
  EXPECT_EQ(std::vector<int>(order.begin(), order.begin() + 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(order[5], 4);  // and flow 1 goes on in order
}

TEST(FairQueue, BacklogsShareBytesEvenlyWhateverTheirPacketSizes) {
  // 1,500-byte and 300-byte packets, both flows always backlogged: each turn gives each flow one
  // quantum, so over 100 turns their bytes differ by at most one quantum.
  FairQueue<int> q;
  const std::map<int, std::size_t> size = {{1, 1500}, {2, 300}};
  std::map<int, std::size_t> sent;
  for (int i = 0; i < 200; ++i) q.push(1, 1, 1500);
  for (int i = 0; i < 1000; ++i) q.push(2, 2, 300);
  for (int n = 0; n < 500; ++n) {
    const int flow = q.pop();
    sent[flow] += size.at(flow);
  }
  const auto gap = sent[1] > sent[2] ? sent[1] - sent[2] : sent[2] - sent[1];
  EXPECT_LE(gap, kFairQueueQuantumBytes) << sent[1] << " vs " << sent[2];
  EXPECT_GT(sent[1], 0u);
}

TEST(FairQueue, AnIdleFlowKeepsNoCredit) {
  // Flow 1 sends one small packet and empties, leaving most of its quantum unused; later it has a
  // backlog beside flow 2's: it does not get its old credit on top of its new quantum.
  FairQueue<int> q;
  q.push(1, 0, 100);
  EXPECT_EQ(q.pop(), 0);
  for (int i = 1; i <= 8; ++i) q.push(1, i, 330);
  for (int i = 0; i < 8; ++i) q.push(2, 100 + i, 330);
  const std::vector<int> order = drain(q);
  EXPECT_EQ(std::vector<int>(order.begin(), order.begin() + 5), (std::vector<int>{1, 2, 3, 4, 100}));
}

TEST(FairQueue, AFullQueueDropsFromTheFlowThatFillsIt) {
  FairQueue<int> q;
  for (int i = 0; i < 6; ++i) q.push(1, i, 330);
  q.push(2, 100, 330);
  EXPECT_EQ(q.backlog(1), 6u * 330);
  // Flow 2 (or a new flow 3) arriving at a full queue: flow 1's oldest packet makes room.
  EXPECT_TRUE(q.drop_for(2));
  EXPECT_TRUE(q.drop_for(3));
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.backlog(1), 4u * 330);
  // Flow 1 itself arriving: nobody has more waiting, its own packet is the one refused.
  EXPECT_FALSE(q.drop_for(1));
  EXPECT_EQ(drain(q), (std::vector<int>{2, 3, 4, 5, 100}));
  // A flow emptied by drops leaves its turn: the others go on.
  q.push(1, 0, 330);
  q.push(1, 1, 330);
  q.push(2, 100, 100);
  EXPECT_TRUE(q.drop_for(2));
  EXPECT_TRUE(q.drop_for(2));
  EXPECT_FALSE(q.drop_for(2));
  EXPECT_EQ(drain(q), (std::vector<int>{100}));
  EXPECT_EQ(q.backlog(1), 0u);
}

TEST(FairQueue, PacketsLargerThanTheQuantumStillGo) {
  FairQueue<int> q(100);
  q.push(1, 1, 1000);
  q.push(2, 2, 50);
  q.push(1, 3, 1000);
  EXPECT_EQ(drain(q), (std::vector<int>{2, 1, 3}));
}

TEST(FairQueue, JobFlowIsTheAtpJobOrOneFlowForTheRest) {
  Header h;
  h.job = 5;
  const std::vector<std::int32_t> values(4, 0);
  EXPECT_EQ(job_flow(build_packet(h, values)), 5u);
  const std::vector<std::uint8_t> garbage(40, 0xAB);
  EXPECT_EQ(job_flow(garbage), job_flow(std::vector<std::uint8_t>(3, 0)));
  EXPECT_GT(job_flow(garbage), 0xFFFFu);
}

}  // namespace
}  // namespace atp
