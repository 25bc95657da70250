// Seeded random-bytes fuzzing of everything that parses network input (works with any
// compiler; the libFuzzer target in fuzz/ does the same with coverage guidance under clang).
#include <gtest/gtest.h>

#include <random>

#include "../../fuzz/packet_harness.h"

namespace atp::fuzz {
namespace {

std::vector<std::uint8_t> valid_packet(std::mt19937_64& rng) {
  Header h;
  h.is_ack = rng() % 3 == 0;
  h.resend = rng() % 4 == 0;
  h.collision = rng() % 8 == 0;
  h.ecn = rng() % 4 == 0;
  h.overflow = rng() % 16 == 0;
  h.float_payload = rng() % 16 == 0;
  h.job = rng() % 4 == 0 ? static_cast<JobId>(rng()) : Harness::kJob;
  h.seq = static_cast<Seq>(rng() % 40);
  // Mostly a node of the harness's tree with its own fan-in and a whole or partial bitmap.
  h.node = rng() % 4 == 0 ? static_cast<std::uint16_t>(rng()) : static_cast<std::uint16_t>(1 + rng() % 5);
  const std::uint8_t fan_in = h.node == 1 || h.node == 2 ? 2 : 1;
  h.fan_in = rng() % 4 == 0 ? static_cast<std::uint8_t>(rng() % 4) : fan_in;
  h.bitmap = rng() % 4 == 0 ? static_cast<std::uint32_t>(rng()) : 1 + static_cast<std::uint32_t>(rng() % fan_in) * 2;
  h.aggregator_index = rng() % 4 == 0 ? static_cast<std::uint32_t>(rng()) : static_cast<std::uint32_t>(rng() % 16);
  h.src = rng() % 2 ? Harness::kWorker : static_cast<Address>(rng());
  h.dst = rng() % 2 ? Harness::kPs : multicast_group_address(h.job);
  if (rng() % 3 == 0) {  // a Rina packet, often one the Rina worker's round takes (200 values: 25 fragments)
    h.rina = static_cast<RinaKind>(1 + rng() % (kRinaKinds - 1));
    h.round_fragments = rng() % 4 == 0 ? static_cast<std::uint32_t>(rng()) : 25;
    h.round_shape = 0;
    h.dst = rng() % 2 ? Harness::kWorker : h.dst;
    h.src = rng() % 2 ? Address{0x0A000002} : Harness::kPs;
  }
  std::vector<std::int32_t> values(rng() % 4 == 0 ? rng() % 100 : 8);
  for (auto& v : values) v = static_cast<std::int32_t>(rng());
  return build_packet(h, values);
}

TEST(Fuzz, RandomBytesAndMutatedPacketsNeverCrash) {
  Harness harness;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 25000; ++i) {
      std::vector<std::uint8_t> input;
      switch (rng() % 3) {
        case 0:  // pure noise, of any length around the header size
          input.resize(rng() % 120);
          for (auto& b : input) b = static_cast<std::uint8_t>(rng());
          break;
        case 1:  // a well-formed packet with random field values
          input = valid_packet(rng);
          break;
        default:  // a well-formed packet with a few bytes flipped, cut or extended
          input = valid_packet(rng);
          for (int k = 0, n = static_cast<int>(rng() % 4); k < n && !input.empty(); ++k) {
            input[rng() % input.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
          }
          if (rng() % 4 == 0) input.resize(rng() % (input.size() + 8));
      }
      harness.feed(input);
    }
  }
  // The run must have exercised both rejection and the real paths.
  EXPECT_GT(harness.level0.counters().malformed, 1000u);
  EXPECT_GT(harness.level0.job_counters(Harness::kJob).aggregations, 100u);
  EXPECT_GT(harness.level1.job_counters(Harness::kJob).aggregations, 100u);
  EXPECT_GT(harness.ps.stats().packets_received, 100u);
  EXPECT_LE(harness.level0.table().in_use(), harness.level0.table().size());
}

}  // namespace
}  // namespace atp::fuzz
