// `atp bench allreduce`: an allreduce benchmark that reads like nccl-tests' all_reduce_perf. For
// every size from --min-bytes to --max-bytes and every algorithm asked for, one scenario run on the
// chosen backend (R racks of workers under a core switch, the PS under the core), reporting time,
// algbw, busbw and #wrong in nccl-tests' units and, side by side, each algorithm's algbw as a
// ratio to the first one's in the same run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "atp/backends/backend.h"
#include "atp/io/machine.h"
#include "atp/scenario/scenario.h"
#include "atp/wire.h"
#include "commands.h"

namespace atp::cli {
namespace {

struct BenchOptions {
  std::string backend = "netns";
  // Gloo where this build has it (ATP_WITH_GLOO).
  std::vector<std::string> algorithms =
      ATP_WITH_GLOO ? std::vector<std::string>{"atp", "ring", "gloo"} : std::vector<std::string>{"atp", "ring"};
  int workers = 8;
  int racks = 2;
  double rate_mbps = 200;
  std::uint64_t min_bytes = 4 << 10;
  std::uint64_t max_bytes = 256 << 20;
  double factor = 2;
  int iters = 5;
  int warmup = 1;
  int values_per_packet = 0;  // 0: the run's choice (JobSpec::values_per_packet)
  int aggregators = 4096;
  // Every link's queue: unset, each end's default (link_base: a switch port marks from a depth
  // sized for the rate and holds 1 MB, a host's NIC queue has no limit), what users get.
  std::optional<int> ecn_threshold;
  std::optional<int> buffer_packets;
  std::optional<int> buffer_bytes;
  // ATP workers' transport, for experiments only: unset, the workers' defaults (what users get).
  std::optional<int> window;
  std::optional<int> max_window;
  std::optional<int> rto_us;
  std::string index = "allocated";
  bool json = false;
};

// ps_nn, BytePS's N-to-N layout (a PS shard on every worker's host, netns only), is algorithm ps
// laid out otherwise: the benchmark's own name, not a registered algorithm.
constexpr const char* kColocatedPs = "ps_nn";

// The registered algorithm a benchmark name runs (--algorithms takes only those and ps_nn).
const Algorithm& algorithm_of(const std::string& name) { return *find_algorithm(name == kColocatedPs ? "ps" : name); }

// The scenario of one measurement: racks tor0..torR-1 under `core`, workers spread evenly (w0..
// in rack order), the PS under the core; every link at the same rate. Built as data: what a file
// would check, the planner checks (run_allreduce_bench plans every algorithm's before the first run).
Scenario bench_scenario(const BenchOptions& o, const std::string& algorithm, std::uint64_t bytes) {
  Scenario s;
  s.seed = 1;
  s.time_limit = std::chrono::seconds(600);
  s.link.rate_gbps = o.rate_mbps / 1000;
  if (o.buffer_packets) s.link.buffer_packets = static_cast<std::uint32_t>(*o.buffer_packets);
  if (o.buffer_bytes) s.link.buffer_bytes = static_cast<std::uint32_t>(*o.buffer_bytes);  // either replaces the other
  if (o.ecn_threshold) s.link.ecn_threshold_packets = static_cast<std::uint32_t>(*o.ecn_threshold);
  Topology& t = s.topology;
  const auto add_switch = [&](std::string name) {
    t.switches.push_back({std::move(name), {}});
    t.switches.back().config.num_aggregators = static_cast<std::uint32_t>(o.aggregators);
  };
  add_switch("core");
  for (int r = 0; r < o.racks; ++r) {
    add_switch("tor" + std::to_string(r));
    t.switch_links.push_back({"tor" + std::to_string(r), "core"});
  }
  t.hosts.push_back({.name = "ps", .switch_name = "core"});
  ScenarioJob job = scenario_job(algorithm_of(algorithm), 0, "bench");
  JobSpec& spec = job.spec;
  for (int w = 0; w < o.workers; ++w) {
    spec.workers.push_back("w" + std::to_string(w));
    t.hosts.push_back({.name = spec.workers.back(), .switch_name = "tor" + std::to_string(w * o.racks / o.workers)});
  }
  if (job.algorithm->parameter_servers) {
    spec.ps = algorithm == kColocatedPs ? spec.workers : std::vector<std::string>{"ps"};
    if (o.window) spec.congestion.initial_window = static_cast<std::uint32_t>(*o.window);
    if (o.max_window) spec.congestion.max_window = static_cast<std::uint32_t>(*o.max_window);
    spec.index_policy = *parse_index_policy(o.index);  // --index takes only policy names
  }
  // As a scenario file without rto_us (ATP's and Rina's workers take it; TCP's ignore it).
  spec.retransmit_timeout = o.rto_us
                                ? std::chrono::microseconds(*o.rto_us)
                                : first_retransmit_timeout(*s.link.rate_gbps, spec.workers.size(), spec.congestion);
  spec.values_per_packet = static_cast<std::uint16_t>(o.values_per_packet);
  job.elements = bytes / 4;  // a multiple of 4 (run_allreduce_bench refuses others)
  job.rounds = static_cast<std::uint32_t>(o.iters + o.warmup);
  job.warmup_rounds = static_cast<std::uint32_t>(o.warmup);
  s.jobs.push_back(std::move(job));
  check_scenario_memory(s, physical_memory_bytes());
  return s;
}

// Whose busbw is nccl-tests' bus bandwidth: each worker's link carries 2(n-1)/n of the tensor
// each way (ring, Gloo, Rina's ring, and BytePS's N-to-N PS), not the tensor once while the
// switches or one PS add.
bool host_based(const std::string& algorithm) {
  return !algorithm_of(algorithm).parameter_servers || algorithm == kColocatedPs;
}

// Ring and Gloo: allreduce over TCP between the workers, not a protocol's packets.
bool is_tcp(const std::string& algorithm) { return algorithm_of(algorithm).protocol.empty(); }

// How the JSON names what the workers checked of an algorithm's results (Algorithm::check).
const char* to_string(ResultCheck c) {
  switch (c) {
    case ResultCheck::kExact:
      return "exact";
    case ResultCheck::kFloat32Rounding:
      return "float32_rounding";
  }
  return "?";
}

struct Measurement {
  JobResult job;
  ResultCheck check = ResultCheck::kExact;
  double time_us = 0;     // per timed iteration, slowest worker
  double algbw_GBps = 0;  // bytes / time, 1e9 bytes per second (nccl-tests' GB/s)
  double busbw_GBps = 0;  // algbw x 2(n-1)/n
  // nccl-tests' #wrong: the values that differed from the reference, summed over workers and the
  // rounds they checked ("0" where every value was checked and right); "fail" where the job
  // failed for another reason (the error is printed under the table).
  // The count, or nothing where the job failed for another reason.
  std::optional<std::uint64_t> wrong_values() const {
    if (job.wrong_values == 0 && !job.correct) return std::nullopt;
    return job.wrong_values;
  }
  std::string wrong() const {
    if (const auto count = wrong_values()) return std::to_string(*count);
    return "fail";
  }
};

// printf into a string.
template <class... Args>
std::string format(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string out(static_cast<std::size_t>(std::max(n, 0)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

// How ring and Gloo's TCP travels on each backend, next to ATP's packets (run_processes.cc,
// tcp_apps.cc): said in the header, so that a ratio is read with it.
std::string tcp_path(const std::string& backend) {
  if (backend == "loopback") return "direct TCP on loopback, not through the switches or their rate limits";
  if (backend == "netns") {
    return "TCP between the workers' addresses through the same links, switch processes and rate limits as ATP";
  }
  if (backend == "ns3") {
    return "ns-3 TCP through the same simulated links and switches, carrying the values";
  }
  return "";
}

// The sizes: --min-bytes x factor^k up to --max-bytes, each a whole number of float32 values;
// nullopt, said on stderr, where the options give none or one that is not.
std::optional<std::vector<std::uint64_t>> bench_sizes(const BenchOptions& o) {
  // Sizes are float32 tensors: a size that is not a whole number of values is refused, not rounded.
  if (o.min_bytes % 4 != 0) {
    std::cerr << "atp bench allreduce: --min-bytes (-b) " << o.min_bytes
              << " is not a multiple of 4 bytes (one float32 value)\n";
    return std::nullopt;
  }
  if (o.max_bytes % 4 != 0) {
    std::cerr << "atp bench allreduce: --max-bytes (-e) " << o.max_bytes
              << " is not a multiple of 4 bytes (one float32 value)\n";
    return std::nullopt;
  }
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes) {
    std::cerr << "atp bench allreduce: sizes must satisfy 4 <= --min-bytes (-b) <= --max-bytes (-e)\n";
    return std::nullopt;
  }
  std::vector<std::uint64_t> sizes;
  for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes) * 1.0000001; b *= o.factor) {
    const double rounded = std::round(b);
    // Within floating-point noise of a whole number (e.g. 4096 x 1.1 x 1.1), it is that number.
    const double bytes = std::fabs(b - rounded) < 1e-6 * b ? rounded : b;
    if (bytes != std::floor(bytes) || std::fmod(bytes, 4.0) != 0) {
      std::cerr << "atp bench allreduce: --factor (-f) " << o.factor << " from --min-bytes " << o.min_bytes
                << " gives a size of " << bytes
                << " bytes, not a multiple of 4 (one float32 value); choose a factor that keeps every size a multiple "
                   "of 4, such as 2\n";
      return std::nullopt;
    }
    sizes.push_back(static_cast<std::uint64_t>(bytes));
  }
  return sizes;
}

// What the backend cannot run, and every algorithm's scenario must plan (e.g. the PS baseline
// has at most 32 workers per PS): refused before the table starts, not after the first ran.
// Returns the sentence; "" when every algorithm can run.
std::string cannot_bench(const BenchOptions& o, const Backend& backend) {
  for (const std::string& a : o.algorithms) {
    try {
      const Scenario s = bench_scenario(o, a, o.min_bytes);
      if (const std::string why = backend.cannot_run(s, {}); !why.empty()) {
        return "--backend " + o.backend + " cannot run " + a + ": " + why;
      }
      const NetworkPlan network = plan_network(s.topology);
      for (const ScenarioJob& job : s.jobs) {
        if (job.algorithm->parameter_servers) plan_job(network, job.spec);
      }
    } catch (const std::exception& e) {
      return a + " cannot run this setup: " + e.what();
    }
  }
  return "";
}

// The figures every line and the JSON share.
struct BenchFigures {
  std::string backend;  // "loopback" where "udp" was given
  double bus_factor;    // nccl-tests' allreduce: busbw = algbw x 2(n-1)/n
  double link_GBps;
  // The fragment width the runs chose (0: no ATP run yet), and the share of a frame that is
  // values at that width, with Ethernet/IPv4/UDP around an ATP packet on every backend (ns-3's
  // point-to-point links pace a packet as an Ethernet frame: docs/ns3.md).
  std::uint16_t values_per_packet = 0;
  double atp_ceiling() const {
    const double v = values_per_packet;
    return v == 0 ? 0.0 : 4 * v / (4 * v + kHeaderBytes + kEncapsulationBytes);
  }
};

// One block of columns per algorithm (nccl-tests' out-of-place and in-place blocks), then the
// first algorithm's algbw over each other's.
constexpr const char* kBlockFormat = " %10s %9s %9s %7s";

// The table's header: the setup, what the columns mean for the algorithms asked for, the columns.
void print_header(const BenchOptions& o, const BenchFigures& f, bool simulated) {
  std::string host_collectives, aggregated, tcp;
  auto add = [](std::string& list, const std::string& a) { list += (list.empty() ? "" : ", ") + a; };
  for (const std::string& a : o.algorithms) {
    add(host_based(a) ? host_collectives : aggregated, a);
    if (is_tcp(a)) add(tcp, a);
  }
  std::printf("# atp bench allreduce: backend %s%s, %d workers in %d rack(s) under a core switch, PS under the core\n",
              f.backend.c_str(), simulated ? " (simulated time)" : "", o.workers, o.racks);
  std::printf("# every link %g Mbit/s = %.4f GB/s", o.rate_mbps, f.link_GBps);
  const EgressConfig port = link_base(bench_scenario(o, "atp", o.min_bytes), false);
  if (port.ecn_threshold_packets > 0) std::printf(", switch ports mark at %u packets", port.ecn_threshold_packets);
  if (port.buffer_packets > 0) std::printf(", hold %u packets", port.buffer_packets);
  if (port.buffer_bytes > 0) std::printf(", hold %u bytes", port.buffer_bytes);
  std::printf("\n# minBytes %llu maxBytes %llu step: %g(factor) warmup iters: %d iters: %d validation: 1\n",
              static_cast<unsigned long long>(o.min_bytes), static_cast<unsigned long long>(o.max_bytes), o.factor,
              o.warmup, o.iters);
  std::printf(
      "# time: per iteration, slowest worker. algbw = size / time. busbw = algbw x 2(n-1)/n = algbw x %.3f.\n"
      "# GB/s = 1e9 bytes/s, as nccl-tests.\n",
      f.bus_factor);
  if (!host_collectives.empty()) {
    std::printf("# %s: busbw is nccl-tests' bus bandwidth, what each worker's link carries each way.\n",
                host_collectives.c_str());
  }
  if (!tcp.empty() && !tcp_path(f.backend).empty()) {
    std::printf("# %s: %s.\n", tcp.c_str(), tcp_path(f.backend).c_str());
  }
  if (!aggregated.empty()) {
    std::printf(
        "# %s: busbw applies the same formula, to compare: each worker sends and receives its tensor\n"
        "# once (the switches or the PS add), so busbw may exceed the link rate, as in nccl-tests'\n"
        "# NVLS/SHARP runs. ATP's algbw is at most the link x the values' share of a frame (the last\n"
        "# lines say how wide the fragments were, and so what that is).\n",
        aggregated.c_str());
  }
  std::printf(
      "# #wrong: values that differ from the reference (ATP's protocol: exact; ring, gloo: within float32\n"
      "# rounding), summed over workers; 0 only where every value was checked; fail: the job failed for\n"
      "# another reason (why: below).\n");
  std::string names = "#" + std::string(41, ' ');
  std::string columns = format("#%11s %13s %9s %5s", "size", "count", "type", "redop");
  std::string units = format("#%11s %13s %9s %5s", "(B)", "(elements)", "", "");
  for (const std::string& a : o.algorithms) {
    names += format(" %-38s", a.c_str());
    columns += format(kBlockFormat, "time", "algbw", "busbw", "#wrong");
    units += format(kBlockFormat, "(us)", "(GB/s)", "(GB/s)", "");
  }
  for (std::size_t i = 1; i < o.algorithms.size(); ++i) {
    columns += format(" %10s", (o.algorithms[0] + "/" + o.algorithms[i]).c_str());
  }
  std::printf("#\n");
  for (std::string* line : {&names, &columns, &units}) {
    line->erase(line->find_last_not_of(' ') + 1);
    std::printf("%s\n", line->c_str());
  }
}

// One scenario run of `algorithm` at `bytes`.
Measurement measure(const BenchOptions& o, const Backend& backend, const std::string& algorithm, std::uint64_t bytes,
                    double bus_factor) {
  Measurement m;
  const ScenarioResult r = backend.run(bench_scenario(o, algorithm, bytes), {});
  m.job = r.jobs.at(0);
  m.check = algorithm_of(algorithm).check;
  const std::uint32_t timed = m.job.completed_rounds - std::min(m.job.completed_rounds, m.job.warmup_rounds);
  m.time_us = timed > 0 ? m.job.seconds / timed * 1e6 : 0;
  m.algbw_GBps = m.job.algbw_gbps / 8;
  m.busbw_GBps = m.algbw_GBps * bus_factor;
  return m;
}

nlohmann::json measurement_json(const BenchOptions& o, const Measurement& m, const std::string& algorithm,
                                std::uint64_t bytes, double bus_factor) {
  return {{"size_bytes", bytes},
          {"count", bytes / 4},
          {"type", "float"},
          {"redop", "sum"},
          {"algorithm", algorithm},
          {"correct", m.job.correct},
          {"check", to_string(m.check)},
          // nccl-tests' #wrong: the count where values were checked, else null (not computed, or
          // the job failed for another reason; see "correct" and "error").
          {"wrong", m.wrong_values() ? nlohmann::json(*m.wrong_values()) : nlohmann::json()},
          {"time_us", m.time_us},
          {"algbw_GBps", m.algbw_GBps},
          {"busbw_GBps", m.busbw_GBps},
          {"algbw_gbps", m.job.algbw_gbps},
          {"busbw_gbps", m.job.algbw_gbps * bus_factor},
          {"algbw_over_link", m.job.algbw_gbps * 1000 / o.rate_mbps},
          {"retransmissions", m.job.retransmissions},
          {"collisions", m.job.collisions},
          {"in_network_share", m.job.in_network_share},
          {"error", m.job.error}};
}

// One size's line: each algorithm's block, then the first one's algbw over each other's.
void print_row(std::uint64_t bytes, const std::vector<Measurement>& row) {
  std::printf(" %11llu %13llu %9s %5s", static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(bytes / 4), "float", "sum");
  for (const Measurement& m : row) {
    std::printf(" %10.1f %9.4f %9.4f %7s", m.time_us, m.algbw_GBps, m.busbw_GBps, m.wrong().c_str());
  }
  for (std::size_t i = 1; i < row.size(); ++i) {
    if (row[i].algbw_GBps > 0 && row[0].algbw_GBps > 0) {
      std::printf(" %9.2fx", row[0].algbw_GBps / row[i].algbw_GBps);
    } else {
      std::printf(" %10s", "-");
    }
  }
  std::printf("\n");
  std::fflush(stdout);
}

// nccl-tests' closing lines: the failures, then the mean busbw over the sizes.
void print_footer(const BenchOptions& o, const BenchFigures& f, const std::vector<std::string>& failures,
                  const std::vector<double>& busbw_sum, std::size_t sizes) {
  for (const std::string& failure : failures) std::printf("# FAILED: %s\n", failure.c_str());
  std::printf("# Avg bus bandwidth (GB/s):");
  for (std::size_t i = 0; i < o.algorithms.size(); ++i) {
    std::printf(" %s %.4f%s", o.algorithms[i].c_str(), busbw_sum[i] / static_cast<double>(sizes),
                i + 1 < o.algorithms.size() ? "," : "");
  }
  std::printf("\n");
  if (f.values_per_packet != 0) {
    std::printf("# Fragments of %u values: ATP's algbw is at most %.4f GB/s, the link x %.3f.\n", f.values_per_packet,
                f.link_GBps * f.atp_ceiling(), f.atp_ceiling());
  }
}

int run_allreduce_bench(const BenchOptions& o) {
  if (o.workers < 1 || o.racks < 1 || o.racks > o.workers) {
    std::cerr << "atp bench allreduce: --racks must be between 1 and --workers\n";
    return kExitBadInput;
  }
  const std::optional<std::vector<std::uint64_t>> sizes = bench_sizes(o);
  if (!sizes) return kExitBadInput;
  const Backend* backend = find_backend(o.backend);
  if (backend == nullptr) {
    std::cerr << "atp bench allreduce: " << no_backend_reason(o.backend) << "\n";
    return kExitBadInput;
  }
  if (const std::string why = cannot_bench(o, *backend); !why.empty()) {
    std::cerr << "atp bench allreduce: " << why << "\n";
    return kExitBadInput;
  }
  const double n = o.workers;
  BenchFigures f{std::string(backend->name()), 2 * (n - 1) / n, o.rate_mbps / 8e3};
  if (!o.json) print_header(o, f, backend->simulated());
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> failures;
  std::vector<double> busbw_sum(o.algorithms.size(), 0);
  bool all_ok = true;
  for (std::uint64_t bytes : *sizes) {
    std::vector<Measurement> row;
    for (const std::string& algorithm : o.algorithms) {
      Measurement m = measure(o, *backend, algorithm, bytes, f.bus_factor);
      if (f.values_per_packet == 0) f.values_per_packet = m.job.values_per_packet;
      all_ok = all_ok && m.job.correct;
      if (!m.job.correct) failures.push_back(algorithm + " at " + std::to_string(bytes) + " B: " + m.job.error);
      rows.push_back(measurement_json(o, m, algorithm, bytes, f.bus_factor));
      row.push_back(std::move(m));
    }
    for (std::size_t i = 0; i < row.size(); ++i) busbw_sum[i] += row[i].busbw_GBps;
    if (!o.json) print_row(bytes, row);
  }
  if (o.json) {
    nlohmann::json doc = {{"backend", f.backend},
                          {"workers", o.workers},
                          {"racks", o.racks},
                          {"rate_mbps", o.rate_mbps},
                          {"link_GBps", f.link_GBps},
                          {"iters", o.iters},
                          {"warmup", o.warmup},
                          {"values_per_packet", f.values_per_packet},
                          {"busbw_factor", f.bus_factor},
                          {"atp_algbw_ceiling_GBps", f.link_GBps * f.atp_ceiling()},
                          {"tcp_path", tcp_path(f.backend)},
                          {"results", rows}};
    std::cout << doc.dump(2) << "\n";
  } else {
    print_footer(o, f, failures, busbw_sum, sizes->size());
  }
  return all_ok ? kExitOk : kExitFailed;
}

// The options that set the network and ATP's transport, for experiments: unset, what users get.
void add_network_options(CLI::App& app, BenchOptions& o) {
  app.add_option("--values-per-packet", o.values_per_packet,
                 "ATP fragment width (int32 values); unset: the widest the switches and the links' MTU take")
      ->check(CLI::Range(1, static_cast<int>(kMaxValuesPerPacket)));
  app.add_option("--aggregators", o.aggregators, "aggregators per switch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ecn-threshold", o.ecn_threshold,
                 "every link's ECN threshold, switch ports only (packets; 0: off; default: the switches' 20)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--buffer-packets", o.buffer_packets,
                 "every link's buffer in packets (0: unlimited); replaces the default of 1 MB at switch ports "
                 "(none at hosts)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--buffer-bytes", o.buffer_bytes,
                 "every link's buffer in bytes (0: unlimited; default: 1000000 at switch ports, none at hosts)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--window", o.window, "ATP workers' initial window (packets; default: the workers' own)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-window", o.max_window, "ATP workers' largest window (packets; default: the workers' own)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--rto-us", o.rto_us,
                 "ATP's and Rina's workers' first retransmission timeout (us; default: 1 ms, or the time the workers' "
                 "first windows take on one link where that is longer)")
      ->check(CLI::Range(1, 1'000'000'000));
  app.add_option("--index", o.index,
                 "ATP aggregator indices: allocated (the switch gives a fragment a free aggregator), hashed_slots "
                 "(the authors' code), hashed (the paper's text) or linear")
      ->capture_default_str()
      ->check(CLI::IsMember({"allocated", "hashed", "linear", "hashed_slots"}));
}

}  // namespace

CLI::App* add_bench_allreduce_command(CLI::App& bench, std::function<int()>& run) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = bench.add_subcommand("allreduce", "allreduce time, algbw and busbw per size (nccl-tests style)");
  app->footer(
      "One scenario run per size and algorithm on the chosen backend: --racks racks (tor0..) of --workers\n"
      "workers under a core switch, the PS under the core, every link at --rate-mbps. Columns as nccl-tests'\n"
      "all_reduce_perf (GB/s = 1e9 bytes/s; busbw = algbw x 2(n-1)/n), one block per algorithm, then the\n"
      "first algorithm's algbw over each other's, measured in the same run. #wrong: the values that differed\n"
      "(exact for atp and ps, within float32 rounding for the host collectives), 0 where every one was right.\n"
      "On loopback, the host collectives use direct TCP, not the switches or their rate limits. nccl-tests' -b -e -f "
      "-n -w work as aliases. netns needs root.");
  app->add_option("--backend", o->backend,
                  "where the runs run: " + backend_names() + " (atp run --help says what each is)")
      ->capture_default_str();
  // The registry's allreduces (not the probe, a measurement), then ps_nn.
  std::vector<std::string> names;
  std::string listed;
  for (const Algorithm& a : algorithms()) {
    if (a.timed_calls != nullptr) continue;
    names.emplace_back(a.name);
    listed += (listed.empty() ? "" : ", ") + std::string(a.name);
  }
  names.emplace_back(kColocatedPs);
  const std::string algorithms_help = "comma-separated: " + listed + " (atp run --help says what each is), or " +
                                      kColocatedPs +
                                      " (ps with a PS shard on every worker's host, BytePS's N-to-N; netns only)";
  app->add_option("--algorithms", o->algorithms, algorithms_help)
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember(names));
  app->add_option("--workers", o->workers, "workers (one host each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--racks", o->racks, "racks the workers are spread over")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app->add_option("--rate-mbps", o->rate_mbps, "every link's rate (Mbit/s)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app->add_option("-b,--min-bytes", o->min_bytes,
                  "smallest tensor (bytes per worker, a multiple of 4; K, M, G suffixes are powers of 1024)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  app->add_option("-e,--max-bytes", o->max_bytes, "largest tensor (bytes per worker, a multiple of 4)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  app->add_option("-f,--factor", o->factor, "size step factor (every size must stay a multiple of 4)")
      ->capture_default_str()
      ->check(CLI::Range(1.1, 1024.0));
  app->add_option("-n,--iters", o->iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("-w,--warmup", o->warmup, "untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  add_network_options(*app, *o);
  app->add_flag("--json", o->json, "print the figures as JSON instead of a table");
  run = [o] { return run_allreduce_bench(*o); };
  return app;
}

}  // namespace atp::cli
