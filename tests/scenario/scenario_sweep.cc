// The random-scenario sweep (docs/sweep.md): for every seed, a generated valid scenario runs on
// the in-process backend and is checked (exact results, loud failures, no leaks, consistent
// counters), and a mutated invalid one must be refused with one sentence naming its key.
//
//   scenario_sweep [--first S] [--seeds N] [--keep-going] [--out DIR] [--valid-only | --invalid-only]
//   scenario_sweep --print SEED | --print-invalid SEED | --run FILE
//
// A failing seed prints the seed, what was violated and the YAML, and writes the YAML to
// DIR/sweep-SEED.yaml (or sweep-invalid-SEED.yaml) for `atp run --backend inproc FILE`.
// Exit 0: every seed passed; 1: some seed failed; 2: bad command line.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "atp/backends/simulated.h"
#include "atp/plan/plan.h"
#include "atp/scenario/scenario.h"
#include "scenario_sweep_gen.h"

namespace atp::sweep {
namespace {

// --- what a crash or a hang reports: the seed being run (async-signal-safe output only)

volatile std::sig_atomic_t g_current_seed_low = 0, g_current_seed_high = 0;
volatile std::sig_atomic_t g_current_kind = 0;  // 0 valid, 1 invalid
constexpr unsigned kSeedWallLimitS = 120;       // one scenario taking this long is a hang

void write_text(const char* s) { (void)!::write(STDERR_FILENO, s, std::strlen(s)); }

void report_signal(int sig) {
  char buf[96];
  char digits[24];
  const std::uint64_t seed = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(g_current_seed_high)) << 32) |
                             static_cast<std::uint32_t>(g_current_seed_low);
  int n = 0;
  std::uint64_t v = seed;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < 23);
  int k = 0;
  while (n > 0) buf[k++] = digits[--n];
  buf[k] = '\0';
  write_text("\nscenario_sweep: seed ");
  write_text(buf);
  write_text(g_current_kind ? " (invalid scenario)" : " (valid scenario)");
  write_text(
      sig == SIGALRM
          ? ": took longer than the wall-clock limit (a hang?); reproduce with --print-invalid or --print and atp run\n"
          : ": the process crashed; reproduce with --print / --print-invalid and atp run\n");
  if (sig == SIGALRM) ::_exit(1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void set_current(std::uint64_t seed, int kind) {
  g_current_seed_low = static_cast<std::sig_atomic_t>(seed & 0xFFFFFFFFu);
  g_current_seed_high = static_cast<std::sig_atomic_t>(seed >> 32);
  g_current_kind = kind;
  ::alarm(kSeedWallLimitS);
}

// --- checks of a valid scenario's run

struct Outcome {
  std::vector<std::string> violations;
  std::uint64_t events = 0;
  std::set<std::string> observed;  // what the run showed (for the coverage summary)
};

std::string fmt(std::uint64_t v) { return std::to_string(v); }

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// A job error that says the result was wrong (RoundDriver::verify's messages), not that it failed.
bool is_wrong_result(const std::string& error) {
  return contains(error, "the exact sum is") || contains(error, "(float32 path) is") || contains(error, "result has") ||
         contains(error, "float fragment index");
}

void check_run(const ValidScenario& v, const Scenario& scenario, const ScenarioResult& r, Outcome& out) {
  const Expectations& ex = v.expect;
  auto fail = [&out](const std::string& what) { out.violations.push_back(what); };
  out.events = r.events;
  if (r.jobs.size() != ex.elements.size()) {
    fail("the result has " + fmt(r.jobs.size()) + " jobs, the scenario " + fmt(ex.elements.size()));
    return;
  }
  for (std::size_t j = 0; j < r.jobs.size(); ++j) {
    const JobResult& job = r.jobs[j];
    const std::string name = "job " + job.name + " (jobs[" + fmt(j) + "])";
    const ScenarioJob& sj = scenario.jobs[j];
    if (job.correct && (!job.error.empty() || job.completed_rounds != job.rounds)) {
      fail(name + " is correct with error '" + job.error + "' after " + fmt(job.completed_rounds) + " of " +
           fmt(job.rounds) + " rounds");
    }
    if (!job.correct && job.error.empty()) fail(name + " is not correct but says nothing why (a silent failure)");
    if (is_wrong_result(job.error)) fail(name + " got a wrong result: " + job.error);
    if (job.wrong_values != 0) fail(name + " reports " + fmt(job.wrong_values) + " wrong values: " + job.error);
    if (!job.correct && !ex.may_fail[j]) fail(name + " failed although nothing it uses crashed: " + job.error);
    if (job.correct && ex.must_fail[j])
      fail(name + " is correct although one of its workers crashed before its last round");
    if (!job.correct && ex.may_fail[j] && !contains(job.error, "crashed") && !contains(job.error, "failed")) {
      fail(name + " failed without saying it crashed or failed: " + job.error);
    }
    if (!job.correct)
      out.observed.insert(ex.may_fail[j] ? "job failed by a crash or a deaf neighbour (expected)" : "job failed");
    if (job.workers != sj.spec.workers.size()) fail(name + " reports " + fmt(job.workers) + " workers");
    // The width the file set, or (unset: 0) the one planning chose: at most what the links' MTU
    // takes (the scenario's, 9000 bytes by default).
    if (sj.algorithm->parameter_servers) {
      const std::uint64_t set = ex.values_per_packet[j];
      const std::uint64_t widest = fragment_width(scenario.mtu_bytes, kMaxValuesPerPacket);
      if (set != 0 && job.values_per_packet != set) {
        fail(name + " has fragments of " + fmt(job.values_per_packet) + " values, but the file says " + fmt(set));
      } else if (set == 0 && (job.values_per_packet == 0 || job.values_per_packet > widest)) {
        fail(name + " has fragments of " + fmt(job.values_per_packet) + " values; the width chosen must be 1.." +
             fmt(widest));
      }
    }
    const std::uint64_t vpp = std::max<std::uint64_t>(job.values_per_packet, 1);
    const std::uint64_t per_round = (ex.elements[j] + vpp - 1) / vpp;
    if (job.fragments != per_round * job.completed_rounds) {
      fail(name + " reports " + fmt(job.fragments) + " fragments, expected " + fmt(per_round) + " x " +
           fmt(job.completed_rounds) + " completed rounds");
    }
    if (job.float_fragments > job.fragments) {
      fail(name + " reports more float fragments (" + fmt(job.float_fragments) + ") than fragments (" +
           fmt(job.fragments) + ")");
    }
    // A fragment of fewer than 32 values over its workers (the short last one too) may hold only
    // values far below the magnitude, which its exponent need not resolve.
    const std::uint64_t last = ex.elements[j] % vpp == 0 ? vpp : ex.elements[j] % vpp;
    const bool few_values = std::min(vpp, last) * sj.spec.workers.size() < 32;
    if (!ex.may_overflow[j] && !few_values && job.float_fragments > 0) {
      fail(name + " took the float32 path " + fmt(job.float_fragments) +
           " times although no sum could overflow and every fragment's largest value is resolved");
    }
    if (job.float_fragments > 0) out.observed.insert("float32 path taken");
    std::uint64_t aggregations = 0;
    for (const auto& [sw, n] : job.switch_aggregations) aggregations += n;
    if (!ex.aggregated[j] && (aggregations > 0 || job.collisions > 0 || job.reclaimed_aggregators > 0)) {
      fail(name + " (algorithm ps) was aggregated in a switch: " + fmt(aggregations) + " aggregations, " +
           fmt(job.collisions) + " collisions, " + fmt(job.reclaimed_aggregators) + " reclaimed");
    }
    const std::uint64_t least_ps_packets = ex.aggregated[j] ? job.fragments : job.fragments * job.workers;
    if (job.correct && job.ps_packets_received < least_ps_packets) {
      fail(name + " is correct with " + fmt(job.ps_packets_received) + " packets at its PSes, fewer than " +
           fmt(least_ps_packets) + " (every fragment must reach a PS)");
    }
    if (!(job.in_network_share >= 0 && job.in_network_share <= 1)) {
      fail(name + " has in_network_share " + std::to_string(job.in_network_share));
    }
    if (job.fast_retransmits + job.requested_resends > job.retransmissions) {
      fail(name + " has more fast retransmits and requested resends (" + fmt(job.fast_retransmits) + " + " +
           fmt(job.requested_resends) + ") than retransmissions (" + fmt(job.retransmissions) + ")");
    }
    if (job.warmup_rounds > job.completed_rounds) fail(name + " has more warm-up rounds than completed rounds");
    if (job.round_end_seconds.size() != job.completed_rounds) {
      fail(name + " has " + fmt(job.round_end_seconds.size()) + " round end times for " + fmt(job.completed_rounds) +
           " completed rounds");
    }
    for (std::size_t k = 1; k < job.round_end_seconds.size(); ++k) {
      if (job.round_end_seconds[k] < job.round_end_seconds[k - 1]) fail(name + " has round end times going back");
    }
    if (job.collisions > 0) out.observed.insert("collisions");
    if (job.reclaimed_aggregators > 0) out.observed.insert("aggregators reclaimed");
    if (job.fast_retransmits > 0) out.observed.insert("fast retransmits");
    if (job.requested_resends > 0) out.observed.insert("resends the PS requested");
    if (job.timeouts > 0) out.observed.insert("retransmission timeouts");
    if (ex.aggregated[j] && aggregations > 0) out.observed.insert("aggregated in a switch");
  }
  if (r.time_limit_reached) fail("the time limit was reached: some job neither finished nor failed (a deadlock?)");
  if (r.simulated_seconds > ex.time_limit_s) {
    fail("the run went on to " + std::to_string(r.simulated_seconds) + " s, past its time limit");
  }
  if (r.host_dropped_packets != 0) {
    fail(fmt(r.host_dropped_packets) + " packets reached a host that had no endpoint for them");
  }
  if (r.leaked_aggregators != 0 && !ex.leaks_allowed) {
    fail(fmt(r.leaked_aggregators) + " aggregators leaked (every ATP switch reclaims, so none may stay held)");
  }
  if (r.leaked_aggregators != 0) out.observed.insert("leak (reclaim disabled)");
  // Noise: every noise packet that reached a running switch was rejected there, and nothing else
  // (a simulated switch comes back from a restart with its jobs: none of theirs is rejected).
  if (r.restart_rejected_packets != 0) {
    fail("a restarted switch rejected " + fmt(r.restart_rejected_packets) +
         " job packets (it comes back with its jobs)");
  }
  if (r.rejected_packets != r.noise_packets_received) {
    fail("switches rejected " + fmt(r.rejected_packets) + " packets but " + fmt(r.noise_packets_received) +
         " noise packets reached a running switch (of " + fmt(r.noise_packets) + " sent)");
  }
  std::uint64_t noise_duplicates = 0;
  for (const LinkResult& l : r.links) {
    if (l.from == "n0") noise_duplicates += l.duplicated;
  }
  if (r.noise_packets_received > r.noise_packets + noise_duplicates) {
    fail(fmt(r.noise_packets_received) + " noise packets reached a switch, more than the " + fmt(r.noise_packets) +
         " sent and " + fmt(noise_duplicates) + " duplicates");
  }
  if (ex.noise_exact && r.noise_packets_received != r.noise_packets) {
    fail(fmt(r.noise_packets) + " noise packets sent on a clean link to a switch that never went down, but " +
         fmt(r.noise_packets_received) + " reached it");
  }
  if (r.noise_packets > 0) out.observed.insert("noise rejected");
  for (const LinkResult& l : r.links) {
    const std::string dir = l.from + ">" + l.to;
    if (l.lost > l.packets) fail("link " + dir + " lost more packets than it sent");
    if (l.lost > 0 && ex.lossy.count(dir) == 0)
      fail("link " + dir + " lost " + fmt(l.lost) + " packets without a loss fault");
    if (l.queue_drops > 0 && ex.limited.count(dir) == 0) {
      fail("link " + dir + " dropped " + fmt(l.queue_drops) + " packets at an unlimited queue");
    }
    if (l.ecn_marked > 0 && ex.marking.count(dir) == 0) {
      fail("link " + dir + " ECN-marked " + fmt(l.ecn_marked) + " packets with no threshold");
    }
    if (l.queue_drops > 0) out.observed.insert("queue drops");
    if (l.ecn_marked > 0) out.observed.insert("ECN marks");
    if (l.lost > 0) out.observed.insert("link loss");
  }
  // The JSON report says the same.
  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  if (j.at("correct").get<bool>() != all_correct(r)) fail("the JSON's correct differs from all_correct");
  if (j.at("noise_packets_received").get<std::uint64_t>() != r.noise_packets_received) {
    fail("the JSON's noise_packets_received differs");
  }
}

// Runs the valid scenario of `seed`; returns its violations ("" entries never).
Outcome run_valid(std::uint64_t seed, bool rerun) {
  Outcome out;
  const ValidScenario v = generate_valid(seed);
  if (generate_valid(seed).yaml != v.yaml)
    out.violations.push_back("the generator gave two different scenarios for one seed");
  Scenario scenario;
  try {
    scenario = parse_scenario_yaml(v.yaml, "sweep-" + fmt(seed) + ".yaml");
  } catch (const std::exception& e) {
    out.violations.push_back(std::string("the parser refused a valid scenario: ") + e.what());
    return out;
  }
  if (scenario.jobs.size() != v.expect.elements.size()) {
    out.violations.push_back("the parser read " + fmt(scenario.jobs.size()) + " jobs");
    return out;
  }
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    if (scenario.jobs[j].elements != v.expect.elements[j] ||
        scenario.jobs[j].spec.values_per_packet != v.expect.values_per_packet[j]) {
      out.violations.push_back("the parser read jobs[" + fmt(j) + "] as " + fmt(scenario.jobs[j].elements) +
                               " elements, " + fmt(scenario.jobs[j].spec.values_per_packet) + " values per packet");
    }
  }
  ScenarioResult result;
  try {
    result = run_inproc(scenario);
  } catch (const std::exception& e) {
    out.violations.push_back(std::string("run_inproc threw ") + typeid(e).name() + ": " + e.what());
    return out;
  }
  check_run(v, scenario, result, out);
  if (rerun) {
    try {
      if (to_json(run_inproc(scenario)) != to_json(result)) {
        out.violations.push_back("two runs of the same scenario gave different results (not deterministic)");
      }
    } catch (const std::exception& e) {
      out.violations.push_back(std::string("the second run threw: ") + e.what());
    }
  }
  return out;
}

// Checks the refusal of the invalid scenario of `seed`; returns the violation or "".
std::string run_invalid(std::uint64_t seed) {
  const InvalidScenario inv = generate_invalid(seed);
  if (generate_invalid(seed).yaml != inv.yaml) return "the generator gave two different invalid scenarios for one seed";
  std::string message;
  try {
    const Scenario s = parse_scenario_yaml(inv.yaml);
    if (!inv.at_run) return "accepted by the parser (" + inv.mutation + ")";
    run_inproc(s);
    return "accepted by run_inproc (" + inv.mutation + ")";
  } catch (const ScenarioError& e) {
    message = e.what();
  } catch (const std::exception& e) {
    return std::string("refused with ") + typeid(e).name() + " instead of a ScenarioError (" + inv.mutation +
           "): " + e.what();
  }
  const std::string expected = inv.key + ": ";
  if (message.rfind(expected, 0) != 0) {
    return "the refusal of '" + inv.mutation + "' does not start with '" + expected + "': " + message;
  }
  if (!inv.contains.empty() && !contains(message, inv.contains)) {
    return "the refusal of '" + inv.mutation + "' does not say '" + inv.contains + "': " + message;
  }
  if (contains(message, "\n")) return "the refusal of '" + inv.mutation + "' is more than one line: " + message;
  if (message.size() <= expected.size() + 5) return "the refusal of '" + inv.mutation + "' says nothing: " + message;
  return "";
}

void report_failure(const std::string& out_dir, const std::string& kind, std::uint64_t seed,
                    const std::vector<std::string>& violations, const std::string& yaml) {
  const std::string file = out_dir + "/sweep-" + (kind == "valid" ? "" : "invalid-") + fmt(seed) + ".yaml";
  std::ofstream(file) << yaml;
  std::ostringstream s;
  s << "FAIL seed " << seed << " (" << kind << " scenario):\n";
  for (const std::string& v : violations) s << "  - " << v << "\n";
  s << "  reproducer: " << file << (kind == "valid" ? " (atp run --backend inproc " + file + " --json)" : "")
    << "\n--- " << file << " ---\n"
    << yaml << "---\n";
  std::fputs(s.str().c_str(), stdout);
  std::fflush(stdout);
}

int usage(const char* why) {
  std::fprintf(
      stderr,
      "scenario_sweep: %s\nusage: scenario_sweep [--first S] [--seeds N] [--keep-going] [--out DIR] "
      "[--valid-only | --invalid-only]\n       scenario_sweep --print SEED | --print-invalid SEED | --run FILE\n",
      why);
  return 2;
}

bool parse_u64(const char* text, std::uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(text, &end, 10);
  return errno == 0 && end != text && *end == '\0' && text[0] != '-';
}

int main_impl(int argc, char** argv) {
  std::uint64_t first = 1, seeds = 100;
  bool keep_going = false, valid = true, invalid = true;
  std::string out_dir = ".";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::uint64_t& v) {
      if (i + 1 >= argc || !parse_u64(argv[i + 1], v)) return false;
      ++i;
      return true;
    };
    std::uint64_t seed = 0;
    if (a == "--first") {
      if (!value(first)) return usage("--first takes a seed");
    } else if (a == "--seeds") {
      if (!value(seeds)) return usage("--seeds takes a count");
    } else if (a == "--keep-going") {
      keep_going = true;
    } else if (a == "--valid-only") {
      invalid = false;
    } else if (a == "--invalid-only") {
      valid = false;
    } else if (a == "--out") {
      if (i + 1 >= argc) return usage("--out takes a directory");
      out_dir = argv[++i];
    } else if (a == "--print") {
      if (!value(seed)) return usage("--print takes a seed");
      const ValidScenario v = generate_valid(seed);
      std::fputs(v.yaml.c_str(), stdout);
      std::string features;
      for (const std::string& f : v.features) features += " " + f;
      std::printf("# features:%s\n", features.c_str());
      return 0;
    } else if (a == "--run") {
      // A scenario file (a reproducer being cut down): its summary; exit 0 if every job is exact.
      if (i + 1 >= argc) return usage("--run takes a scenario file");
      try {
        const ScenarioResult r = run_inproc(load_scenario_file(argv[i + 1]));
        std::fputs(to_summary(r).c_str(), stdout);
        return all_correct(r) ? 0 : 1;
      } catch (const ScenarioError& e) {
        std::fprintf(stderr, "scenario_sweep: %s\n", e.what());
        return 2;
      }
    } else if (a == "--print-invalid") {
      if (!value(seed)) return usage("--print-invalid takes a seed");
      const InvalidScenario inv = generate_invalid(seed);
      std::fputs(inv.yaml.c_str(), stdout);
      std::printf("# expected: a ScenarioError%s starting '%s: '%s\n", inv.at_run ? " from run_inproc" : "",
                  inv.key.c_str(), inv.contains.empty() ? "" : (" and saying '" + inv.contains + "'").c_str());
      return 0;
    } else {
      return usage(("unknown argument '" + a + "'").c_str());
    }
  }
  std::signal(SIGSEGV, report_signal);
  std::signal(SIGABRT, report_signal);
  std::signal(SIGFPE, report_signal);
  std::signal(SIGBUS, report_signal);
  std::signal(SIGALRM, report_signal);

  const auto start = std::chrono::steady_clock::now();
  std::uint64_t failures = 0, events = 0, valid_run = 0, invalid_run = 0;
  std::map<std::string, std::uint64_t> features, observed, mutations;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    if (valid) {
      set_current(seed, 0);
      Outcome o;
      try {
        o = run_valid(seed, seed % 8 == 0);
      } catch (const std::exception& e) {
        o.violations.push_back(std::string("the sweep itself threw: ") + e.what());
      }
      ++valid_run;
      events += o.events;
      for (const std::string& f : o.observed) ++observed[f];
      if (!o.violations.empty()) {
        ++failures;
        report_failure(out_dir, "valid", seed, o.violations, generate_valid(seed).yaml);
        if (!keep_going) break;
      } else {
        for (const std::string& f : generate_valid(seed).features) ++features[f];
      }
    }
    if (invalid) {
      set_current(seed, 1);
      std::string violation;
      try {
        violation = run_invalid(seed);
      } catch (const std::exception& e) {
        violation = std::string("the sweep itself threw: ") + e.what();
      }
      ++invalid_run;
      ++mutations[generate_invalid(seed).kind];
      if (!violation.empty()) {
        ++failures;
        report_failure(out_dir, "invalid", seed, {violation}, generate_invalid(seed).yaml);
        if (!keep_going) break;
      }
    }
  }
  ::alarm(0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "scenario_sweep: seeds %llu..%llu: %llu valid and %llu invalid scenarios, %llu failed, %.1f s wall, "
      "%llu simulated events\n",
      static_cast<unsigned long long>(first), static_cast<unsigned long long>(first + seeds - 1),
      static_cast<unsigned long long>(valid_run), static_cast<unsigned long long>(invalid_run),
      static_cast<unsigned long long>(failures), wall, static_cast<unsigned long long>(events));
  if (!features.empty()) {
    std::printf("  generated (passing scenarios):");
    for (const auto& [f, n] : features) std::printf(" %s=%llu", f.c_str(), static_cast<unsigned long long>(n));
    std::printf("\n  observed:");
    for (const auto& [f, n] : observed) std::printf(" [%s]=%llu", f.c_str(), static_cast<unsigned long long>(n));
    std::printf("\n");
  }
  if (!mutations.empty()) {
    std::printf("  invalid:");
    for (const auto& [k, n] : mutations) std::printf(" %s=%llu", k.c_str(), static_cast<unsigned long long>(n));
    std::printf("\n");
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace atp::sweep

int main(int argc, char** argv) { return atp::sweep::main_impl(argc, argv); }
