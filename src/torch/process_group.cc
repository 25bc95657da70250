// The PyTorch c10d backend "atp" (python/atp_torch registers it): a thin adapter from torch's
// ProcessGroup (torch 1.13) or Backend (torch 2.x) to a ClusterJob. allreduce (SUM, AVG) of
// float32, float16 and bfloat16 tensors goes through ATP (the switches add them); everything
// in-network aggregation does not speed up (other dtypes and reduce ops, broadcast, gather,
// scatter, all_to_all, point-to-point, ...) goes to a Gloo process group the backend makes on the
// same store, so nothing Gloo does is written again. Tensors on a device (CUDA) are staged through
// pinned host memory. Options come from ATP_* variables.
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <torch/python.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include "atp/baselines/tcp_schedule_allreduce.h"
#include "atp/cluster/cluster_job.h"
#include "atp/collectives/store.h"
#include "atp/io/udp_socket.h"
#include "atp/plink/aggregation.h"
#include "atp/plink/embed.h"
#include "atp/plink/grouping.h"
#include "atp/plink/probing.h"
#include "atp/scenario/algorithm.h"
#include "atp/scenario/scenario.h"
#include "group_stats.h"

namespace atp::torch_backend {
namespace {

#if TORCH_VERSION_MAJOR >= 2
// torch 2.x: a backend is a c10d::Backend, to which torch's ProcessGroup hands the tensors of the
// devices it was registered for.
using BackendBase = c10d::Backend;
#else
// torch 1.13: a backend is a whole ProcessGroup.
using BackendBase = c10d::ProcessGroup;
#endif

[[noreturn]] void unsupported(const std::string& what) { TORCH_CHECK(false, "not supported by atp: ", what); }

// torch's store (the PrefixStore of this process group) as ATP's rendezvous Store; our keys
// under "atp/".
class TorchStore : public Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::string& value) override {
    store_->set("atp/" + key, std::vector<std::uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key, Duration timeout) override {
    try {
      // c10d reads a wait of 0 ms as "no timeout" (the store's own, as long as init_process_group's):
      // a deadline that has passed, or is under a millisecond away, waits 1 ms instead.
      store_->wait({"atp/" + key},
                   std::max(std::chrono::ceil<std::chrono::milliseconds>(timeout), std::chrono::milliseconds(1)));
      const std::vector<std::uint8_t> value = store_->get("atp/" + key);
      return std::string(value.begin(), value.end());
    } catch (const std::exception& e) {  // a timeout, or the store's server (rank 0) is gone
      throw CollectiveError("the rendezvous store has no key " + key + " (" + first_line(e.what()) + ")");
    }
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add("atp/" + key, delta); }
  void erase(const std::string& key) override { store_->deleteKey("atp/" + key); }

 private:
  static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
  c10::intrusive_ptr<c10d::Store> store_;
};

// An environment variable, or "" when unset.
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

SocketAddress env_endpoint(const char* name, const std::string& value) {
  try {
    return SocketAddress::parse(value);
  } catch (const std::invalid_argument&) {
    TORCH_CHECK(false, "atp: ", name, "='", value, "' is not HOST:PORT like 127.0.0.1:9100");
  }
}

double env_number(const char* name, double min, double max) {
  const std::string value = env(name);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  TORCH_CHECK(!value.empty() && end == value.c_str() + value.size() && v >= min && v <= max, "atp: ", name, "='", value,
              "' must be a number from ", min, " to ", max);
  return v;
}

// ATP_TOPOLOGY: a scenario file (`atp run`'s format). Its topology is the network rank 0 starts,
// its first job's workers are the ranks' hosts in rank order, and its PS the job's.
ClusterJobOptions::LocalNetwork network_from_scenario_file(const std::string& path) {
  Scenario scenario;
  try {
    scenario = load_scenario_file(path);
  } catch (const ScenarioError& e) {
    TORCH_CHECK(false, "atp: ATP_TOPOLOGY: ", e.what());
  }
  TORCH_CHECK(!scenario.jobs.empty(), "atp: ATP_TOPOLOGY=", path,
              " has no jobs; the first job's workers are the ranks' hosts and its ps their PS");
  const JobSpec& job = scenario.jobs.front().spec;
  TORCH_CHECK(job.ps.size() == 1, "atp: ATP_TOPOLOGY=", path, ": jobs[0] names ", job.ps.size(),
              " PS hosts; the ranks' job has one (ps: [HOST])");
  return {scenario.topology, job.workers, job.ps.front()};
}

// ATP_BIND: where the ranks' sockets bind. Unset: with running switches (ATP_SWITCH: ranks on
// hosts of their own, maybe), the address this host reaches MASTER_ADDR from, when that is an
// IPv4 address; else 127.0.0.1.
std::uint32_t bind_ip_from_environment() {
  if (const std::string bind = env("ATP_BIND"); !bind.empty()) return env_endpoint("ATP_BIND", bind + ":0").ip;
  if (const std::string master = env("MASTER_ADDR"); !env("ATP_SWITCH").empty() && !master.empty()) {
    try {
      return source_address_towards(SocketAddress::parse(master + ":" + std::to_string(kUdpPort)));
    } catch (const std::exception&) {  // a host name, or no route: torch says so when it connects
    }
  }
  return ClusterJobOptions{}.bind_ip;
}

// What a group runs of the scenario's algorithms (atp/scenario/algorithm.h): an in-network
// protocol's endpoints, through ClusterJob, or an allreduce schedule over TCP between the ranks.
bool group_runs(const Algorithm& a) {
  return a.runtime == AlgorithmRuntime::kProtocol ||
         (a.runtime == AlgorithmRuntime::kSchedule && a.timed_calls == nullptr);
}

// ATP_ALGORITHM: one of those, atp (the default algorithm) when unset.
const Algorithm& algorithm_from_environment() {
  const std::string name = env("ATP_ALGORITHM");
  const Algorithm* algorithm = name.empty() ? &default_algorithm() : find_algorithm(name);
  if (algorithm == nullptr || !group_runs(*algorithm)) {
    std::string names;
    for (const Algorithm& a : algorithms())
      names += group_runs(a) ? (names.empty() ? "" : ", ") + std::string(a.name) : "";
    TORCH_CHECK(false, "atp: ATP_ALGORITHM='", name, "' must be one of ", names,
                " (atp, the default: in-network aggregation towards the PS; docs/pytorch.md)");
  }
  return *algorithm;
}

// ATP_ALGORITHM=ring, halving_doubling, hierarchical, plink or plink_fa: a host collective over TCP
// between the ranks, no switch adding: the flat ring and halving-doubling, the baseline Rina is
// measured against (docs/baselines.md), Horovod's and NCCL's hierarchical allreduce (a
// reduce-scatter inside each rack, an allreduce across the racks, an allgather inside); PLink's
// two-level aggregation over the racks, or its flat aggregation (docs/plink.md). Each rank of one
// that follows racks names its rack in ATP_RACK (ranks with the same name share one); the ranks
// meet in the group's store, each listening on ATP_BIND (default 127.0.0.1) at a port the kernel
// picks.
// ATP_GROUPING=probe (plink): the ranks' groups from PLink's probes (docs/plink.md): every pair of
// ranks probes once over TCP (plink::probe_calls, 256 KiB transfers), each rank publishes its call
// times in the store, and every rank computes the same embedding and groups from all of them.
RankGroups probed_groups(Store& store, int rank, int size, std::uint32_t bind_ip, Duration timeout) {
  RankGroups groups(1);
  if (size < 2) {
    groups[0].push_back(0);
    return groups;
  }
  constexpr std::size_t kTransferElements = (256 << 10) / sizeof(float);
  const auto probes = TcpScheduleAllreduce::join(
      "probe", [](int r, int n, std::size_t) { return plink::all_pairs(r, n); }, store, rank, size, bind_ip, timeout);
  std::vector<float> buffer(kTransferElements);
  std::vector<std::vector<double>> mine;  // [round][call], seconds
  for (std::uint32_t round = 0; round < plink::probe_rounds(size); ++round) {
    mine.emplace_back();
    for (const Schedule& call : plink::probe_calls(rank, size, kTransferElements, round)) {
      const auto t0 = std::chrono::steady_clock::now();
      probes->run(call, buffer);
      mine.back().push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  store.set("probe/" + std::to_string(rank), plink::probe_times_text(mine));
  std::vector<std::vector<std::vector<double>>> seconds;
  for (int r = 0; r < size; ++r)
    seconds.push_back(plink::probe_times_from_text(store.get("probe/" + std::to_string(r), timeout)));
  const plink::ProbeSamples samples = plink::probe_samples(size, kTransferElements, seconds);
  return plink::rank_groups(plink::probe_groups(plink::embed(samples.latency_distances()).coordinates));
}

std::unique_ptr<Allreduce> join_host_collective(const Algorithm& algorithm, Store& store, int rank, int size,
                                                Duration timeout) {
  const std::string name(algorithm.name);
  const std::uint32_t bind_ip = bind_ip_from_environment();
  const std::string grouping = env("ATP_GROUPING");
  TORCH_CHECK(grouping.empty() || grouping == "racks" || grouping == "probe", "atp: ATP_GROUPING must be racks or ",
              "probe, got '", grouping, "'");
  TORCH_CHECK(grouping != "probe" || name == "plink",
              "atp: ATP_GROUPING=probe groups the ranks of ATP_ALGORITHM=plink; ", "ATP_ALGORITHM is ", name);
  // Checked before any rank talks to the store: a rank that fails later leaves the others waiting
  // on keys it never sets (rank 0, which serves the store, gone).
  int connections = plink::kDefaultLanes;
  if (const std::string text = env("ATP_CONNECTIONS"); !text.empty()) {
    TORCH_CHECK(name == "plink" || name == "plink_fa", "atp: ATP_CONNECTIONS is PLink's (ATP_ALGORITHM=plink or ",
                "plink_fa); ATP_ALGORITHM is ", name);
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), connections);
    TORCH_CHECK(
        error == std::errc() && end == text.data() + text.size() && connections >= 1 && connections <= kMaxLanes,
        "atp: ATP_CONNECTIONS='", text, "' must be a whole number of connections per pair from 1 to ", kMaxLanes);
  }
  RankGroups racks;  // in the order of their first rank, as job_racks gives them
  if (grouping == "probe") {
    racks = probed_groups(store, rank, size, bind_ip, timeout);
  } else {
    // Unset, a rank's switch (ATP_SWITCH, the same address on the ranks of one rack) names its rack.
    std::string rack = env("ATP_RACK").empty() ? env("ATP_SWITCH") : env("ATP_RACK");
    if (!algorithm.follows_racks) rack = "all";
    TORCH_CHECK(!rack.empty(), "atp: ATP_ALGORITHM=", name, " needs ATP_RACK on every rank: the name of its rack ",
                "(ranks with the same name are one rack), or ATP_SWITCH, its rack's switch",
                name == "plink" ? ", or ATP_GROUPING=probe" : "");
    store.set("rack/" + std::to_string(rank), rack);
    std::map<std::string, std::size_t> index;
    for (int r = 0; r < size; ++r) {
      const auto [it, fresh] = index.emplace(store.get("rack/" + std::to_string(r), timeout), racks.size());
      if (fresh) racks.emplace_back();
      racks[it->second].push_back(r);
    }
  }
  ScheduleBuilder build = [&algorithm, racks, connections](int r, int n, std::size_t count) {
    return algorithm.schedule(r, n, count, racks, connections);
  };
  return TcpScheduleAllreduce::join(name, std::move(build), store, rank, size, bind_ip, timeout);
}

// ClusterJobOptions from ATP_TESTBED and ATP_HOST, ATP_LOCAL, ATP_TOPOLOGY, ATP_SWITCH, ATP_PS, ATP_SWITCHES, ATP_BIND,
// ATP_ALGORITHM, ATP_VALUES_PER_PACKET, ATP_SCALE, ATP_RTO_MS; the timeout is init_process_group's.
ClusterJobOptions options_from_environment(Duration timeout) {
  ClusterJobOptions o;
  o.timeout = timeout;
  const std::string local = env("ATP_LOCAL");
  TORCH_CHECK(local.empty() || local == "0" || local == "1", "atp: ATP_LOCAL='", local, "' must be 1 or 0");
  o.local = local == "1";
  if (const std::string topology = env("ATP_TOPOLOGY"); !topology.empty()) {
    TORCH_CHECK(o.local, "atp: ATP_TOPOLOGY is the network that ATP_LOCAL=1 starts on rank 0: set ATP_LOCAL=1 too ",
                "(a job on running switches finds their links from the switches' configs)");
    o.local_network = network_from_scenario_file(topology);
  }
  const std::string switch_control = env("ATP_SWITCH"), ps_control = env("ATP_PS");
  if (const std::string testbed = env("ATP_TESTBED"); !testbed.empty()) {
    // `atp testbed` set these: its runner installs the job over the testbed's switches and PS.
    TORCH_CHECK(!o.local && switch_control.empty() && ps_control.empty() && env("ATP_SWITCHES").empty(),
                "atp: ATP_TESTBED (set by `atp testbed`) names the cluster already: unset ATP_LOCAL, ATP_SWITCH, ",
                "ATP_PS and ATP_SWITCHES");
    const std::string host = env("ATP_HOST");
    TORCH_CHECK(!host.empty(), "atp: ATP_TESTBED is set but ATP_HOST is not: run the command through `atp testbed`, ",
                "which sets both");
    o.testbed = ClusterJobOptions::Testbed{testbed, host};
  } else if (!o.local) {
    TORCH_CHECK(!switch_control.empty() && !ps_control.empty(),
                "atp: set ATP_SWITCH and ATP_PS to the control addresses (HOST:PORT) of a running `atp switch` and "
                "`atp ps`, or ATP_LOCAL=1 to have rank 0 start a switch and a PS itself");
    o.switch_control = env_endpoint("ATP_SWITCH", switch_control);
    o.ps_control = env_endpoint("ATP_PS", ps_control);
    // HOST:PORT,HOST:PORT,...: the switches between the ranks' racks and the PS's (a core).
    const std::string more = env("ATP_SWITCHES");
    for (std::size_t at = 0; !more.empty() && at <= more.size();) {
      const std::size_t comma = std::min(more.find(',', at), more.size());
      o.switches.push_back(env_endpoint("ATP_SWITCHES", more.substr(at, comma - at)));
      at = comma + 1;
    }
  } else {
    TORCH_CHECK(env("ATP_SWITCHES").empty(), "atp: ATP_SWITCHES names running switches; ATP_LOCAL=1 starts its own");
  }
  o.bind_ip = bind_ip_from_environment();
  const Algorithm& algorithm = algorithm_from_environment();
  o.protocol = algorithm.protocol;
  o.in_network_aggregation = algorithm.in_network_aggregation;
  if (!env("ATP_VALUES_PER_PACKET").empty()) {
    o.values_per_packet = static_cast<std::uint16_t>(env_number("ATP_VALUES_PER_PACKET", 1, kMaxValuesPerPacket));
  }
  if (!env("ATP_SCALE").empty()) o.scale = env_number("ATP_SCALE", 1, 1e9);
  if (!env("ATP_RTO_MS").empty()) {
    o.retransmit_timeout =
        std::chrono::microseconds(static_cast<std::int64_t>(env_number("ATP_RTO_MS", 0.01, 10000) * 1000));
  }
  return o;
}

// A collective queued on the group's thread. c10d::Work keeps the completion state (wait,
// isCompleted, isSuccess); the future is what DDP's communication hook chains on.
class AtpWork : public c10d::Work {
 public:
  AtpWork(c10d::OpType type, std::vector<at::Tensor> outputs)
      : Work(-1, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  void complete(std::exception_ptr error) {
    finish(error);
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

void check_one(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "atp ", what, ": expected one tensor per call, got ", tensors.size());
}

// Waits until the work `stream` had when `event` was recorded on it is done. Polls: torch 1.13's
// c10::Event has no synchronize().
void wait_for(const c10::Event& event) {
  while (!event.query()) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// A collective's tensors on a device (CUDA) through pinned host memory, which is what the
// switches and Gloo's CPU transport take. When the collective is called, its inputs are copied to
// the host on a copy stream of the device (after what the caller's current stream has queued:
// the kernels that computed them), without waiting: the copies run beside the caller's next
// kernels and while earlier collectives (DDP's earlier buckets) are on the network. The group's
// thread waits for them when the collective's turn comes, runs it on the host copies, and copies
// the results back on the same stream, waiting for that before the Work completes: wait() means
// on a device what it means on the CPU. CPU tensors pass through untouched.
class DeviceStaging {
 public:
  // The host tensor a collective reads (`t` itself on the CPU: then nothing is staged).
  at::Tensor input(const at::Tensor& t) { return stage(t, true, false); }
  // The host tensor a collective writes, copied back into `t` after it.
  at::Tensor output(const at::Tensor& t) { return stage(t, false, true); }
  // Both: an in-place collective's (allreduce, broadcast).
  at::Tensor in_place(const at::Tensor& t) { return stage(t, true, true); }
  template <class Stage>
  std::vector<at::Tensor> each(const std::vector<at::Tensor>& tensors, Stage stage) {
    std::vector<at::Tensor> host;
    for (const at::Tensor& t : tensors) host.push_back((this->*stage)(t));
    return host;
  }
  template <class Stage>
  std::vector<std::vector<at::Tensor>> each(const std::vector<std::vector<at::Tensor>>& lists, Stage stage) {
    std::vector<std::vector<at::Tensor>> host;
    for (const auto& list : lists) host.push_back(each(list, stage));
    return host;
  }

  // On the caller's thread, after the last input(): marks where the input copies end.
  void inputs_started() {
    if (stream_) copied_in_.emplace(stream_->device_type()).record(*stream_);
  }
  // On the group's thread, before the collective runs.
  void wait_for_inputs() const {
    if (copied_in_) wait_for(*copied_in_);
  }
  // On the group's thread, after it ran: the outputs are back on their device.
  void write_back() const {
    if (!stream_) return;
    const c10::StreamGuard on(*stream_);
    for (const Staged& s : staged_) {
      if (s.copy_back) s.device.copy_(s.host, /*non_blocking=*/true);
    }
    c10::Event copied_back(stream_->device_type());
    copied_back.record(*stream_);
    wait_for(copied_back);
  }

 private:
  at::Tensor stage(const at::Tensor& t, bool copy_in, bool copy_back) {
    if (t.device().is_cpu()) return t;
    if (!stream_) {
      // The copy stream starts after what the caller's stream has queued so far.
      const c10::impl::VirtualGuardImpl device(t.device().type());
      const c10::Stream caller = device.getStream(t.device());
      stream_ = device.getStreamFromGlobalPool(t.device());
      c10::Event computed(t.device().type());
      computed.record(caller);
      computed.block(*stream_);
    } else {
      TORCH_CHECK(stream_->device() == t.device(), "atp: a collective's tensors are on one device, got ",
                  stream_->device().str(), " and ", t.device().str());
    }
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    if (copy_in) {
      const c10::StreamGuard on(*stream_);
      host.copy_(t, /*non_blocking=*/true);
    }
    staged_.push_back({t, host, copy_back});
    return host;
  }

  struct Staged {
    at::Tensor device, host;
    bool copy_back;
  };
  std::vector<Staged> staged_;
  std::optional<c10::Stream> stream_;  // the copies' stream on the tensors' device
  std::optional<c10::Event> copied_in_;
};
using Staging = std::shared_ptr<DeviceStaging>;

// A point-to-point receive into a device tensor: Gloo receives into a host copy, which this Work
// writes back when it is waited for or found complete.
class StagedReceive : public c10d::Work {
 public:
  StagedReceive(c10::intrusive_ptr<c10d::Work> inner, Staging staging)
      : Work(-1, c10d::OpType::RECV), inner_(std::move(inner)), staging_(std::move(staging)) {}

  bool wait(std::chrono::milliseconds timeout) override {
    const bool done = inner_->wait(timeout);
    write_back();
    return done;
  }
  bool isCompleted() override {
    if (!inner_->isCompleted()) return false;
    write_back();
    return true;
  }
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  int sourceRank() const override { return inner_->sourceRank(); }

 private:
  void write_back() {
    std::call_once(written_, [this] {
      if (inner_->isSuccess()) staging_->write_back();
    });
  }
  c10::intrusive_ptr<c10d::Work> inner_;
  Staging staging_;
  std::once_flag written_;
};

// Whether ATP aggregates an allreduce of `t` with `op`: a sum of floats the switches can add as
// fixed point (float32, and float16 and bfloat16 staged as float32). float64 would lose bits in
// float32 and integers must stay exact beyond float32's 24: those go to Gloo, as other ops do.
bool through_atp(const at::Tensor& t, c10d::ReduceOp::RedOpType op) {
  const at::ScalarType type = t.scalar_type();
  return (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG) &&
         (type == at::kFloat || type == at::kHalf || type == at::kBFloat16);
}

class ProcessGroupAtp : public BackendBase {
 public:
  // `make_gloo` makes torch's Gloo group of the same ranks (atp_torch's: on the ranks' data
  // address, ATP_BIND, under keys of its own in the same store), once the ATP job is set up, so
  // that a rank that never came is named by the job's rendezvous. Made through torch's Python
  // API, so that this file needs none of Gloo's headers, which torch's wheels do not ship.
  ProcessGroupAtp(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Duration timeout,
                  const std::function<c10::intrusive_ptr<BackendBase>()>& make_gloo)
      : BackendBase(rank, size), store_(store) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    store_.set("arrived/" + std::to_string(rank), "");
    try {
      if (const Algorithm& algorithm = algorithm_from_environment(); algorithm.protocol.empty()) {
        tcp_ = join_host_collective(algorithm, store_, rank, size, timeout);
      } else {
        job_ = ClusterJob::join(store_, rank, size, options_from_environment(timeout));
        stats_entry_.emplace(*job_, std::string(algorithm.name), rank);
      }
    } catch (const c10::Error&) {
      // A setting's one sentence, already worded. Rank 0 serves the store: it waits (within the
      // group's timeout from its own start) for every rank to reach this point before its process
      // may end, so that a rank still connecting finds the store and says its own sentence.
      if (rank == 0) await_arrivals(size, deadline);
      throw;
    } catch (const std::exception& e) {
      if (rank == 0) await_arrivals(size, deadline);
      TORCH_CHECK(false, "atp: ", e.what());
    }
    gloo_ = make_gloo();
    TORCH_CHECK(gloo_ && gloo_->getRank() == rank && gloo_->getSize() == size,
                "atp: the Gloo group made for the backend is not of the same ranks");
    thread_ = std::thread([this] { run(); });
  }

  ~ProcessGroupAtp() override {
    // Python drops the group holding the GIL, and the group's thread may need the GIL to free a
    // tensor that has a Python object: let go of it while waiting for that thread and the others.
    // So for the Gloo group, whose last reference this is: torch destroys its groups without the
    // GIL (their destructors join threads that may run Python callbacks, a DDP future's).
    if (PyGILState_Check() != 0) {
      pybind11::gil_scoped_release release;
      shut_down();
      gloo_.reset();
    } else {
      shut_down();
      gloo_.reset();
    }
  }

  const std::string getBackendName() const override { return "atp"; }

  // The group's sequence number, which torch sets when it makes a group and reads to check that
  // the ranks called the same collectives: the collectives called on this group so far, counted
  // from 0 as Gloo counts its own, so equal on ranks that call them in the same order.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }

  // Every collective below takes CPU tensors, and device tensors staged through the host
  // (DeviceStaging): each maps its tensors to host ones first, and runs on those.
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    check_one(tensors, "allreduce");
    if (tensors[0].is_sparse()) {  // Gloo's sparse SUM (nn.Embedding(sparse=True)'s gradients)
      if (!tensors[0].is_cpu()) unsupported("allreduce of sparse tensors on " + tensors[0].device().str());
      return in_order(c10d::OpType::ALLREDUCE, tensors, std::make_shared<DeviceStaging>(),
                      [=](auto& gloo) mutable { return gloo.allreduce(tensors, opts); });
    }
    const c10d::ReduceOp::RedOpType op = opts.reduceOp;
    check_op(tensors[0], op, "allreduce");
    auto staging = std::make_shared<DeviceStaging>();
    at::Tensor t = staging->in_place(tensors[0]);
    return enqueue(c10d::OpType::ALLREDUCE, tensors, staging, [this, t, op]() mutable { reduce_in_place(t, op); });
  }

  // What in-network aggregation does not speed up: Gloo's, in this group's call order.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    check_one(tensors, "broadcast");
    auto staging = std::make_shared<DeviceStaging>();
    auto host = staging->each(tensors, &DeviceStaging::in_place);
    return in_order(c10d::OpType::BROADCAST, tensors, staging,
                    [=](auto& gloo) mutable { return gloo.broadcast(host, opts); });
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    check_one(inputs, "allgather");
    auto staging = std::make_shared<DeviceStaging>();
    auto in = staging->each(inputs, &DeviceStaging::input);
    auto out = staging->each(outputs, &DeviceStaging::output);
    return in_order(c10d::OpType::ALLGATHER, flat(outputs), staging,
                    [=](auto& gloo) mutable { return gloo.allgather(out, in, opts); });
  }
  // all_gather_into_tensor. torch 1.13's Gloo has no _allgather_base: its list form, into the
  // output's chunks.
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    std::vector<at::Tensor> outputs{output}, inputs{input};
    return allgather_into_tensors(c10d::OpType::_ALLGATHER_BASE, outputs, inputs, opts);
  }
#if TORCH_VERSION_MAJOR >= 2
  // torch 2.x's coalesced forms (FSDP's fully_shard gathers and reduces several tensors at once).
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    return allgather_into_tensors(c10d::OpType::COALESCED, outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_tensors(c10d::OpType::COALESCED, outputs, inputs, opts.reduceOp);
  }
#endif
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override {
    auto staging = std::make_shared<DeviceStaging>();
    auto in = staging->each(inputs, &DeviceStaging::input);
    auto out = staging->each(outputs, &DeviceStaging::output);
    return in_order(c10d::OpType::ALLGATHER_COALESCED, flat(outputs), staging,
                    [=](auto& gloo) mutable { return gloo.allgather_coalesced(out, in, opts); });
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    auto staging = std::make_shared<DeviceStaging>();
    auto host = staging->each(tensors, &DeviceStaging::in_place);
    return in_order(c10d::OpType::ALLREDUCE_COALESCED, tensors, staging,
                    [=](auto& gloo) mutable { return gloo.allreduce_coalesced(host, opts); });
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    check_one(tensors, "reduce");
    auto staging = std::make_shared<DeviceStaging>();
    auto host = staging->each(tensors, &DeviceStaging::in_place);
    return in_order(c10d::OpType::REDUCE, tensors, staging,
                    [=](auto& gloo) mutable { return gloo.reduce(host, opts); });
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    check_one(inputs, "gather");
    auto staging = std::make_shared<DeviceStaging>();
    auto in = staging->each(inputs, &DeviceStaging::input);
    auto out = staging->each(outputs, &DeviceStaging::output);
    return in_order(c10d::OpType::GATHER, flat(outputs), staging,
                    [=](auto& gloo) mutable { return gloo.gather(out, in, opts); });
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    check_one(outputs, "scatter");
    auto staging = std::make_shared<DeviceStaging>();
    auto in = staging->each(inputs, &DeviceStaging::input);
    auto out = staging->each(outputs, &DeviceStaging::output);
    return in_order(c10d::OpType::SCATTER, outputs, staging,
                    [=](auto& gloo) mutable { return gloo.scatter(out, in, opts); });
  }
  // torch 1.13's Gloo has no reduce_scatter: an allreduce of all the inputs (through ATP where
  // it aggregates them), of which each rank keeps its chunk.
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    check_one(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<std::size_t>(getSize()),
                "atp reduce_scatter: expected one input list of ", getSize(), " tensors");
    for (const at::Tensor& in : inputs[0]) {
      TORCH_CHECK(in.numel() == outputs[0].numel() && in.scalar_type() == outputs[0].scalar_type(),
                  "atp reduce_scatter: every input must be of the output's size and dtype");
    }
    const c10d::ReduceOp::RedOpType op = opts.reduceOp;
    check_op(outputs[0], op, "reduce_scatter");
    auto staging = std::make_shared<DeviceStaging>();
    auto host_inputs = staging->each(inputs[0], &DeviceStaging::input);
    at::Tensor out = staging->output(outputs[0]);
    return enqueue(c10d::OpType::REDUCE_SCATTER, outputs, staging,
                   [this, out, host_inputs, op]() mutable { reduce_scatter_into(out, host_inputs, op); });
  }
  // FSDP's reduce_scatter_tensor.
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outputs{output}, inputs{input};
    return reduce_scatter_tensors(c10d::OpType::_REDUCE_SCATTER_BASE, outputs, inputs, opts.reduceOp);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override {
    auto staging = std::make_shared<DeviceStaging>();
    at::Tensor in = staging->input(input), out = staging->output(output);
    return in_order(c10d::OpType::ALLTOALL_BASE, {output}, staging, [=](auto& gloo) mutable {
      return gloo.alltoall_base(out, in, output_split_sizes, input_split_sizes, opts);
    });
  }
  // torch 1.13's Gloo has only the flat form: the inputs concatenated, split by their sizes.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(
        !inputs.empty() && inputs.size() == outputs.size() && inputs.size() == static_cast<std::size_t>(getSize()),
        "atp alltoall: expected ", getSize(), " inputs and outputs");
    auto staging = std::make_shared<DeviceStaging>();
    auto host_inputs = staging->each(inputs, &DeviceStaging::input);
    auto host_outputs = staging->each(outputs, &DeviceStaging::output);
    return enqueue(c10d::OpType::ALLTOALL, outputs, staging, [this, host_outputs, host_inputs, opts]() mutable {
      std::vector<at::Tensor> flat_inputs;
      std::vector<int64_t> input_splits, output_splits;
      for (std::size_t r = 0; r < host_inputs.size(); ++r) {
        flat_inputs.push_back(host_inputs[r].reshape(-1));
        input_splits.push_back(host_inputs[r].numel());
        output_splits.push_back(host_outputs[r].numel());
      }
      at::Tensor in = at::cat(flat_inputs);
      at::Tensor out = at::empty({std::accumulate(output_splits.begin(), output_splits.end(), int64_t{0})},
                                 host_outputs[0].options());
      // Gloo moves the split sizes away: it gets copies.
      std::vector<int64_t> gloo_output_splits = output_splits, gloo_input_splits = input_splits;
      gloo_->alltoall_base(out, in, gloo_output_splits, gloo_input_splits, opts)->wait();
      int64_t at = 0;
      for (std::size_t r = 0; r < host_outputs.size(); ++r) {
        host_outputs[r].copy_(out.narrow(0, at, output_splits[r]).view(host_outputs[r].sizes()));
        at += output_splits[r];
      }
    });
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    return in_order(c10d::OpType::BARRIER, {}, std::make_shared<DeviceStaging>(),
                    [=](auto& gloo) mutable { return gloo.barrier(opts); });
  }
  // Gloo's, after everything called before it has run (ProcessGroup.monitored_barrier; torch's
  // dist.monitored_barrier itself takes only a Gloo group).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    enqueue(c10d::OpType::BARRIER, {}, std::make_shared<DeviceStaging>(), [] {})->wait();
    gloo_->monitoredBarrier(opts, wait_all_ranks);
  }
  // Point to point runs at once on the caller's thread, as Gloo's own does: a send waiting in
  // this group's queue for an earlier receive would deadlock isend/irecv pairs. A device tensor
  // is sent from a host copy made first, and received into one written back by the Work.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    check_one(tensors, "send");
    std::vector<at::Tensor> host{tensors[0].is_cpu() ? tensors[0] : tensors[0].to(at::kCPU)};
    return gloo_->send(host, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    check_one(tensors, "recv");
    return received(tensors, [&](std::vector<at::Tensor>& host) { return gloo_->recv(host, src, tag); });
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    check_one(tensors, "recv");
    return received(tensors, [&](std::vector<at::Tensor>& host) { return gloo_->recvAnysource(host, tag); });
  }

 private:
  // An average of integers is not one (torch's Gloo refuses AVG outright).
  static void check_op(const at::Tensor& t, c10d::ReduceOp::RedOpType op, const char* what) {
    if (op == c10d::ReduceOp::AVG && !at::isFloatingType(t.scalar_type())) {
      unsupported(std::string(what) + " with AVG of " + c10::toString(t.scalar_type()) + " tensors");
    }
  }

  // On the group's thread: `t` becomes `op` over every rank's `t`, through ATP where it
  // aggregates it, else through Gloo (AVG as a sum divided, which Gloo lacks).
  void reduce_in_place(at::Tensor& t, c10d::ReduceOp::RedOpType op) {
    if (through_atp(t, op)) {
      // float32, contiguous: the tensor itself, else a staged copy written back after.
      at::Tensor c = t.to(at::kFloat).contiguous();
      const std::span<float> values(c.data_ptr<float>(), static_cast<std::size_t>(c.numel()));
      (job_ ? static_cast<Allreduce&>(job_->communicator()) : *tcp_).allreduce(values);
      if (op == c10d::ReduceOp::AVG) c.div_(getSize());
      if (!c.is_same(t)) t.copy_(c);
      return;
    }
    // Gloo has no bfloat16: its MAX, MIN and PRODUCT in float32 (which holds every bfloat16),
    // rounded back once.
    std::vector<at::Tensor> staged{t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t.contiguous()};
    c10d::AllreduceOptions gloo_op;
    gloo_op.reduceOp = op == c10d::ReduceOp::AVG ? c10d::ReduceOp::SUM : op;
    gloo_->allreduce(staged, gloo_op)->wait();
    if (op == c10d::ReduceOp::AVG) staged[0].div_(getSize());
    if (!staged[0].is_same(t)) t.copy_(staged[0]);
  }

  // all_gather_into_tensor of each (outputs[i], inputs[i]), as one collective.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensors(c10d::OpType type, std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
    TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), "atp allgather: expected as many outputs (",
                outputs.size(), ") as inputs (", inputs.size(), ")");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      TORCH_CHECK(
          outputs[i].numel() == inputs[i].numel() * getSize() && outputs[i].scalar_type() == inputs[i].scalar_type(),
          "atp allgather: an output must hold ", getSize(), " inputs of the same dtype");
    }
    auto staging = std::make_shared<DeviceStaging>();
    auto in = staging->each(inputs, &DeviceStaging::input);
    auto out = staging->each(outputs, &DeviceStaging::output);
    return enqueue(type, outputs, staging, [this, out, in, opts]() mutable {
      for (std::size_t i = 0; i < out.size(); ++i) {
        at::Tensor whole = out[i].contiguous();
        std::vector<std::vector<at::Tensor>> chunks{whole.view(-1).chunk(getSize())};
        for (at::Tensor& chunk : chunks[0]) chunk = chunk.view(in[i].sizes());
        std::vector<at::Tensor> input{in[i].contiguous()};
        gloo_->allgather(chunks, input, opts)->wait();
        if (!whole.is_same(out[i])) out[i].copy_(whole);
      }
    });
  }

  // reduce_scatter_tensor of each (outputs[i], inputs[i]), as one collective.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensors(c10d::OpType type, std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs, c10d::ReduceOp::RedOpType op) {
    TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), "atp reduce_scatter: expected as many outputs (",
                outputs.size(), ") as inputs (", inputs.size(), ")");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      TORCH_CHECK(
          inputs[i].numel() == outputs[i].numel() * getSize() && inputs[i].scalar_type() == outputs[i].scalar_type(),
          "atp reduce_scatter: an input must hold ", getSize(), " outputs of the same dtype");
      check_op(outputs[i], op, "reduce_scatter");
    }
    auto staging = std::make_shared<DeviceStaging>();
    auto in = staging->each(inputs, &DeviceStaging::input);
    auto out = staging->each(outputs, &DeviceStaging::output);
    return enqueue(type, outputs, staging, [this, out, in, op]() mutable {
      for (std::size_t i = 0; i < out.size(); ++i) reduce_scatter_into(out[i], {in[i]}, op);
    });
  }

  // On the group's thread: `out` becomes this rank's chunk of `op` over every rank's `inputs`
  // (concatenated).
  void reduce_scatter_into(at::Tensor& out, const std::vector<at::Tensor>& inputs, c10d::ReduceOp::RedOpType op) {
    std::vector<at::Tensor> flat_inputs;
    for (const at::Tensor& in : inputs) flat_inputs.push_back(in.reshape(-1));
    at::Tensor whole = at::cat(flat_inputs);
    reduce_in_place(whole, op);
    out.copy_(whole.chunk(getSize())[static_cast<std::size_t>(getRank())].view(out.sizes()));
  }

  // A receive into `tensors` (one), by `receive` into host tensors; a device tensor gets a Work
  // that writes the host copy back.
  template <class Receive>
  c10::intrusive_ptr<c10d::Work> received(std::vector<at::Tensor>& tensors, Receive receive) {
    if (tensors[0].is_cpu()) return receive(tensors);
    auto staging = std::make_shared<DeviceStaging>();
    std::vector<at::Tensor> host = staging->each(tensors, &DeviceStaging::output);
    return c10::make_intrusive<StagedReceive>(receive(host), staging);
  }

  // Gloo's collective `call(gloo)`, started from this group's thread after everything called
  // before it (ATP's allreduces included: an allgather of their results must see them) and
  // waited for there.
  template <class Call>
  c10::intrusive_ptr<c10d::Work> in_order(c10d::OpType type, std::vector<at::Tensor> outputs, Staging staging,
                                          Call call) {
    return enqueue(type, std::move(outputs), std::move(staging), [this, call]() mutable { call(*gloo_)->wait(); });
  }
  static std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& lists) {
    std::vector<at::Tensor> all;
    for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
    return all;
  }

  // Queues `body` on the group's thread (collectives run one at a time, in call order, as every
  // rank calls them), between the staging's wait for its inputs and its write-back; the Work, of
  // the caller's `outputs`, completes when all that has run.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs, Staging staging,
                                         std::function<void()> body) {
    staging->inputs_started();
    ++sequence_;
    auto work = c10::make_intrusive<AtpWork>(type, std::move(outputs));
    {
      std::lock_guard lock(mutex_);
      queue_.push_back([work, staging = std::move(staging), body = std::move(body)] {
        std::exception_ptr error;
        try {
          staging->wait_for_inputs();
          body();
          staging->write_back();
        } catch (...) {
          error = std::current_exception();
        }
        work->complete(error);
      });
    }
    wake_.notify_one();
    return work;
  }

  void shut_down() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    stats_entry_.reset();
    if (job_) job_->close();
    if (tcp_) tcp_->close();
  }

  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  TorchStore store_;
  std::unique_ptr<ClusterJob> job_;             // atp, rina
  std::optional<GroupStatsEntry> stats_entry_;  // job_'s counters in atp_torch.stats(), until shut down
  std::unique_ptr<Allreduce> tcp_;              // hierarchical, plink, plink_fa
  c10::intrusive_ptr<BackendBase> gloo_;
  std::mutex mutex_;
  std::condition_variable wake_;
  // Waits until every rank has reached the constructor, or `deadline` (best effort).
  void await_arrivals(int size, std::chrono::steady_clock::time_point deadline) {
    for (int r = 1; r < size; ++r) {
      try {
        store_.get("arrived/" + std::to_string(r), deadline - std::chrono::steady_clock::now());
      } catch (const std::exception&) {
        return;  // that rank never came: its own error says why
      }
    }
  }

  std::deque<std::function<void()>> queue_;  // under mutex_
  bool stopping_ = false;                    // under mutex_
  std::atomic<uint64_t> sequence_{0};        // collectives called (getSequenceNumberForGroup)
  std::thread thread_;
};

// What atp_torch's creator, which torch.distributed.Backend.register_backend calls with (store,
// rank, size, timeout), calls, with how to make the Gloo group.
c10::intrusive_ptr<BackendBase> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::chrono::duration<float>& timeout,
    const std::function<c10::intrusive_ptr<BackendBase>()>& make_gloo) {
  return c10::make_intrusive<ProcessGroupAtp>(store, rank, size, std::chrono::duration_cast<Duration>(timeout),
                                              make_gloo);
}

// ATP_BIND's address (bind_ip_from_environment), where atp_torch binds the Gloo group's device.
std::string bind_address() { return format_address(bind_ip_from_environment()); }

}  // namespace
}  // namespace atp::torch_backend

PYBIND11_MODULE(_C, module) {
  module.doc() = "ATP's torch.distributed backend (C++ part); import atp_torch instead";
  module.def("create_process_group", &atp::torch_backend::create_process_group,
             "the 'atp' backend, over the Gloo group of the same ranks that make_gloo() makes", pybind11::arg("store"),
             pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"), pybind11::arg("make_gloo"));
  module.def("bind_address", &atp::torch_backend::bind_address, "ATP_BIND's address (default 127.0.0.1)");
  module.def("stats", &atp::torch_backend::group_stats,
             "one dict per live atp/ps/rina group of this process: algorithm, job, rank and its endpoint's counters");
}
