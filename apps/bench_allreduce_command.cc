// `atp bench allreduce`: an nccl-tests-style allreduce benchmark. For every size from --min-bytes
// to --max-bytes and every algorithm asked for, one scenario run on the chosen backend (R racks
// of workers under a core switch, the PS under the core), reporting time, algbw and busbw and,
// side by side, each algorithm's algbw as a ratio to the first one's in the same run.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "atp/scenario.h"
#include "atp/wire.h"
#include "commands.h"

namespace atp::cli {
namespace {

struct BenchOptions {
  std::string backend = "netns";
  std::vector<std::string> algorithms = {"atp", "ring", "gloo"};
  int workers = 8;
  int racks = 2;
  double rate_mbps = 200;
  std::uint64_t min_bytes = 4 << 10;
  std::uint64_t max_bytes = 256 << 20;
  double factor = 2;
  int iters = 5;
  int warmup = 1;
  int values_per_packet = 1024;
  int aggregators = 4096;
  // Switches mark ECN above this queue (packets), as ATP's congestion control expects (§3.7):
  // without it, a queue that hash collisions overload (the PS's link) grows until the fixed RTO
  // fires spuriously.
  int ecn_threshold = 16;
  int buffer_packets = 0;
  // ATP's defaults (200, 1024 packets) are sized for 100 Gbit/s NICs; on emulated links of a few
  // hundred Mbit/s they overflow the hosts' NIC queues (tc tbf: 10 ms, no ECN) and outlast the
  // RTO: docs/testbed.md, "Window".
  int window = 16;
  int max_window = 32;
  int rto_us = 20000;
  std::string index = "hashed";
  bool json = false;
};

// The scenario of one measurement: racks tor0..torR-1 under `core`, workers spread evenly (w0..
// in rack order), the PS under the core; every link at the same rate.
std::string scenario_text(const BenchOptions& o, const std::string& algorithm, std::uint64_t bytes) {
  std::ostringstream y;
  y << "seed: 1\ntime_limit_s: 600\nlink: {rate_mbps: " << o.rate_mbps;
  if (o.buffer_packets > 0) y << ", buffer_packets: " << o.buffer_packets;
  if (o.ecn_threshold > 0) y << ", ecn_threshold_packets: " << o.ecn_threshold;
  y << "}\ntopology:\n  switches:\n    - {name: core, aggregators: " << o.aggregators << "}\n";
  for (int r = 0; r < o.racks; ++r) y << "    - {name: tor" << r << ", aggregators: " << o.aggregators << "}\n";
  y << "  hosts:\n    - {name: ps, switch: core}\n";
  std::string workers;
  for (int w = 0; w < o.workers; ++w) {
    const int rack = w * o.racks / o.workers;
    y << "    - {name: w" << w << ", switch: tor" << rack << "}\n";
    workers += (w ? ", w" : "w") + std::to_string(w);
  }
  y << "  links: [";
  for (int r = 0; r < o.racks; ++r) y << (r ? ", " : "") << "[tor" << r << ", core]";
  const std::uint64_t elements = std::max<std::uint64_t>(1, bytes / 4);
  // ps_nn: BytePS's N-to-N layout, a PS shard on every worker's host (netns only).
  const bool colocated = algorithm == "ps_nn";
  y << "]\njobs:\n  - {name: bench, algorithm: " << (colocated ? "ps" : algorithm) << ", workers: [" << workers
    << "], ";
  if (algorithm == "atp" || algorithm == "ps" || colocated) {
    y << "ps: [" << (colocated ? workers : "ps") << "], rto_us: " << o.rto_us << ", window: " << o.window
      << ", max_window: " << o.max_window << ", index: " << o.index << ", ";
  }
  y << "elements: " << elements << ", rounds: " << o.iters + o.warmup << ", warmup_rounds: " << o.warmup
    << ", values_per_packet: " << o.values_per_packet << "}\n";
  return y.str();
}

struct Measurement {
  JobResult job;
  double time_us = 0;  // per timed iteration, slowest worker
  double busbw_gbps = 0;
};

int run_allreduce_bench(const BenchOptions& o) {
  if (o.workers < 1 || o.racks < 1 || o.racks > o.workers) {
    std::cerr << "atp bench allreduce: --racks must be between 1 and --workers\n";
    return kExitBadInput;
  }
  // What the simulated backends cannot run, said before the table starts.
  for (const std::string& a : o.algorithms) {
    std::string why;
    if (a == "ps_nn" && o.backend != "netns") why = "PS shards on the workers' hosts need --backend netns";
    if ((a == "gloo" || a == "gloo_hd") && (o.backend == "ns3" || o.backend == "inproc")) {
      why = "Gloo runs on real sockets only (--backend udp or netns; ring is the same algorithm on ns3)";
    }
    if (a == "ring" && o.backend == "inproc") why = "the in-process network has no TCP (--backend ns3, udp or netns)";
    if (!why.empty()) {
      std::cerr << "atp bench allreduce: --backend " << o.backend << " cannot run " << a << ": " << why << "\n";
      return kExitBadInput;
    }
  }
  // Every algorithm's scenario must plan (e.g. the PS baseline has at most 32 workers per PS), so
  // that a refusal comes before the table, not after the first algorithms ran.
  for (const std::string& a : o.algorithms) {
    try {
      const Scenario s = parse_scenario_yaml(scenario_text(o, a, o.min_bytes), "atp bench allreduce");
      const NetworkPlan network = plan_network(s.topology);
      for (const ScenarioJob& job : s.jobs) {
        if (uses_atp_protocol(job.algorithm)) plan_job(network, job.spec);
      }
    } catch (const std::exception& e) {
      std::cerr << "atp bench allreduce: " << a << " cannot run this setup: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes) {
    std::cerr << "atp bench allreduce: sizes must satisfy 4 <= --min-bytes <= --max-bytes\n";
    return kExitBadInput;
  }
  const double n = o.workers;
  const double bus_factor = n > 1 ? 2 * (n - 1) / n : 1;  // nccl-tests' allreduce busbw = algbw x 2(n-1)/n
  std::vector<std::uint64_t> sizes;
  for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes) * 1.0000001; b *= o.factor) {
    sizes.push_back(static_cast<std::uint64_t>(b) / 4 * 4);
  }
  // Bytes around an ATP packet on the wire: Ethernet/IPv4/UDP, or on ns-3's point-to-point
  // links PPP (2) + IPv4 (20) + UDP (8).
  const double encapsulation = o.backend == "ns3" ? 30 : kEncapsulationBytes;
  if (!o.json) {
    std::printf(
        "# atp bench allreduce: backend %s, %d workers in %d rack(s) under a core switch, PS under the core,\n"
        "# every link %.0f Mbit/s, %d warm-up + %d timed iterations per size; time = per iteration, slowest\n"
        "# worker; algbw = size / time; busbw = algbw x 2(n-1)/n (nccl-tests); ATP's best possible algbw\n"
        "# is the link rate x %.3f (values per frame with %d-value fragments).\n",
        o.backend.c_str(), o.workers, o.racks, o.rate_mbps, o.warmup, o.iters,
        4.0 * o.values_per_packet / (4.0 * o.values_per_packet + kHeaderBytes + encapsulation), o.values_per_packet);
    std::printf("%12s", "size(B)");
    for (const std::string& a : o.algorithms) {
      std::printf(" | %-8s %10s %9s %9s %6s", a.c_str(), "time(us)", "algbw", "busbw", "ok");
    }
    for (std::size_t i = 1; i < o.algorithms.size(); ++i) {
      std::printf(" | %s/%s", o.algorithms[0].c_str(), o.algorithms[i].c_str());
    }
    std::printf("\n%12s", "");
    for (std::size_t i = 0; i < o.algorithms.size(); ++i)
      std::printf(" | %-8s %10s %9s %9s %6s", "", "", "Gb/s", "Gb/s", "");
    std::printf("\n");
  }
  nlohmann::json rows = nlohmann::json::array();
  bool all_ok = true;
  for (std::uint64_t bytes : sizes) {
    std::vector<Measurement> row;
    for (const std::string& algorithm : o.algorithms) {
      Measurement m;
      const Scenario s = parse_scenario_yaml(scenario_text(o, algorithm, bytes), "atp bench allreduce");
      const ScenarioResult r = o.backend == "netns" ? run_netns(s, self_path())
                               : o.backend == "udp" ? run_udp(s, self_path())
                               : o.backend == "ns3" ? run_ns3(s)
                                                    : run_inproc(s);
      m.job = r.jobs.at(0);
      const std::uint32_t timed = m.job.completed_rounds - std::min(m.job.completed_rounds, m.job.warmup_rounds);
      m.time_us = timed > 0 ? m.job.seconds / timed * 1e6 : 0;
      m.busbw_gbps = m.job.algbw_gbps * bus_factor;
      all_ok = all_ok && m.job.correct;
      rows.push_back({{"size_bytes", bytes},
                      {"algorithm", algorithm},
                      {"correct", m.job.correct},
                      {"time_us", m.time_us},
                      {"algbw_gbps", m.job.algbw_gbps},
                      {"busbw_gbps", m.busbw_gbps},
                      {"algbw_over_link", m.job.algbw_gbps * 1000 / o.rate_mbps},
                      {"retransmissions", m.job.retransmissions},
                      {"collisions", m.job.collisions},
                      {"in_network_share", m.job.in_network_share},
                      {"error", m.job.error}});
      row.push_back(std::move(m));
    }
    if (o.json) continue;
    std::printf("%12llu", static_cast<unsigned long long>(bytes));
    for (const Measurement& m : row) {
      std::printf(" | %-8s %10.1f %9.3f %9.3f %6s", "", m.time_us, m.job.algbw_gbps, m.busbw_gbps,
                  m.job.correct ? "yes" : "NO");
    }
    for (std::size_t i = 1; i < row.size(); ++i) {
      if (row[i].job.algbw_gbps > 0) {
        std::printf(" | %9.2fx", row[0].job.algbw_gbps / row[i].job.algbw_gbps);
      } else {
        std::printf(" | %10s", "-");
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (o.json) {
    nlohmann::json doc = {{"backend", o.backend},
                          {"workers", o.workers},
                          {"racks", o.racks},
                          {"rate_mbps", o.rate_mbps},
                          {"iters", o.iters},
                          {"warmup", o.warmup},
                          {"values_per_packet", o.values_per_packet},
                          {"results", rows}};
    std::cout << doc.dump(2) << "\n";
  }
  return all_ok ? kExitOk : kExitFailed;
}

}  // namespace

CLI::App* add_bench_allreduce_command(CLI::App& bench, std::function<int()>& run) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = bench.add_subcommand("allreduce", "allreduce time, algbw and busbw per size (nccl-tests style)");
  app->footer(
      "One scenario run per size and algorithm on the chosen backend: --racks racks (tor0..) of --workers\n"
      "workers under a core switch, the PS under the core, every link at --rate-mbps. Each worker checks\n"
      "every result (exact for atp and ps, within float32 rounding for ring and gloo). The ratio columns\n"
      "divide the first algorithm's algbw by each other's, measured in the same run. netns needs root.");
  app->add_option("--backend", o->backend,
                  "netns (namespaces and veth links), udp (loopback), ns3 (simulated, with TCP for ring) or inproc "
                  "(simulated, atp and ps only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"netns", "udp", "ns3", "inproc"}));
  app->add_option("--algorithms", o->algorithms,
                  "comma-separated: atp, ps (one PS under the core), ps_nn (a PS shard on every worker's host, "
                  "BytePS's N-to-N; netns only), ring, gloo, gloo_hd")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"atp", "ps", "ps_nn", "ring", "gloo", "gloo_hd"}));
  app->add_option("--workers", o->workers, "workers (one host each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--racks", o->racks, "racks the workers are spread over")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app->add_option("--rate-mbps", o->rate_mbps, "every link's rate (Mbit/s)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app->add_option("--min-bytes", o->min_bytes,
                  "smallest tensor (bytes per worker; K, M, G suffixes are powers of 1024)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  app->add_option("--max-bytes", o->max_bytes, "largest tensor (bytes per worker)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  app->add_option("--factor", o->factor, "size step factor")->capture_default_str()->check(CLI::Range(1.1, 1024.0));
  app->add_option("--iters", o->iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--warmup", o->warmup, "untimed iterations first")->capture_default_str()->check(CLI::Range(0, 1000));
  app->add_option("--values-per-packet", o->values_per_packet, "ATP fragment width (int32 values)")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(kMaxValuesPerPacket)));
  app->add_option("--aggregators", o->aggregators, "aggregators per switch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--ecn-threshold", o->ecn_threshold, "switch egress ECN threshold (packets; 0: off)")
      ->capture_default_str();
  app->add_option("--buffer-packets", o->buffer_packets, "switch egress buffer (packets; 0: unlimited)")
      ->capture_default_str();
  app->add_option("--window", o->window,
                  "ATP workers' initial window (packets; small: emulated links drain slowly, see docs/testbed.md)")
      ->capture_default_str();
  app->add_option("--max-window", o->max_window, "ATP workers' largest window (packets)")->capture_default_str();
  app->add_option("--rto-us", o->rto_us, "ATP workers' retransmission timeout (us)")->capture_default_str();
  app->add_option("--index", o->index, "ATP aggregator indices: hashed (the paper) or linear")
      ->capture_default_str()
      ->check(CLI::IsMember({"hashed", "linear", "hashed_slots"}));
  app->add_flag("--json", o->json, "print the figures as JSON instead of a table");
  run = [o] { return run_allreduce_bench(*o); };
  return app;
}

}  // namespace atp::cli
