// `atp bench`: the software switch's packet rate per core on loopback (127.0.0.1), next to
// a raw UDP forwarder measured in the same run with the same batching; the overhead as a ratio.
#include <httplib.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "atp/control/control.h"
#include "atp/control/control_client.h"
#include "atp/control/stats.h"
#include "atp/daemons/switch_daemon.h"
#include "atp/io/event_loop.h"
#include "atp/io/udp_socket.h"
#include "atp/plan/plan.h"
#include "atp/wire.h"
#include "commands.h"

namespace atp::cli {
namespace {

using nlohmann::json;

constexpr int kWorkers = 4;         // the job's fan-in: one gradient from each completes an aggregate
constexpr std::size_t kBatch = 64;  // datagrams per sendmmsg / recvmmsg, as in the daemons
constexpr std::uint32_t kAggregators = 4096;
// Fragments in flight (sent, parameter packet not yet back at worker 0): two batches per worker,
// so the generator sends a new batch while the previous one is being forwarded, and the at most
// 512 gradients queued (about 4 MB of kernel memory at 1024 values) fit every receive buffer.
constexpr std::uint64_t kWindowFragments = 2 * kBatch;
constexpr auto kWarmUp = std::chrono::milliseconds(200);  // fills the window and the batches
// No parameter packet for this long: the generator counts the fragments in flight as lost and
// goes on, so that a lost datagram cannot stop the run.
constexpr auto kStall = std::chrono::milliseconds(100);
// Each configuration's time is split into this many slices, switch and raw alternating, so that
// a change in what else the machine runs affects both alike rather than only one of them.
constexpr int kSlices = 3;
constexpr int kPollMs = 1;  // how long an idle load thread waits before it checks for stop again
// The stand-ins' sockets, like the daemons' UDP ports and the loopback backend's hosts, send and
// receive runs of datagrams to one peer as one message.
constexpr UdpSocketOptions kSegmented{.segmentation_offload = true};

void wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, kPollMs);
}

// One switch "s0" with four workers and a PS on ports 0..4, and job 1 over them, planned like any
// other job (plan_network, plan_job); every host is a UDP socket of this process.
struct BenchNetwork {
  explicit BenchNetwork(std::uint16_t values) {
    SwitchConfig sc;
    sc.num_aggregators = kAggregators;
    sc.aggregator_width = 1024;  // both fragment sizes (62 and 1024) run on the same switch
    topology.switches = {{"s0", sc}};
    JobSpec spec;
    spec.name = "bench";
    spec.id = 1;
    for (int w = 0; w < kWorkers; ++w) {
      topology.hosts.push_back({"w" + std::to_string(w), "s0"});
      spec.workers.push_back("w" + std::to_string(w));
    }
    topology.hosts.push_back({"ps0", "s0"});
    spec.ps = {"ps0"};
    spec.values_per_packet = values;
    network = plan_network(topology);
    job = plan_job(network, spec);
    for (int w = 0; w < kWorkers; ++w) workers.emplace_back(SocketAddress::loopback(0), kSegmented);
  }
  BenchNetwork(const BenchNetwork&) = delete;  // network points into topology

  Topology topology;
  NetworkPlan network;
  JobPlan job;
  std::vector<UdpSocket> workers;  // ports 0..3
  UdpSocket ps{SocketAddress::loopback(0), kSegmented};
};

// The hosts' side of the run, on two threads. The generator sends every worker's gradient for
// fragments seq, seq+1, ... (aggregator index seq mod 4096) from that worker's socket, 64 per
// sendmmsg, keeping kWindowFragments in flight like a real worker's window; it drains the worker
// sockets and counts the parameter packets arriving at worker 0. The PS stand-in answers every
// packet worker 0's gradient went into (an aggregate from the switch; worker 0's own gradient
// from the raw forwarder) with the parameter packet a PS would send, which frees the aggregator
// at the switch and is multicast to the workers. Both modes thus move 5 datagrams per fragment
// in and 5 out of the forwarding thread: switch 4 gradients + 1 parameter in, 1 aggregate + 4
// multicast copies out; raw 4 + 1 in, 4 + 1 out.
class Load {
 public:
  Load(BenchNetwork& net, std::uint16_t values, const SocketAddress& forwarder) : net_(net), forwarder_(forwarder) {
    const std::vector<std::int32_t> ones(values, 1);
    for (int w = 0; w < kWorkers; ++w) {
      const WorkerConfig& wc = net.job.workers[w];
      Header& h = headers_[w];
      h.job = wc.job;
      h.node = wc.ps[0].node;
      h.bitmap = 1;
      h.fan_in = 1;
      h.src = wc.self;
      h.dst = wc.ps[0].ps;
      h.value_count = values;
      for (std::size_t i = 0; i < kBatch; ++i) packets_[w].push_back(build_packet(h, ones));
    }
    generator_ = std::thread([this] { guarded([this] { generate(); }); });
    ps_ = std::thread([this] { guarded([this] { answer(); }); });
  }
  ~Load() { join(); }

  // Ends both threads; throws std::runtime_error with the first error either of them hit.
  void stop() {
    join();
    std::lock_guard lock(error_mutex_);
    if (!error_.empty()) throw std::runtime_error(error_);
  }

  std::uint64_t lost_fragments() const { return lost_.load(std::memory_order_relaxed); }

 private:
  void join() noexcept {
    stop_ = true;
    if (generator_.joinable()) generator_.join();
    if (ps_.joinable()) ps_.join();
  }

  template <class Fn>
  void guarded(Fn fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::lock_guard lock(error_mutex_);
      if (error_.empty()) error_ = e.what();
    }
  }

  void generate() {
    UdpRecvBatch batch(kBatch);
    std::vector<UdpOutgoing> out(kBatch);
    std::uint64_t sent = 0, acked = 0, lost = 0;  // fragments
    Time last_progress = EventLoop::now();
    while (!stop_) {
      std::uint64_t arrived = 0;
      for (int w = 0; w < kWorkers; ++w) {
        do {
          const std::size_t n = net_.workers[w].recv_batch(batch);
          if (w == 0) arrived += n;  // every worker gets the multicast: count one copy
        } while (batch.full());
      }
      acked += arrived;
      lost = std::min(lost, sent - acked);  // a parameter packet counted lost came after all
      lost_.store(lost, std::memory_order_relaxed);
      const Time now = EventLoop::now();
      if (arrived > 0) last_progress = now;
      if (sent - acked - lost + kBatch <= kWindowFragments) {
        for (int w = 0; w < kWorkers; ++w) {
          Header h = headers_[w];
          for (std::size_t i = 0; i < kBatch; ++i) {
            h.seq = static_cast<Seq>(sent + i);
            h.aggregator_index = h.seq % kAggregators;
            encode_header(h, packets_[w][i]);
            out[i] = {forwarder_, packets_[w][i]};
          }
          net_.workers[w].send_batch(out);
        }
        sent += kBatch;
        continue;
      }
      if (now - last_progress > kStall) {
        lost = sent - acked;
        lost_.store(lost, std::memory_order_relaxed);
        last_progress = now;
      }
      wait_readable(net_.workers[0].fd());
    }
  }

  void answer() {
    UdpRecvBatch batch(kBatch);
    std::vector<UdpOutgoing> out;
    const PsConfig& ps = net_.job.ps[0];
    // The packets with worker 0's values: its own, or the sum of the switch above it.
    const std::uint16_t worker0 = net_.job.workers[0].ps[0].node, above = ps.tree.at(worker0);
    while (!stop_) {
      const std::size_t n = net_.ps.recv_batch(batch);
      if (n == 0) {
        wait_readable(net_.ps.fd());
        continue;
      }
      out.clear();
      for (std::size_t i = 0; i < n; ++i) {
        const std::span<std::uint8_t> bytes = batch.bytes(i);
        Header h;
        if (decode_header(bytes, h) != DecodeError::kOk || h.is_ack ||
            (h.node != worker0 && (above == 0 || h.node != above))) {
          continue;
        }
        Header p;  // the parameter packet: the values (the sum) stay, the header is the PS's
        p.is_ack = true;
        p.job = h.job;
        p.seq = h.seq;
        p.aggregator_index = h.aggregator_index;
        p.value_count = h.value_count;
        p.src = ps.self;
        p.dst = ps.multicast_group;
        encode_header(p, bytes);
        out.push_back({forwarder_, bytes});
      }
      net_.ps.send_batch(out);
    }
  }

  BenchNetwork& net_;
  SocketAddress forwarder_;  // the switch, or the raw forwarder
  std::array<Header, kWorkers> headers_;
  std::array<std::vector<std::vector<std::uint8_t>>, kWorkers> packets_;  // each worker's batch, seq rewritten per send
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> lost_{0};
  std::mutex error_mutex_;
  std::string error_;
  std::thread generator_;
  std::thread ps_;
};

// Cumulative counters of the measured forwarding thread at one instant.
struct Sample {
  Time wall{};
  double cpu_seconds = 0;  // that thread's CPU time
  std::uint64_t packets = 0;
  std::uint64_t gradients = 0;  // of `packets`, gradient packets
};

struct Rate {
  double wall_seconds = 0;
  double cpu_seconds = 0;
  std::uint64_t packets = 0;
  std::uint64_t gradients = 0;
  std::uint64_t lost_fragments = 0;
  std::uint64_t value_bytes = 0;  // per packet

  void add(const Rate& slice) {
    wall_seconds += slice.wall_seconds;
    cpu_seconds += slice.cpu_seconds;
    packets += slice.packets;
    gradients += slice.gradients;
    lost_fragments += slice.lost_fragments;
    value_bytes = slice.value_bytes;
  }
  double mpps_per_core() const { return static_cast<double>(packets) / cpu_seconds / 1e6; }
  double gbps_per_core() const { return static_cast<double>(gradients * value_bytes) * 8 / cpu_seconds / 1e9; }
  double wall_mpps() const { return static_cast<double>(packets) / wall_seconds / 1e6; }
  double busy() const { return cpu_seconds / wall_seconds; }
  json to_json() const {
    return {{"packets", packets},
            {"gradient_packets", gradients},
            {"cpu_seconds", cpu_seconds},
            {"wall_seconds", wall_seconds},
            {"mpps_per_core", mpps_per_core()},
            {"gbps_per_core", gbps_per_core()},
            {"wall_mpps", wall_mpps()},
            {"busy", busy()},
            {"lost_fragments", lost_fragments}};
  }
};

template <class SampleFn>
Rate measure(double seconds, std::uint16_t values, const Load& load, SampleFn sample) {
  std::this_thread::sleep_for(kWarmUp);
  const Sample a = sample();
  const std::uint64_t lost_before = load.lost_fragments();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const Sample b = sample();
  Rate r;
  r.wall_seconds = std::chrono::duration<double>(b.wall - a.wall).count();
  r.cpu_seconds = b.cpu_seconds - a.cpu_seconds;
  r.packets = b.packets - a.packets;
  r.gradients = b.gradients - a.gradients;
  r.lost_fragments = load.lost_fragments() - lost_before;
  r.value_bytes = 4u * values;
  if (r.packets == 0 || r.cpu_seconds <= 0) {
    throw std::runtime_error("no packet was forwarded in " + std::to_string(seconds) + " s");
  }
  return r;
}

// The software switch (SwitchDaemon, job installed over its HTTP control plane) on its own
// dataplane threads (`threads`; 0: as many as the switch chooses).
Rate measure_switch(std::uint16_t values, double seconds, std::uint32_t threads) {
  BenchNetwork net(values);
  SwitchDaemonConfig config;
  config.name = "s0";
  config.threads = threads;
  config.pipeline = net.topology.switches[0].config;
  auto add_port = [&config](const UdpSocket& host) {
    SwitchPortConfig port;  // no rate limit, buffer limit or faults: nothing but the switch's own cost
    port.peer = host.local_endpoint();
    config.ports.push_back(port);
  };
  for (const UdpSocket& w : net.workers) add_port(w);
  add_port(net.ps);
  for (const auto& [dst, port] : net.network.routes.at("s0")) config.routes.emplace_back(dst, port);
  config.access.operator_token = control::random_token();  // only this process talks to it
  SwitchDaemon daemon(config);
  daemon.start();

  httplib::Client client =
      control::client(SocketAddress::parse(daemon.control_endpoint()), {config.access.operator_token, ""});
  const httplib::Result installed =
      client.Post("/jobs", control::to_json(net.job.switches.at("s0")), "application/json");
  if (!installed || installed->status != 200) {
    throw std::runtime_error("the benchmark switch refused its job: " +
                             (installed ? installed->body : httplib::to_string(installed.error())));
  }

  Load load(net, values, daemon.data_endpoint());
  control::SwitchStats stats;
  const Rate rate = measure(seconds, values, load, [&] {
    // The counters first: the clocks are read right after the dataplane thread answered, not
    // across the round trip to it.
    stats = daemon.stats();
    return Sample{EventLoop::now(), daemon.dataplane_cpu_seconds(), stats.pipeline.packets,
                  stats.jobs.at(0).counters.aggregations};
  });
  load.stop();
  daemon.stop();
  if (stats.jobs.at(0).counters.completions == 0) {
    throw std::runtime_error("the benchmark switch completed no aggregate; its counters: " + control::to_json(stats));
  }
  return rate;
}

// The null switch: the same event loop and batching as the switch daemon (up to 8 recvmmsg of 64
// per wake-up), every datagram sent straight on with one sendmmsg per batch; no ATP processing.
// Parameter packets (from the PS) go to worker 0, everything else to the PS.
class RawForwarder {
 public:
  RawForwarder(const SocketAddress& ps, const SocketAddress& worker0) : ps_(ps), worker0_(worker0) {
    loop_.add_readable(socket_.fd(), [this] { on_readable(); });
    thread_ = std::thread([this] { loop_.run(); });
  }
  ~RawForwarder() {
    loop_.stop();
    thread_.join();
  }

  SocketAddress endpoint() const { return socket_.local_endpoint(); }
  Sample sample() {
    const std::optional<double> cpu = thread_cpu_seconds(thread_);
    if (!cpu) throw std::runtime_error("cannot read the CPU clock of the forwarding thread");
    return {EventLoop::now(), *cpu, packets_.load(std::memory_order_relaxed),
            gradients_.load(std::memory_order_relaxed)};
  }

 private:
  void on_readable() {
    for (int round = 0; round < 8; ++round) {
      const std::size_t n = socket_.recv_batch(batch_);
      if (n == 0) break;
      std::uint64_t gradients = 0;
      out_.resize(n);  // runs received whole (segmentation offload) give more datagrams than messages
      for (std::size_t i = 0; i < n; ++i) {
        const bool from_ps = batch_.from(i) == ps_;
        gradients += from_ps ? 0 : 1;
        out_[i] = {from_ps ? worker0_ : ps_, batch_.bytes(i)};
      }
      socket_.send_batch(out_);
      packets_.store(packets_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
      gradients_.store(gradients_.load(std::memory_order_relaxed) + gradients, std::memory_order_relaxed);
      if (!batch_.full()) break;
    }
  }

  SocketAddress ps_;
  SocketAddress worker0_;
  UdpSocket socket_{SocketAddress::loopback(0), kSegmented};
  EventLoop loop_;
  UdpRecvBatch batch_{kBatch};
  std::vector<UdpOutgoing> out_ = std::vector<UdpOutgoing>(kBatch);
  std::atomic<std::uint64_t> packets_{0};  // written by the loop thread only
  std::atomic<std::uint64_t> gradients_{0};
  std::thread thread_;
};

Rate measure_raw(std::uint16_t values, double seconds) {
  BenchNetwork net(values);
  RawForwarder forwarder(net.ps.local_endpoint(), net.workers[0].local_endpoint());
  Load load(net, values, forwarder.endpoint());
  const Rate rate = measure(seconds, values, load, [&] { return forwarder.sample(); });
  load.stop();
  return rate;
}

// The dataplane threads a switch of the benchmark's runs with `threads` (0: its own choice).
std::uint32_t switch_threads(std::uint32_t threads) {
  BenchNetwork net(kDefaultValuesPerPacket);
  SwitchDaemonConfig config;
  config.name = "s0";
  config.pipeline = net.topology.switches[0].config;
  config.threads = threads;
  return SwitchDaemon(config).dataplane_threads();
}

int run_bench(double seconds, std::uint32_t threads, bool as_json) {
  json doc;
  doc["backend"] = "loopback";
  doc["address"] = "127.0.0.1";
  doc["seconds"] = seconds;
  doc["slices"] = kSlices;
  doc["warm_up_seconds"] = std::chrono::duration<double>(kWarmUp).count();
  doc["batch"] = kBatch;
  doc["window_fragments"] = kWindowFragments;
  doc["results"] = json::array();
  try {
    doc["switch_threads"] = switch_threads(threads);
    for (const std::uint16_t values : {kDefaultValuesPerPacket, std::uint16_t{1024}}) {
      Rate sw, raw;
      for (int slice = 0; slice < kSlices; ++slice) {
        sw.add(measure_switch(values, seconds / kSlices, threads));
        raw.add(measure_raw(values, seconds / kSlices));
      }
      doc["results"].push_back({{"values", values},
                                {"datagram_bytes", packet_size(values)},
                                {"switch", sw.to_json()},
                                {"raw", raw.to_json()},
                                {"ratio", sw.mpps_per_core() / raw.mpps_per_core()}});
    }
  } catch (const std::exception& e) {
    std::cerr << "atp bench: " << e.what() << "\n";
    return kExitFailed;
  }
  if (as_json) {
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
  }
  std::printf(
      "atp bench: loopback backend (127.0.0.1), %.1f s per measurement (%d alternating slices, each after a %.1f s\n"
      "warm-up), %zu datagrams per sendmmsg/recvmmsg, %llu fragments of 4 workers in flight; the switch on\n"
      "%d dataplane thread(s), the raw forwarder on one\n\n",
      seconds, kSlices, std::chrono::duration<double>(kWarmUp).count(), kBatch,
      static_cast<unsigned long long>(kWindowFragments), doc["switch_threads"].get<int>());
  std::printf("%6s %9s | %-33s | %-33s | %s\n", "", "", "software switch", "raw UDP forwarder", "switch/");
  std::printf("%6s %9s | %6s %7s %10s %6s | %6s %7s %10s %6s | %s\n", "values", "datagram", "Mpps", "Gbit/s",
              "wall Mpps", "busy", "Mpps", "Gbit/s", "wall Mpps", "busy", "raw");
  for (const json& r : doc["results"]) {
    auto row = [](const json& m) {
      char text[64];
      std::snprintf(text, sizeof text, "%6.3f %7.2f %10.3f %5.0f%%", m["mpps_per_core"].get<double>(),
                    m["gbps_per_core"].get<double>(), m["wall_mpps"].get<double>(), 100 * m["busy"].get<double>());
      return std::string(text);
    };
    std::printf("%6d %7d B | %s | %s | %.2f\n", r["values"].get<int>(), r["datagram_bytes"].get<int>(),
                row(r["switch"]).c_str(), row(r["raw"]).c_str(), r["ratio"].get<double>());
  }
  std::printf(
      "\nMpps and Gbit/s are per core: datagrams the forwarding threads handled, and gradient values they received,\n"
      "per second of those threads' CPU time. wall Mpps: per second of the run; busy: those threads' CPU time per\n"
      "second of the run (above 100%%: more than one core).\n");
  return kExitOk;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("bench",
                                "benchmarks: `atp bench switch` (software switch vs raw UDP forwarding), "
                                "`atp bench allreduce` (allreduce algbw per size, nccl-tests style)");
  c.app->require_subcommand(1);
  CLI::App* sw =
      c.app->add_subcommand("switch", "measure the software switch's packets/s per core against raw UDP forwarding");
  sw->footer(
      "In one process on 127.0.0.1: a software switch (the `atp switch` daemon, one ATP job with 4 workers\n"
      "and a PS, fan-in 4) on its dataplane threads, a generator sending the 4 workers' gradient packets\n"
      "(64 per sendmmsg, a window of fragments in flight), and a PS stand-in answering every aggregate with\n"
      "its parameter packet, which frees the aggregator and is multicast back to the workers. Then the same\n"
      "load through a raw forwarder: the same event loop and recvmmsg/sendmmsg batches of 64, every\n"
      "datagram sent straight on. Both forwarding threads move 5 datagrams in and 5 out per fragment,\n"
      "and the two run in alternating slices, each on fresh sockets after a short warm-up.\n"
      "For 62-value (284 B) and 1024-value (4132 B) packets it reports per core (per second of the\n"
      "forwarding threads' CPU time) Mpps and Gbit/s of gradient values, the wall-clock rate, and switch/raw.");
  auto seconds = std::make_shared<double>(2.0);
  auto as_json = std::make_shared<bool>(false);
  sw->add_option("--seconds", *seconds,
                 "measured time per configuration (4 of them), in alternating slices after warm-ups")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  auto threads = std::make_shared<std::uint32_t>(0);
  sw->add_option("--threads", *threads,
                 "the switch's dataplane threads (its `threads:` key); 0: what the switch chooses on this machine")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  sw->add_flag("--json", *as_json, "print the figures as JSON instead of a table");
  auto allreduce_run = std::make_shared<std::function<int()>>();
  CLI::App* allreduce = add_bench_allreduce_command(*c.app, *allreduce_run);
  c.run = [=] { return allreduce->parsed() ? (*allreduce_run)() : run_bench(*seconds, *threads, *as_json); };
  return c;
}

}  // namespace atp::cli
