// The `atp` command: `atp run` runs a scenario file on a backend and checks the results,
// `atp demo` shows ATP against a plain PS on a built-in workload. Exit 0 ok, 1 wrong result, 2 bad input.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "atp/backends/backend.h"
#include "atp/backends/discover.h"
#include "atp/backends/processes.h"
#include "atp/scenario/scenario.h"
#include "commands.h"

namespace {

using atp::cli::kExitBadInput;
using atp::cli::kExitOk;
constexpr int kExitIncorrect = atp::cli::kExitFailed;  // a job failed or produced a wrong result

// Every key of a scenario file, for `atp run --help`. Times are microseconds unless named _s.
constexpr const char* kScenarioKeys = R"(
Scenario file keys (YAML; unknown or repeated keys are errors; defaults in parentheses):
  seed (1)                       seeds inputs and link faults: same seed, same run
  time_limit_s (60)              simulated seconds before unfinished jobs are reported
  description                    free text
  link: {delay_us (2), rate_gbps or rate_mbps (0: unlimited: no queue, so no buffer or marks),
         buffer_bytes (switch ports 1000000, hosts' NICs unlimited; 0: unlimited) or buffer_packets
         (0: unlimited; either one given replaces the other), ecn_threshold_packets (20 up to
         1 Gbit/s, 20 x sqrt(Gbit/s) above, and from a third of buffer_bytes; 0: off; switch ports
         only, which from there drop TCP data that is not ECN-capable: a host's queue marks only
         where a fault sets it), mtu_bytes (9000, the testbed's; 1500 for standard
         Ethernet; simulated backends and netns)}    defaults of every link, both directions
  topology:
    switches: [{name, atp (true), aggregators (4096), width (4096 values),
                reclaim_timeout_us (100000; 0: never)}]
    hosts:    [{name, switch}]   each host has one link, to its switch
    links:    [[switch, switch]] switch-to-switch links; they must connect every switch (cycles are
              fine: routes are shortest paths, ties to the link listed first)
  jobs: [{name (jobN), algorithm (atp), workers: [hosts], ps: [hosts], elements (float32 values),
          rounds (1), warmup_rounds (0: untimed first rounds), values_per_packet (unset: the widest the
          aggregating switches, the links' MTU and the PS's memory take: 2233 on 9000-byte frames, 358
          on 1500-byte ones, 4096 on loopback; the paper's is 62), scale (1e8), magnitude (1.0: inputs uniform
          in [-magnitude, magnitude]), index (allocated: the switch gives a fragment's first packet the
          aggregator free the longest and finds it by <job, seq>; a job over an even share of a full
          table is braked | hashed_slots: slot seq mod max_window x PS shards, side by side from the
          job's home, as the authors' code keeps a job's aggregators distinct | hashed: HASH(job,
          seq), the paper's text | linear: seq), congestion_control (true), loss_recovery (atp:
          holes overdue after later results, or the RTO; timeout: the RTO alone, as SwitchML),
          window (unset: the paper's 200 x 284 B in packets, 13 of 1024 values), max_window (1024),
          compute_us (0: off phase between rounds),
          start_us (0), rto_us (the first RTO: 1000, or the time the job's first windows take
          on one link where longer; later ones are measured),
          progress_timeout_us (2000000), initial_seq (0), grouping (plink only: topology: the racks |
          random: sqrt(n) groups dealt at random, the paper's Balanced Random | probe: the groups of the
          workers' probed distances, probed on the same backend first, as atp discover does),
          autotune (false; plink and plink_fa, ns3: PLink's Autotune moves the masters between rounds)}]
          job ids are 1, 2, ... in file order; algorithm: one of the algorithms below (probe: no rounds,
          elements are the bytes / 4 of each timed transfer; its JSON has the pairs' round trips and bandwidths)
  aggregator_sharing (dynamic)   dynamic: every atp job's indices span the whole aggregator table
                                 (ATP; with allocated a job's window may grow to the whole table);
                                 with hashed_slots each of the K atp jobs keeps its window at
                                 1/K of the smallest table and starts on a K-th of its own, a
                                 collision moving a slot to the aggregator the switch offers;
                                 static: the K atp jobs get fixed equal shares, job k (file
                                 order) only [k*c, k*c + c) with c = the smallest ATP table / K
                                 rounded down, its index (hashed|linear) inside it (the baseline of the
                                 paper's Fig. 13a/14); a share of 0 aggregators is an error
  faults:
    - {link: [a, b], loss, duplicate, reorder (probabilities), delay_us, rate_gbps | rate_mbps,
       buffer_bytes, buffer_packets, ecn_threshold_packets, one_way (false: both directions),
       from_us (0), until_us (forever)}
    - {crash: host, at_round: N | at_us: T}   the host stops for good (before round N, 0-based);
                                              its jobs fail, but a Rina job goes on without
                                              it (docs/rina.md "Failures")
    - {restart: switch, at_us, down_us (0)}   the switch loses all state, drops everything for
                                              down_us, then gets its jobs installed again
    - {noise: host, rate_pps (1000), from_us (0), until_us (forever)}
                                  a host with no job role sends malformed and spoofed packets
  background: [{from: host, to: host, kind (tcp), from_us (0), until_us (when all jobs end),
                congestion (cubic; reno, bbr), ecn (true)}]
                                  a TCP flow through the same switches (netns and ns3)
)";

// The algorithms a job can name, from the registry, each with the backends of this build that run it.
std::string algorithms_help() {
  std::string out = "Algorithms (a job's algorithm:):";
  for (const atp::Algorithm& a : atp::algorithms()) {
    std::string runs_on;
    for (const atp::Backend* b : atp::backends()) {
      if (atp::cannot_run(a, b->algorithm_support()).empty()) {
        runs_on += (runs_on.empty() ? "" : ", ") + std::string(b->name());
      }
    }
    out += "\n  " + std::string(a.name) + ": " + std::string(a.summary) + "\n    " +
           (runs_on.empty() ? "no backend of this build runs it" : "backends: " + runs_on);
  }
  return out + "\nExit codes: 0 every job correct, 1 a job failed or was wrong, 2 bad command line or file.\n";
}

// The --backend help: every backend of this build, from the registry.
std::string backends_help() {
  std::string out = "Where to run it:";
  for (const atp::Backend* b : atp::backends())
    out += "\n  " + std::string(b->name()) + ": " + std::string(b->summary());
  return out;
}

// Edits from a to b, counting a swap of two neighbouring letters as one ("swtich" is one from
// "switch"): the optimal string alignment form of Damerau-Levenshtein.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// "did you mean 'x' or 'y'?" for the names within two edits of `token` or starting with it, closest
// first, dashes aside (so '-json' finds '--json'); else `otherwise`. Fewer edits than the token has
// letters, or 'x' would suggest 'ps'.
std::string suggest(const std::string& token, const std::vector<std::string>& names, const std::string& otherwise) {
  const auto bare = [](std::string_view s) { return s.substr(std::min(s.find_first_not_of('-'), s.size())); };
  const std::string_view typed = bare(token);
  std::vector<std::pair<std::size_t, std::string>> close;
  for (const std::string& name : names) {
    const std::size_t edits = edit_distance(typed, bare(name));
    if ((edits <= 2 && edits < typed.size()) || (!typed.empty() && bare(name).starts_with(typed))) {
      close.emplace_back(edits, name);
    }
  }
  if (close.empty()) return otherwise;
  std::stable_sort(close.begin(), close.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string out = "did you mean ";
  for (std::size_t i = 0; i < close.size(); ++i) {
    out += std::string(i == 0 ? "'" : i + 1 == close.size() ? " or '" : ", '") + close[i].second + "'";
  }
  return out + "?";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The one line for a command line CLI11 refused, for every subcommand alike: which command it was
// for and, for an unknown subcommand or flag (the first token left over), the closest names, as
// git and cargo do; other errors keep CLI11's sentence. Returns the exit code.
int report_usage_error(const CLI::App& root, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return root.exit(e);  // --help, --version
  // The mistake is in the first command, from the top, that kept tokens it could not place;
  // else in the last one parsed (a missing value, a required flag or subcommand).
  const auto left_over = [](const CLI::App* app) {  // the first token past any "--" (which ends the flags)
    for (const std::string& t : app->remaining()) {
      if (t != "--") return t;
    }
    return std::string();
  };
  const CLI::App* at = &root;
  std::string command = "atp";  // not argv[0], which may be a path
  while (left_over(at).empty() && !at->get_subcommands().empty()) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  std::vector<std::string> commands;  // visible ones: hidden (internal) commands have no group
  for (const CLI::App* sub : at->get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); })) {
    commands.push_back(sub->get_name());
  }
  std::vector<std::string> flags, flag_names;  // each flag as --help lists it; every spelling of each
  for (const CLI::Option* opt : at->get_options([](const CLI::Option* o) { return !o->get_group().empty(); })) {
    if (opt->get_lnames().empty() && opt->get_snames().empty()) continue;  // a positional
    flags.push_back(opt->get_name());
    for (const std::string& n : opt->get_lnames()) flag_names.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) flag_names.push_back("-" + n);
  }
  const std::string token = left_over(at);
  if (token.size() > 1 && token[0] == '-') {
    const std::string flag = token.substr(0, token.find('='));  // --seeed=1 names --seeed
    std::cerr << command << ": unknown flag '" << flag << "'; "
              << suggest(flag, flag_names, "the flags are " + join(flags)) << "\n";
  } else if (!token.empty() && !commands.empty()) {
    std::cerr << command << ": '" << token << "' is not an " << command << " command; "
              << suggest(token, commands, "the commands are " + join(commands)) << "\n";
  } else if (e.get_name() == "RequiredError" && at->get_subcommands().empty() && !commands.empty()) {
    std::cerr << command << ": " << e.what() << "; the commands are " << join(commands) << "\n";
  } else {
    std::cerr << command << ": " << e.what() << "\n";
  }
  return kExitBadInput;
}

int run_command(const std::string& backend_name, const std::string& file, bool json, double series_ms) {
  const atp::Backend* backend = atp::find_backend(backend_name);
  if (backend == nullptr) {
    std::cerr << "atp run: " << atp::no_backend_reason(backend_name) << "\n";
    return kExitBadInput;
  }
  if (series_ms != 0 && !(series_ms > 0)) {
    std::cerr << "atp run: --series takes a positive interval in ms\n";
    return kExitBadInput;
  }
  atp::RunOptions options;
  options.series_interval = atp::Duration(static_cast<atp::Duration::rep>(series_ms * 1e6));
  atp::ScenarioResult result;
  try {
    // PLink's probed groups first (grouping: probe), on the same backend.
    const atp::Scenario loaded = atp::load_scenario_file(file);
    if (loaded.jobs.empty()) throw atp::ScenarioError("has no jobs to run (a file without jobs is for atp discover)");
    const atp::Scenario scenario = atp::with_probed_groups(*backend, loaded);
    result = backend->run(scenario, options);
  } catch (const atp::ScenarioError& e) {
    std::cerr << "atp run: " << atp::cli::with_file(file, e.what()) << "\n";
    return kExitBadInput;
  } catch (const atp::ProbeFailed& e) {
    std::cerr << "atp run: " << e.what() << "\n";
    return kExitIncorrect;
  } catch (const std::runtime_error& e) {
    if (backend->simulated()) throw;
    std::cerr << "atp run: " << e.what() << "\n";  // a process that did not start, or Ctrl-C
    return kExitIncorrect;
  }
  std::cout << (json ? atp::to_json(result) : atp::to_summary(result));
  return atp::all_correct(result) ? kExitOk : kExitIncorrect;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"atp: ATP in-network gradient aggregation (NSDI'21), runnable without a Tofino switch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "atp " ATP_VERSION);  // ATP_VERSION: project(atp VERSION) in CMakeLists.txt
  app.footer("Backends (atp run --backend): " + atp::backend_names() +
             ".\nExit codes: 0 ok, 1 a job failed or was wrong, 2 bad command line or scenario file.\n");

  std::string backend = "inproc";
  std::string file;
  bool json = false;
  double series_ms = 0;
  CLI::App* run =
      app.add_subcommand("run", "Run a scenario file (topology, jobs, faults; see examples/) and check every result");
  run->add_option("--backend", backend, backends_help())->capture_default_str();
  run->add_option("file", file, "Scenario file (YAML)")->required();
  run->add_flag("--json", json, "Print the results as JSON instead of a table");
  run->add_option("--series", series_ms,
                  "Simulated backends: record each job's goodput, window and switch vs PS packets every this many "
                  "simulated ms (JSON key series; background flow goodput at the same interval)");
  run->footer(kScenarioKeys + algorithms_help());

  const atp::cli::Command demo_command = atp::cli::add_demo_command(app);
  const atp::cli::Command switch_command = atp::cli::add_switch_command(app);
  const atp::cli::Command ps_command = atp::cli::add_ps_command(app);
  const atp::cli::Command bench_command = atp::cli::add_bench_command(app);
  const atp::cli::Command topology_command = atp::cli::add_topology_command(app);
  const atp::cli::Command bom_command = atp::cli::add_bom_command(app);
  const atp::cli::Command discover_command = atp::cli::add_discover_command(app);
  const atp::cli::Command testbed_command = atp::cli::add_testbed_command(app);

  // Hidden (empty group): the worker process the process backends start per worker host.
  std::string worker_spec;
  CLI::App* worker =
      app.add_subcommand("worker", "internal: one worker process of `atp run --backend loopback` or netns");
  worker->group("");
  worker->add_option("--spec", worker_spec, "worker spec (JSON) written by atp run")->required();

  // Hidden: the two ends of a background TCP flow of `atp run --backend netns`.
  std::string flow_listen, flow_connect, flow_congestion = "cubic";
  bool flow_ecn = false;
  CLI::App* flow =
      app.add_subcommand("flow", "internal: one end of a background TCP flow of `atp run --backend netns`");
  flow->group("");
  flow->add_option("--listen", flow_listen, "receive on IP:PORT and report goodput when the sender closes");
  flow->add_option("--connect", flow_connect, "send to IP:PORT until stdin closes");
  flow->add_option("--congestion", flow_congestion, "the sender's TCP congestion control (cubic, reno, bbr)");
  flow->add_flag("--ecn", flow_ecn, "the sender asks for ECN");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return report_usage_error(app, e);  // --help and --version are "parse errors" with exit code 0
  }

  try {
    if (run->parsed()) return run_command(backend, file, json, series_ms);
    if (worker->parsed()) return atp::run_worker_process(worker_spec);
    if (flow->parsed()) return atp::run_background_flow(flow_listen, flow_connect, flow_congestion, flow_ecn);
    if (demo_command.app->parsed()) return demo_command.run();
    if (switch_command.app->parsed()) return switch_command.run();
    if (ps_command.app->parsed()) return ps_command.run();
    if (bench_command.app->parsed()) return bench_command.run();
    if (topology_command.app->parsed()) return topology_command.run();
    if (bom_command.app->parsed()) return bom_command.run();
    if (discover_command.app->parsed()) return discover_command.run();
    if (testbed_command.app->parsed()) return testbed_command.run();
  } catch (const atp::ScenarioError& e) {
    std::cerr << "atp: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "atp: internal error: " << e.what() << "\n";
    return kExitIncorrect;
  }
  return kExitBadInput;
}
