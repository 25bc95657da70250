// The PyTorch c10d backend "atp" (python/atp_torch registers it): a thin adapter from torch's
// ProcessGroup (torch 1.13) or Backend (torch 2.x) to a ClusterJob. allreduce (SUM, AVG) of
// float32, float16 and bfloat16 tensors goes through ATP (the switches add them); everything
// in-network aggregation does not speed up (other dtypes and reduce ops, broadcast, gather,
// scatter, all_to_all, point-to-point, ...) goes to a Gloo process group the backend makes on the
// same store, so nothing Gloo does is written again. Tensors on a device (CUDA) are staged through
// pinned host memory (device_staging.h). Options come from ATP_* variables (options.h); the host
// collectives (ring, hierarchical, PLink's) are host_collective.h's.
#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <torch/python.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include "atp/cluster/cluster_job.h"
#include "atp/collectives/allreduce.h"
#include "atp/scenario/algorithm.h"
#include "atp/wire.h"
#include "collective_queue.h"
#include "device_staging.h"
#include "group_stats.h"
#include "host_collective.h"
#include "options.h"
#include "torch_store.h"

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

void check_one(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "atp ", what, ": expected one tensor per call, got ", tensors.size());
}

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
        tcp_ = join_host_collective(algorithm, host_collective_options_from_environment(algorithm), store_, rank, size,
                                    timeout);
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
    queue_.emplace();
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

  // Queues `body` on the group's thread (collective_queue.h), counted in the group's sequence.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs, Staging staging,
                                         std::function<void()> body) {
    staging->inputs_started();
    ++sequence_;
    return queue_->enqueue(type, std::move(outputs), std::move(staging), std::move(body));
  }

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

  // Runs what is queued, then ends the job or the host collective.
  void shut_down() {
    queue_.reset();
    stats_entry_.reset();
    if (job_) job_->close();
    if (tcp_) tcp_->close();
  }

  TorchStore store_;
  std::unique_ptr<ClusterJob> job_;             // atp, rina
  std::optional<GroupStatsEntry> stats_entry_;  // job_'s counters in atp_torch.stats(), until shut down
  std::unique_ptr<Allreduce> tcp_;              // hierarchical, plink, plink_fa
  c10::intrusive_ptr<BackendBase> gloo_;
  std::atomic<uint64_t> sequence_{0};     // collectives called (getSequenceNumberForGroup)
  std::optional<CollectiveQueue> queue_;  // the group's thread, from the end of the constructor until shut down
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
