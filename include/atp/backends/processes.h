// The process backends: a scenario as real processes (`atp switch`, `atp ps`, `atp worker`), on
// loopback (`loopback`, called `udp` before) or in network namespaces (`netns`), and the hidden
// subcommands they start.
#pragma once

#include <string>

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
