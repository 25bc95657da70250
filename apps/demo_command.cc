// `atp demo`: a local cluster of real processes (one `atp switch`, two jobs of four `atp worker`
// processes, one `atp ps` each) running allreduce rounds with a live progress bar per job, every
// result checked; then the same workload with in-network aggregation off, and a table side by side.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "atp/backends/processes.h"
#include "atp/io/machine.h"
#include "atp/scenario/scenario.h"
#include "commands.h"

namespace atp::cli {
namespace {

// Two jobs of four workers sharing one switch, one PS each, on 127.0.0.1, with the defaults a user
// gets: fragments as wide as the switch takes (4096 values on loopback; a Tofino stage holds the
// paper's 62, while here a packet costs the same system calls whatever its size). `atp`: whether
// the switch aggregates (else it only forwards and the PSes sum).
Scenario demo_scenario(std::uint64_t elements, std::uint32_t rounds, double link_gbps, bool atp) {
  Scenario s;
  s.seed = 7;
  s.time_limit = std::chrono::seconds(300);
  s.link.rate_gbps = link_gbps;
  s.topology.switches.push_back({"tor", {}});
  s.topology.switches.back().config.atp_capable = atp;
  s.topology.switches.back().config.num_aggregators = 4096;
  for (const char* name : {"a", "b"}) {
    ScenarioJob job = scenario_job(default_algorithm(), s.jobs.size(), name);
    for (int w = 0; w < 4; ++w) job.spec.workers.push_back(name + std::to_string(w));
    job.spec.ps = {std::string("ps_") + name};
    job.elements = elements;
    job.rounds = rounds;
    s.jobs.push_back(std::move(job));
  }
  // Hosts: both jobs' workers, then the PSes (plan_network numbers their addresses in this order).
  for (const ScenarioJob& job : s.jobs) {
    for (const std::string& w : job.spec.workers) s.topology.hosts.push_back({.name = w, .switch_name = "tor"});
  }
  for (const ScenarioJob& job : s.jobs) s.topology.hosts.push_back({.name = job.spec.ps[0], .switch_name = "tor"});
  check_scenario_memory(s, physical_memory_bytes());
  return s;
}

// One bar per job: the rounds every one of its workers has completed. On a terminal the bars
// are redrawn in place (at most every 50 ms); otherwise each job's progress is printed as a line
// at every quarter, so that logs stay short.
class ProgressBars {
 public:
  ProgressBars(const Scenario& s, std::FILE* out) : out_(out), tty_(::isatty(::fileno(out)) != 0) {
    for (const ScenarioJob& j : s.jobs)
      jobs_.push_back({j.spec.name, j.rounds, std::vector<std::uint32_t>(j.spec.workers.size(), 0)});
    if (tty_) draw(true);
  }

  void on_round(const RoundDone& d) {
    Job& job = jobs_[d.job];
    job.worker_rounds[d.worker] = d.round + 1;
    std::uint32_t done = job.rounds;
    for (std::uint32_t r : job.worker_rounds) done = std::min(done, r);
    if (done == job.done) return;
    job.done = done;
    job.seconds = d.seconds;
    if (tty_) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_draw_ < std::chrono::milliseconds(50) && done < job.rounds) return;
      last_draw_ = now;
      draw(false);
    } else if (done * 4 / job.rounds > job.quarter || done == job.rounds) {
      job.quarter = done * 4 / job.rounds;
      std::fprintf(out_, "  job %s: %u/%u rounds, %.2f s\n", job.name.c_str(), done, job.rounds, d.seconds);
      std::fflush(out_);
    }
  }

  void finish() {
    if (tty_) draw(false);
  }

 private:
  struct Job {
    std::string name;
    std::uint32_t rounds;
    std::vector<std::uint32_t> worker_rounds;
    std::uint32_t done = 0;
    double seconds = 0;
    std::uint32_t quarter = 0;
  };

  void draw(bool first) {
    constexpr int kWidth = 40;
    if (!first) std::fprintf(out_, "\x1b[%zuA", jobs_.size());  // back to the first bar
    for (const Job& j : jobs_) {
      const int filled = static_cast<int>(kWidth * static_cast<double>(j.done) / std::max<std::uint32_t>(j.rounds, 1));
      std::fprintf(out_, "\r  job %-3s [%s%s] %u/%u rounds %7.2f s\x1b[K\n", j.name.c_str(),
                   std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(), j.done, j.rounds,
                   j.seconds);
    }
    std::fflush(out_);
  }

  std::FILE* out_;
  bool tty_;
  std::vector<Job> jobs_;
  std::chrono::steady_clock::time_point last_draw_{};
};

ScenarioResult run_with_progress(const Scenario& s, const char* title) {
  std::printf("%s\n", title);
  std::fflush(stdout);
  ProgressBars bars(s, stdout);
  RunOptions options;
  options.on_round = [&bars](const RoundDone& d) { bars.on_round(d); };
  ScenarioResult result = run_loopback(s, options);
  bars.finish();
  for (const JobResult& j : result.jobs) {
    if (!j.correct) std::printf("  job %s FAILED: %s\n", j.name.c_str(), j.error.c_str());
  }
  std::printf("\n");
  return result;
}

int run_demo(std::uint64_t elements, std::uint32_t rounds, double link_gbps) {
  const Scenario with_atp = demo_scenario(elements, rounds, link_gbps, true);
  const Scenario without_atp = demo_scenario(elements, rounds, link_gbps, false);

  std::printf(
      "ATP demo: a local cluster of real processes on 127.0.0.1: one software switch (`atp switch`),\n"
      "two jobs of four worker processes each sharing it, one parameter server (`atp ps`) per job.\n"
      "Each worker allreduces %.1f MB of float32 per round, %u rounds, and checks every result exactly\n"
      "(the defaults: see apps/demo_command.cc).\n\n",
      static_cast<double>(elements) * 4.0 / 1e6, rounds);

  ScenarioResult on, off;
  try {
    on = run_with_progress(with_atp, "1/2 with in-network aggregation (the switch sums gradients):");
    off = run_with_progress(without_atp, "2/2 in-network aggregation off (the switch only forwards, the PS sums):");
  } catch (const std::runtime_error& e) {  // Ctrl-C, or a process that did not start
    std::cerr << "atp demo: " << e.what() << "\n";
    return kExitFailed;
  }

  std::printf(
      "Results (wall clock; algbw = tensor bits per second per worker; ps_pkts = packets the job's PS\n"
      "received; in-switch = share of worker packets the switch absorbed):\n");
  std::printf("%-4s %-12s %-7s %-7s %9s %11s %9s %10s %10s %8s\n", "job", "aggregation", "correct", "rounds", "seconds",
              "algbw_Gbps", "ps_pkts", "in-switch", "collisions", "retrans");
  for (std::size_t j = 0; j < on.jobs.size(); ++j) {
    for (const JobResult* r : {&on.jobs[j], &off.jobs[j]}) {
      const std::string done = std::to_string(r->completed_rounds) + "/" + std::to_string(r->rounds);
      std::printf("%-4s %-12s %-7s %-7s %9.3f %11.3f %9llu %9.1f%% %10llu %8llu\n", r->name.c_str(),
                  r == &on.jobs[j] ? "ATP switch" : "PS only", r->correct ? "yes" : "NO", done.c_str(), r->seconds,
                  r->algbw_gbps, static_cast<unsigned long long>(r->ps_packets_received), r->in_network_share * 100.0,
                  static_cast<unsigned long long>(r->collisions), static_cast<unsigned long long>(r->retransmissions));
    }
    if (on.jobs[j].algbw_gbps > 0 && off.jobs[j].algbw_gbps > 0 && on.jobs[j].ps_packets_received > 0) {
      std::printf("     job %s: the PS received %.1fx fewer packets with ATP; throughput ratio ATP/PS-only %.2f\n",
                  on.jobs[j].name.c_str(),
                  static_cast<double>(off.jobs[j].ps_packets_received) / on.jobs[j].ps_packets_received,
                  on.jobs[j].algbw_gbps / off.jobs[j].algbw_gbps);
    }
  }
  if (link_gbps > 0) {
    std::printf(
        "\nThe switch's ports model %g Gbit/s links (--link-gbps), so that, as in the paper, the PS's link\n"
        "is the bottleneck of the PS-only runs: it carries one packet per worker per fragment, ATP's one.\n",
        link_gbps);
  } else {
    std::printf(
        "\nLinks are unlimited (--link-gbps 0): the CPU is the bottleneck of both runs, and ATP's gain\n"
        "shows only in the PS's packet count.\n");
  }
  std::printf(
      "All processes share this machine's cores; software-switch costs per core are in\n"
      "docs/benchmarks.md (atp bench), paper-scale runs in examples/ (atp run, simulated network).\n");
  return all_correct(on) && all_correct(off) ? kExitOk : kExitFailed;
}

}  // namespace

Command add_demo_command(CLI::App& parent) {
  CLI::App* demo = parent.add_subcommand(
      "demo",
      "A local cluster of real processes: two jobs of four workers sharing one switch, with and without "
      "in-network aggregation, every result checked");
  auto elements = std::make_shared<std::uint64_t>(250'000);
  auto rounds = std::make_shared<std::uint32_t>(20);
  auto link_gbps = std::make_shared<double>(0.2);
  demo->add_option("--elements", *elements, "float32 values per allreduce")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 24));  // 64 MiB per worker, 8 workers
  demo->add_option("--link-gbps", *link_gbps,
                   "rate of every link (the switch's port queues), Gbit/s; 0: unlimited (then CPU is the bottleneck)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  demo->add_option("--rounds", *rounds, "allreduce rounds per job")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10000u));
  return {demo, [elements, rounds, link_gbps] { return run_demo(*elements, *rounds, *link_gbps); }};
}

}  // namespace atp::cli
