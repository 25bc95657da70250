// Writes a scenario's results: JSON for scripts (stable key order, so equal runs give equal
// text) and a short table for people.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "atp/plink/probing.h"
#include "atp/scenario/scenario.h"

namespace atp {

namespace {

// ordered_json keeps insertion order: the keys appear in the order written here.
using nlohmann::ordered_json;

// A probe's distances (atp discover reads the same): median round trips, median bandwidths.
ordered_json probe_json(const JobResult& j) {
  const plink::ProbeSamples samples =
      plink::probe_samples(static_cast<int>(j.workers), j.tensor_bytes / sizeof(float), j.call_seconds);
  const Eigen::MatrixXd rtt = samples.latency_distances(), inverse = samples.bandwidth_distances();
  ordered_json rtt_us = ordered_json::array(), gbps = ordered_json::array();
  for (Eigen::Index a = 0; a < rtt.rows(); ++a) {
    ordered_json r1 = ordered_json::array(), r2 = ordered_json::array();
    for (Eigen::Index b = 0; b < rtt.cols(); ++b) {
      r1.push_back(rtt(a, b) * 1e6);
      r2.push_back(a == b ? 0.0 : 8 / inverse(a, b) / 1e9);
    }
    rtt_us.push_back(std::move(r1));
    gbps.push_back(std::move(r2));
  }
  return {{"round_trip_us", std::move(rtt_us)}, {"bandwidth_gbps", std::move(gbps)}};
}

ordered_json job_json(const JobResult& j) {
  ordered_json o;
  o["name"] = j.name;
  o["algorithm"] = j.algorithm;
  o["correct"] = j.correct;
  o["rounds"] = j.rounds;
  o["completed_rounds"] = j.completed_rounds;
  o["workers"] = j.workers;
  o["tensor_bytes"] = j.tensor_bytes;
  o["warmup_rounds"] = j.warmup_rounds;
  o["values_per_packet"] = j.values_per_packet;
  o["fragments"] = j.fragments;
  o["float_fragments"] = j.float_fragments;
  o["wrong_values"] = j.wrong_values;
  ordered_json aggregations = ordered_json::object();
  for (const auto& [name, count] : j.switch_aggregations) aggregations[name] = count;
  o["switch_aggregations"] = aggregations;
  o["ps_packets_received"] = j.ps_packets_received;
  o["in_network_share"] = j.in_network_share;
  o["retransmissions"] = j.retransmissions;
  o["fast_retransmits"] = j.fast_retransmits;
  o["requested_resends"] = j.requested_resends;
  o["timeouts"] = j.timeouts;
  o["final_requests"] = j.final_requests;
  o["collisions"] = j.collisions;
  o["table_marks"] = j.table_marks;
  o["reclaimed_aggregators"] = j.reclaimed_aggregators;
  o["seconds"] = j.seconds;
  o["algbw_gbps"] = j.algbw_gbps;
  o["round_end_seconds"] = j.round_end_seconds;
  if (j.replans > 0) o["replans"] = j.replans;
  o["error"] = j.error;
  if (!j.excluded_workers.empty()) {
    ordered_json excluded = ordered_json::array();
    for (const ExcludedWorker& e : j.excluded_workers) {
      excluded.push_back({{"host", e.host}, {"from_round", e.from_round}});
    }
    o["excluded_workers"] = std::move(excluded);
  }
  if (j.correct && !j.call_seconds.empty()) o["probe"] = probe_json(j);
  return o;
}

ordered_json link_json(const LinkResult& l) {
  ordered_json o;
  o["from"] = l.from;
  o["to"] = l.to;
  o["packets"] = l.packets;
  o["bytes"] = l.bytes;
  o["lost"] = l.lost;
  o["queue_drops"] = l.queue_drops;
  o["ecn_marked"] = l.ecn_marked;
  o["duplicated"] = l.duplicated;
  return o;
}

ordered_json flow_json(const FlowResult& f) {
  ordered_json o;
  o["from"] = f.from;
  o["to"] = f.to;
  o["start_seconds"] = f.start_seconds;
  o["bytes"] = f.bytes;
  o["seconds"] = f.seconds;
  o["goodput_gbps"] = f.goodput_gbps;
  o["interval_s"] = f.interval_s;
  o["goodput_mbps"] = f.goodput_mbps;
  return o;
}

// The simulator's speed. Wall-clock figures differ between equal runs: only ns3 reports them.
ordered_json simulator_json(const ScenarioResult& result) {
  ordered_json sim;
  sim["wall_seconds"] = result.wall_seconds;
  sim["link_packets"] = result.link_packets;
  sim["packets_per_wall_second"] =
      result.wall_seconds > 0 ? static_cast<double>(result.link_packets) / result.wall_seconds : 0.0;
  return sim;
}

// The time series recorded per job, every series_interval_s.
ordered_json series_json(const ScenarioResult& result) {
  ordered_json series;
  series["interval_s"] = result.series_interval_s;
  ordered_json per_job = ordered_json::array();
  for (const JobSeries& js : result.series) {
    ordered_json o;
    o["name"] = js.name;
    o["goodput_gbps"] = js.goodput_gbps;
    o["window_packets"] = js.window_packets;
    o["switch_aggregations"] = js.switch_aggregations;
    o["ps_packets"] = js.ps_packets;
    per_job.push_back(std::move(o));
  }
  series["jobs"] = std::move(per_job);
  return series;
}

}  // namespace

std::string to_json(const ScenarioResult& result) {
  ordered_json root;
  root["backend"] = result.backend;
  root["correct"] = all_correct(result);
  root["leaked_aggregators"] = result.leaked_aggregators;
  root["time_limit_reached"] = result.time_limit_reached;
  root["simulated_seconds"] = result.simulated_seconds;
  root["events"] = result.events;
  root["host_dropped_packets"] = result.host_dropped_packets;
  root["noise_packets"] = result.noise_packets;
  root["noise_packets_received"] = result.noise_packets_received;
  root["rejected_packets"] = result.rejected_packets;
  root["restart_rejected_packets"] = result.restart_rejected_packets;
  ordered_json jobs = ordered_json::array();
  for (const JobResult& j : result.jobs) jobs.push_back(job_json(j));
  root["jobs"] = std::move(jobs);
  ordered_json links = ordered_json::array();
  for (const LinkResult& l : result.links) links.push_back(link_json(l));
  root["links"] = std::move(links);
  ordered_json flows = ordered_json::array();
  for (const FlowResult& f : result.flows) flows.push_back(flow_json(f));
  root["flows"] = std::move(flows);
  if (result.backend == "ns3") root["simulator"] = simulator_json(result);
  if (!result.series.empty()) root["series"] = series_json(result);
  return root.dump(2) + "\n";
}

namespace {

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace

std::string to_summary(const ScenarioResult& result) {
  std::ostringstream out;
  out << "backend " << result.backend << ": " << result.jobs.size() << " job(s), ";
  // The process backends have no simulated clock: their job seconds are wall-clock.
  if (result.backend != "inproc" && result.backend != "ns3") {
    out << "real processes, wall-clock seconds, ";
  } else {
    out << format("%.6f", result.simulated_seconds) << " s simulated, " << result.events << " events, ";
    if (result.wall_seconds > 0) {
      out << format("%.2f s wall (%.0f link packets/s), ", result.wall_seconds,
                    static_cast<double>(result.link_packets) / result.wall_seconds);
    }
  }
  out << result.leaked_aggregators << " aggregators leaked" << (result.time_limit_reached ? ", time limit reached" : "")
      << "\n";
  // The algorithm column is as wide as the longest name in it (7 at least: "algo", "gloo_hd").
  int algo = 7;
  for (const JobResult& j : result.jobs) algo = std::max(algo, static_cast<int>(j.algorithm.size()));
  out << format("%-12s %-*s %-7s %7s %9s %6s %9s %8s %8s %8s %10s %10s\n", "job", algo, "algo", "correct", "rounds",
                "fragments", "float", "ps_pkts", "in-net", "retrans", "collide", "seconds", "algbw_Gbps");
  for (const JobResult& j : result.jobs) {
    const std::string rounds = std::to_string(j.completed_rounds) + "/" + std::to_string(j.rounds);
    out << format("%-12s %-*s %-7s %7s %9llu %6llu %9llu %7.1f%% %8llu %8llu %10.6f %10.2f\n", j.name.c_str(), algo,
                  j.algorithm.c_str(), j.correct ? "yes" : "NO", rounds.c_str(),
                  static_cast<unsigned long long>(j.fragments), static_cast<unsigned long long>(j.float_fragments),
                  static_cast<unsigned long long>(j.ps_packets_received), j.in_network_share * 100.0,
                  static_cast<unsigned long long>(j.retransmissions), static_cast<unsigned long long>(j.collisions),
                  j.seconds, j.algbw_gbps);
    std::string aggregations;
    for (const auto& [name, count] : j.switch_aggregations) {
      aggregations += (aggregations.empty() ? "" : ", ") + name + "=" + std::to_string(count);
    }
    if (!aggregations.empty()) out << "  aggregated in switches: " << aggregations << "\n";
    if (j.reclaimed_aggregators > 0) {
      out << "  aggregators reclaimed by switch timeouts: " << j.reclaimed_aggregators << "\n";
    }
    for (const ExcludedWorker& e : j.excluded_workers) {
      out << "  went on without " << e.host << " (crashed): rounds from " << e.from_round
          << " on are the other workers' sum\n";
    }
    if (!j.error.empty()) out << "  error: " << j.error << "\n";
  }
  const LinkTotals t = link_totals(result.links);
  // inproc counts ATP bytes; ns3 whole packets with their IPv4/UDP (or TCP) and PPP headers.
  out << "links: " << result.links.size() << " directions, " << t.packets << " packets, " << t.bytes
      << (result.backend == "ns3" ? " bytes, " : " ATP bytes, ") << t.lost << " lost, " << t.queue_drops
      << " queue drops, " << t.ecn_marked << " ECN-marked\n";
  for (const FlowResult& f : result.flows) {
    out << format("background tcp %s -> %s: %.1f MB in %.2f s, %.3f Gbit/s goodput\n", f.from.c_str(), f.to.c_str(),
                  static_cast<double>(f.bytes) / 1e6, f.seconds, f.goodput_gbps);
  }
  if (result.noise_packets > 0) {
    out << "noise: " << result.noise_packets << " packets sent, " << result.rejected_packets
        << " rejected by switches (malformed, unknown job or not admitted)\n";
    if (result.noise_packets_received != result.noise_packets) {
      out << "  of the noise, " << result.noise_packets_received
          << " packets reached a running switch (the others were lost on the way, duplicated or met a "
             "switch that was down)\n";
    }
  } else if (result.rejected_packets > 0) {
    out << "switches rejected " << result.rejected_packets << " packets (malformed, unknown job or not admitted)\n";
  }
  if (result.restart_rejected_packets > 0) {
    out << "  of the rejected, " << result.restart_rejected_packets
        << " were the jobs' own packets at a restarted switch before its jobs were installed again\n";
  }
  return out.str();
}

LinkTotals link_totals(const std::vector<LinkResult>& links) {
  LinkTotals t;
  for (const LinkResult& l : links) {
    t.packets += l.packets;
    t.bytes += l.bytes;
    t.lost += l.lost;
    t.queue_drops += l.queue_drops;
    t.ecn_marked += l.ecn_marked;
  }
  return t;
}

bool all_correct(const ScenarioResult& result) {
  return std::all_of(result.jobs.begin(), result.jobs.end(), [](const JobResult& j) { return j.correct; });
}

JobResult job_result_for(const ScenarioJob& job) {
  JobResult r;
  r.name = job.spec.name;
  r.algorithm = std::string(job.algorithm->name);
  r.rounds = job.rounds;
  r.workers = job.spec.workers.size();
  r.tensor_bytes = job.elements * sizeof(float);
  return r;
}

void derive_rates(JobResult& r) {
  if (r.seconds > 0) {
    const std::uint32_t timed = r.completed_rounds - std::min(r.completed_rounds, r.warmup_rounds);
    r.algbw_gbps = static_cast<double>(r.tensor_bytes) * 8.0 * timed / r.seconds / 1e9;
  }
  if (r.workers > 1 && r.fragments > 0) {
    // Of the packets the switches could have absorbed (all but one per fragment), the share
    // that never reached a PS.
    const double contributions = static_cast<double>(r.fragments) * static_cast<double>(r.workers);
    const double absorbed = contributions - static_cast<double>(r.ps_packets_received);
    const double absorbable = contributions - static_cast<double>(r.fragments);
    r.in_network_share = std::clamp(absorbed / absorbable, 0.0, 1.0);
  }
}

}  // namespace atp
