// The worker process of the process backends: the job's allreduce (an atp::Communicator, or a host
// collective over TCP) running a scenario job's rounds on seeded inputs and checking every result,
// reporting on stdout (worker_process.h).
#include "worker_process.h"

#include <condition_variable>
#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "atp/backends/processes.h"
#if ATP_WITH_GLOO
#include "atp/baselines/gloo_allreduce.h"
#endif
#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/cluster/protocols.h"
#include "atp/collectives/communicator.h"
#include "atp/control/control.h"
#include "atp/io/config_file.h"
#include "atp/io/event_loop.h"
#include "atp/plink/aggregation.h"
#include "atp/scenario/inputs.h"
#include "atp/scenario/scenario.h"

namespace atp::worker_process {
namespace {

using nlohmann::json;

// endl: the parent reads line by line. The lock: an Alive's thread prints too.
void print(const json& line) {
  static std::mutex m;
  const std::lock_guard lock(m);
  std::cout << line.dump() << std::endl;
}

// While it lives, an "alive" line every `every` (0: none): the runner fails a worker that keeps
// the job's others waiting at a round's barrier only once it has not heard from it for the job's
// progress timeout, and a worker's own work between rounds may take longer than that (a large
// job's answer, 8 workers on 2 cores) while a stopped or hung process says nothing.
class Alive {
 public:
  explicit Alive(Duration every) {
    if (every <= Duration::zero()) return;
    thread_ = std::jthread([every](const std::stop_token& stop) {
      std::mutex m;
      std::condition_variable_any wake;
      std::unique_lock lock(m);
      while (!wake.wait_for(lock, stop, every, [] { return false; })) {
        if (stop.stop_requested()) return;
        print({{"event", "alive"}});
      }
    });
  }

 private:
  std::jthread thread_;  // stopped and joined first thing in the destructor
};

// Setup (rendezvous, connections) of the TCP collectives is bounded by this; so is any stall.
constexpr auto kCollectiveTimeout = std::chrono::seconds(10);

// The worker's allreduce: a Communicator on its protocol's endpoint, or a host collective over TCP.
// Throws std::invalid_argument for a spec this worker cannot run.
std::unique_ptr<Allreduce> make_collective(const Algorithm& algorithm, const WorkerSpec& spec) {
  if (algorithm.protocol.empty() != spec.config.is_null()) {
    throw std::invalid_argument(std::string(spec.config.is_null() ? "the spec has no" : "the spec has a") +
                                " worker config, which is not one for " + std::string(algorithm.name));
  }
  if (!algorithm.protocol.empty()) {
    return std::make_unique<Communicator>(protocol(algorithm.protocol).endpoint(spec.config), spec.local, spec.uplink);
  }
  if (spec.ranks.size() != spec.workers) throw std::invalid_argument("the spec lists the wrong number of ranks");
  const int rank = static_cast<int>(spec.worker);
  const int size = static_cast<int>(spec.workers);
  switch (algorithm.runtime) {
    case AlgorithmRuntime::kProtocol:
      break;  // above
    case AlgorithmRuntime::kSchedule: {
      std::vector<std::string> addresses;
      for (const SocketAddress& e : spec.ranks) addresses.push_back(e.to_string());
      ScheduleBuilder build = [&algorithm, racks = spec.racks, c = spec.connections](int r, int n, std::size_t count) {
        return algorithm.schedule(r, n, count, racks, c);
      };
      return std::make_unique<TcpScheduleAllreduce>(std::string(algorithm.name), std::move(build), rank, size,
                                                    addresses, kCollectiveTimeout);
    }
    case AlgorithmRuntime::kGloo: {
#if ATP_WITH_GLOO
      GlooAllreduceConfig c;
      c.rank = rank;
      c.size = size;
      c.local_ip = format_address(spec.ranks[spec.worker].ip);
      c.store_dir = spec.store_dir;
      c.run_prefix = "job" + std::to_string(spec.job);
      c.algorithm = parse_gloo_algorithm(algorithm.variant);
      c.timeout = kCollectiveTimeout;
      return std::make_unique<GlooAllreduce>(c);
#else
      break;  // the runner refuses such jobs before it starts a worker (cannot_run)
#endif
    }
  }
  throw std::invalid_argument(cannot_run(algorithm, loopback_backend().algorithm_support()));
}

// One worker's run of its job's rounds (run_worker_process): its collective, each round's
// input and reference answer, the exact check, and the runner's answers on stdin.
class WorkerRun {
 public:
  // Throws std::invalid_argument for a spec this worker cannot run.
  WorkerRun(WorkerSpec& spec, const Algorithm& algorithm, WorkerResult& result)
      : spec_(spec),
        algorithm_(algorithm),
        r_(result),
        collective_(make_collective(algorithm, spec)),
        comm_(dynamic_cast<Communicator*>(collective_.get())),
        rank_(static_cast<int>(spec.worker)),
        size_(static_cast<int>(spec.workers)),
        buffer_(spec.elements),
        // A protocol that re-forms (Rina's) goes on without workers that are gone ("reform" lines).
        reforms_(!algorithm.protocol.empty() && protocol(algorithm.protocol).reformed != nullptr),
        values_per_packet_(comm_ != nullptr ? comm_->values_per_packet() : 0),
        // Endpoints that pick their exponents (Rina's): their sums are exact integers at those
        // exponents, which must hold every fragment's largest value to float32's precision (no
        // float path).
        picks_(comm_ != nullptr && comm_->picks_exponents()),
        fragments_(static_cast<std::uint32_t>(
            picks_ ? fragment_count(spec.elements, static_cast<std::uint16_t>(values_per_packet_)) : 0)),
        integer_path_(picks_ ? fragments_ : 0, false) {
    if (algorithm.timed_calls != nullptr) timed_calls_ = dynamic_cast<TcpScheduleAllreduce*>(collective_.get());
  }

  // Runs the job's rounds into the result; false: the runner called the run off (then no result
  // line is due).
  bool run() {
    print({{"event", "ready"}});
    if (!std::getline(std::cin, go_) || go_ != "go") return false;
    std::this_thread::sleep_for(spec_.start);
    // PLink's Autotune: the plan this worker runs, from the master shares the runner sends with "go".
    if (spec_.autotune) {
      tuned_ = dynamic_cast<TcpScheduleAllreduce*>(collective_.get());
      if (tuned_ == nullptr) throw std::invalid_argument("autotune needs a plink or plink_fa job");
      plan_ = plan_for(plink::equal_shares(size_));
    }
    for (std::uint32_t round = 0; round < spec_.rounds && r_.error.empty();) {
      if (spec_.crash_round && round >= *spec_.crash_round) {
        r_.crashed = true;
        r_.error = "host crashed (at_round " + std::to_string(*spec_.crash_round) + ") after " +
                   std::to_string(r_.completed_rounds) + " of " + std::to_string(spec_.rounds) + " rounds";
        break;
      }
      const Step step = timed_calls_ != nullptr ? timed_round(round) : checked_round(round);
      if (step == Step::kCalledOff) return false;
      if (step == Step::kDone) ++round;
    }
    if (r_.error.empty()) collective_->close();
    if (comm_ != nullptr) {
      EndpointCounts counts = left_behind_;
      counts += comm_->counts();
      r_.retransmissions = counts.retransmissions;
      r_.fast_retransmits = counts.fast_retransmits;
      r_.requested_resends = counts.requested_resends;
      r_.timeouts = counts.timeouts;
      r_.final_requests = counts.final_requests;
    }
    return true;
  }

 private:
  // How a round ended: done (or failed, with the result's error set), to be run again from the
  // round a re-form names, or called off by the runner.
  enum class Step { kDone, kAgain, kCalledOff };

  Schedule plan_for(const plink::MasterShares& shares) const {
    return plink::two_level_schedule(rank_, size_, spec_.elements, spec_.racks, shares, plink::kDefaultChunkElements,
                                     spec_.connections);
  }

  void reference_at(std::uint32_t round, std::span<const std::int16_t> exponents) {
    scenario_inputs::make_reference_at(spec_.seed, spec_.job, spec_.workers, round, spec_.elements, spec_.magnitude,
                                       values_per_packet_, exponents, ref_, excluded_);
  }

  // The runner's answer to a "wait" or "failed" line, in go_; false: the run was called off. One
  // to a worker of a protocol that re-forms may be "reform {...}": then its job is built anew,
  // and `round` is where it goes on.
  bool answer(const char* event, std::uint32_t& round, const std::string& error) {
    json line{{"event", event}, {"round", round}};
    if (reforms_) line["next_seq"] = comm_->resume_seq();
    if (!error.empty()) line["error"] = error;
    print(line);
    if (!std::getline(std::cin, go_)) return false;
    if (!reforms_ || !go_.starts_with("reform ")) return true;
    const Reform reform = reform_from_json(go_.substr(std::strlen("reform ")));
    left_behind_ += comm_->counts();
    collective_.reset();  // its socket's port is the new job's
    spec_.config = reform.config;
    collective_ = make_collective(algorithm_, spec_);
    comm_ = dynamic_cast<Communicator*>(collective_.get());
    excluded_ = reform.excluded;
    round = reform.round;
    r_.completed_rounds = std::min(r_.completed_rounds, round);
    return true;
  }

  // A measurement (probe): this round's calls one after the other, each timed; nothing to check.
  Step timed_round(std::uint32_t round) {
    const std::vector<Schedule> calls = algorithm_.timed_calls(rank_, size_, spec_.elements, round);
    if (!answer("wait", round, "") || go_ != "go") return Step::kCalledOff;
    // Pairs finish a round at their paths' pace and wait for the slowest at the next barrier,
    // which fails a worker not heard from for the progress timeout: this one says it is alive.
    const Alive alive(spec_.alive_every);
    std::vector<std::int64_t>& times = r_.call_ns.emplace_back();
    for (const Schedule& call : calls) {
      const Time t0 = EventLoop::now();
      timed_calls_->run(call, buffer_);
      times.push_back((EventLoop::now() - t0).count());
      r_.allreduce_ns += times.back();
    }
    ++r_.completed_rounds;
    print({{"event", "round"}, {"round", round}});
    return Step::kDone;
  }

  // The input and the answer come before the round's barrier: building the answer draws every
  // worker's input, and that must not run beside another worker's timed allreduce. Then every
  // worker of the job starts the round together, as nccl-tests' ranks do.
  void prepare(std::uint32_t round) {
    const Alive alive(spec_.alive_every);
    if (round > 0) std::this_thread::sleep_for(spec_.compute);
    scenario_inputs::generate_input(scenario_inputs::input_seed(spec_.seed, spec_.job, spec_.worker, round),
                                    spec_.magnitude, buffer_);
    if (picks_) {
      // At the exponents its first pass uses; a redo pass (rare) changes some, and then the
      // reference is made again after the round.
      reference_at(round, comm_->next_exponents(fragments_));
    } else {
      scenario_inputs::make_reference(spec_.seed, spec_.job, spec_.workers, round, spec_.elements, spec_.magnitude,
                                      spec_.scale, values_per_packet_, ref_);
    }
  }

  // A round of the job's allreduce, checked against its reference.
  Step checked_round(std::uint32_t& round) {
    prepare(round);
    if (!answer("wait", round, "")) return Step::kCalledOff;
    if (go_.starts_with("reform ")) return Step::kAgain;  // re-formed: from its round again
    if (tuned_ != nullptr && go_.starts_with("go ")) {
      plan_ = plan_for(shares_from_json(go_.substr(3)));
      go_ = "go";
    }
    if (go_ != "go") return Step::kCalledOff;
    const Time t0 = EventLoop::now();
    try {
      if (tuned_ != nullptr) {
        tuned_->run(plan_, buffer_);
      } else {
        collective_->allreduce(buffer_);
      }
    } catch (const std::exception& e) {
      // A worker gone leaves a job that re-forms without progress; the runner re-forms it or stops.
      if (!reforms_) throw;
      if (round >= spec_.warmup_rounds) r_.allreduce_ns += (EventLoop::now() - t0).count();  // time lost counts
      if (!answer("failed", round, e.what())) return Step::kCalledOff;
      if (go_.starts_with("reform ")) return Step::kAgain;
      throw;  // "stop": the failure is the job's
    }
    if (round >= spec_.warmup_rounds) r_.allreduce_ns += (EventLoop::now() - t0).count();
    const Alive alive(spec_.alive_every);
    if (const std::string wrong = check(round); !wrong.empty()) {
      r_.error = "round " + std::to_string(round) + ": " + wrong;
      return Step::kDone;
    }
    ++r_.completed_rounds;
    json done{{"event", "round"}, {"round", round}};
    if (tuned_ != nullptr) {
      json& links = done["links"] = json::array();
      for (const auto& l : tuned_->last_call_links())
        links.push_back(json::array({l.peer, l.lane, l.bytes, l.active_s, l.round_trip_s}));
    }
    print(done);
    return Step::kDone;
  }

  // What is wrong with the round's result; "" when it is right. ATP's result is exact (or, per
  // fragment, the float32 overflow path's), Rina's exact; a float32 collective's sum is held to
  // the float path's rounding bound everywhere.
  std::string check(std::uint32_t round) {
    std::string wrong;
    if (picks_) {
      if (const std::vector<std::int16_t> used = comm_->result_exponents(); used != ref_.exponents) {
        reference_at(round, used);
      }
      wrong = scenario_inputs::unresolved_fragment(ref_, values_per_packet_);
    }
    std::uint64_t floats = 0;
    if (wrong.empty()) {
      wrong = scenario_inputs::check_result(ref_, buffer_, integer_path_, values_per_packet_, &floats,
                                            algorithm_.check == ResultCheck::kFloat32Rounding, &r_.wrong_values);
    }
    if (comm_ != nullptr) r_.float_fragments += floats;
    return wrong;
  }

  WorkerSpec& spec_;
  const Algorithm& algorithm_;
  WorkerResult& r_;
  std::unique_ptr<Allreduce> collective_;
  Communicator* comm_;  // collective_, when it runs a protocol
  const int rank_, size_;
  std::vector<float> buffer_;
  const bool reforms_;
  const std::size_t values_per_packet_;
  const bool picks_;
  const std::uint32_t fragments_;
  const std::vector<bool> integer_path_;
  TcpScheduleAllreduce* timed_calls_ = nullptr;  // collective_, when its algorithm times calls (a probe)
  TcpScheduleAllreduce* tuned_ = nullptr;        // collective_, when Autotune plans it
  Schedule plan_;                                // Autotune's plan for the next round
  scenario_inputs::RoundReference ref_;
  std::vector<std::uint32_t> excluded_;  // workers the job went on without (a "reform" line)
  EndpointCounts left_behind_;           // the counts of the jobs it left
  std::string go_;                       // the runner's last answer
};

}  // namespace

std::string to_json(const WorkerSpec& s) {
  json ranks = json::array();
  for (const SocketAddress& r : s.ranks) ranks.push_back(r.to_string());
  return json{{"algorithm", s.algorithm},
              {"job", s.job},
              {"scale", s.scale},
              {"config", s.config},
              {"local", s.local.to_string()},
              {"uplink", s.uplink ? json(s.uplink->to_string()) : json()},
              {"ranks", ranks},
              {"racks", s.racks},
              {"connections", s.connections},
              {"autotune", s.autotune},
              {"store_dir", s.store_dir},
              {"seed", s.seed},
              {"worker", s.worker},
              {"workers", s.workers},
              {"elements", s.elements},
              {"rounds", s.rounds},
              {"warmup_rounds", s.warmup_rounds},
              {"magnitude", s.magnitude},
              {"compute_ns", s.compute.count()},
              {"start_ns", s.start.count()},
              {"alive_every_ns", s.alive_every.count()},
              {"crash_round", s.crash_round ? json(*s.crash_round) : json()}}
      .dump();
}

WorkerSpec spec_from_json(const std::string& text) {
  const json j = json::parse(text);
  WorkerSpec s;
  s.algorithm = j.at("algorithm").get<std::string>();
  s.job = j.at("job").get<JobId>();
  s.scale = j.at("scale").get<double>();
  s.config = j.at("config");
  s.local = SocketAddress::parse(j.at("local").get<std::string>());
  if (!j.at("uplink").is_null()) s.uplink = SocketAddress::parse(j["uplink"].get<std::string>());
  for (const json& r : j.at("ranks")) s.ranks.push_back(SocketAddress::parse(r.get<std::string>()));
  s.racks = j.at("racks").get<RankGroups>();
  s.connections = j.at("connections").get<int>();
  s.autotune = j.at("autotune").get<bool>();
  s.store_dir = j.at("store_dir").get<std::string>();
  s.seed = j.at("seed").get<std::uint64_t>();
  s.worker = j.at("worker").get<std::size_t>();
  s.workers = j.at("workers").get<std::size_t>();
  s.elements = j.at("elements").get<std::uint64_t>();
  s.rounds = j.at("rounds").get<std::uint32_t>();
  s.warmup_rounds = j.at("warmup_rounds").get<std::uint32_t>();
  s.magnitude = j.at("magnitude").get<double>();
  s.compute = Duration(j.at("compute_ns").get<std::int64_t>());
  s.start = Duration(j.at("start_ns").get<std::int64_t>());
  s.alive_every = Duration(j.at("alive_every_ns").get<std::int64_t>());
  if (!j.at("crash_round").is_null()) s.crash_round = j["crash_round"].get<std::uint32_t>();
  return s;
}

std::string result_line(const WorkerResult& r) {
  return json{{"event", "result"},
              {"correct", r.correct},
              {"crashed", r.crashed},
              {"completed_rounds", r.completed_rounds},
              {"retransmissions", r.retransmissions},
              {"fast_retransmits", r.fast_retransmits},
              {"requested_resends", r.requested_resends},
              {"timeouts", r.timeouts},
              {"final_requests", r.final_requests},
              {"float_fragments", r.float_fragments},
              {"wrong_values", r.wrong_values},
              {"allreduce_ns", r.allreduce_ns},
              {"call_ns", r.call_ns},
              {"error", r.error}}
      .dump();
}

WorkerLine parse_line(const std::string& text) {
  WorkerLine line;
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) return line;
  try {
    line.event = j["event"].get<std::string>();
    if (line.event == "round" || line.event == "wait" || line.event == "failed") {
      line.round = j.at("round").get<std::uint32_t>();
    }
    if (j.contains("next_seq")) line.next_seq = j["next_seq"].get<Seq>();
    if (line.event == "failed") line.error = j.at("error").get<std::string>();
    if (line.event == "round" && j.contains("links")) {
      for (const json& l : j["links"]) {
        line.links.push_back({l.at(0).get<int>(), l.at(1).get<int>(), l.at(2).get<std::uint64_t>(),
                              l.at(3).get<double>(), l.at(4).get<double>()});
      }
    }
    if (line.event == "result") {
      WorkerResult& r = line.result;
      r.correct = j.at("correct").get<bool>();
      r.crashed = j.at("crashed").get<bool>();
      r.completed_rounds = j.at("completed_rounds").get<std::uint32_t>();
      r.retransmissions = j.at("retransmissions").get<std::uint64_t>();
      r.fast_retransmits = j.at("fast_retransmits").get<std::uint64_t>();
      r.requested_resends = j.at("requested_resends").get<std::uint64_t>();
      r.timeouts = j.at("timeouts").get<std::uint64_t>();
      r.final_requests = j.at("final_requests").get<std::uint64_t>();
      r.float_fragments = j.at("float_fragments").get<std::uint64_t>();
      r.wrong_values = j.at("wrong_values").get<std::uint64_t>();
      r.allreduce_ns = j.at("allreduce_ns").get<std::int64_t>();
      r.call_ns = j.at("call_ns").get<std::vector<std::vector<std::int64_t>>>();
      r.error = j.at("error").get<std::string>();
    }
  } catch (const json::exception&) {
    line.event.clear();  // not one of ours
  }
  return line;
}

std::string shares_json(const plink::MasterShares& shares) { return json{{"gm", shares.gm}, {"lm", shares.lm}}.dump(); }

plink::MasterShares shares_from_json(const std::string& text) {
  const json j = json::parse(text);
  return {j.at("gm").get<std::vector<double>>(), j.at("lm").get<std::vector<double>>()};
}

std::string reform_json(const Reform& r) {
  return json{{"config", r.config}, {"excluded", r.excluded}, {"round", r.round}}.dump();
}

Reform reform_from_json(const std::string& text) {
  const json j = json::parse(text);
  Reform r;
  r.config = j.at("config");
  r.excluded = j.at("excluded").get<std::vector<std::uint32_t>>();
  r.round = j.at("round").get<std::uint32_t>();
  return r;
}

}  // namespace atp::worker_process

namespace atp {

int run_worker_process(const std::string& spec_path) {
  using namespace worker_process;
  // A peer that died closes its TCP connections; Gloo's next write to one would raise SIGPIPE
  // and kill this worker without a result line. Ignored, it is Gloo's error (EPIPE), reported.
  ::signal(SIGPIPE, SIG_IGN);
  WorkerSpec spec;
  try {
    // Bounded: a regular file of at most kMaxConfigFileBytes, not /dev/zero read until memory runs out.
    spec = spec_from_json(read_config_file(spec_path));
  } catch (const ConfigFileError& e) {
    std::cerr << "atp worker: " << e.what() << "\n";  // names the path already
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "atp worker: " << spec_path << ": " << e.what() << "\n";
    return 2;
  }
  WorkerResult r;
  try {
    const Algorithm* algorithm = find_algorithm(spec.algorithm);
    if (algorithm == nullptr) throw std::invalid_argument("unknown algorithm '" + spec.algorithm + "'");
    if (!WorkerRun(spec, *algorithm, r).run()) return 1;  // the run was called off
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.correct = r.error.empty() && r.completed_rounds == spec.rounds;
  if (!r.error.empty()) {
    r.error = "worker " + std::to_string(spec.worker) + " of job " + std::to_string(spec.job) + ": " + r.error;
  }
  std::cout << result_line(r) << std::endl;
  return r.correct ? 0 : 1;
}

}  // namespace atp
