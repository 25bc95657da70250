// The simulated runner's nodes around the protocol core: a switch (its pipeline, and what a restart
// does to it), an end host (the worker and PS endpoints of every job placed on it), a noise
// source. Internal to src/backends/simulated/.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "atp/endpoint.h"
#include "atp/ps.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"
#include "atp/sim/simulated_network.h"
#include "atp/switch.h"

namespace atp::simulated {

using sim::NodeId;

// A host's single uplink: whatever an endpoint sends leaves on port 0.
class HostUplink final : public PacketSink {
 public:
  explicit HostUplink(PortSink& ports) : ports_(ports) {}
  void send(std::span<const std::uint8_t> packet) override { ports_.send(0, packet); }

 private:
  PortSink& ports_;
};

// The simulated time of the last packet or timer any node handled: when the run really ended
// (Network::run_until leaves its clock at the limit).
struct Activity {
  Time last{};
  void saw(Time now) { last = std::max(last, now); }
};

// A switch's control-plane state (routes, multicast groups, job entries) in the order it was
// installed, kept so that a restarted switch can be given the same state again.
struct SwitchSetup {
  struct Job {
    Address group = 0;
    std::vector<PortId> multicast_ports;
    SwitchJobEntry entry;
  };
  std::vector<std::pair<Address, PortId>> routes;
  std::vector<Job> jobs;

  void install(SwitchPipeline& pipeline) const {
    for (const auto& [dst, port] : routes) pipeline.add_route(dst, port);
    for (const Job& job : jobs) {
      pipeline.add_multicast_group(job.group, job.multicast_ports);
      pipeline.install_job(job.entry);
    }
  }
};

// A switch process: its pipeline, and what a restart (Scenario::restarts) does to it. While down
// it drops every packet that arrives; packets it had already sent stay in its egress queues and
// on the links and are still delivered (they left the switch before its process died).
class SwitchNode final : public sim::Node {
 public:
  SwitchNode(const SwitchConfig& config, Activity& activity)
      : pipeline_(std::make_unique<SwitchPipeline>(config)), activity_(activity) {}
  void on_packet(PortId port, std::span<std::uint8_t> packet, Time now, PortSink& out) override {
    activity_.saw(now);
    if (state_ == State::kDown) return;
    if (noise_ports.contains(port)) ++noise_received;
    pipeline_->process(port, packet, now, out);
  }
  void on_timeout(Time now, PortSink& out) override {
    activity_.saw(now);
    pipeline_->on_timeout(now, out);
  }
  Time next_deadline() const override { return state_ == State::kDown ? kNever : pipeline_->next_deadline(); }

  // The process dies at `now` with all its state and stays down until now + down, then comes back
  // with a fresh pipeline given `setup` again (by restart() itself when down is zero, else by
  // come_back(), which the caller schedules). A restart while down extends the down time.
  void restart(Time now, Duration down) {
    retired_counters_ += pipeline_->counters();
    for (const auto& [job, c] : pipeline_->all_job_counters()) retired_job_counters_[job] += c;
    pipeline_ = std::make_unique<SwitchPipeline>(pipeline_->config());
    state_ = State::kDown;
    down_until_ = std::max(down_until_, now + down);
    come_back(now);
  }
  void come_back(Time now) {
    if (state_ != State::kDown || now < down_until_) return;
    setup.install(*pipeline_);
    state_ = State::kUp;
  }

  SwitchPipeline& pipeline() { return *pipeline_; }
  // Counters over the switch's whole life: the running pipeline's plus those restarts threw away.
  SwitchCounters counters() const {
    SwitchCounters sum = retired_counters_;
    sum += pipeline_->counters();
    return sum;
  }
  SwitchJobCounters job_counters(JobId job) const {
    SwitchJobCounters sum = pipeline_->job_counters(job);
    const auto it = retired_job_counters_.find(job);
    if (it != retired_job_counters_.end()) sum += it->second;
    return sum;
  }

  SwitchSetup setup;
  // Ports of noise hosts, and the packets that arrived on them while the switch was up: the
  // noise that reached a running switch (ScenarioResult::noise_packets_received).
  std::set<PortId> noise_ports;
  std::uint64_t noise_received = 0;

 private:
  enum class State { kUp, kDown };

  std::unique_ptr<SwitchPipeline> pipeline_;
  Activity& activity_;
  State state_ = State::kUp;
  Time down_until_{};
  SwitchCounters retired_counters_;
  std::map<JobId, SwitchJobCounters> retired_job_counters_;
};

// A noise source (Scenario::noise): bad packets at a fixed rate from `from` until `until`, or
// until no job is running any more, so that it cannot keep the simulation alive on its own.
class NoiseSender {
 public:
  NoiseSender(const NoiseSource& source, std::uint64_t seed, scenario_inputs::NoiseTargets targets,
              std::function<bool()> jobs_running)
      : source_(source), seed_(seed), targets_(std::move(targets)), jobs_running_(std::move(jobs_running)) {}

  // The time of the next packet; kNever once the source has stopped.
  Time next_deadline() const {
    if (stopped_) return kNever;
    const Time next = send_time(sent_);
    return source_.until && next >= Time(*source_.until) ? kNever : next;
  }
  // Sends the packets due at `now`. Returns whether it sent any.
  bool on_timeout(Time now, PacketSink& out) {
    bool sent_any = false;
    while (next_deadline() <= now) {
      if (!jobs_running_()) {
        stopped_ = true;
        break;
      }
      out.send(scenario_inputs::noise_packet(seed_, sent_, targets_));
      ++sent_;
      sent_any = true;
    }
    return sent_any;
  }
  std::uint64_t sent() const { return sent_; }

 private:
  // Packet n leaves at from + n / rate: computed from n rather than accumulated, so no drift.
  Time send_time(std::uint64_t n) const {
    return Time(source_.from) + Duration(static_cast<Duration::rep>(std::llround(n * 1e9 / source_.rate_pps)));
  }

  const NoiseSource& source_;
  std::uint64_t seed_;
  scenario_inputs::NoiseTargets targets_;
  std::function<bool()> jobs_running_;
  std::uint64_t sent_ = 0;
  bool stopped_ = false;
};

class RoundDriver;

// One end host: the worker and PS endpoints of every job placed on it. Parameter packets and
// Rina's packets go to the job's worker, gradient packets to the job's PS. A host may also be a noise source. A
// crashed host ignores everything and sends nothing.
class HostNode final : public sim::Node {
 public:
  HostNode(std::string host_name, Activity& activity) : name(std::move(host_name)), activity_(activity) {}

  void on_packet(PortId, std::span<std::uint8_t> packet, Time now, PortSink& out) override;
  void on_timeout(Time now, PortSink& out) override;
  Time next_deadline() const override;
  // Its NIC's queue refused a packet: every worker here with fragments in flight slows down, as
  // a worker process on a real host does when its socket's send fails (the host's link is a
  // bottleneck that no switch marks).
  void on_egress_full(Time now) override;

  struct LocalWorker {
    std::unique_ptr<Endpoint> endpoint;
    RoundDriver* driver;
  };
  std::string name;
  std::map<JobId, LocalWorker> workers;
  std::map<JobId, PsEndpoint> ps;
  std::vector<NoiseSender> noise;
  bool crashed = false;
  Time crash_time{};
  // What the control plane does when this host crashes (a Rina job's ring re-forms without it),
  // run right after the crash: it sees the process gone at once, as a launcher sees its child exit.
  std::vector<std::function<void(Time)>> on_crash;
  std::optional<std::uint32_t> crash_round;  // crash when a worker here would start this round
  std::uint64_t dropped = 0;                 // undecodable, or for a job with no endpoint here

 private:
  Activity& activity_;
};

// Stops `host` at `now` (a scenario crash): it ignores everything and sends nothing from then on,
// and its on_crash hooks run at once.
void crash_host(HostNode& host, Time now, sim::Network& network, sim::NodeId node);

}  // namespace atp::simulated
