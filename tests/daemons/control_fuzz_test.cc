// Seeded random fuzzing of the daemons' control input with any compiler (the libFuzzer target
// fuzz/control_fuzzer.cc does the same with coverage guidance under clang): valid messages,
// configs and HTTP requests with bytes flipped, cut, repeated or nested, and pure noise.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "../../fuzz/control_harness.h"

namespace atp::fuzz {
namespace {

// Valid inputs to start from, one per kind of control input.
std::vector<std::string> seeds() {
  SwitchJobPlan plan;
  plan.entry.job = 1;
  plan.entry.admitted_ports = {0, 1, 2};
  plan.entry.roles = {{0x0A000003, 1, {{2, 1}, {3, 1}}}};
  plan.multicast_ports = {0, 1};
  PsConfig ps;
  ps.job = 1;
  ps.self = 0x0A000003;
  ps.multicast_group = multicast_group_address(1);
  ps.tree = flat_tree(2);
  ps.workers = {0x0A000001, 0x0A000002};
  ps.values_per_packet = 4;
  ps.aggregators = {0, 16};
  ps.max_window_seqs = 64;
  WorkerConfig worker;
  worker.job = 1;
  worker.self = 0x0A000001;
  worker.ps = {PsRoute{0x0A000003, 2}};
  control::PortSettings port{EgressConfig{.rate_gbps = 1, .buffer_packets = 8, .loss = 0.5}, EgressConfig{}};
  return {
      control::to_json(plan),
      control::to_json(ps),
      control::worker_config_json(worker).dump(),
      control::to_json(port),
      control::host_to_json(SocketAddress::parse("127.0.0.1:40001")),
      "name: s0\naggregators: 16\nwidth: 8\nports:\n  - {peer: 127.0.0.1:9001, loss: 0.1, ingress: {delay_us: 5}}\n"
      "routes:\n  - {dst: 10.0.0.1, port: 0}\n",
      "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
      "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n",
      "PUT /ports/1 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 12\r\n\r\n{\"egress\":1}",
  };
}

// `text` changed at random: bytes flipped, a piece cut, repeated or wrapped in brackets.
std::string mutate(std::string text, std::mt19937_64& rng) {
  for (int k = 0, n = static_cast<int>(rng() % 4); k < n && !text.empty(); ++k) {
    const std::size_t at = rng() % text.size();
    switch (rng() % 6) {
      case 0:
        text[at] = static_cast<char>(rng());
        break;
      case 1:
        text.erase(at, rng() % 8);
        break;
      case 2:
        text.insert(at, text.substr(at, rng() % 16));
        break;
      case 3:
        text.insert(at, std::string(rng() % 64, "[{\"1e999 -:,"[rng() % 12]));
        break;
      case 4:
        text.insert(at, std::to_string(static_cast<std::int64_t>(rng())));
        break;
      default:
        text.resize(at);
    }
  }
  return text;
}

TEST(ControlFuzz, RandomAndMutatedControlInputNeverCrashOrGoUnanswered) {
  Daemons daemons;
  const std::vector<std::string> starts = seeds();
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 5000; ++i) {
      std::string input(1, static_cast<char>(rng() % 6));  // feed()'s mode byte
      if (rng() % 4 == 0) {
        input.resize(1 + rng() % 200);
        for (std::size_t b = 1; b < input.size(); ++b) input[b] = static_cast<char>(rng());
      } else {
        const std::string& start = starts[rng() % starts.size()];
        if (input[0] == 4) input += static_cast<char>(rng() % (3 * std::size(kBodyRoutes)));  // route, who
        if (input[0] == 5) input += static_cast<char>(rng() % 4);  // switch or PS, operator or tenant
        input += mutate(start, rng);
      }
      feed(daemons, std::span(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
    }
  }
}

// The reproducers of the adversarial pass, through every way in.
TEST(ControlFuzz, DeepNestingAndHugeNumbersEverywhere) {
  Daemons daemons;
  const std::string deep = "{\"job\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  for (const std::string& body : {deep, std::string("{\"job\": 1e400}")}) {
    for (std::size_t route = 0; route < std::size(kBodyRoutes); ++route) {
      const std::string input = std::string(1, '\x04') + static_cast<char>(route) + body;
      feed(daemons, std::span(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
    }
  }
}

}  // namespace
}  // namespace atp::fuzz
