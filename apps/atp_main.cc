// The `atp` command: `atp run` runs a scenario file on a backend and checks the results,
// `atp demo` shows ATP against a plain PS on a built-in workload. Exit 0 ok, 1 wrong result, 2 bad input.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "atp/scenario.h"
#include "commands.h"

namespace {

using atp::cli::kExitBadInput;
using atp::cli::kExitOk;
constexpr int kExitIncorrect = atp::cli::kExitFailed;  // a job failed or produced a wrong result

// The demo's workload: two jobs of four workers sharing one ATP switch, one PS each.
// %ELEMENTS% and %ROUNDS% are filled in from the command line.
constexpr const char* kDemoScenario = R"(
seed: 7
link: {delay_us: 1, rate_gbps: 100, buffer_packets: 4000, ecn_threshold_packets: 300}
topology:
  switches: [{name: tor, atp: true, aggregators: 4096}]
  hosts:
    - {name: a0, switch: tor}
    - {name: a1, switch: tor}
    - {name: a2, switch: tor}
    - {name: a3, switch: tor}
    - {name: b0, switch: tor}
    - {name: b1, switch: tor}
    - {name: b2, switch: tor}
    - {name: b3, switch: tor}
    - {name: ps_a, switch: tor}
    - {name: ps_b, switch: tor}
jobs:
  - {name: a, workers: [a0, a1, a2, a3], ps: [ps_a], elements: %ELEMENTS%, rounds: %ROUNDS%}
  - {name: b, workers: [b0, b1, b2, b3], ps: [ps_b], elements: %ELEMENTS%, rounds: %ROUNDS%}
)";

// Every key of a scenario file, for `atp run --help`. Times are microseconds unless named _s.
constexpr const char* kScenarioKeys = R"(
Scenario file keys (YAML; unknown or repeated keys are errors; defaults in parentheses):
  seed (1)                       seeds inputs and link faults: same seed, same run
  time_limit_s (60)              simulated seconds before unfinished jobs are reported
  description                    free text
  link: {delay_us (2), rate_gbps (0: unlimited), buffer_packets (0: unlimited),
         ecn_threshold_packets (0: off)}          defaults of every link, both directions
  topology:
    switches: [{name, atp (true), aggregators (4096), width (1024 values),
                reclaim_timeout_us (100000; 0: never)}]
    hosts:    [{name, switch}]   each host has one link, to its switch
    links:    [[switch, switch]] switch-to-switch links; they must form a tree
  jobs: [{name (jobN), workers: [hosts], ps: [hosts], elements (float32 values),
          rounds (1), values_per_packet (62), scale (1e8), magnitude (1.0: inputs uniform
          in [-magnitude, magnitude]), index (hashed|linear), congestion_control (true),
          window (200), max_window (1024), compute_us (0: off phase between rounds),
          start_us (0), rto_us (1000), progress_timeout_us (2000000), initial_seq (0)}]
          job ids are 1, 2, ... in file order
  faults:
    - {link: [a, b], loss, duplicate, reorder (probabilities), delay_us, rate_gbps,
       buffer_packets, ecn_threshold_packets, one_way (false: both directions),
       from_us (0), until_us (forever)}
    - {crash: host, at_round: N | at_us: T}   the host stops for good (before round N, 0-based)
    - {restart: switch, at_us, down_us (0)}   the switch loses all state, drops everything for
                                              down_us, then gets its jobs installed again
    - {noise: host, rate_pps (1000), from_us (0), until_us (forever)}
                                  a host with no job role sends malformed and spoofed packets
Exit codes: 0 every job correct, 1 a job failed or was wrong, 2 bad command line or file.
)";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

int run_command(const std::string& backend, const std::string& file, bool json) {
  if (backend != "inproc" && backend != "udp") {
    std::cerr << "atp run: backend '" << backend
              << "' is not available yet; use --backend inproc or udp (ns3 is planned)\n";
    return kExitBadInput;
  }
  atp::ScenarioResult result;
  try {
    const atp::Scenario scenario = atp::load_scenario_file(file);
    // The udp backend starts this same binary as its daemons and workers, by its real path so
    // that they show up as `atp switch ...` (not `exe`) in ps and pgrep.
    std::error_code ignored;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ignored);
    result = backend == "udp" ? atp::run_udp(scenario, self.empty() ? "/proc/self/exe" : self.string())
                              : atp::run_inproc(scenario);
  } catch (const atp::ScenarioError& e) {
    const std::string what = e.what();
    // Errors from the parser that already start with the file name are not prefixed twice.
    std::cerr << "atp run: " << (what.rfind(file + ":", 0) == 0 ? what : file + ": " + what) << "\n";
    return kExitBadInput;
  } catch (const std::runtime_error& e) {
    if (backend != "udp") throw;
    std::cerr << "atp run: " << e.what() << "\n";  // a process that did not start, or Ctrl-C
    return kExitIncorrect;
  }
  std::cout << (json ? atp::to_json(result) : atp::to_summary(result));
  return atp::all_correct(result) ? kExitOk : kExitIncorrect;
}

int demo_command(std::uint64_t elements, std::uint32_t rounds) {
  std::string text = replace_all(kDemoScenario, "%ELEMENTS%", std::to_string(elements));
  text = replace_all(text, "%ROUNDS%", std::to_string(rounds));
  const atp::Scenario with_atp = atp::parse_scenario_yaml(text, "demo");
  atp::Scenario without_atp = with_atp;
  for (auto& s : without_atp.topology.switches) s.config.atp_capable = false;

  std::printf(
      "ATP demo on the in-process backend: a deterministic simulated network inside this process\n"
      "(simulated time; the udp and ns3 backends are planned).\n"
      "Workload: 2 jobs x 4 workers, one PS each, all under one switch 'tor' (100 Gbit/s links,\n"
      "1 us delay, ECN at 300 queued packets), %.1f MB of float32 per allreduce, %u round(s).\n\n",
      static_cast<double>(elements) * 4.0 / 1e6, rounds);

  const atp::ScenarioResult on = atp::run_inproc(with_atp);
  std::printf("With in-network aggregation (switch atp: true):\n%s\n", atp::to_summary(on).c_str());
  const atp::ScenarioResult off = atp::run_inproc(without_atp);
  std::printf("Same workload, in-network aggregation off (switch atp: false, the PS aggregates everything):\n%s\n",
              atp::to_summary(off).c_str());

  std::printf(
      "Side by side (algbw = tensor bits per simulated second; in-switch = share of worker packets\n"
      "the switch absorbed):\n");
  std::printf("%-4s %-13s %-7s %-7s %11s %10s %10s %8s\n", "job", "aggregation", "correct", "rounds", "algbw_Gbps",
              "in-switch", "collisions", "retrans");
  for (std::size_t j = 0; j < on.jobs.size(); ++j) {
    for (const auto* r : {&on.jobs[j], &off.jobs[j]}) {
      const std::string rounds_done = std::to_string(r->completed_rounds) + "/" + std::to_string(r->rounds);
      std::printf("%-4s %-13s %-7s %-7s %11.2f %9.1f%% %10llu %8llu\n", r->name.c_str(),
                  r == &on.jobs[j] ? "ATP switch" : "PS only", r->correct ? "yes" : "NO", rounds_done.c_str(),
                  r->algbw_gbps, r->in_network_share * 100.0, static_cast<unsigned long long>(r->collisions),
                  static_cast<unsigned long long>(r->retransmissions));
    }
  }
  return atp::all_correct(on) && atp::all_correct(off) ? kExitOk : kExitIncorrect;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atp: ATP in-network gradient aggregation (NSDI'21), runnable without a Tofino switch"};
  app.require_subcommand(1);
  app.footer(
      "Backends: inproc (a deterministic simulated network inside this process), udp (real processes on\n"
      "127.0.0.1); ns3 is planned.\n"
      "Exit codes: 0 ok, 1 a job failed or was wrong, 2 bad command line or scenario file.\n");

  std::string backend = "inproc";
  std::string file;
  bool json = false;
  CLI::App* run =
      app.add_subcommand("run", "Run a scenario file (topology, jobs, faults; see examples/) and check every result");
  run->add_option("--backend", backend,
                  "Where to run it: inproc (in-process simulated network) or udp (real processes on 127.0.0.1; "
                  "times are wall-clock; ns3 is planned)")
      ->capture_default_str();
  run->add_option("file", file, "Scenario file (YAML)")->required();
  run->add_flag("--json", json, "Print the results as JSON instead of a table");
  run->footer(kScenarioKeys);

  std::uint64_t demo_elements = 1'000'000;
  std::uint32_t demo_rounds = 2;
  CLI::App* demo = app.add_subcommand(
      "demo", "Two jobs of four workers sharing one switch, with and without in-network aggregation");
  demo->add_option("--elements", demo_elements, "float32 values per allreduce")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 24));  // 64 MiB per worker, 8 workers
  demo->add_option("--rounds", demo_rounds, "allreduce rounds per job")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100u));

  const atp::cli::Command switch_command = atp::cli::add_switch_command(app);
  const atp::cli::Command ps_command = atp::cli::add_ps_command(app);
  const atp::cli::Command bench_command = atp::cli::add_bench_command(app);

  // Hidden (empty group): the worker process `atp run --backend udp` starts per worker host.
  std::string worker_spec;
  CLI::App* worker = app.add_subcommand("worker", "internal: one worker process of `atp run --backend udp`");
  worker->group("");
  worker->add_option("--spec", worker_spec, "worker spec (JSON) written by atp run")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a "parse error" with exit code 0; every real one is bad usage.
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }

  try {
    if (run->parsed()) return run_command(backend, file, json);
    if (worker->parsed()) return atp::run_udp_worker(worker_spec);
    if (demo->parsed()) return demo_command(demo_elements, demo_rounds);
    if (switch_command.app->parsed()) return switch_command.run();
    if (ps_command.app->parsed()) return ps_command.run();
    if (bench_command.app->parsed()) return bench_command.run();
  } catch (const atp::ScenarioError& e) {
    std::cerr << "atp: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "atp: internal error: " << e.what() << "\n";
    return kExitIncorrect;
  }
  return kExitBadInput;
}
