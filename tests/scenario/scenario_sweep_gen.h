// The random-scenario sweep's generator: one seed gives one scenario file (YAML text, bit for
// bit the same on every machine), valid ones covering every key the format has, and invalid ones
// made by mutating a valid one, each with what the parser must say about it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace atp::sweep {

// What a generated valid scenario promises, for the checker: which jobs must end exact, which
// may or must fail (a crash touched them), and what the counters may show. Indices are the jobs'
// file order.
struct Expectations {
  std::vector<bool> may_fail;   // a host of the job (worker or PS) crashes: it may fail, loudly
  std::vector<bool> must_fail;  // a worker of the job crashes before its last round: it must fail
  bool leaks_allowed = false;   // some ATP switch never reclaims (reclaim_timeout_us: 0) and a job may fail
  // No noise packet can be lost, duplicated or arrive at a switch that is down: then every noise
  // packet sent must reach its switch and be rejected there (noise_packets == rejected_packets).
  bool noise_exact = true;
  // Per job: whether a fragment may take the float32 path (a sum that can leave int32, or a
  // largest value its exponent may not resolve): without it none may.
  std::vector<bool> may_overflow;
  // Per job: values per packet and elements, for the fragment count.
  std::vector<std::uint64_t> values_per_packet, elements;
  std::vector<bool> aggregated;  // algorithm atp (else ps: no switch aggregates it)
  // Link directions ("from>to") where a fault sets loss / a buffer limit / an ECN threshold at
  // some time; elsewhere lost / queue_drops / ecn_marked must be 0.
  std::set<std::string> lossy, limited, marking;
  double time_limit_s = 0;
};

// A valid scenario and what it covers (for the sweep's coverage summary).
struct ValidScenario {
  std::uint64_t seed = 0;
  std::string yaml;
  Expectations expect;
  std::vector<std::string> features;  // e.g. "crash", "noise", "restart", "static", "two-level"
};

ValidScenario generate_valid(std::uint64_t seed);

// A valid scenario with one mutation that the parser (or, for `at_run`, run_inproc's planning)
// must refuse with a ScenarioError whose message is one line starting with `key` + ": ".
struct InvalidScenario {
  std::uint64_t seed = 0;
  std::string yaml;
  std::string mutation;  // what was changed, for the report
  std::string key;       // the key path the error must start with ("jobs[2].elements")
  std::string contains;  // text the message must also contain ("" if nothing particular)
  bool at_run = false;   // refused by run_inproc's planning, not the parser
  std::string kind;      // the kind of mutation ("unknown-key", "bad-value", ...)
};

InvalidScenario generate_invalid(std::uint64_t seed);

}  // namespace atp::sweep
