// The process backends: a scenario as real processes (`atp switch`, `atp ps`, `atp worker`), on
// loopback (`loopback`, called `udp` before) or in network namespaces (`netns`), and the hidden
// subcommands they start.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "atp/backends/backend.h"
#include "atp/scenario/scenario.h"

namespace atp {

// The loopback backend: the scenario as real processes on 127.0.0.1, started from
// RunOptions::atp_binary (`atp switch` per switch, `atp ps` per PS host, `atp worker` per worker
// host). Every worker binds, then all start together. Results come from the worker processes
// (each checks its own results exactly) and the daemons' /stats; `seconds` and `algbw_gbps` are
// wall-clock, and time_limit is a wall-clock bound. Faults: link settings on the switches' ports
// (time windows through their control plane), crashes and switch restarts as SIGKILL (a restarted
// switch gets its jobs again), noise sent by this process. Every child is stopped and reaped
// before it returns or throws (also on SIGINT/SIGTERM, which then throw std::runtime_error). A
// host is one UDP peer of its switch: it runs a worker or a PS, not both; no background flows.
const Backend& loopback_backend();
// The netns backend: the same processes, each in its own network namespace (one per host and per
// switch, veth pairs as links, rates from the scenario's link settings; switches run on the
// namespaces' interfaces as Ethernet switches and hosts address each other by IP), plus
// background TCP flows. Needs root (cannot_run says so). Everything it creates (namespaces,
// veths, processes) is removed before it returns or throws, also after SIGINT/SIGTERM;
// namespaces a killed run left behind are removed by the next run.
const Backend& netns_backend();

// loopback_backend().run(scenario, options), netns_backend().run(scenario, options)
ScenarioResult run_loopback(const Scenario& scenario, const RunOptions& options = {});
ScenarioResult run_netns(const Scenario& scenario, const RunOptions& options = {});

// `atp testbed FILE -- COMMAND`: the netns backend's network of `scenario` (its topology, link
// settings, fault windows, switch restarts and background flows; needs root), with `command` run
// once on each worker host of each job in place of `atp worker`, in rank order, with torch's
// environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR: rank 0's host address, MASTER_PORT) and
// the atp backend's (ATP_TESTBED, ATP_HOST, ATP_BIND, ATP_RACK, ATP_ALGORITHM unless set). The
// ranks' ATP jobs are planned and installed when their rank 0 asks (cluster/testbed_client.h).
// Each line the commands print goes to `out` as "[HOST] LINE". Once a rank exits with a non-zero
// status the others are stopped (SIGTERM, SIGKILL 5 s later).
struct TestbedOptions {
  std::string atp_binary;     // the daemons' binary; "": this one
  Duration time_limit{0};     // wall clock; 0: none (the ranks' own timeouts bound them)
  std::ostream* out = nullptr;  // nullptr: std::cout
  // Where the links' counters go at the end as JSON (atp run's links, flows and
  // host_dropped_packets; no jobs); "": none. A one-line summary goes to stderr either way.
  std::string report;
};
// Returns 0 when every rank exited 0, else the first non-zero exit status (128 + the signal for a
// rank killed by one; 124 for the time limit). Throws ScenarioError for a file it cannot run (one
// sentence), std::runtime_error when the testbed cannot be built, processes::Interrupted on
// SIGINT/SIGTERM; every process, namespace and file it made is gone by then.
int run_testbed(const Scenario& scenario, const std::vector<std::string>& command, const TestbedOptions& options = {});

// The body of the hidden `atp worker --spec FILE` subcommand run_loopback starts (src/backends/
// processes/worker_process.h has its protocol). Returns the exit code.
int run_worker_process(const std::string& spec_path);

// The body of the hidden `atp flow` subcommand run_netns starts for background traffic: with
// `listen` (IP:PORT) the receiving end, with `connect` the sending end, whose TCP uses
// `congestion` (cubic, reno, bbr) and asks for ECN if `ecn` (BackgroundFlow's keys)
// (src/backends/processes/tcp_flow.h has its protocol). Returns the exit code (2: not exactly
// one of them, or not an address).
int run_background_flow(const std::string& listen, const std::string& connect, const std::string& congestion, bool ecn);

}  // namespace atp
